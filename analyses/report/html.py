"""The report page: one self-contained HTML file, plotly.js inlined once, nothing fetched.

Every string that comes from a config, a run name, a path, an error or an analysis goes
through `esc` (text and attribute values). Figures travel as JSON inside
`<script type="application/json">` blocks with `<`, `>` and `&` written as \\u escapes, so
no figure text can close the block; a small inline script draws them with Plotly.newPlot.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

PAGE_CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #d9dee7; --accent: #2f5fb3; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0; background: #f6f7fa; }
header, main, footer { max-width: 1180px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 28px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 21px; margin: 0 0 10px; border-bottom: 2px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 16px; margin: 18px 0 6px; }
.sub { color: var(--muted); margin: 0 0 12px; }
nav ol { columns: 2; margin: 8px 0 16px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 18px 22px;
          margin: 18px 0; }
ul.findings { background: #eef3fc; border-left: 4px solid var(--accent); padding: 10px 14px 10px 32px;
              margin: 0 0 12px; }
ul.findings li { margin: 2px 0; }
.status { display: inline-block; font-size: 12px; padding: 1px 8px; border-radius: 10px; margin-left: 8px;
          vertical-align: middle; }
.status.ok { background: #dff3e2; color: #1d6b2c; }
.status.omitted { background: #eceef2; color: #4b5363; }
.status.failed { background: #fbe1e1; color: #8d1c1c; }
p.omitted { color: var(--muted); font-style: italic; }
p.failed { color: #8d1c1c; font-weight: 600; white-space: pre-wrap; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13.5px; }
caption { text-align: left; color: var(--muted); padding: 0 0 2px; }
th, td { border: 1px solid var(--line); padding: 3px 9px; text-align: left; vertical-align: top; }
th { background: #f0f2f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.table-scroll { max-width: 100%; overflow-x: auto; }
table.compact { font-size: 12px; }
table.compact th, table.compact td { padding: 2px 3px; white-space: nowrap; }
.tables { display: flex; flex-wrap: wrap; gap: 10px 28px; }
.figure { margin: 10px 0; width: 100%; overflow-x: auto; overflow-y: hidden; }
.note { color: var(--muted); font-size: 13px; }
footer { color: var(--muted); font-size: 13px; padding-bottom: 40px; }
code { font-size: 13px; background: #f0f2f6; padding: 0 3px; border-radius: 3px; }
"""

# Draws every figure block; sets window.__reportStatus for the browser test.
RENDER_JS = """
(function () {
  // figures are drawn one after another, yielding between them, so the page (text,
  // findings, tables) shows at once and the figures fill in
  var status = window.__reportStatus = {total: 0, rendered: 0, failed: [], done: false, ms: {}};
  function draw() {
    var blocks = Array.prototype.slice.call(document.querySelectorAll('script.figure-data'));
    status.total = blocks.length;
    var i = 0;
    function next() {
      if (i >= blocks.length) { status.done = true; return; }
      var block = blocks[i++];
      var target = document.getElementById(block.getAttribute('data-target'));
      var t0 = performance.now();
      try {
        var fig = JSON.parse(block.textContent);
        // the whole figure, so animation frames (sliders, play buttons) come along
        Plotly.newPlot(target, {data: fig.data || [], layout: fig.layout || {}, frames: fig.frames || [],
                                config: {displaylogo: false, showLink: false, responsive: true}})
          .then(function () { status.rendered += 1; },
                function (err) { status.failed.push(target.id + ': ' + err); console.error('figure ' + target.id + ': ' + err); })
          .then(function () { status.ms[target.id] = Math.round(performance.now() - t0); setTimeout(next, 0); });
      } catch (err) {
        status.failed.push(target.id + ': ' + err);
        console.error('figure ' + target.id + ': ' + err);
        setTimeout(next, 0);
      }
    }
    next();
  }
  if (document.readyState === 'loading') { document.addEventListener('DOMContentLoaded', draw); }
  else { draw(); }
})();
"""


def esc(value: Any) -> str:
    """HTML-escape anything (quotes included, so it is safe in attribute values too)."""
    return html.escape(str(value), quote=True)


def script_json(obj: Any) -> str:
    """JSON that is safe inside a <script> element: no `<`, `>` or `&` characters at all
    (in JSON they can only occur inside strings, where the \\u escapes mean the same)."""
    text = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def fmt_value(value: Any) -> str:
    """A table cell's text for a number, bool, None, list or string (not yet escaped)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value == 0:
            return "0"
        if abs(value) >= 1e4 or abs(value) < 1e-3:
            return f"{value:.3g}"
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt_value(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


# A table with more columns than this is set compact (small type, tight cells): the
# architectures table has one column per problem length (8-40 characters: 39 columns in all),
# 1,614 px wide at the normal size in a page column of about 1,090 px.
COMPACT_COLUMNS = 12


def _scroll(table_html: str) -> str:
    """A table inside a box that scrolls sideways when the table is still wider than the page
    column, so a wide table never widens the page nor gets cut off."""
    return f'<div class="table-scroll">{table_html}</div>'


def kv_table(rows: list[tuple[Any, Any]], caption: str | None = None) -> str:
    out = ["<table>"]
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    for key, value in rows:
        cls = ' class="num"' if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
        out.append(f"<tr><th>{esc(key)}</th><td{cls}>{esc(fmt_value(value))}</td></tr>")
    out.append("</table>")
    return _scroll("".join(out))


def grid_table(header: list[Any], rows: list[list[Any]], caption: str | None = None) -> str:
    out = ['<table class="compact">' if len(header) > COMPACT_COLUMNS else "<table>"]
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    out.append("<tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        cells = []
        for value in row:
            cls = ' class="num"' if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
            cells.append(f"<td{cls}>{esc(fmt_value(value))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return _scroll("".join(out))


def fit_to_page(figure_json: str) -> tuple[str, int | None]:
    """The figure with its fixed layout width taken out, so plotly sizes it to its container
    (and follows the window: the page draws with `responsive`), plus that width, which the
    container keeps as its max-width: a narrow figure keeps its size, a wide one (a loop x
    head grid, a 1100 px panel row) shrinks to the page instead of getting a scroll bar."""
    fig = json.loads(figure_json)
    layout = fig.get("layout")
    if not isinstance(layout, dict) or layout.get("width") is None:
        return figure_json, None
    width = layout.pop("width")
    layout["autosize"] = True
    return json.dumps(fig, separators=(",", ":"), allow_nan=False), int(math.ceil(width))


def figure_block(dom_id: str, figure_json: str, title: str | None = None) -> str:
    """A placeholder div plus its figure JSON (plotly.io.to_json output), fitted to the page."""
    label = f' aria-label="{esc(title)}"' if title else ""
    figure_json, width = fit_to_page(figure_json)
    style = f' style="max-width: {width}px"' if width else ""
    return (
        f'<div class="figure plotly-graph-div" id="{esc(dom_id)}"{label}{style}></div>'
        f'<script type="application/json" class="figure-data" data-target="{esc(dom_id)}">'
        f"{script_json(figure_json)}</script>"
    )


def section_html(section: dict, body: str) -> str:
    """One <section>: title, status badge, findings (or omission / failure reason), body."""
    status = section["status"]
    badge = {"ok": "", "omitted": "omitted", "failed": "failed"}[status]
    head = f'<h2>{esc(section["title"])}'
    if badge:
        head += f'<span class="status {status}">{badge}</span>'
    head += "</h2>"
    parts = [f'<section id="{esc(section["key"])}" data-status="{esc(status)}">', head]
    if status == "omitted":
        parts.append(f'<p class="omitted">Omitted: {esc(section.get("reason") or "does not apply")}</p>')
    elif status == "failed":
        parts.append(f'<p class="failed">section failed: {esc(section.get("error") or "unknown error")}</p>')
    findings = section.get("findings") or []
    if findings:
        parts.append('<ul class="findings">' + "".join(f"<li>{esc(f)}</li>" for f in findings) + "</ul>")
    parts.append(body)
    if section.get("elapsed_s") is not None:
        parts.append(f'<p class="note">computed in {section["elapsed_s"]:.1f} s</p>')
    parts.append("</section>")
    return "".join(parts)


def page(title: str, subtitle: str, nav: list[tuple[str, str, str]], sections_html: list[str],
         footer: str, plotly_js: str) -> str:
    """The whole document. nav: (anchor, label, status)."""
    toc = "".join(
        f'<li><a href="#{esc(anchor)}">{esc(label)}</a>'
        + (f' <span class="status {esc(status)}">{esc(status)}</span>' if status != "ok" else "")
        + "</li>"
        for anchor, label, status in nav
    )
    # plotly.js contains no "</script" (checked in the tests); guard anyway
    plotly_js = plotly_js.replace("</script", "<\\/script")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # nothing may be fetched: only inline scripts/styles, data:/blob: images
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; "
        "font-src data:; connect-src 'none'\">"
        f"<title>{esc(title)}</title><style>{PAGE_CSS}</style>"
        f"<script>{plotly_js}</script></head><body>"
        f"<header><h1>{esc(title)}</h1><p class=\"sub\">{subtitle}</p><nav><ol>{toc}</ol></nav></header>"
        f"<main>{''.join(sections_html)}</main>"
        f"<footer>{footer}</footer>"
        f"<script>{RENDER_JS}</script></body></html>\n"
    )

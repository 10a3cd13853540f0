"""The report in a real browser: headless Chromium opens it from a file URL, and
`browser_check` (Chrome DevTools Protocol, standard library only) checks that there are no
console errors, that every plotly figure rendered (non-empty SVG) and that no request left
the machine; a screenshot is saved.

Chromium is Debian's `chromium` package, installed by the CI set-up (.ci/run). Without it
these tests skip and say so.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from browser_check import check_page, find_chromium

ROOT = Path(__file__).resolve().parents[1]

CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: `apt-get install chromium`; .ci/run installs it "
           "before `make test`), so the report cannot be opened in a browser here",
)


@needs_chromium
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_report_renders_offline_in_chromium(tmp_path_factory):
    from test_report import tiny_add_report

    html_path = tiny_add_report(tmp_path_factory.getbasetemp())
    shot = tmp_path_factory.mktemp("screenshot") / "report.png"
    result = check_page(html_path, screenshot=shot, chromium=CHROMIUM)
    assert result.ok, "\n".join(result.problems())
    assert result.console_errors == []
    assert result.external_requests == []
    assert result.figure_blocks > 20 and len(result.figures) == result.figure_blocks
    assert all(f["svgs"] >= 1 and f["children"] > 0 for f in result.figures)
    # every figure fits the page: no horizontal scroll bar on a figure or on the page
    assert result.wide_figures == [], "\n".join(result.problems())
    assert result.page_width <= result.viewport_width
    assert result.render_status.get("done") and result.render_status.get("failed") == []
    assert result.title.startswith("abacus-interp report")
    assert shot.exists() and shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    try:  # a copy to look at (runs/ is git-ignored)
        (ROOT / "runs").mkdir(exist_ok=True)
        shutil.copy(shot, ROOT / "runs" / "report-screenshot.png")
    except OSError:
        pass


@needs_chromium
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_checker_catches_errors_external_requests_and_empty_figures(tmp_path):
    """The checks are not vacuous: a page with a console error, a remote image, a fetch, an
    empty figure div, a figure wider than the page and a title wider than its figure fails each of them (and the remote
    requests are blocked)."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>bad</title></head><body>"
        '<img src="http://example.invalid/a.png">'
        '<div class="plotly-graph-div" id="empty"></div>'
        '<div class="plotly-graph-div" id="wide" style="width: 3000px">'
        '<svg class="main-svg" width="3000" height="10"><rect width="3000" height="10"/></svg></div>'
        '<div class="plotly-graph-div" id="long-title" style="width: 200px; overflow: hidden">'
        '<svg class="main-svg" width="200" height="40"><text class="gtitle" x="10" y="20">'
        'A title far too long for a figure two hundred pixels wide, drawn past its edge</text></svg></div>'
        "<script>console.error('boom'); fetch('https://example.invalid/data.json').catch(function () {});"
        "window.__reportStatus = {done: true, failed: []};</script>"
        "</body></html>"
    )
    result = check_page(page, screenshot=tmp_path / "bad.png", chromium=CHROMIUM, timeout=60)
    assert not result.ok
    assert any("boom" in e for e in result.console_errors)
    assert any(u.startswith("http://example.invalid/a.png") for u in result.external_requests)
    assert any(u.startswith("https://example.invalid/data.json") for u in result.external_requests)
    assert result.empty_figures == ["empty"]
    assert result.wide_figures == ["wide"]
    assert result.page_width > result.viewport_width
    assert any("figure wider than the page: wide" in p for p in result.problems())
    # a title plotly would clip (extrap-add's grid and carry-wave head-reading titles were)
    assert result.cut_off_titles == ["long-title"]
    assert (tmp_path / "bad.png").exists()


@needs_chromium
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_architectures_table_of_the_shipped_comparison_fits_the_page(tmp_path):
    """checkpoints/expr-compare has one column per problem length (39 columns): at 1,400 px it
    was 1,614 px wide and cut off columns 31-40 and its caption. It now fits the page column;
    in a narrower window it scrolls in its own box and the page keeps its width."""
    from analyses.report import ReportSizes, build_report

    html_path = build_report(ROOT / "checkpoints" / "extrap-add", tmp_path / "report",
                             architectures=ROOT / "checkpoints" / "expr-compare", sizes=ReportSizes.quick(),
                             sections=["architectures"], progress=False)
    wide = check_page(html_path, chromium=CHROMIUM, width=1400, timeout=120)
    table = next(t for t in wide.tables if t["caption"].startswith("Held-out exact match"))
    assert wide.ok, "\n".join(wide.problems())
    assert wide.cut_off_tables == [] and wide.page_width <= wide.viewport_width == 1400
    assert table["scroll_width"] <= table["client_width"] + 1 and table["right"] <= 1400  # no scrolling needed

    narrow = check_page(html_path, chromium=CHROMIUM, width=900, timeout=120)
    assert narrow.cut_off_tables == [] and narrow.page_width <= narrow.viewport_width == 900
    assert any(c.startswith("Held-out exact match") for c in narrow.scrolling_tables)

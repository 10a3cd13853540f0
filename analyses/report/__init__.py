"""`abacus-interp report`: one offline HTML page plus a JSON file with every number in it.

    >>> from analyses.report import build_report
    >>> build_report("checkpoints/small-add", "report/")          # -> Path("report/index.html")

Writes `OUT/index.html` (plotly.js inlined once, nothing fetched when viewed) and
`OUT/report.json`, both at the end, through a folder beside OUT renamed into place: a report
that fails leaves no new OUT behind, and an OUT that existed keeps its other files:

    {"run": ..., "compare": ..., "generated": ..., "sizes": {...},
     "timing": {"total_s": ..., "sections": {key: seconds}},
     "sections": {key: {"title", "status": "ok" | "omitted" | "failed", "reason", "error",
                        "findings": [...], "figures": [names], "elapsed_s", "data": {...}}}}

Each section opens with findings sentences generated from its numbers (an analysis's
`findings()`, or `findings.py` for the model card and the evaluation); a
section that does not apply is omitted with the reason; one whose analysis raises is shown
as "section failed: <error>" and recorded in the JSON, and the rest of the report is built.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import shutil
import time
import traceback
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import plotly.io as pio
from tqdm.auto import tqdm

from abacus_interp.core.runtime import torch_threads as limit_threads
from abacus_interp.errors import MissingPathError, UserError, check_output_dir
from abacus_interp.jsonsafe import json_safe
from analyses.contract import Analysis, Result, RunContext
from analyses.registry import dependency_order

from . import html as H
from .sections import SECTIONS, Context, Omitted, ReportSizes, Section, analysis_section
from .summary import SUMMARY_KEY, SUMMARY_TITLE, summary_html

logger = logging.getLogger(__name__)

__all__ = ["build_report", "ReportSizes", "SECTIONS", "load_report_json"]


def _resolve_run(run) -> Path:
    run = Path(run)
    if not (run / "config.json").is_file():
        raise MissingPathError(f"{run} is not a run directory (no config.json); pass a directory made by `abacus-interp train`")
    return run


def build_report(
    run: str | Path,
    out: str | Path,
    compare: str | Path | None = None,
    *,
    ablation: str | Path | None = None,
    architectures: str | Path | None = None,
    sizes: ReportSizes | None = None,
    sections: Sequence[str] | None = None,
    seed: int = 0,
    progress: bool = True,
    torch_threads: int | None = 1,
    device: str = "auto",
    step: int | None = None,
) -> Path:
    """Write the report of `run` (optionally compared with run `compare`) into `out`;
    return the path of the HTML file.

    sizes: problem counts per analysis (default `ReportSizes()`, sized for a <= 3 minute
      report of checkpoints/small-add on 2 CPU cores; `ReportSizes.quick()` for tests).
    sections: keys of the sections to build (default all, see `SECTIONS`); the others are
      listed as omitted ("not requested").
    torch_threads: intra-op threads while the report runs (restored afterwards); None
      leaves torch's setting alone.
    ablation: a directory written by `abacus-interp ablate` (its ablation.json), shown as
      the "ablation" section; without it that section is omitted.
    architectures: a directory written by `abacus-interp compare` (its comparison.json),
      shown as the "architectures" section; without it that section is omitted.
    device: where the model runs, "auto" (CUDA when a GPU is visible), "cpu", "cuda", ...
    step: the checkpoint step the model is loaded from, as `abacus-interp eval --step`
      (default: the latest); analyses over training still read every checkpoint of the run.
    """
    started = time.perf_counter()
    run_dir = _resolve_run(run)
    compare_dir = _resolve_run(compare) if compare is not None else None
    out = check_output_dir(out)  # now, not after minutes of analyses
    weights = run_dir if step is None else _checkpoint_at(run_dir, step)
    sizes = sizes or ReportSizes()
    order = dependency_order(SECTIONS)  # now: a registry that cannot be ordered fails before any work
    _check_sections(sections)

    with limit_threads(torch_threads):
        ctx = _load_context(run_dir, weights, device, compare_dir=compare_dir, sizes=sizes, seed=seed,
                            ablation=ablation, architectures=architectures)
        entries, figures, extra_html = _run_sections(order, ctx, sections, progress)
    results = [entries[a.key] for a in SECTIONS]  # the page's order, whatever order they ran in

    total_s = time.perf_counter() - started
    report = json_safe(_report_dict(ctx, results, total_s))
    _write_all(out, {"report.json": json.dumps(report, indent=1, allow_nan=False),
                     "index.html": render_html(report, figures, extra_html)})
    html_path = out / "index.html"
    logger.info("report of %s written to %s in %.1f s", run_dir, html_path, total_s)
    return html_path


def _load_context(run_dir: Path, weights: Path, device: str, *, compare_dir: Path | None, sizes: ReportSizes,
                  seed: int, ablation: str | Path | None, architectures: str | Path | None) -> Context:
    """The run's config and task, its model loaded from `weights`, and the report's options."""
    from abacus_interp.checkpoints import load_model, read_run_config
    from abacus_interp.tasks import task_from_config

    config = read_run_config(run_dir)
    task = task_from_config(config["task"])
    model = load_model(weights, device=device)
    run = RunContext(run_dir=run_dir, model=model, task=task, compare_dir=compare_dir, seed=seed, run_config=config,
                     ablation_dir=Path(ablation) if ablation is not None else None,
                     architectures_dir=Path(architectures) if architectures is not None else None)
    return Context(run=run, sizes=sizes)


def _report_dict(ctx: Context, results: list[dict[str, Any]], total_s: float) -> dict[str, Any]:
    """report.json: the run and its options, then every section's entry in the page's order."""
    return {
        "run": str(ctx.run.run_dir),
        "compare": str(ctx.run.compare_dir) if ctx.run.compare_dir else None,
        "task": ctx.run.run_config.get("task"),
        "preset": ctx.run.run_config.get("preset"),
        "checkpoint": ctx.run.model.checkpoint_path,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "seed": ctx.run.seed,
        "sizes": ctx.sizes.to_dict(),
        "timing": {"total_s": total_s, "sections": {r["key"]: r["elapsed_s"] for r in results}},
        "failed_sections": [r["key"] for r in results if r["status"] == "failed"],
        "sections": {r["key"]: r for r in results},
    }


def _check_sections(sections: Sequence[str] | None) -> None:
    """Refuse section keys the report does not have, before any work."""
    known = [s.key for s in SECTIONS]
    if sections is not None:
        unknown = sorted(set(sections) - set(known))
        if unknown:
            raise UserError(f"unknown report sections {unknown}; choose from {known}")


def _run_sections(order: Sequence[Analysis], ctx: Context, sections: Sequence[str] | None,
                  progress: bool) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, str]], dict[str, str]]:
    """Every section in dependency order, each given the results of those it needs: per key,
    its report.json entry, its figures (name -> plotly JSON) and its extra HTML."""
    figures: dict[str, dict[str, str]] = {}  # section -> figure name -> plotly JSON
    extra_html: dict[str, str] = {}
    entries: dict[str, dict[str, Any]] = {}
    done: dict[str, Result] = {}  # key -> result of each analysis that ran to the end
    bar = tqdm(order, desc="report", unit="section", disable=not progress, dynamic_ncols=True)
    for analysis in bar:
        key = analysis.key
        bar.set_postfix_str(key)
        if sections is not None and key not in sections:
            entries[key] = _entry(analysis, "omitted", reason="not requested (--skip or sections=...): a report without --skip runs it")
            continue
        unmet = next((k for k in analysis.requires if k not in done), None)
        if unmet is not None:
            entries[key] = _entry(analysis, "omitted", reason=_unmet_reason(unmet, entries[unmet]))
            continue
        needs = {k: done[k] for k in (*analysis.requires, *analysis.uses) if k in done}
        entry, figs, tables, result = _run_section(analysis_section(analysis), ctx, needs)
        entries[key] = entry
        figures[key] = figs
        extra_html[key] = tables
        if result is not None:
            done[key] = result
    bar.close()
    return entries, figures, extra_html


def _checkpoint_at(run_dir: Path, step: int) -> Path:
    from abacus_interp.checkpoints import checkpoint_at

    return checkpoint_at(run_dir, step)


def _write_all(out: Path, files: dict[str, str]) -> None:
    """Write `files` (name -> text) into `out`, all or none: into a new folder beside `out`,
    then renamed onto `out` (or, when `out` exists, each file moved into it). On failure the
    staging folder and any parent folders created for it are removed; nothing else is."""
    missing = [p for p in [out.parent, *out.parent.parents] if not p.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.parent / f".{out.name}.{uuid.uuid4().hex[:12]}.partial"
    stage.mkdir()
    try:
        for name, text in files.items():
            (stage / name).write_text(text, encoding="utf-8")
        if out.is_dir():
            for name in files:
                os.replace(stage / name, out / name)
        else:
            os.replace(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        for parent in missing:  # deepest first; only the ones this call made, and only if empty
            try:
                parent.rmdir()
            except OSError:
                break
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _unmet_reason(key: str, entry: dict[str, Any]) -> str:
    """Why a section is omitted when the section `key` it requires did not run: that section's
    own status and reason (or error), so the page points at the cause."""
    why = entry["reason"] or entry["error"] or "no result"
    return f"it requires the {key} section ({entry['title']}), which was {entry['status']}: {why}"


def _entry(spec: Analysis | Section, status: str, *, reason: str | None = None, error: str | None = None,
           findings: Sequence[str] = (), figures: Sequence[str] = (), elapsed_s: float | None = None,
           data: dict[str, Any] | None = None) -> dict[str, Any]:
    """One section of report.json; every key is written, None where it does not apply."""
    return {"key": spec.key, "title": spec.title, "status": status, "reason": reason, "error": error,
            "findings": list(findings), "figures": list(figures), "elapsed_s": elapsed_s, "data": data}


def _run_section(section: Section, ctx: Context,
                 needs: dict[str, Result]) -> tuple[dict[str, Any], dict, str, Result | None]:
    """The section's report.json entry, its figures as plotly JSON, its extra HTML, and its
    result for the analyses that need it (None unless it ran to the end)."""
    t0 = time.perf_counter()
    try:
        result, data, tables = section.build(ctx, needs)
        findings = result.findings()
        figures = result.figures()
    except Omitted as e:
        return _entry(section, "omitted", reason=str(e), elapsed_s=time.perf_counter() - t0), {}, "", None
    except Exception as e:  # a failing analysis must not take the report down
        logger.error("report section %s failed: %s", section.key, "".join(traceback.format_exception(e)))
        return _entry(section, "failed", error=f"{type(e).__name__}: {e}", elapsed_s=time.perf_counter() - t0,
                      data={"traceback": traceback.format_exc(limit=8)}), {}, "", None
    try:
        figs = {name: pio.to_json(fig, validate=False) for name, fig in figures.items()}
    except Exception as e:
        logger.error("report section %s: figures failed: %s", section.key, e)
        return _entry(section, "failed", error=f"figures: {type(e).__name__}: {e}", data=data,
                      findings=findings, elapsed_s=time.perf_counter() - t0), {}, "", None
    elapsed = time.perf_counter() - t0
    logger.info("report section %s: %.1f s", section.key, elapsed)
    return (_entry(section, "ok", data=data, findings=findings, figures=list(figs), elapsed_s=elapsed),
            figs, tables, result)


def render_html(report: dict[str, Any], figures: dict[str, dict[str, str]], extra_html: dict[str, str]) -> str:
    """The page from the report dict (numbers, findings), figure JSON and section tables."""
    from plotly.offline import get_plotlyjs

    # the summary first: what the model does and where it fails, before any config table
    nav = [(SUMMARY_KEY, SUMMARY_TITLE, "ok")]
    parts = [summary_html(report["sections"].get("evaluation"))]
    for key, sec in report["sections"].items():
        nav.append((key, sec["title"], sec["status"]))
        body = extra_html.get(key, "")
        for name, fig_json in figures.get(key, {}).items():
            body += H.figure_block(f"fig-{key}-{name}", fig_json, title=name)
        parts.append(H.section_html(sec, body))
    run = report["run"]
    title = f"abacus-interp report: {Path(run).name}"
    sub = (f"run <code>{H.esc(run)}</code>"
           + (f" compared with <code>{H.esc(report['compare'])}</code>" if report["compare"] else "")
           + f" &middot; checkpoint <code>{H.esc(report['checkpoint'])}</code>"
           + f" &middot; generated {H.esc(report['generated'])}"
           + f" &middot; built in {report['timing']['total_s']:.1f} s")
    timing_rows = [[sec["title"], sec["status"], sec["elapsed_s"]] for sec in report["sections"].values()]
    timing_rows.append(["total", "", report["timing"]["total_s"]])
    footer = (H.grid_table(["section", "status", "seconds"], timing_rows, caption="Time per section")
              + '<p>Every number on this page is in <code>report.json</code> next to this file. '
              "Sizes used: " + H.esc(json.dumps(report["sizes"])) + "</p>")
    return H.page(title, sub, nav, parts, footer, get_plotlyjs())


def load_report_json(out: str | Path) -> dict[str, Any]:
    """The report.json written by `build_report` into `out`."""
    return json.loads((Path(out) / "report.json").read_text())

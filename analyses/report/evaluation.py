"""The evaluation (exact-match grid, accuracy against loops, ...) as a registered analysis of
the report, with the sizes it runs at."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# the sibling modules themselves, not `from . import`: the package's __init__ imports this one
import analyses.report.findings as F
import analyses.report.html as H
from analyses.contract import Result, RunContext

from .result import Built, EdgeCases


@dataclass(frozen=True)
class EvaluationSizes:
    """`settings`: keyword arguments of `evaluate`; `max_loops`: the largest loop count in
    accuracy-vs-loops (None: the model's max_loops). `ReportSizes` keeps them as its
    `evaluation` and `max_eval_loops`, the names report.json records."""

    settings: dict[str, Any] = field(default_factory=lambda: {"n_per_cell": 10, "n_per_set": 64})
    max_loops: int | None = None

    @classmethod
    def quick(cls) -> EvaluationSizes:
        return cls(settings={"n_per_cell": 3, "n_per_set": 16, "grid": (1, 4)}, max_loops=8)


def notes_html(notes: list[str]) -> str:
    return "".join(f'<p class="note">{H.esc(n)}</p>' for n in notes)


def edge_case_table(edge: EdgeCases, how: str) -> str:
    """Every edge case as a row of an HTML table, so no row hides inside a scrolling figure (a
    plotly table showed 12 of 63), with the pass rates in and out of distribution apart."""
    inside = [c for c in edge.cases if c.in_distribution]
    outside = [c for c in edge.cases if not c.in_distribution]
    counts = [f"in distribution {sum(c.passed for c in inside)} of {len(inside)} pass"]
    if outside:
        counts.append(f"out of distribution {sum(c.passed for c in outside)} of {len(outside)} pass")
    rows = [[c.group, c.name, "in" if c.in_distribution else "out", " / ".join(c.expected),
             " / ".join(c.answers), " / ".join(map(str, c.loops_used)) or "-", "pass" if c.passed else "FAIL"]
            for c in edge.cases]
    return H.grid_table(["group", "problem", "distribution", "expected", "model", "loops used", "result"], rows,
                        caption=f"Edge cases, one hand-picked problem each, greedy decoding ({how}): "
                                + "; ".join(counts))


def report_loops(cfg, cap: int | None = None) -> list[int]:
    """Loop counts for accuracy vs loops: every R up to twice the trained depth, then 3x, 4x
    and max_loops (deep loops cost the most, and the curve is smooth there)."""
    n = cfg.n_loops
    if n == 1 and cfg.input_injection == "none":
        return [1]  # not a looped model: extra passes of the block mean nothing
    top = cfg.max_loops if cap is None else min(cfg.max_loops, cap)
    loops = {*range(1, 2 * n + 1), 3 * n, 4 * n, top}
    return sorted(r for r in loops if 1 <= r <= top)


def build_evaluation(ctx: RunContext, sizes: EvaluationSizes) -> Built:
    from abacus_interp.core.scoring import run_readout
    from abacus_interp.evaluation.suite import evaluate

    cfg = ctx.model.cfg
    kwargs = dict(sizes.settings)
    kwargs.setdefault("loops", report_loops(cfg, sizes.max_loops))
    digit_range = ctx.task.digit_range
    if digit_range is not None and "max_length" not in kwargs:
        kwargs["max_length"] = 3 * digit_range[1]  # equal-length operands up to 3x the trained length
        if cfg.positional == "none" and cfg.halt_tol is not None:
            # no position table and adaptive loops: a run that may read any length is asked how far it goes
            kwargs.setdefault("far_lengths", [10 * digit_range[1], 25 * digit_range[1]])
    if not ctx.task.has_digit_grid:  # score the run the way it was trained (its readout)
        kwargs.update(run_readout((ctx.run_config or {}).get("train", {}), ctx.task))
    report = evaluate(ctx.model, ctx.task, seed=ctx.seed, progress=False, **kwargs)
    figs = report.figures()
    figs.pop("edge_cases", None)  # shown whole as an HTML table below
    # the order: the grid and accuracy vs loops first
    order = ["grid", "loops", "splits", "lengths", "carry", "perplexity"]
    figures = {k: figs[k] for k in order if k in figs}
    figures.update({k: v for k, v in figs.items() if k not in figures})
    tables = ""
    if report.edge_cases is not None and report.edge_cases.cases:
        tables += edge_case_table(report.edge_cases, report.edge_cases.decoding or F.decoding_label(report))
    if report.skipped:
        tables = H.grid_table(["part", "skipped because"], [[k, v] for k, v in report.skipped.items()],
                              caption="Parts of the evaluation that do not apply")
    tables += notes_html(list(report.notes))
    # report.json holds the evaluation's own JSON, the layout `EvalReport.from_dict` reads back
    return Built(data=report.to_dict(), sentences=F.evaluation(report), plots=figures, tables=tables)



class EvaluationAnalysis:
    key = "evaluation"
    title = "Accuracy: grid and loops"
    Config = EvaluationSizes
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        return None  # every task is evaluated; parts that do not apply are listed as skipped

    def run(self, run: RunContext, config: EvaluationSizes, needs: Mapping[str, Result]) -> Built:
        return build_evaluation(run, config)


ANALYSIS = EvaluationAnalysis()

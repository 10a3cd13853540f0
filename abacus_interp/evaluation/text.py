"""The plain-text rendering of an `EvalReport` for a terminal (`abacus-interp eval`).

This module owns `format_report`: a header with the task, model and settings, then one
block per section the report has (the exact-match grid with the trained region starred,
greedy agreement, splits, exact match vs loops, by operand length, edge cases, carry
buckets, perplexity), then what was skipped and any notes. Exact match is shown in percent
(`_pct`); it reads only the report's numbers and computes nothing new.
"""

from __future__ import annotations

from abacus_interp.evaluation.report import EvalReport
from abacus_interp.evaluation.result import EdgeCaseResult, Grid, LoopSet


def _pct(x: float | None, width: int = 5) -> str:
    return "-".rjust(width) if x is None else f"{100 * x:.0f}".rjust(width)


def format_report(report: EvalReport) -> str:
    """A plain-text summary of every section for a terminal (exact match in percent)."""
    t, m = report.task, report.model
    lines = [
        f"task {t['name']} ({', '.join(f'{k}={v}' for k, v in t.items() if k != 'name')}); "
        f"model: {m.n_layers} layer(s) x {m.n_loops} loops, "
        f"d_model={m.d_model}, {m.positional} positions"
        + (f"; checkpoint {m.checkpoint}" if m.checkpoint else ""),
        f"seed {report.settings.seed}, answers read with {report.settings.decoding.label}",
    ]
    for section in (_grid_lines, _split_lines, _loop_lines, _length_lines, _edge_case_lines, _carry_lines,
                    _perplexity_lines):
        lines += section(report)
    if report.skipped:
        lines += ["", "Skipped:"] + [f"  {k}: {v}" for k, v in report.skipped.items()]
    if report.notes:
        lines += ["", "Notes:"] + [f"  {n}" for n in report.notes]
    return "\n".join(lines)


def _grid_lines(report: EvalReport) -> list[str]:
    lines = []
    g = report.grid
    if g is not None:
        lo, hi = g.trained_digits
        lines += [
            "",
            f"Exact match (%) by digits of a (rows) x digits of b (columns), n={g.n_per_cell} per cell "
            f"(operands of exactly those digit counts, uniform digits; {g.decoding or 'teacher-forced'}); "
            f"* = trained region ({lo}..{hi} digits), - = does not fit",
        ]
        w = 5
        lines.append("a\\b".rjust(4) + "".join(str(j).rjust(w) for j in g.digits_b))
        for i, row in zip(g.digits_a, g.exact_match, strict=True):
            cells = []
            for j, v in zip(g.digits_b, row, strict=True):
                mark = "*" if lo <= i <= hi and lo <= j <= hi else " "
                cells.append(_pct(v, w - 1) + mark)
            lines.append(str(i).rjust(4) + "".join(cells))
        lines.append(
            f"  in-distribution mean {_pct(g.in_distribution_exact_match, 0)}% (over the * cells), "
            f"out-of-distribution mean {_pct(g.out_of_distribution_exact_match, 0)}% (over the others)"
        )
        if (square := _square_line(g)) is not None:
            lines.append(square)
    if report.generate_agreement is not None:
        a = report.agreement
        lines.append(
            f"  greedy decoding agrees with teacher-forced scoring on n={a.n} problems ({a.sample}): "
            f"{100 * report.generate_agreement:.0f}%"
        )
    return lines


def _square_line(g: Grid) -> str | None:
    """The largest N with every cell up to N x N at the bar, and what stops the next square;
    None for a grid whose digit counts are not 1, 2, 3, ... on both sides."""
    if not g.counts_from_one:
        return None
    n = g.largest_square() or 0
    head = f"  largest N with every cell up to N x N at >= {100 * g.SQUARE_BAR:.0f}%: {n or 'none'}"
    if n + 1 > min(len(g.digits_a), len(g.digits_b)):
        return f"{head} (the grid ends at {n} x {n})"
    square = [v for row in g.exact_match[: n + 1] for v in row[: n + 1]]
    why = "a cell left out" if None in square else f"lowest cell {_pct(min(square), 0)}%"
    return f"{head} ({n + 1} x {n + 1}: {why})"


def _split_lines(report: EvalReport) -> list[str]:
    if not report.splits:
        return []
    lines = ["", "Splits (every problem of each, teacher-forced):"]
    for name, s in report.splits.items():
        lines.append(f"  {name:<6} exact match {_pct(s.exact_match, 0)}%  loss {s.loss:.4g}  (n={s.n})")
    return lines


def _loop_lines(report: EvalReport) -> list[str]:
    lp = report.loops
    if lp is None:
        return []
    lines = ["", f"Exact match (%) vs loops (trained: {lp.trained_loops}), teacher-forced on the sets below"]
    names = list(lp.sets)
    lines.append("   R " + "".join(n[:20].rjust(22) for n in names))
    for k, r in enumerate(lp.loops):
        lines.append(f"{r:4d} " + "".join((_pct(lp.sets[n].exact_match[k], 0) + "%").rjust(22) for n in names))
    if lp.adaptive:
        ad = lp.adaptive
        lines.append(f"  {ad.label}: " + ", ".join(
            f"{n} {_pct(a.exact_match, 0)}% (median {a.median_loops} loops, at most {a.max_loops_used})"
            for n, a in ad.sets.items()))
    return lines + _set_lines(report, lp.sets)


def _length_lines(report: EvalReport) -> list[str]:
    ln = report.lengths
    if ln is None:
        return []
    return [
        "",
        f"Exact match (%) by operand length, equal lengths (trained up to {ln.trained_max}), "
        f"n={ln.n_per_length} per length (both operands of exactly that many digits, uniform digits)",
        "  len " + " ".join(str(n).rjust(4) for n in ln.lengths),
        "  EM  " + " ".join(_pct(v, 4) for v in ln.exact_match),
    ]


def _edge_case_lines(report: EvalReport) -> list[str]:
    ec = report.edge_cases
    if ec is None:
        return []
    lines = ["", *_edge_case_summary(ec.cases, ec.decoding or report.settings.decoding.label)]
    for c in ec.cases:
        verdict = "PASS" if c.passed else "FAIL"
        tag = "" if c.in_distribution else " (OOD)"
        lines.append(f"  {verdict} {c.group:<16} {c.name}{tag}: model {' / '.join(c.answers)}, "
                     f"expected {' / '.join(c.expected)}")
    return lines


def _carry_lines(report: EvalReport) -> list[str]:
    cr = report.carry
    if cr is None:
        return []
    lines = ["", "Exact match (%) by longest carry cascade (balanced, in-distribution lengths)"]
    for b in cr.buckets:
        extra = f"  ({b.reason})" if b.reason else ""
        lines.append(f"  {b.bucket:>3}: {_pct(b.exact_match, 4)}%  n={b.n:<5} "
                     f"natural frequency {100 * b.natural_fraction:.1f}%{extra}")
    return lines


def _perplexity_lines(report: EvalReport) -> list[str]:
    pp = report.perplexity
    if not pp:
        return []
    lines = ["", "Perplexity of the correct answer (per token)"]
    for name, s in pp.items():
        lines.append(f"  {name:<20} {s.perplexity:.4g}  (loss {s.loss:.4g}, exact match "
                     f"{_pct(s.exact_match, 0)}%, n={s.n})")
    return lines


def _set_lines(report: EvalReport, sets: dict[str, LoopSet]) -> list[str]:
    """Each scored set's size and where its problems come from."""
    samples = report.settings.samples
    per_set, per_cell = report.settings.n_per_set, report.settings.n_per_cell
    lines = [f"  {name}: n={s.n}, {samples[name]}" if name in samples else f"  {name}: n={s.n}"
             for name, s in sets.items()]
    if per_set == 4 * per_cell and any(s.n == per_set for s in sets.values()):
        # --n counts problems per grid cell; a whole set is four cells' worth
        lines.append(f"  (n={per_set} is 4 x --n {per_cell}: --n counts problems per grid cell, a whole set gets "
                     "four cells' worth)")
    return lines


def _edge_case_summary(cases: tuple[EdgeCaseResult, ...], decoding: str) -> list[str]:
    """The pass counts, in and out of distribution apart, and every failed in-distribution
    case named: one failure there matters more than all the out-of-distribution ones."""
    inside = [c for c in cases if c.in_distribution]
    outside = [c for c in cases if not c.in_distribution]
    failed = [c for c in inside if not c.passed]
    lines = [
        f"Edge cases (one hand-picked problem each, greedy decoding, {decoding}): "
        f"in distribution {len(inside) - len(failed)}/{len(inside)} passed, "
        f"out of distribution {sum(c.passed for c in outside)}/{len(outside)}"
    ]
    for c in failed:
        lines.append(f"  in-distribution failure: {c.name}: model {' / '.join(c.answers)}, "
                     f"expected {' / '.join(c.expected)}")
    return lines

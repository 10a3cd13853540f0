"""The summary the report opens with: what the model does in and out of distribution, each
number with its n, and its known failures, read from the evaluation section's numbers alone
(issue 37: some 40 rows of config came before any accuracy). The loops the answers were read
at are named once, as every sentence of the evaluation section names them."""

from __future__ import annotations

from typing import Any

# the sibling modules themselves, not `from . import`: the package's __init__ imports this one
import analyses.report.html as H
from analyses.prose import pct

from .findings import decoding_label
from .result import EdgeCaseResult, EdgeCases, EvalReport, Grid

SUMMARY_KEY = "summary"
SUMMARY_TITLE = "Summary"


def _grid_cells(grid: Grid, inside: bool) -> list[tuple[int, int, float]]:
    """(digits of a, digits of b, exact match) of each scored cell, in or beyond the trained
    digits as the grid's own means split them (the longer operand decides)."""
    top = grid.trained_digits[1]
    return [(a, b, v) for a, row in zip(grid.digits_a, grid.exact_match, strict=True)
            for b, v in zip(grid.digits_b, row, strict=True)
            if v is not None and (max(a, b) <= top) == inside]


def _cases(cases: list[EdgeCaseResult], most: int = 3) -> str:
    named = "; ".join(f"{c.name} gives {' / '.join(c.answers)}, not {' / '.join(c.expected)}" for c in cases[:most])
    return named + (f"; and {len(cases) - most} more" if len(cases) > most else "")


def _far_sentence(lengths, how: str) -> str | None:
    """Exact match at the lengths 10x or more past the trained one, when any were scored."""
    if lengths is None or not lengths.trained_max:
        return None
    trained = lengths.trained_max
    far = [(n, v) for n, v in zip(lengths.lengths, lengths.exact_match, strict=False)
           if n >= 10 * trained and v is not None]
    if not far:
        return None
    parts = " and ".join(f"{pct(v)} at {n} digits ({n / trained:g}x)" for n, v in far)
    return (f"Far past its training (operands of up to {trained} digits), exact match is {parts} "
            f"(both operands of exactly that length, uniform digits, n={lengths.n_per_length} each, {how}).")


def summary_sentences(d: EvalReport) -> list[str]:
    """What the model does and where it fails, each number with its sample; [] when the
    evaluation produced no accuracy."""
    how = decoding_label(d)
    out: list[str] = []
    grid = d.grid
    if grid is not None:
        out.append(_grid_sentence(grid, how))
    lengths = d.lengths
    far = _far_sentence(lengths, how)
    if far:  # how far past its training a model goes is its headline when it goes far
        out.insert(0, far)
    if lengths is not None and lengths.lengths:
        below = next((n for n, v in zip(lengths.lengths, lengths.exact_match, strict=False)
                      if v is not None and v < 0.5), None)
        reach = (f"stays at or above 50% up to {lengths.lengths[-1]} digits, the longest tested" if below is None
                 else f"first drops below 50% at {below} digits")
        out.append(f"With both operands of equal length, exact match {reach} (n={lengths.n_per_length} per length, "
                   f"trained up to {lengths.trained_max}).")
    if d.splits:
        parts = [f"{name} {pct(s.exact_match, 1)} (n={s.n})" for name, s in d.splits.items()]
        out.append(f"Accuracy on the full splits, {how}: " + ", ".join(parts) + ".")
    elif grid is None and d.perplexity:
        parts = [f"{pct(p.exact_match)} on {p.n} {name.replace('_', '-')} problems" for name, p in d.perplexity.items()]
        out.append(f"Exact match, {how}: " + ", ".join(parts) + ".")
    failures = _edge_case_failures(d.edge_cases) + _weakest_cell(grid)
    if failures:
        known = "; ".join(failures)
        prefix = "Known failures: " if any("fail" in f or "weakest" in f for f in failures) else "No known failure: "
        out.append(prefix + known + f" (greedy decoding, {how}).")
    return out


def _grid_sentence(grid: Grid, how: str) -> str:
    """Exact match in distribution and beyond it on the digit grid, with the problems behind each."""
    lo, hi = grid.trained_digits
    inside, beyond = _grid_cells(grid, True), _grid_cells(grid, False)
    sentence = (f"In distribution (operands of {lo}-{hi} digits, the trained range), exact match is "
                f"{pct(grid.in_distribution_exact_match)} on {len(inside) * grid.n_per_cell} problems "
                f"({len(inside)} digit-count cells of n={grid.n_per_cell})")
    if beyond:
        top = max(max(grid.digits_a), max(grid.digits_b))
        span = f"{hi + 1}" if top == hi + 1 else f"{hi + 1}-{top}"
        sentence += (f"; out of distribution (the longer operand of {span} digits) it is "
                     f"{pct(grid.out_of_distribution_exact_match)} on {len(beyond) * grid.n_per_cell} problems "
                     f"({len(beyond)} cells)")
    return sentence + f". Answers are read with {how}."


def _edge_case_failures(edge: EdgeCases | None) -> list[str]:
    """The edge cases that fail, in and beyond the trained lengths, or that all of them pass."""
    failures: list[str] = []
    if edge is not None and edge.cases:
        inside_cases = [c for c in edge.cases if c.in_distribution]
        outside_cases = [c for c in edge.cases if not c.in_distribution]
        failed_in = [c for c in inside_cases if not c.passed]
        failed_out = [c for c in outside_cases if not c.passed]
        if failed_in:
            failures.append(f"{len(failed_in)} of {len(inside_cases)} in-distribution edge cases fail "
                            f"({_cases(failed_in)})")
        if failed_out:
            failures.append(f"{len(failed_out)} of {len(outside_cases)} edge cases beyond the trained lengths fail "
                            f"({_cases(failed_out)})")
        if not failed_in and not failed_out:
            passes = f"all {len(inside_cases)} in-distribution edge cases pass"
            if outside_cases:
                passes += f", and all {len(outside_cases)} beyond the trained lengths"
            failures.append(passes)
    return failures


def _weakest_cell(grid: Grid | None) -> list[str]:
    """The grid's weakest cell, when one is below 100%."""
    if grid is not None:
        weakest = min(_grid_cells(grid, True) + _grid_cells(grid, False), key=lambda c: c[2], default=None)
        if weakest is not None and weakest[2] < 1.0:
            return [f"the weakest grid cell, operands of {weakest[0]} and {weakest[1]} digits, is at "
                    f"{pct(weakest[2])} (n={grid.n_per_cell})"]
    return []


def summary_of(evaluation_section: dict[str, Any] | None) -> list[str]:
    """The summary's sentences from report.json's evaluation section ([] when it did not run)."""
    if evaluation_section is not None and evaluation_section.get("status") == "ok" and evaluation_section.get("data"):
        return summary_sentences(EvalReport.from_dict(evaluation_section["data"]))
    return []


def summary_html(evaluation_section: dict[str, Any] | None) -> str:
    """The summary as the page's first section, or a line saying why there is none."""
    sentences = summary_of(evaluation_section)
    if not sentences:
        status = "no accuracy was measured" if evaluation_section is None else (
            f"the evaluation section is {evaluation_section.get('status')}")
        body = f'<p class="note">No summary: {H.esc(status)}.</p>'
    else:
        body = '<ul class="findings">' + "".join(f"<li>{H.esc(s)}</li>" for s in sentences) + "</ul>"
    return (f'<section id="{SUMMARY_KEY}" data-status="ok"><h2>{SUMMARY_TITLE}</h2>{body}'
            '<p class="note">From the accuracy section below; every number there has its figure.</p></section>')

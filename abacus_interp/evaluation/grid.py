"""The exact-match grid over (digits of a, digits of b) for two-operand digit tasks.

This module owns the grid's geometry and its section of the report: how long a cell's
sequences are and whether they fit the model (`cell_length`, `cell_fits`), which problems
a cell holds (`cell_examples`, keyed by seed and cell so a cell is the same in any grid),
the default operand range (`default_grid`), and judging every fitting cell at the run's own
decoding (`answers.AnswerDecoding`: adaptive loops where the run halts) into `EvalReport.grid`
with its in- and out-of-distribution means (`grid_section`).
"""

from __future__ import annotations

from abacus_interp.evaluation.answers import AnswerDecoding, judge
from abacus_interp.evaluation.common import SectionProgress, mean_or_none, section_rng
from abacus_interp.evaluation.result import Grid
from abacus_interp.tasks.base import Example
from abacus_interp.tasks.binary_op import BinaryOpTask

Cell = tuple[int, int]


def cell_length(task: BinaryOpTask, i: int, j: int) -> int:
    """Longest prompt + answer + EOS for operands of i and j digits."""
    return i + 1 + j + 1 + task.max_answer_digits(i, j) + 1


def cell_fits(task: BinaryOpTask, i: int, j: int, max_seq_len: int) -> bool:
    return cell_length(task, i, j) <= max_seq_len


def cell_examples(task: BinaryOpTask, i: int, j: int, n: int, seed: int = 0) -> list[Example]:
    """The `n` problems of grid cell (i, j): operands of exactly i and j digits, from a
    stream keyed by (seed, i, j), so a cell is the same whatever grid it is part of."""
    return task.sample_cell(n, section_rng(seed, "cell", i, j), i, j)


def default_grid(task: BinaryOpTask, max_seq_len: int) -> tuple[int, int]:
    """1..2 * task.max_digits, lowered to the longest operand that fits with a 1-digit partner."""
    hi = 2 * task.max_digits
    while hi > 1 and not cell_fits(task, hi, 1, max_seq_len):
        hi -= 1
    return 1, hi


def grid_section(
    model,
    task: BinaryOpTask,
    digits: list[int],
    fitting: list[Cell],
    skipped_cells: list[Cell],
    n_per_cell: int,
    seed: int,
    decoding: AnswerDecoding,
    bar: SectionProgress,
) -> tuple[Grid, dict[Cell, float], dict[Cell, list[Example]], dict[Cell, list[bool]]]:
    """Judge every fitting cell under `decoding` (the loss teacher-forced at its fixed depth).
    Returns the report's `grid` section and, per cell, its exact match, its problems and their
    teacher-forced verdicts (for the lengths section and the greedy re-check)."""
    em: dict[Cell, float] = {}
    loss: dict[Cell, float] = {}
    cell_ex: dict[Cell, list[Example]] = {}
    cell_verdicts: dict[Cell, list[bool]] = {}
    for i, j in fitting:
        bar.section(f"grid {i}x{j}")
        ex = cell_examples(task, i, j, n_per_cell, seed)
        judged = judge(model, task, ex, decoding)
        em[(i, j)], loss[(i, j)] = judged.exact_match, judged.teacher_forced.loss
        cell_ex[(i, j)], cell_verdicts[(i, j)] = ex, judged.teacher_forced.per_example_correct
        bar.step()
    in_dist = [em[c] for c in fitting if max(c) <= task.max_digits]
    ood = [em[c] for c in fitting if max(c) > task.max_digits]
    section = Grid(
        digits_a=tuple(digits),
        digits_b=tuple(digits),
        exact_match=tuple(tuple(em.get((i, j)) for j in digits) for i in digits),
        loss=tuple(tuple(loss.get((i, j)) for j in digits) for i in digits),
        skipped_cells=tuple(skipped_cells),
        trained_digits=(task.min_digits, task.max_digits),
        n_per_cell=n_per_cell,
        n_loops=decoding.n_loops,
        decoding=decoding.label,
        in_distribution_exact_match=mean_or_none(in_dist),
        out_of_distribution_exact_match=mean_or_none(ood),
    )
    return section, em, cell_ex, cell_verdicts

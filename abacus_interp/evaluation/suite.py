"""The evaluation suite behind `abacus-interp eval`: one call, every number, text and figures.

    >>> report = evaluate(model, task, grid=(1, 10), loops=[1, 2, 4, 8], n_per_cell=100)
    >>> print(format_report(report))
    >>> report.to_dict()      # JSON-safe
    >>> report.figures()      # {"grid": go.Figure, "loops": ..., ...}

For two-operand digit tasks (addition, multiplication) it measures:

1. `grid`: exact match over (digits of a, digits of b), trained region outlined, with
   in- and out-of-distribution means. Answers are read at the run's own decoding
   (`answers.AnswerDecoding`): at a fixed loop count cells are scored teacher-forced
   (`score_examples`; all answer argmaxes right == greedy exact match); a run with adaptive
   halting (`cfg.halt_tol`) has its answers generated with adaptive loops, as `solve` does.
   A subset is re-checked with `model.generate` + `task.check` at the teacher-forced depth:
   `generate_agreement` is the fraction that agrees.
2. `loops`: exact match and loss vs the number of loops R, on an in-distribution set and
   an out-of-distribution set (both operands longer than trained, up to 2x).
3. `lengths`: exact match by operand length, equal-length operands 1..as long as fits.
4. `edge_cases`: carry chains, no carries, maximal sums, zeros, unequal lengths,
   commutativity, greedily decoded with `model.generate`.
5. `carry` (addition): exact match by longest carry cascade 0..4, 5+ on a balanced set
   with planted cascades (`sample_with_cascade`), in-distribution lengths.
6. `perplexity`: per-token perplexity of the correct answer on each set.

For the modular-addition task (`full_split`): accuracy and loss on the train and test
splits and accuracy vs loops; the digit sections are listed in `skipped` with the reason.
Other tasks get accuracy, loss and perplexity vs loops on a sampled set.

Problems are drawn from `random.Random` streams derived from `seed` and the section/cell
name, so one cell's problems do not depend on which other cells are evaluated.

The sections live in sibling modules: `report.py` (the `EvalReport` dataclass) and `result.py`
(its sections' frozen dataclasses, each built whole by its module), `grid.py`
(the exact-match grid), `loops.py` (accuracy vs loops and lengths, perplexity sets),
`carry.py` (carry-complexity buckets), `agreement.py` (the greedy re-check),
`edge_cases.py`, `other_tasks.py` (modular addition and non-digit tasks), `text.py`
(`format_report`) and `common.py` (seeded streams, progress bar). This module owns the
entry point: argument checks, the report header, dispatch by kind of task, and running
the digit-task sections in order. `evaluate`, `format_report` and `EvalReport` stay
importable from here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from abacus_interp.errors import UserError
from abacus_interp.evaluation.agreement import (
    AGREEMENT_PROBLEMS,
    measure_agreement,
    pick_from_cells,
)
from abacus_interp.evaluation.answers import AnswerDecoding
from abacus_interp.evaluation.carry import carry_section
from abacus_interp.evaluation.cascades import CASCADE_BUCKETS
from abacus_interp.evaluation.common import SectionProgress, mean_or_none, section_rng
from abacus_interp.evaluation.edge_cases import edge_cases, run_edge_cases
from abacus_interp.evaluation.grid import (
    cell_examples,
    cell_fits,
    cell_length,
    default_grid,
    grid_section,
)
from abacus_interp.evaluation.loops import (
    adaptive_sets,
    default_loops,
    digit_sets,
    equal_lengths,
    lengths_section,
    loops_section,
    perplexity_section,
    scored_sets,
)
from abacus_interp.evaluation.other_tasks import (
    DIGIT_SECTIONS,
    evaluate_generic,
    evaluate_modular,
)
from abacus_interp.evaluation.report import EvalReport
from abacus_interp.evaluation.result import (
    Decoding,
    EdgeCaseResult,
    EdgeCases,
    GroupCount,
    ModelInfo,
    Settings,
)
from abacus_interp.evaluation.text import format_report

__all__ = [
    "EvalReport",
    "evaluate",
    "format_report",
    # re-exported from their modules for existing importers
    "AGREEMENT_PROBLEMS",
    "DIGIT_SECTIONS",
    "cell_examples",
    "cell_fits",
    "cell_length",
    "default_grid",
    "default_loops",
]

logger = logging.getLogger(__name__)


def _validate(model, grid, loops, n_per_cell, n_per_set) -> None:
    for name, v in (("n_per_cell", n_per_cell), ("n_per_set", n_per_set)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UserError(f"{name} must be a positive integer, got {v!r}")
    if grid is not None:
        if len(grid) != 2 or not all(isinstance(g, int) and not isinstance(g, bool) for g in grid):
            raise UserError(
                f"grid must be a pair of integers (lo, hi), e.g. (1, 20); got {grid!r}"
            )
        if not 1 <= grid[0] <= grid[1]:
            raise UserError(f"grid {grid!r} must satisfy 1 <= lo <= hi")
        if grid[1] > model.cfg.max_seq_len:  # such cells are all skipped; 10**30 of them are never listed
            raise UserError(
                f"grid {grid!r}: operands of more than max_seq_len={model.cfg.max_seq_len} digits never fit the "
                f"model's sequence; use hi <= {model.cfg.max_seq_len}"
            )
    if loops is not None:
        if not loops:
            raise UserError(
                "loops is empty; pass loop counts like [1, 2, 4, 8] or None for the default"
            )
        bad = [r for r in loops if isinstance(r, bool) or not isinstance(r, int) or r < 1]
        if bad:
            raise UserError(f"loop counts must be integers >= 1, got {bad}")
        if max(loops) > model.cfg.max_loops:
            raise UserError(
                f"loops up to {max(loops)} requested but the model has hook sets for "
                f"max_loops={model.cfg.max_loops}; load it with load_model(path, max_loops={max(loops)}) "
                "(the CLI's eval does this from --loops)"
            )


# --------------------------------------------------------------------------- evaluate


def evaluate(
    model,
    task,
    *,
    grid: tuple[int, int] | None = None,
    loops: list[int] | None = None,
    n_per_cell: int = 25,
    seed: int = 0,
    progress: bool = True,
    n_per_set: int | None = None,
    n_loops: int | None = None,
    max_length: int | None = None,
    allowed=None,
    eos: bool = True,
    tol: float | None = None,
    far_lengths: Sequence[int] = (),
) -> EvalReport:
    """Run the evaluation suite (see the module docstring) and return an `EvalReport`.

    grid:       operand digit range (lo, hi) for the exact-match grid; default 1..2x the
                trained max_digits, lowered to what fits `model.cfg.max_seq_len`. Cells that
                do not fit are skipped and listed.
    loops:      loop counts for accuracy vs loops; default `default_loops(model.cfg)`.
    n_per_cell: problems per grid cell and per length; 25 keeps `abacus-interp eval` of every
                shipped run within half a minute on two CPU cores (a 16x16 grid at 100 took
                over a minute) and still shows each cell's accuracy to about +-10 points.
    n_per_set:  problems per whole set (in/out-of-distribution, carry bucket); default 4 x n_per_cell.
    n_loops, tol: how the answers of every section except accuracy-vs-loops are read
                (`answers.AnswerDecoding.of`): an explicit `n_loops` is a fixed loop count;
                otherwise the run's own decoding, adaptive loops (at `tol`, default the
                model's `halt_tol`, at most its max_loops) where it halts, else the trained
                depth. With adaptive loops the answers are generated; losses and perplexity
                stay teacher-forced at the trained depth, and the loop sweep adds each set's
                adaptive exact match beside its fixed loop counts.
    max_length: longest equal-length operands in `lengths`; default the longest that fits,
                capped at max(4 * max_digits, grid hi).
    far_lengths: equal-length operands far past those (e.g. 10x and 25x the trained length),
                scored after them where they fit: how far a model that reads any length goes.
    allowed, eos: the run's readout for tasks without digit operands (modular addition and the
                rest), as `scoring.run_readout(config["train"], task)` gives them.
    """
    cfg = model.cfg
    n_per_set = 4 * n_per_cell if n_per_set is None else n_per_set
    _validate(model, grid, loops, n_per_cell, n_per_set)
    decoding = AnswerDecoding.of(model, n_loops, tol)
    eval_loops = decoding.n_loops
    _check_depth_and_vocabulary(cfg, task, eval_loops)
    loops = sorted(set(loops)) if loops is not None else default_loops(cfg)
    header = _header(model, task, seed=seed, n_per_cell=n_per_cell, n_per_set=n_per_set,
                     decoding=decoding, loops=loops, grid=grid)
    if task.has_fixed_split:
        report = evaluate_modular(model, task, header, loops, eval_loops, progress, allowed, eos)
    elif task.has_digit_grid:
        report = _evaluate_digits(model, task, header, grid, loops, decoding, n_per_cell, n_per_set, seed,
                                  max_length, progress, far_lengths)
    else:
        report = evaluate_generic(model, task, header, loops, eval_loops, n_per_set, seed, progress, allowed, eos)
    for section, reason in report.skipped.items():
        logger.info("eval: skipped %s: %s", section, reason)
    return report


def _check_depth_and_vocabulary(cfg, task, eval_loops: int) -> None:
    if not 1 <= eval_loops <= cfg.max_loops:
        raise UserError(f"n_loops={eval_loops} must be in 1..max_loops={cfg.max_loops}")
    if cfg.vocab.tokens != task.vocab.tokens:
        raise UserError(f"the model's vocabulary {cfg.vocab.symbols} is not the task's {task.vocab.symbols}; "
                        "evaluate a model on the task it was trained on (see the run's config.json)")


def _header(model, task, *, seed, n_per_cell, n_per_set, decoding, loops, grid) -> EvalReport:
    """The report before any section ran: what was evaluated and how."""
    cfg = model.cfg
    return EvalReport(
        task={"name": task.name, **task.config()},
        model=ModelInfo(
            n_loops=cfg.n_loops,
            max_loops=cfg.max_loops,
            max_seq_len=cfg.max_seq_len,
            n_layers=cfg.n_layers,
            d_model=cfg.d_model,
            positional=cfg.positional,
            checkpoint=model.checkpoint_path,
        ),
        settings=Settings(
            seed=seed,
            n_per_cell=n_per_cell,
            n_per_set=n_per_set,
            n_loops=decoding.n_loops,
            decoding=Decoding(**decoding.to_dict()),
            loops=tuple(loops),
            grid=tuple(grid) if grid is not None else None,
        ),
    )


def _grid_cells(task, digits: list[int], max_seq_len: int) -> tuple[list, list, list[str]]:
    """(cells that fit, cells skipped for length, notes) of the digits x digits grid, leaving
    out what the run cannot read; each omission noted."""
    L = max_seq_len
    notes = []
    cells = [(i, j) for i in digits for j in digits]
    unreadable = [[i, j] for i, j in cells if not task.can_read(i, j)]
    if unreadable:
        notes.append(
            f"grid: {len(unreadable)} of {len(cells)} cells left out, the run cannot read their operands "
            f"(e.g. {unreadable[-1][0]}x{unreadable[-1][1]} digits: {task.name} trained with a multiplier of up "
            f"to {task.multiplier_range[1]} digits)" if hasattr(task, "multiplier_range") else
            f"grid: {len(unreadable)} of {len(cells)} cells left out, the run cannot read their operands")
    cells = [(i, j) for i, j in cells if task.can_read(i, j)]
    fitting = [(i, j) for i, j in cells if cell_fits(task, i, j, L)]
    skipped_cells = [(i, j) for i, j in cells if not cell_fits(task, i, j, L)]
    if skipped_cells:
        msg = (
            f"grid: {len(skipped_cells)} of {len(cells)} cells skipped, their sequences exceed "
            f"max_seq_len={L} (e.g. {skipped_cells[-1][0]}x{skipped_cells[-1][1]} digits needs "
            f"{cell_length(task, *skipped_cells[-1])} tokens)"
        )
        notes.append(msg)
        logger.info(msg)
    return fitting, skipped_cells, notes


def _evaluate_digits(
    model, task, header: EvalReport, grid, loops, decoding, n_per_cell, n_per_set, seed, max_length, progress,
    far_lengths,
) -> EvalReport:
    cfg = model.cfg
    eval_loops = decoding.n_loops  # the teacher-forced parts' depth
    L = cfg.max_seq_len
    lo, hi = grid if grid is not None else default_grid(task, L)
    digits = list(range(lo, hi + 1))
    fitting, skipped_cells, notes = _grid_cells(task, digits, L)
    evaluated = digit_sets(model, task, n_per_set, seed)  # in- and out-of-distribution sets
    sets = evaluated.sets
    lengths, edge_lengths = _lengths(task, max_length, hi, L, far_lengths)
    cases = edge_cases(task, edge_lengths, section_rng(seed, "edge"), max_seq_len=L)
    is_add = task.has_carries  # carry buckets: addition only
    total = (len(fitting) + len(sets) * len(set(loops) | {eval_loops}) + len(lengths) + 1
             + (len(CASCADE_BUCKETS) if is_add else 0) + 1 + (len(sets) if decoding.adaptive else 0))
    bar = SectionProgress(progress, total)
    try:
        # 1. grid, then the greedy re-check of a round-robin pick of its problems
        grid_result, em, cell_ex, cell_verdicts = grid_section(
            model, task, digits, fitting, skipped_cells, n_per_cell, seed, decoding, bar
        )
        bar.section("generate agreement")
        picked = pick_from_cells(cell_ex, cell_verdicts, fitting, n_per_cell)
        agreement = measure_agreement(model, task, [p[0] for p in picked], [p[1] for p in picked], eval_loops,
                                      sample="grid problems, round robin over the cells, both verdicts represented")
        bar.step()
        # 2. loops and 6. perplexity
        scored = scored_sets(model, sets, loops, eval_loops, bar)
        loops_result = loops_section(sets, scored, loops, cfg.n_loops, adaptive_sets(model, task, sets, decoding, bar))
        # 3. lengths
        lengths_result = lengths_section(model, task, lengths, fitting, em, n_per_cell, seed, decoding, bar)
        # 4. edge cases
        bar.section("edge cases")
        edge = _edge_case_section(run_edge_cases(model, task, cases, decoding=decoding), decoding, edge_lengths)
        bar.step()
        # 5. carry complexity
        carry = carry_section(model, task, sets["in_distribution"], n_per_set, seed, decoding, bar, L) if is_add else None
    finally:
        bar.close()
    skipped = {} if is_add else {"carry": f"carry cascades are defined for addition, not {task.name}"}
    return replace(
        header, settings=replace(header.settings, grid=(lo, hi), samples=evaluated.samples,
                                 ood_digits=evaluated.ood_digits),
        grid=grid_result, loops=loops_result, lengths=lengths_result, edge_cases=edge, carry=carry,
        perplexity=perplexity_section(sets, scored, eval_loops), agreement=agreement,
        skipped={**header.skipped, **skipped}, notes=(*header.notes, *notes, *evaluated.notes))


def _lengths(task, max_length, hi: int, max_seq_len: int, far_lengths) -> tuple[list[int], list[int]]:
    """(equal operand lengths 1..length_hi, then the far lengths that fit and can be read;
    the lengths the edge cases are drawn at)."""
    lengths = equal_lengths(task, max_length, hi, max_seq_len)
    length_hi = len(lengths)
    lengths += [n for n in sorted(set(far_lengths))
                if n > length_hi and cell_fits(task, n, n, max_seq_len) and task.can_read(n, n)]
    edge_lengths = [n for n in sorted({1, 2, 3, task.max_digits, task.max_digits + 1, 2 * task.max_digits})
                    if n <= max(length_hi, 1)]
    return lengths, edge_lengths


def _edge_case_section(results: list[EdgeCaseResult], decoding, lengths: list[int]) -> EdgeCases:
    groups = dict.fromkeys(r.group for r in results)  # in the order the cases first name them
    by_group = {g: GroupCount(passed=sum(int(r.passed) for r in results if r.group == g),
                              total=sum(1 for r in results if r.group == g)) for g in groups}
    return EdgeCases(
        cases=tuple(results),
        by_group=by_group,
        pass_rate=mean_or_none([float(r.passed) for r in results]),
        # apart: a rate over both mixes the trained range with what the run never saw
        in_distribution_pass_rate=mean_or_none([float(r.passed) for r in results if r.in_distribution]),
        out_of_distribution_pass_rate=mean_or_none([float(r.passed) for r in results if not r.in_distribution]),
        decoding=decoding.label,
        lengths=tuple(lengths),
    )

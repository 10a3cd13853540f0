"""Accuracy vs loops and vs operand length: the sections that sweep one variable.

This module owns the evaluation sets these sweeps run on and their report sections: the
default loop counts (`default_loops`), the in- and out-of-distribution sets of a digit task
(`digit_sets`, the latter with operands longer than trained, up to 2x), scoring every set
at every loop count (`scored_sets`) into `EvalReport.loops` and `EvalReport.perplexity`,
and exact match by equal operand length (`equal_lengths`, `lengths_section`) into
`EvalReport.lengths`, with the grid's exact match by longer operand alongside.
"""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.core.scoring import Scores, score_examples
from abacus_interp.evaluation.answers import AnswerDecoding, judge
from abacus_interp.evaluation.common import (
    SectionProgress,
    fits_context,
    mean_or_none,
    scores_summary,
    section_rng,
)
from abacus_interp.evaluation.grid import Cell, cell_fits
from abacus_interp.evaluation.result import (
    AdaptiveLoops,
    AdaptiveSet,
    FromGrid,
    Lengths,
    Loops,
    LoopSet,
    SetScores,
)
from abacus_interp.tasks.base import Example
from abacus_interp.tasks.binary_op import BinaryOpTask


def default_loops(cfg) -> list[int]:
    """Powers of two and 1x, 2x and 4x the trained depth, up to 4x the trained depth or
    max_loops, whichever is less (and that one too): where accuracy rises to the trained depth
    and whether it holds past it, at a few counts, since every count is a pass over both sets
    at that depth (every count up to max_loops took most of a minute on small-add). `loops=`
    asks for any other sweep."""
    top = min(cfg.max_loops, 4 * cfg.n_loops)
    loops = {cfg.n_loops, 2 * cfg.n_loops, 4 * cfg.n_loops, top}
    power = 1
    while power <= top:
        loops.add(power)
        power *= 2
    return sorted(r for r in loops if r <= top)


@dataclass(frozen=True)
class EvalSets:
    """The sets a sweep runs on, and what the report says of them."""

    sets: dict[str, list[Example]]
    samples: dict[str, str]  # set name -> where its problems come from, in words
    ood_digits: tuple[int, int] | None  # the out-of-distribution set's digit range; None: no such set
    notes: tuple[str, ...]  # why a set is missing


def digit_sets(model, task: BinaryOpTask, n_per_set: int, seed: int) -> EvalSets:
    """The in-distribution set (problems that fit) and, when longer operands fit, the
    out-of-distribution set, with its digit range, or a note why there is none."""
    cfg = model.cfg
    L = cfg.max_seq_len
    # generated problems: none is held out, as a repeat of a training problem is rare enough
    # not to matter in a space this large
    samples = {"in_distribution": f"sampled as in training: each operand's digit count uniform in "
                                  f"{task.min_digits}..{task.max_digits}, then uniform digits"}
    sets: dict[str, list[Example]] = {
        "in_distribution": [
            e for e in task.sample(n_per_set, section_rng(seed, "set", "id")) if fits_context(e, cfg.vocab, L)
        ]
    }
    ood_hi = 2 * task.max_digits
    while ood_hi > task.max_digits and not cell_fits(task, ood_hi, ood_hi, L):
        ood_hi -= 1
    if ood_hi <= task.max_digits:
        return EvalSets(sets, samples, None, (
            f"no out-of-distribution set: {task.max_digits + 1}-digit operands exceed max_seq_len={L}",))
    sets["out_of_distribution"] = task.sample(
        n_per_set, section_rng(seed, "set", "ood"), min_digits=task.max_digits + 1, max_digits=ood_hi
    )
    samples["out_of_distribution"] = (f"each operand's digit count uniform in {task.max_digits + 1}..{ood_hi} "
                                      "(longer than trained), then uniform digits")
    return EvalSets(sets, samples, (task.max_digits + 1, ood_hi), ())


def scored_sets(
    model, sets: dict[str, list[Example]], loops: list[int], eval_loops: int, bar: SectionProgress,
    allowed=None, eos: bool = True,
):
    """Scores of every set at every R in loops (plus eval_loops): {(name, R): Scores};
    `allowed` and `eos` as in `score_examples` (the run's readout)."""
    results: dict[tuple[str, int], Scores] = {}
    for name, examples in sets.items():
        for r in sorted(set(loops) | {eval_loops}):
            bar.section(f"loops {name} R={r}")
            results[(name, r)] = score_examples(model, examples, n_loops=r, allowed=allowed, eos=eos)
            bar.step()
    return results


def adaptive_sets(model, task, sets: dict[str, list[Example]], decoding: AnswerDecoding,
                  bar: SectionProgress) -> AdaptiveLoops | None:
    """Each set's exact match with adaptive loops (the run's own decoding) and the loops its
    problems used, beside the fixed loop counts of the sweep; None when the run has fixed loops."""
    if not decoding.adaptive:
        return None
    out = {}
    for name, examples in sets.items():
        bar.section(f"adaptive loops {name}")
        judged = judge(model, task, examples, decoding)
        used = sorted(judged.loops_used)
        out[name] = AdaptiveSet(exact_match=judged.exact_match, median_loops=used[len(used) // 2],
                                max_loops_used=used[-1], n=len(examples))
        bar.step()
    return AdaptiveLoops(label=decoding.label, cap=decoding.cap, sets=out)


def loops_section(sets, scored, loops, trained, adaptive: AdaptiveLoops | None = None) -> Loops:
    """Exact match and loss of every set at every fixed loop count (teacher-forced), and
    `adaptive`, the sets under adaptive loops when the run has them (`adaptive_sets`)."""
    return Loops(
        loops=tuple(loops),
        trained_loops=trained,
        adaptive=adaptive,
        sets={
            name: LoopSet(
                exact_match=tuple(scored[(name, r)].exact_match for r in loops),
                loss=tuple(scored[(name, r)].loss for r in loops),
                n=len(examples),
            )
            for name, examples in sets.items()
        },
    )


def perplexity_section(sets, scored, eval_loops) -> dict[str, SetScores]:
    return {name: scores_summary(scored[(name, eval_loops)], len(ex)) for name, ex in sets.items()}


def equal_lengths(
    task: BinaryOpTask, max_length: int | None, grid_hi: int, max_seq_len: int
) -> list[int]:
    """1..the longest equal-length operands that fit, capped at max_length (default
    max(4 * max_digits, grid_hi))."""
    cap = max(4 * task.max_digits, grid_hi) if max_length is None else max_length
    length_hi = 0
    while (length_hi < cap and cell_fits(task, length_hi + 1, length_hi + 1, max_seq_len)
           and task.can_read(length_hi + 1, length_hi + 1)):
        length_hi += 1
    return list(range(1, length_hi + 1))


def lengths_section(
    model,
    task: BinaryOpTask,
    lengths: list[int],
    fitting: list[Cell],
    em: dict[Cell, float],
    n_per_cell: int,
    seed: int,
    decoding: AnswerDecoding,
    bar: SectionProgress,
) -> Lengths:
    """Exact match on equal-length operands under `decoding` (the loss teacher-forced at its
    fixed depth), plus the grid's exact match by the longer operand (`em` of the fitting cells)."""
    len_em, len_loss = [], []
    for n in lengths:
        bar.section(f"length {n}")
        judged = judge(model, task, task.sample_cell(n_per_cell, section_rng(seed, "length", n), n, n), decoding)
        len_em.append(judged.exact_match)
        len_loss.append(judged.teacher_forced.loss)
        bar.step()
    by_max = sorted({max(c) for c in fitting})
    return Lengths(
        lengths=tuple(lengths),
        exact_match=tuple(len_em),
        loss=tuple(len_loss),
        n_per_length=n_per_cell,
        decoding=decoding.label,
        trained_max=task.max_digits,
        from_grid=FromGrid(
            max_operand_digits=tuple(by_max),
            exact_match=tuple(mean_or_none([em[c] for c in fitting if max(c) == m]) for m in by_max),
        ),
    )

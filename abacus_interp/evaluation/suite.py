"""The evaluation suite behind `abacus-interp eval`: one call, every number, text and figures.

    >>> report = evaluate(model, task, grid=(1, 10), loops=[1, 2, 4, 8], n_per_cell=100)
    >>> print(format_report(report))
    >>> report.to_dict()      # JSON-safe
    >>> report.figures()      # {"grid": go.Figure, "loops": ..., ...}

For two-operand digit tasks (addition, multiplication) it measures:

1. `grid`: exact match over (digits of a, digits of b), trained region outlined, with
   in- and out-of-distribution means. Cells are scored teacher-forced (`score_examples`;
   all answer argmaxes right == greedy exact match), and a subset is re-checked with
   `model.generate` + `task.check`: `generate_agreement` is the fraction that agrees.
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
"""

from __future__ import annotations

import copy
import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from abacus_interp.evaluation.cascades import CASCADE_BUCKETS, cascade_bucket, sample_with_cascade
from abacus_interp.evaluation.edge_cases import edge_cases, run_edge_cases
from abacus_interp.scoring import Scores, score_examples
from abacus_interp.tasks.base import Example
from abacus_interp.tasks.binary_op import BinaryOpTask
from abacus_interp.tasks.carries import longest_cascade

logger = logging.getLogger(__name__)

DIGIT_SECTIONS = ("grid", "lengths", "edge_cases", "carry")
AGREEMENT_PROBLEMS = 64  # greedy re-check of teacher-forced verdicts: problems decoded


# --------------------------------------------------------------------------- report


@dataclass
class EvalReport:
    """Every number of one evaluation. Sections a task does not support are None, with the
    reason in `skipped[section]`.

    grid:       digits_a, digits_b (axis values), exact_match and loss ([a][b], None for a
                cell that does not fit max_seq_len), skipped_cells ([[i, j], ...]),
                trained_digits [min, max], n_per_cell, n_loops,
                in_distribution_exact_match, out_of_distribution_exact_match
    loops:      loops [R...], trained_loops, sets {name: {exact_match: [...], loss: [...], n}}
    lengths:    lengths [...], exact_match, loss, n_per_length, trained_max,
                from_grid {max_operand_digits: [...], exact_match: [...]}
    edge_cases: cases [{group, name, kind, in_distribution, passed, expected, answers,
                correct}], by_group {group: {passed, total}}, pass_rate
    carry:      buckets [{bucket, n, exact_match, loss, natural_fraction}], n_per_bucket
    perplexity: {set: {perplexity, loss, mean_answer_logprob, exact_match, token_accuracy, n}}
    splits:     (modular tasks) {split: {exact_match, loss, token_accuracy, n}}
    generate_agreement: fraction of re-checked problems where model.generate + task.check
                gives the same verdict as teacher-forced scoring (1.0 expected)
    """

    task: dict[str, Any]
    model: dict[str, Any]
    settings: dict[str, Any]
    grid: dict[str, Any] | None = None
    loops: dict[str, Any] | None = None
    lengths: dict[str, Any] | None = None
    edge_cases: dict[str, Any] | None = None
    carry: dict[str, Any] | None = None
    perplexity: dict[str, Any] | None = None
    splits: dict[str, Any] | None = None
    generate_agreement: float | None = None
    agreement: dict[str, Any] | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def in_distribution_exact_match(self) -> float | None:
        return None if self.grid is None else self.grid["in_distribution_exact_match"]

    @property
    def out_of_distribution_exact_match(self) -> float | None:
        return None if self.grid is None else self.grid["out_of_distribution_exact_match"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe deep copy: plain dicts/lists/str/bool/int/float, non-finite floats as None."""
        out = {
            name: copy.deepcopy(getattr(self, name))
            for name in (
                "task",
                "model",
                "settings",
                "grid",
                "loops",
                "lengths",
                "edge_cases",
                "carry",
                "perplexity",
                "splits",
                "generate_agreement",
                "agreement",
                "skipped",
                "notes",
            )
        }
        return _json_safe(out)

    def figures(self) -> dict[str, Any]:
        """Plotly figures keyed by section (never shown): grid, loops, lengths, edge_cases,
        carry, perplexity, splits, whichever the report has."""
        from abacus_interp.evaluation import figures

        return figures.report_figures(self)


def _json_safe(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, (str, int)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if hasattr(x, "item"):  # numpy / torch scalars
        return _json_safe(x.item())
    return str(x)


# --------------------------------------------------------------------------- helpers


def _rng(seed: int, *parts: Any) -> random.Random:
    """A stream keyed by the seed and a name; str seeds hash with SHA-512, so this is
    stable across processes (unlike hash())."""
    return random.Random(":".join(["abacus-eval", str(seed), *map(str, parts)]))


def _fits(example: Example, vocab, max_seq_len: int) -> bool:
    """Whether prompt + target + EOS fits the model (the teacher-forced input length)."""
    return len(vocab.encode(example.prompt)) + len(vocab.encode(example.target)) + 1 <= max_seq_len


def cell_length(task: BinaryOpTask, i: int, j: int) -> int:
    """Longest prompt + answer + EOS for operands of i and j digits."""
    return i + 1 + j + 1 + task.max_answer_digits(i, j) + 1


def cell_fits(task: BinaryOpTask, i: int, j: int, max_seq_len: int) -> bool:
    return cell_length(task, i, j) <= max_seq_len


def cell_examples(task: BinaryOpTask, i: int, j: int, n: int, seed: int = 0) -> list[Example]:
    """The `n` problems of grid cell (i, j): operands of exactly i and j digits, from a
    stream keyed by (seed, i, j), so a cell is the same whatever grid it is part of."""
    return task.sample_cell(n, _rng(seed, "cell", i, j), i, j)


def default_grid(task: BinaryOpTask, max_seq_len: int) -> tuple[int, int]:
    """1..2 * task.max_digits, lowered to the longest operand that fits with a 1-digit partner."""
    hi = 2 * task.max_digits
    while hi > 1 and not cell_fits(task, hi, 1, max_seq_len):
        hi -= 1
    return 1, hi


def default_loops(cfg) -> list[int]:
    """1..max_loops when that is at most 16 values, else powers of two, the trained depth
    and max_loops."""
    if cfg.max_loops <= 16:
        return list(range(1, cfg.max_loops + 1))
    loops = {1, cfg.n_loops, cfg.max_loops}
    p = 2
    while p <= cfg.max_loops:
        loops.add(p)
        p *= 2
    return sorted(loops)


def _summary(s: Scores, n: int) -> dict[str, Any]:
    return {
        "exact_match": s.exact_match,
        "loss": s.loss,
        "token_accuracy": s.token_accuracy,
        "perplexity": s.perplexity,
        "mean_answer_logprob": sum(s.answer_logprob) / len(s.answer_logprob),
        "n": n,
    }


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


class _Progress:
    def __init__(self, enabled: bool, total: int):
        self.bar = tqdm(
            total=total, desc="eval", disable=not enabled, dynamic_ncols=True, leave=False
        )

    def section(self, name: str) -> None:
        self.bar.set_postfix_str(name, refresh=False)

    def step(self, n: int = 1) -> None:
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()


def _validate(model, grid, loops, n_per_cell, n_per_set) -> None:
    for name, v in (("n_per_cell", n_per_cell), ("n_per_set", n_per_set)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if grid is not None:
        if len(grid) != 2 or not all(isinstance(g, int) and not isinstance(g, bool) for g in grid):
            raise ValueError(
                f"grid must be a pair of integers (lo, hi), e.g. (1, 20); got {grid!r}"
            )
        if not 1 <= grid[0] <= grid[1]:
            raise ValueError(f"grid {grid!r} must satisfy 1 <= lo <= hi")
    if loops is not None:
        if not loops:
            raise ValueError(
                "loops is empty; pass loop counts like [1, 2, 4, 8] or None for the default"
            )
        bad = [r for r in loops if isinstance(r, bool) or not isinstance(r, int) or r < 1]
        if bad:
            raise ValueError(f"loop counts must be integers >= 1, got {bad}")
        if max(loops) > model.cfg.max_loops:
            raise ValueError(
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
    n_per_cell: int = 100,
    seed: int = 0,
    progress: bool = True,
    n_per_set: int | None = None,
    n_loops: int | None = None,
    max_length: int | None = None,
) -> EvalReport:
    """Run the evaluation suite (see the module docstring) and return an `EvalReport`.

    grid:       operand digit range (lo, hi) for the exact-match grid; default 1..2x the
                trained max_digits, lowered to what fits `model.cfg.max_seq_len`. Cells that
                do not fit are skipped and listed.
    loops:      loop counts for accuracy vs loops; default `default_loops(model.cfg)`.
    n_per_cell: problems per grid cell and per length.
    n_per_set:  problems per whole set (in/out-of-distribution, carry bucket); default 4 *
                n_per_cell.
    n_loops:    loops used for every section except accuracy-vs-loops; default the trained depth.
    max_length: longest equal-length operands in `lengths`; default the longest that fits,
                capped at max(4 * max_digits, grid hi).
    """
    cfg = model.cfg
    n_per_set = 4 * n_per_cell if n_per_set is None else n_per_set
    _validate(model, grid, loops, n_per_cell, n_per_set)
    eval_loops = cfg.n_loops if n_loops is None else n_loops
    if not 1 <= eval_loops <= cfg.max_loops:
        raise ValueError(f"n_loops={eval_loops} must be in 1..max_loops={cfg.max_loops}")
    loops = sorted(set(loops)) if loops is not None else default_loops(cfg)
    if cfg.vocab.tokens != task.vocab.tokens:
        raise ValueError(
            f"the model's vocabulary {cfg.vocab.symbols} is not the task's {task.vocab.symbols}; "
            "evaluate a model on the task it was trained on (see the run's config.json)"
        )
    report = EvalReport(
        task={"name": task.name, **task.config()},
        model={
            "n_loops": cfg.n_loops,
            "max_loops": cfg.max_loops,
            "max_seq_len": cfg.max_seq_len,
            "n_layers": cfg.n_layers,
            "d_model": cfg.d_model,
            "positional": cfg.positional,
            "checkpoint": getattr(model, "checkpoint_path", None),
        },
        settings={
            "seed": seed,
            "n_per_cell": n_per_cell,
            "n_per_set": n_per_set,
            "n_loops": eval_loops,
            "loops": loops,
            "grid": list(grid) if grid is not None else None,
        },
    )
    if hasattr(task, "full_split"):
        _evaluate_modular(model, task, report, loops, eval_loops, progress)
    elif isinstance(task, BinaryOpTask):
        _evaluate_digits(
            model,
            task,
            report,
            grid,
            loops,
            eval_loops,
            n_per_cell,
            n_per_set,
            seed,
            max_length,
            progress,
        )
    else:
        _evaluate_generic(model, task, report, loops, eval_loops, n_per_set, seed, progress)
    for section, reason in report.skipped.items():
        logger.info("eval: skipped %s: %s", section, reason)
    return report


def _scored_sets(
    model, sets: dict[str, list[Example]], loops: list[int], eval_loops: int, bar: _Progress
):
    """Scores of every set at every R in loops (plus eval_loops): {(name, R): Scores}."""
    results: dict[tuple[str, int], Scores] = {}
    for name, examples in sets.items():
        for r in sorted(set(loops) | {eval_loops}):
            bar.section(f"loops {name} R={r}")
            results[(name, r)] = score_examples(model, examples, n_loops=r)
            bar.step()
    return results


def _loops_section(sets, scored, loops, trained) -> dict[str, Any]:
    return {
        "loops": list(loops),
        "trained_loops": trained,
        "sets": {
            name: {
                "exact_match": [scored[(name, r)].exact_match for r in loops],
                "loss": [scored[(name, r)].loss for r in loops],
                "n": len(examples),
            }
            for name, examples in sets.items()
        },
    }


def _perplexity_section(sets, scored, eval_loops) -> dict[str, Any]:
    return {name: _summary(scored[(name, eval_loops)], len(ex)) for name, ex in sets.items()}


def _agreement(
    model, task, examples: list[Example], verdicts: list[bool], n_loops: int
) -> dict[str, Any]:
    """Re-judge examples with greedy decoding; compare with the teacher-forced verdicts."""
    if not examples:
        return {"agreement": None, "n": 0, "disagreements": []}
    max_new = max(len(task.vocab.split(e.target)) for e in examples) + 1
    completions = model.generate(
        [e.prompt for e in examples], n_loops=n_loops, max_new_tokens=max_new
    )
    disagreements = []
    agree = 0
    for e, c, v in zip(examples, completions, verdicts, strict=True):
        g = task.check(e, c)
        if g == bool(v):
            agree += 1
        elif len(disagreements) < 5:
            disagreements.append(
                {
                    "prompt": e.prompt,
                    "target": e.target,
                    "completion": c,
                    "teacher_forced": bool(v),
                    "generate": g,
                }
            )
    if disagreements:
        logger.warning(
            "generate disagrees with teacher-forced scoring on %d of %d problems",
            len(examples) - agree,
            len(examples),
        )
    return {
        "agreement": agree / len(examples),
        "n": len(examples),
        "n_correct": int(sum(map(bool, verdicts))),
        "disagreements": disagreements,
    }


def _evaluate_digits(
    model, task, report, grid, loops, eval_loops, n_per_cell, n_per_set, seed, max_length, progress
):
    cfg = model.cfg
    L = cfg.max_seq_len
    lo, hi = grid if grid is not None else default_grid(task, L)
    report.settings["grid"] = [lo, hi]
    digits = list(range(lo, hi + 1))
    cells = [(i, j) for i in digits for j in digits]
    fitting = [(i, j) for i, j in cells if cell_fits(task, i, j, L)]
    skipped_cells = [[i, j] for i, j in cells if not cell_fits(task, i, j, L)]
    if skipped_cells:
        msg = (
            f"grid: {len(skipped_cells)} of {len(cells)} cells skipped, their sequences exceed "
            f"max_seq_len={L} (e.g. {skipped_cells[-1][0]}x{skipped_cells[-1][1]} digits needs "
            f"{cell_length(task, *skipped_cells[-1])} tokens)"
        )
        report.notes.append(msg)
        logger.info(msg)

    # in- and out-of-distribution sets
    sets: dict[str, list[Example]] = {
        "in_distribution": [
            e for e in task.sample(n_per_set, _rng(seed, "set", "id")) if _fits(e, cfg.vocab, L)
        ]
    }
    ood_hi = 2 * task.max_digits
    while ood_hi > task.max_digits and not cell_fits(task, ood_hi, ood_hi, L):
        ood_hi -= 1
    if ood_hi > task.max_digits:
        sets["out_of_distribution"] = task.sample(
            n_per_set, _rng(seed, "set", "ood"), min_digits=task.max_digits + 1, max_digits=ood_hi
        )
        report.settings["ood_digits"] = [task.max_digits + 1, ood_hi]
    else:
        report.notes.append(
            f"no out-of-distribution set: {task.max_digits + 1}-digit operands exceed max_seq_len={L}"
        )

    # equal-length operands
    cap = max(4 * task.max_digits, hi) if max_length is None else max_length
    length_hi = 0
    while length_hi < cap and cell_fits(task, length_hi + 1, length_hi + 1, L):
        length_hi += 1
    lengths = list(range(1, length_hi + 1))

    # edge cases
    edge_lengths = [
        n
        for n in sorted({1, 2, 3, task.max_digits, task.max_digits + 1, 2 * task.max_digits})
        if n <= max(length_hi, 1)
    ]
    cases = edge_cases(task, edge_lengths, _rng(seed, "edge"), max_seq_len=L)

    # carry buckets (addition only)
    is_add = task.name == "addition"
    buckets = list(CASCADE_BUCKETS) if is_add else []

    total = (
        len(fitting)
        + len(sets) * len(set(loops) | {eval_loops})
        + len(lengths)
        + 1
        + len(buckets)
        + 1
    )
    bar = _Progress(progress, total)
    try:
        # 1. grid
        em: dict[tuple[int, int], float] = {}
        loss: dict[tuple[int, int], float] = {}
        cell_ex: dict[tuple[int, int], list[Example]] = {}
        cell_verdicts: dict[tuple[int, int], list[bool]] = {}
        for i, j in fitting:
            bar.section(f"grid {i}x{j}")
            ex = cell_examples(task, i, j, n_per_cell, seed)
            s = score_examples(model, ex, n_loops=eval_loops)
            em[(i, j)], loss[(i, j)] = s.exact_match, s.loss
            cell_ex[(i, j)], cell_verdicts[(i, j)] = ex, s.per_example_correct
            bar.step()
        in_dist = [em[c] for c in fitting if max(c) <= task.max_digits]
        ood = [em[c] for c in fitting if max(c) > task.max_digits]
        report.grid = {
            "digits_a": digits,
            "digits_b": digits,
            "exact_match": [[em.get((i, j)) for j in digits] for i in digits],
            "loss": [[loss.get((i, j)) for j in digits] for i in digits],
            "skipped_cells": skipped_cells,
            "trained_digits": [task.min_digits, task.max_digits],
            "n_per_cell": n_per_cell,
            "n_loops": eval_loops,
            "in_distribution_exact_match": _mean(in_dist),
            "out_of_distribution_exact_match": _mean(ood),
        }

        # greedy re-check, round robin over cells (first problem of every cell, then the
        # second, ...), with up to half the budget spent on teacher-forced-correct problems
        # so both verdicts are tested when the model gets any right
        bar.section("generate agreement")
        order = [(cell_ex[c][k], cell_verdicts[c][k]) for k in range(n_per_cell) for c in fitting]
        right = [p for p in order if p[1]][: AGREEMENT_PROBLEMS // 2]
        wrong = [p for p in order if not p[1]][: AGREEMENT_PROBLEMS - len(right)]
        picked = right + wrong
        picked += [p for p in order if p[1]][
            len(right) : len(right) + AGREEMENT_PROBLEMS - len(picked)
        ]
        report.agreement = _agreement(
            model, task, [p[0] for p in picked], [p[1] for p in picked], eval_loops
        )
        report.generate_agreement = report.agreement["agreement"]
        bar.step()

        # 2. loops and 6. perplexity
        scored = _scored_sets(model, sets, loops, eval_loops, bar)
        report.loops = _loops_section(sets, scored, loops, cfg.n_loops)
        report.perplexity = _perplexity_section(sets, scored, eval_loops)

        # 3. lengths
        len_em, len_loss = [], []
        for n in lengths:
            bar.section(f"length {n}")
            s = score_examples(
                model,
                task.sample_cell(n_per_cell, _rng(seed, "length", n), n, n),
                n_loops=eval_loops,
            )
            len_em.append(s.exact_match)
            len_loss.append(s.loss)
            bar.step()
        by_max = sorted({max(c) for c in fitting})
        report.lengths = {
            "lengths": lengths,
            "exact_match": len_em,
            "loss": len_loss,
            "n_per_length": n_per_cell,
            "trained_max": task.max_digits,
            "from_grid": {
                "max_operand_digits": by_max,
                "exact_match": [_mean([em[c] for c in fitting if max(c) == m]) for m in by_max],
            },
        }

        # 4. edge cases
        bar.section("edge cases")
        results = run_edge_cases(model, task, cases, n_loops=eval_loops)
        by_group: dict[str, dict[str, int]] = {}
        for r in results:
            g = by_group.setdefault(r.group, {"passed": 0, "total": 0})
            g["passed"] += int(r.passed)
            g["total"] += 1
        report.edge_cases = {
            "cases": [r.__dict__ for r in results],
            "by_group": by_group,
            "pass_rate": _mean([float(r.passed) for r in results]),
            "lengths": edge_lengths,
        }
        bar.step()

        # 5. carry complexity
        if is_add:
            report.carry = _carry_section(
                model, task, sets["in_distribution"], n_per_set, seed, eval_loops, bar, L
            )
        else:
            report.skipped["carry"] = f"carry cascades are defined for addition, not {task.name}"
    finally:
        bar.close()


def _carry_section(model, task, id_set, n, seed, eval_loops, bar, max_seq_len) -> dict[str, Any]:
    natural = {b: 0 for b in CASCADE_BUCKETS}
    for e in id_set:
        natural[cascade_bucket(longest_cascade(*e.operands))] += 1
    out = []
    for bucket in CASCADE_BUCKETS:
        bar.section(f"carry {bucket}")
        rng = _rng(seed, "carry", bucket)
        min_len = 5 if bucket == "5+" else int(bucket)
        lo_digits = max(task.min_digits, min_len, 1)
        row: dict[str, Any] = {
            "bucket": bucket,
            "natural_fraction": natural[bucket] / max(len(id_set), 1),
        }
        if lo_digits > task.max_digits:
            row.update(
                n=0,
                exact_match=None,
                loss=None,
                reason=f"needs operands of >= {lo_digits} digits; the task trains up to {task.max_digits}",
            )
        else:
            examples = []
            for _ in range(n):
                d = rng.randint(lo_digits, task.max_digits)
                length = min_len if bucket != "5+" else rng.randint(5, d)
                examples.append(task.make(*sample_with_cascade(length, d, rng)))
            examples = [e for e in examples if _fits(e, task.vocab, max_seq_len)]
            if examples:
                s = score_examples(model, examples, n_loops=eval_loops)
                row.update(n=len(examples), exact_match=s.exact_match, loss=s.loss)
            else:
                row.update(
                    n=0,
                    exact_match=None,
                    loss=None,
                    reason=f"problems exceed max_seq_len={max_seq_len}",
                )
        out.append(row)
        bar.step()
    return {"buckets": out, "n_per_bucket": n, "n_loops": eval_loops}


def _evaluate_modular(model, task, report, loops, eval_loops, progress):
    sets = {"train": task.full_split("train"), "test": task.full_split("test")}
    if not sets["test"]:
        del sets["test"]
        report.notes.append("the test split is empty (train_fraction=1)")
    bar = _Progress(progress, len(sets) * len(set(loops) | {eval_loops}) + 1)
    try:
        scored = _scored_sets(model, sets, loops, eval_loops, bar)
        report.splits = {
            name: _summary(scored[(name, eval_loops)], len(ex)) for name, ex in sets.items()
        }
        report.loops = _loops_section(sets, scored, loops, model.cfg.n_loops)
        report.perplexity = _perplexity_section(sets, scored, eval_loops)
        bar.section("generate agreement")
        name = "test" if "test" in sets else "train"
        ex = sets[name][:AGREEMENT_PROBLEMS]
        verdicts = scored[(name, eval_loops)].per_example_correct[:AGREEMENT_PROBLEMS]
        report.agreement = _agreement(model, task, ex, verdicts, eval_loops)
        report.generate_agreement = report.agreement["agreement"]
        bar.step()
    finally:
        bar.close()
    reason = f"{task.name} has single-token residues, not digit-count operands"
    for section in DIGIT_SECTIONS:
        report.skipped[section] = reason


def _evaluate_generic(model, task, report, loops, eval_loops, n_per_set, seed, progress):
    examples = [
        e
        for e in task.sample(n_per_set, _rng(seed, "set", "id"))
        if _fits(e, task.vocab, model.cfg.max_seq_len)
    ]
    if not examples:
        raise ValueError(
            f"no {task.name} problem fits the model's max_seq_len={model.cfg.max_seq_len}; "
            "evaluate the model on the task configuration it was trained with"
        )
    sets = {"in_distribution": examples}
    bar = _Progress(progress, len(set(loops) | {eval_loops}) + 1)
    try:
        scored = _scored_sets(model, sets, loops, eval_loops, bar)
        report.loops = _loops_section(sets, scored, loops, model.cfg.n_loops)
        report.perplexity = _perplexity_section(sets, scored, eval_loops)
        ex = examples[:AGREEMENT_PROBLEMS]
        report.agreement = _agreement(
            model,
            task,
            ex,
            scored[("in_distribution", eval_loops)].per_example_correct[:AGREEMENT_PROBLEMS],
            eval_loops,
        )
        report.generate_agreement = report.agreement["agreement"]
        bar.step()
    finally:
        bar.close()
    reason = f"{task.name} is not a two-operand digit task (addition, multiplication)"
    for section in DIGIT_SECTIONS:
        report.skipped[section] = reason


# --------------------------------------------------------------------------- text


def _pct(x: float | None, width: int = 5) -> str:
    return "-".rjust(width) if x is None else f"{100 * x:.0f}".rjust(width)


def format_report(report: EvalReport) -> str:
    """A plain-text summary of every section for a terminal (exact match in percent)."""
    t = report.task
    lines = [
        f"task {t['name']} ({', '.join(f'{k}={v}' for k, v in t.items() if k != 'name')}); "
        f"model: {report.model['n_layers']} layer(s) x {report.model['n_loops']} loops, "
        f"d_model={report.model['d_model']}, {report.model['positional']} positions"
        + (f"; checkpoint {report.model['checkpoint']}" if report.model.get("checkpoint") else ""),
        f"seed {report.settings['seed']}, evaluated at {report.settings['n_loops']} loops",
    ]
    g = report.grid
    if g is not None:
        lo, hi = g["trained_digits"]
        lines += [
            "",
            f"Exact match (%) by digits of a (rows) x digits of b (columns), {g['n_per_cell']} per cell; "
            f"* = trained region ({lo}..{hi} digits), - = does not fit",
        ]
        w = 5
        lines.append("a\\b".rjust(4) + "".join(str(j).rjust(w) for j in g["digits_b"]))
        for i, row in zip(g["digits_a"], g["exact_match"], strict=True):
            cells = []
            for j, v in zip(g["digits_b"], row, strict=True):
                mark = "*" if lo <= i <= hi and lo <= j <= hi else " "
                cells.append(_pct(v, w - 1) + mark)
            lines.append(str(i).rjust(4) + "".join(cells))
        lines.append(
            f"  in-distribution mean {_pct(g['in_distribution_exact_match'], 0)}%, "
            f"out-of-distribution mean {_pct(g['out_of_distribution_exact_match'], 0)}%"
        )
    if report.generate_agreement is not None:
        a = report.agreement
        lines.append(
            f"  greedy decoding agrees with teacher-forced scoring on {a['n']} problems: "
            f"{100 * report.generate_agreement:.0f}%"
        )
    if report.splits:
        lines += ["", "Splits:"]
        for name, s in report.splits.items():
            lines.append(
                f"  {name:<6} exact match {_pct(s['exact_match'], 0)}%  loss {s['loss']:.4g}  (n={s['n']})"
            )
    lp = report.loops
    if lp is not None:
        lines += ["", f"Exact match (%) vs loops (trained: {lp['trained_loops']})"]
        names = list(lp["sets"])
        lines.append("   R " + "".join(n[:20].rjust(22) for n in names))
        for k, r in enumerate(lp["loops"]):
            lines.append(
                f"{r:4d} "
                + "".join((_pct(lp["sets"][n]["exact_match"][k], 0) + "%").rjust(22) for n in names)
            )
    ln = report.lengths
    if ln is not None:
        lines += [
            "",
            f"Exact match (%) by operand length, equal lengths (trained up to {ln['trained_max']})",
        ]
        lines.append("  len " + " ".join(str(n).rjust(4) for n in ln["lengths"]))
        lines.append("  EM  " + " ".join(_pct(v, 4) for v in ln["exact_match"]))
    ec = report.edge_cases
    if ec is not None:
        lines += [
            "",
            f"Edge cases: {sum(g['passed'] for g in ec['by_group'].values())}/"
            f"{sum(g['total'] for g in ec['by_group'].values())} passed",
        ]
        for c in ec["cases"]:
            verdict = "PASS" if c["passed"] else "FAIL"
            tag = "" if c["in_distribution"] else " (OOD)"
            got = " / ".join(c["answers"])
            exp = " / ".join(c["expected"])
            lines.append(
                f"  {verdict} {c['group']:<16} {c['name']}{tag}: model {got}, expected {exp}"
            )
    cr = report.carry
    if cr is not None:
        lines += [
            "",
            "Exact match (%) by longest carry cascade (balanced, in-distribution lengths)",
        ]
        for b in cr["buckets"]:
            extra = f"  ({b['reason']})" if b.get("reason") else ""
            lines.append(
                f"  {b['bucket']:>3}: {_pct(b['exact_match'], 4)}%  n={b['n']:<5} "
                f"natural frequency {100 * b['natural_fraction']:.1f}%{extra}"
            )
    pp = report.perplexity
    if pp:
        lines += ["", "Perplexity of the correct answer (per token)"]
        for name, s in pp.items():
            lines.append(
                f"  {name:<20} {s['perplexity']:.4g}  (loss {s['loss']:.4g}, exact match "
                f"{_pct(s['exact_match'], 0)}%, n={s['n']})"
            )
    if report.skipped:
        lines += ["", "Skipped:"] + [f"  {k}: {v}" for k, v in report.skipped.items()]
    if report.notes:
        lines += ["", "Notes:"] + [f"  {n}" for n in report.notes]
    return "\n".join(lines)

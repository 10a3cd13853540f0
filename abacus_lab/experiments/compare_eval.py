"""Evaluation of one comparison cell: held-out exact match overall, by problem length
(characters of an expression, or operand digits of an addition) and, for addition, on
carry-balanced problems; and the cell's learning curve against training compute.

Held-out means: for a task with a sampled split (expressions) the test split, which training
never draws; for addition, which has no split, problems drawn from a seeded stream other
than training's (the space of operand pairs up to 5 digits is 10^10, so a repeat of a
training problem is negligible).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.scoring import score_examples
from abacus_interp.errors import UserError
from abacus_interp.tasks.carries import sample_with_cascade
from abacus_interp.training.compute import (
    CurvePoint,
    TrainingCost,
    learning_curve,
    mean_context,
    training_cost,
)

UNIFORM = "uniform"  # the task's own sampler, as training draws problems
CARRY_BALANCED = "carry-balanced"  # longest carry chain uniform in 0..digits (tasks.carries)


@dataclass(frozen=True)
class CellEvaluation:
    """evaluation.json of a cell. Fields added since the first comparisons read back as None
    from an older file (`from_dict`); `summarise` fills in the curve from metrics.jsonl."""

    exact_match: float  # on n_test held-out problems of the trained distribution (`sample`)
    loss: float  # per answer token: it still separates cells whose exact match is near 0
    lengths: list[int]  # characters or digits, as the spec's length_unit says
    exact_match_by_length: list[float | None]  # None: the length does not fit the model
    trained_lengths: list[int]  # the task's (min, max) length, in the same unit
    n_test: int
    n_per_length: int
    params: int
    train_seconds: float | None = None
    steps: int | None = None
    wall_seconds: float | None = None
    sample: str | None = None  # the headline sampler: UNIFORM (None in files written before it was named)
    exact_match_carry_balanced: float | None = None  # None: the task has no carry-chain sampler
    n_carry_balanced: int | None = None
    seed: int | None = None  # train.seed
    compute: TrainingCost | None = None
    curve: tuple[CurvePoint, ...] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellEvaluation:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"evaluation.json has fields this version does not know: {', '.join(unknown)}")
        values = dict(data)
        if "compute" in values and values["compute"] is not None:
            values["compute"] = TrainingCost(**values["compute"])
        if "curve" in values and values["curve"] is not None:
            values["curve"] = tuple(CurvePoint(**p) for p in values["curve"])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _score(model, examples) -> float:
    return score_examples(model, examples).exact_match


def carry_balanced(task, n: int, rng: random.Random) -> list:
    """`n` problems whose longest carry chain is uniform in 0..d, d (both operands' digits)
    uniform in the trained digit range: under uniform digits a chain of c columns has
    probability about 10^-(c-1), so a uniform sample hardly tests carrying."""
    lo, hi = task.digit_range
    out = []
    for _ in range(n):
        digits = rng.randint(lo, hi)
        out.append(task.make(*sample_with_cascade(rng.randint(0, digits), digits, rng)))
    return out


def evaluate_cell(model, task, spec) -> CellEvaluation:
    """Exact match on `spec.n_test` held-out problems of the trained distribution, and on
    `spec.n_per_length` held-out problems of each length in `spec.lengths` (None where a
    length does not fit the model's positions). A task with a digit range is measured by
    operand digits (both operands of exactly n digits); one with a length range by
    characters. Every set is seeded, so each cell sees the same problems."""
    by_digits = task.digit_range is not None
    if not by_digits and task.length_range is None:
        raise UserError(f"task {task.name!r} declares neither a digit nor a problem-length range; a comparison "
                        "by length needs one (addition, or expressions with grammar='reference')")
    unit = "digits" if by_digits else "characters"
    if spec.length_unit != unit:
        raise UserError(f"the comparison measures length in {spec.length_unit} but task {task.name!r} is "
                        f"measured in {unit}; set the spec's length_unit to {unit!r}")
    trained = task.digit_range if by_digits else task.length_range
    test = task.sample_held_out(spec.n_test, random.Random(spec.eval_seed))
    by_length: list[float | None] = []
    for length in spec.lengths:
        size = {"max_digits": length} if by_digits else {"max_len": length}
        if task.max_sequence_length(**size) > model.cfg.max_seq_len:
            by_length.append(None)
            continue
        rng = random.Random(spec.eval_seed * 1_000 + length)
        if by_digits:
            examples = task.sample_cell(spec.n_per_length, rng, length, length)
        else:
            # lengths past the trained range were never trained on, so any problem of them is
            # held out (and drawing them from the whole grammar is ten times faster)
            split = "test" if length <= trained[1] else None
            examples = task.sample(spec.n_per_length, rng, min_len=length, max_len=length, split=split)
        by_length.append(_score(model, examples))
    balanced = None
    if task.has_carries:
        balanced = _score(model, carry_balanced(task, spec.n_test, random.Random(f"{spec.eval_seed}-carry-balanced")))
    overall = score_examples(model, test)
    return CellEvaluation(
        exact_match=overall.exact_match, loss=overall.loss, lengths=list(spec.lengths),
        exact_match_by_length=by_length, trained_lengths=list(trained), n_test=spec.n_test,
        n_per_length=spec.n_per_length, params=sum(p.numel() for p in model.parameters()),
        sample=UNIFORM, exact_match_carry_balanced=balanced,
        n_carry_balanced=spec.n_test if balanced is not None else None,
    )


def heldout_size(config: dict[str, Any], task) -> int:
    """Problems in the in-run held-out set (`evaluation.heldout.heldout_sets`): the whole
    test split of a fixed-split task, else train.eval_problems."""
    return len(task.full_split("test")) if task.has_fixed_split else config["train"]["eval_problems"]


def cell_curve(cell_dir: Path, params: int) -> tuple[TrainingCost, tuple[CurvePoint, ...]]:
    """The compute and learning curve of a trained cell, from its config.json and metrics.jsonl."""
    from abacus_interp.tasks import task_from_config

    config = ckpt.read_run_config(cell_dir)
    task = task_from_config(config["task"])
    rows = ckpt.read_metrics(cell_dir)
    compute = training_cost(config, params, mean_context(config, rows, task.max_sequence_length()))
    return compute, learning_curve(rows, compute, heldout_size(config, task))

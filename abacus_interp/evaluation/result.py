"""The evaluation's numbers as one tree of frozen dataclasses: what `EvalReport` holds, what
its JSON writes and what the text, the figures and the report's findings read, attribute by
attribute.

Each section is built whole by its module (`grid.py`, `loops.py`, `edge_cases.py`,
`carry.py`, `agreement.py`, ...) and never changed after. `plain` writes a tree as plain
dicts and lists in field order, the layout `EvalReport.to_dict` has always written; a field
marked `WRITTEN_WHEN_SET` is left out while it is None (a bucket's `reason`, the settings'
`ood_digits`, the agreement's `n_correct`), as the evaluation's JSON has never had them then.
The task's config stays a dict: its keys are each task's own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

# metadata of a field left out of the JSON while it is None
WRITTEN_WHEN_SET = {"written_when_set": True}


def plain(x: Any) -> Any:
    """A tree of these dataclasses as dicts (in field order), lists and leaves."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)
                if not ("written_when_set" in f.metadata and getattr(x, f.name) is None)}
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


# --------------------------------------------------------------------------- what was evaluated, and how


@dataclass(frozen=True)
class ModelInfo:
    """The evaluated model's shape."""

    n_loops: int  # the trained depth
    max_loops: int
    max_seq_len: int
    n_layers: int
    d_model: int
    positional: str
    checkpoint: str | None  # None: a model that was not loaded from a file


@dataclass(frozen=True)
class Decoding:
    """`answers.AnswerDecoding` as written: how the answers were read."""

    n_loops: int  # the teacher-forced depth (and the fixed count without adaptive loops)
    halt_tol: float | None  # None: fixed loops
    cap: int | None  # the adaptive loops' cap; None at fixed loops
    label: str  # e.g. "6 loops", what every section quotes


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The evaluation's arguments as run."""

    seed: int
    n_per_cell: int
    n_per_set: int
    n_loops: int  # the decoding's teacher-forced depth
    decoding: Decoding
    loops: tuple[int, ...]  # the loop counts of accuracy vs loops
    grid: tuple[int, int] | None  # the operand digit range (lo, hi); None for a task without a grid
    samples: dict[str, str] = field(default_factory=dict)  # set name -> where its problems come from
    # the out-of-distribution set's operand digit range; None when there is no such set
    ood_digits: tuple[int, int] | None = field(default=None, metadata=WRITTEN_WHEN_SET)


# --------------------------------------------------------------------------- sections


@dataclass(frozen=True, kw_only=True)
class Grid:
    """Exact match per (digits of a, digits of b); None for a cell that does not fit."""

    digits_a: tuple[int, ...]
    digits_b: tuple[int, ...]
    exact_match: tuple[tuple[float | None, ...], ...]  # [a][b]
    loss: tuple[tuple[float | None, ...], ...]
    skipped_cells: tuple[tuple[int, int], ...]  # cells whose sequences exceed max_seq_len
    trained_digits: tuple[int, int]
    n_per_cell: int
    n_loops: int  # the teacher-forced depth of the loss (and of exact match without adaptive loops)
    decoding: str | None = None  # how exact match was read, e.g. "6 loops" (None: a report from before it was recorded)
    in_distribution_exact_match: float | None
    out_of_distribution_exact_match: float | None  # None: no cell beyond the trained digits

    # N x N multiplication's measure: every cell up to N x N at this exact match or more
    SQUARE_BAR: ClassVar[float] = 0.99

    @property
    def counts_from_one(self) -> bool:
        """Whether both operands' digit counts run 1, 2, 3, ... (the squares N x N are then cells)."""
        return all(digits == tuple(range(1, len(digits) + 1)) for digits in (self.digits_a, self.digits_b))

    def largest_square(self) -> int | None:
        """The largest N with every cell up to N x N (operands of 1..N digits each) at
        SQUARE_BAR or more; None when the grid does not count from one or 1 x 1 falls short. A
        cell left out (too long, or a multiplier the run cannot read) counts as short of it."""
        if not self.counts_from_one:
            return None
        n_best = None
        for n in range(1, min(len(self.digits_a), len(self.digits_b)) + 1):
            if any(v is None or v < self.SQUARE_BAR for row in self.exact_match[:n] for v in row[:n]):
                break
            n_best = n
        return n_best


@dataclass(frozen=True)
class LoopSet:
    exact_match: tuple[float | None, ...]  # per loop count of `Loops.loops`
    loss: tuple[float | None, ...]
    n: int


@dataclass(frozen=True)
class AdaptiveSet:
    """One set's exact match with adaptive loops, and the loops its problems used."""

    exact_match: float
    median_loops: int
    max_loops_used: int
    n: int


@dataclass(frozen=True)
class AdaptiveLoops:
    label: str  # e.g. "adaptive loops, at most 128, halting at relative step < 0.001"
    cap: int
    sets: dict[str, AdaptiveSet]


@dataclass(frozen=True, kw_only=True)
class Loops:
    loops: tuple[int, ...]
    trained_loops: int
    adaptive: AdaptiveLoops | None = None  # the run's own adaptive loops, beside the fixed counts
    sets: dict[str, LoopSet]  # in_distribution / out_of_distribution, or train / test


@dataclass(frozen=True)
class FromGrid:
    """The grid's exact match by the longer operand's digits."""

    max_operand_digits: tuple[int, ...]
    exact_match: tuple[float | None, ...]


@dataclass(frozen=True, kw_only=True)
class Lengths:
    """Exact match with equal-length operands, past the trained length."""

    lengths: tuple[int, ...]
    exact_match: tuple[float | None, ...]
    loss: tuple[float | None, ...]
    n_per_length: int
    decoding: str | None = None
    trained_max: int | None
    from_grid: FromGrid


@dataclass(frozen=True)
class EdgeCaseResult:
    """One hand-picked case (`edge_cases.EdgeCase`) as the model answered it."""

    group: str
    name: str
    kind: str  # "correct", or "commutative": both orders must also give the same answer
    in_distribution: bool
    passed: bool
    expected: tuple[str, ...]  # human order, one per problem
    answers: tuple[str, ...]  # the model's, human order
    correct: tuple[bool, ...] = ()
    loops_used: tuple[int, ...] = ()  # per problem: the loop count its answer was read at (empty: not recorded)


@dataclass(frozen=True)
class GroupCount:
    passed: int
    total: int


@dataclass(frozen=True, kw_only=True)
class EdgeCases:
    cases: tuple[EdgeCaseResult, ...]
    by_group: dict[str, GroupCount]
    pass_rate: float | None
    # apart: a rate over both mixes the trained range with what the run never saw
    in_distribution_pass_rate: float | None = None
    out_of_distribution_pass_rate: float | None = None  # None: no case past the trained lengths
    decoding: str | None = None
    lengths: tuple[int, ...]  # the operand lengths the cases were drawn at


@dataclass(frozen=True, kw_only=True)
class Bucket:
    bucket: str  # longest carry cascade: "0".."4", "5+"
    natural_fraction: float  # how often the bucket occurs in the in-distribution set
    n: int
    exact_match: float | None  # None: no problem in the bucket
    loss: float | None
    reason: str | None = field(default=None, metadata=WRITTEN_WHEN_SET)  # why a bucket has no problems


@dataclass(frozen=True, kw_only=True)
class Carry:
    buckets: tuple[Bucket, ...]
    n_per_bucket: int
    n_loops: int
    decoding: str | None = None


@dataclass(frozen=True)
class SetScores:
    """Held-out scores of one set (perplexity) or split (splits), teacher-forced."""

    exact_match: float | None
    loss: float | None
    token_accuracy: float | None
    perplexity: float | None
    mean_answer_logprob: float | None
    n: int


@dataclass(frozen=True)
class Disagreement:
    """A problem whose greedy verdict differs from the teacher-forced one."""

    prompt: str
    target: str
    completion: str
    teacher_forced: bool
    generate: bool


@dataclass(frozen=True, kw_only=True)
class Agreement:
    """The greedy re-check of the teacher-forced verdicts (`agreement.measure_agreement`)."""

    agreement: float | None  # the share of matching verdicts; None: no problem re-checked
    n: int
    sample: str  # where the re-checked problems come from, in words
    n_correct: int | None = field(default=None, metadata=WRITTEN_WHEN_SET)  # teacher-forced right; None: none re-checked
    disagreements: tuple[Disagreement, ...]  # the first few

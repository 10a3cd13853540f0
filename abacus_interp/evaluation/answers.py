"""How the evaluation suite reads a model's answers: at the run's own decoding defaults.

A run with adaptive halting (`ModelConfig.halt_tol`, answer-slot models) is decoded by
`generate`, `solve` and `eval --lengths` one way: each problem's loop runs until its answer
converges (`core.halting.generate_adaptive`). Scoring such a run teacher-forced at the trained
depth measures another model: extrap-add answers 99999+1 with 90000 after 6 loops and with
100000 once its answer has converged. This module owns that choice for the suite:
`AnswerDecoding` (a fixed loop count, or adaptive loops with a tolerance and a cap, with the
label every section quotes) and `judge` (the verdicts of a set of problems under it, with the
teacher-forced scores at the fixed depth beside them for the loss and the greedy re-check).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from abacus_interp.core.halting import generate_adaptive, resolve_halting
from abacus_interp.core.scoring import Scores, decode_budget, score_examples
from abacus_interp.tasks.base import Example


@dataclass(frozen=True)
class AnswerDecoding:
    """`halt_tol` None: answers read at `n_loops` fixed loops. Otherwise each problem's answer
    is generated with adaptive loops (relative step below `halt_tol`, at most `cap` loops), and
    `n_loops` (the trained depth) is where the teacher-forced parts (loss, perplexity) run."""

    n_loops: int
    halt_tol: float | None = None
    cap: int | None = None

    @classmethod
    def of(cls, model, n_loops: int | None = None, tol: float | None = None) -> AnswerDecoding:
        """The run's own decoding: an explicit `n_loops` wins, then `tol` or the model's
        `cfg.halt_tol` (adaptive loops up to `cfg.max_loops`), else the trained depth."""
        fixed, halt_tol = resolve_halting(model, n_loops, tol)
        if halt_tol is None:
            return cls(n_loops=fixed)
        return cls(n_loops=model.cfg.n_loops, halt_tol=halt_tol, cap=model.cfg.max_loops)

    @property
    def adaptive(self) -> bool:
        return self.halt_tol is not None

    @property
    def label(self) -> str:
        """What every figure and finding says about its loops, e.g. "6 loops"."""
        if self.halt_tol is None:
            return f"{self.n_loops} loop{'s' if self.n_loops != 1 else ''}"
        return f"adaptive loops, at most {self.cap}, halting at relative step < {self.halt_tol:g}"

    def to_dict(self) -> dict[str, Any]:
        return {"n_loops": self.n_loops, "halt_tol": self.halt_tol, "cap": self.cap, "label": self.label}


@dataclass(frozen=True)
class Judged:
    """The verdicts of a set of problems under one `AnswerDecoding`."""

    correct: tuple[bool, ...]  # per problem, under the decoding
    loops_used: tuple[int, ...]  # per problem: the loop count its answer was read at
    teacher_forced: Scores  # at the decoding's fixed depth: the loss, and the verdicts the re-check compares

    @property
    def exact_match(self) -> float:
        return sum(self.correct) / len(self.correct)


def generate_answers(model, task, examples: Sequence[Example], decoding: AnswerDecoding,
                     eos: bool = True) -> tuple[list[str], list[int]]:
    """Greedy completions of `examples` under `decoding` and the loops each was read at."""
    prompts = [e.prompt for e in examples]
    budget = decode_budget(task, examples, eos)
    if not decoding.adaptive:
        completions = model.generate(prompts, n_loops=decoding.n_loops, max_new_tokens=budget)
        return completions, [decoding.n_loops] * len(prompts)
    decoded = generate_adaptive(model, prompts, tol=decoding.halt_tol, max_loops=decoding.cap, max_new_tokens=budget)
    return decoded.completions, decoded.loops_used


def judge(model, task, examples: Sequence[Example], decoding: AnswerDecoding) -> Judged:
    """Exact match of `examples` under `decoding`. At fixed loops the teacher-forced verdict is
    the greedy one (all answer argmaxes right), so nothing is generated; with adaptive loops
    the answers are generated and checked by the task."""
    scores = score_examples(model, examples, n_loops=decoding.n_loops)
    if not decoding.adaptive:
        return Judged(tuple(scores.per_example_correct), (decoding.n_loops,) * len(examples), scores)
    completions, loops_used = generate_answers(model, task, examples, decoding)
    correct = tuple(bool(task.check(e, c)) for e, c in zip(examples, completions, strict=True))
    return Judged(correct, tuple(loops_used), scores)

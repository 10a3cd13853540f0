"""Hand-picked hard and degenerate problems for two-operand digit tasks.

Each `EdgeCase` is one named problem (or, for commutativity, the pair a OP b and b OP a).
Expected answers come from the task itself (`task.make`), so they are the same integers the
model was trained on; `run_edge_cases` decodes greedily at the run's own decoding (adaptive
loops where the run halts, `answers.AnswerDecoding`) and reports the model's answer in human
order next to the expected one, with the loops each was read at.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from abacus_interp.core.scoring import decode_budget
from abacus_interp.evaluation.answers import AnswerDecoding, generate_answers
from abacus_interp.evaluation.common import fits_context
from abacus_interp.evaluation.result import EdgeCaseResult
from abacus_interp.tasks.base import Example, random_with_digits

logger = logging.getLogger(__name__)

# add(group, pairs, kind="correct"): adds one case to the suite, when it fits
_AddCase = Callable[..., None]


@dataclass(frozen=True)
class EdgeCase:
    group: str  # e.g. "carry_chain", "zeros", "commutativity"
    name: str  # human-readable, e.g. "999+1" or "12+345 == 345+12"
    problems: tuple[Example, ...]
    # "correct": every problem must be answered exactly; "commutative": additionally the
    # two completions must be identical.
    kind: str = "correct"
    in_distribution: bool = True


def _human(task, a: int, b: int) -> str:
    return f"{a}{task.op_symbol}{b}"


def _cycle_digits(n: int, start: int = 1) -> int:
    """An n-digit number 1234123... (most significant first), digits 1..4."""
    return int("".join(str((start - 1 + k) % 4 + 1) for k in range(n)))


def edge_cases(
    task, lengths: list[int], rng: random.Random, max_seq_len: int | None = None
) -> list[EdgeCase]:
    """The edge-case suite for an addition or multiplication task, at the given operand
    lengths (digits). Cases whose sequences do not fit `max_seq_len` are left out.

    Addition: carry chains 9..9+1, no carries (1234+4321), maximal sums 9..9+9..9 (these
    also at every trained length).
    Multiplication: times one, powers of ten, maximal products 9..9*9..9.
    Both: zeros (0 OP 0, n OP 0, 0 OP n), unequal lengths, commutativity.
    """
    lengths = sorted({int(n) for n in lengths if n >= 1})
    cases: list[EdgeCase] = []

    def add(group: str, pairs: list[tuple[int, int]], kind: str = "correct") -> None:
        case = _edge_case(task, group, pairs, kind, max_seq_len)
        if case is not None:
            cases.append(case)

    # the sections draw from `rng` in this order (the suite of a seed stays the same)
    if task.has_carries:
        _addition_cases(add, task, lengths)
    else:
        _multiplication_cases(add, lengths, rng)
    _zero_cases(add, lengths, rng)
    _unequal_length_cases(add, lengths, rng)
    _commutativity_cases(add, lengths, rng)
    return cases


def _edge_case(task, group: str, pairs: list[tuple[int, int]], kind: str, max_seq_len: int | None) -> EdgeCase | None:
    """The case of `pairs`, or None when one of its sequences does not fit `max_seq_len` or
    the task cannot read its operands."""
    problems = tuple(task.make(a, b) for a, b in pairs)
    if max_seq_len is not None and not all(fits_context(p, task.vocab, max_seq_len) for p in problems):
        return None
    if not all(task.can_read(len(str(a)), len(str(b))) for a, b in pairs):
        return None  # e.g. a multiplier longer than an N x k run reads
    longest = max(len(str(x)) for a, b in pairs for x in (a, b))
    ops = sorted({len(str(x)) for a, b in pairs for x in (a, b)})
    in_dist = longest <= task.max_digits and ops[0] >= task.min_digits
    if kind == "commutative":
        name = f"{_human(task, *pairs[0])} == {_human(task, *pairs[1])}"
    else:
        name = ", ".join(_human(task, a, b) for a, b in pairs)
    return EdgeCase(group, name, problems, kind, in_dist)


def _addition_cases(add: _AddCase, task, lengths: list[int]) -> None:
    for n in lengths:
        add("carry_chain", [(10**n - 1, 1)])
    for n in lengths:
        a = _cycle_digits(n)
        add("no_carry", [(a, int(str(a)[::-1]))])  # 1234+4321: every digit sum <= 8
    # every trained length, not only the given ones: a run of 9+9 columns is where a model
    # drops the final carry (small-add: right up to 5 digits, wrong at 6, 7 and 8)
    for n in sorted(set(lengths) | set(range(1, task.max_digits + 1))):
        add("max_sum", [(10**n - 1, 10**n - 1)])


def _multiplication_cases(add: _AddCase, lengths: list[int], rng: random.Random) -> None:
    for n in lengths:
        a = random_with_digits(rng, n)
        add("times_one", [(a, 1)])
        add("times_one", [(1, a)])
    for n in lengths:
        add("power_of_ten", [(random_with_digits(rng, n), 10 ** min(n, 3))])
    for n in lengths:
        add("max_product", [(10**n - 1, 10**n - 1)])


def _zero_cases(add: _AddCase, lengths: list[int], rng: random.Random) -> None:
    add("zeros", [(0, 0)])
    for n in lengths:
        v = random_with_digits(rng, n)
        add("zeros", [(v, 0)])
        add("zeros", [(0, v)])


def _unequal_length_cases(add: _AddCase, lengths: list[int], rng: random.Random) -> None:
    for n in lengths:
        if n < 2:
            continue
        short = max(1, n // 2)
        a, b = random_with_digits(rng, n), random_with_digits(rng, 1)
        add("unequal_lengths", [(a, b)])
        add("unequal_lengths", [(b, a)])
        a, b = random_with_digits(rng, n), random_with_digits(rng, short)
        add("unequal_lengths", [(a, b)])
        add("unequal_lengths", [(b, a)])


def _commutativity_cases(add: _AddCase, lengths: list[int], rng: random.Random) -> None:
    for n in lengths:
        short = max(1, n // 2)
        a, b = random_with_digits(rng, n), random_with_digits(rng, short)
        add("commutativity", [(a, b), (b, a)], kind="commutative")
        a, b = random_with_digits(rng, n), random_with_digits(rng, n)
        add("commutativity", [(a, b), (b, a)], kind="commutative")


def run_edge_cases(
    model, task, cases: list[EdgeCase], n_loops: int | None = None, decoding: AnswerDecoding | None = None
) -> list[EdgeCaseResult]:
    """Greedy-decode every problem of every case in one batch and judge each case: under
    `decoding` when given (adaptive loops where the run halts), else at `n_loops` (None: the
    model's default)."""
    flat = [p for case in cases for p in case.problems]
    if not flat:
        return []
    if decoding is not None:
        completions, loops_used = generate_answers(model, task, flat, decoding)
    else:
        # target + EOS is all a correct greedy decode needs; one wrong token already fails it
        completions = model.generate([p.prompt for p in flat], n_loops=n_loops, max_new_tokens=decode_budget(task, flat))
        loops_used = [n_loops] * len(flat) if n_loops is not None else []  # the model's default: not known here
    results, k = [], 0
    for case in cases:
        comps = completions[k : k + len(case.problems)]
        used = loops_used[k : k + len(case.problems)]  # empty when not recorded
        k += len(case.problems)
        correct = [task.check(p, c) for p, c in zip(case.problems, comps, strict=True)]
        passed = all(correct)
        if case.kind == "commutative":
            passed = passed and len(set(c.strip() for c in comps)) == 1
        results.append(
            EdgeCaseResult(
                group=case.group,
                name=case.name,
                kind=case.kind,
                in_distribution=case.in_distribution,
                passed=bool(passed),
                expected=tuple(str(p.answer) for p in case.problems),
                answers=tuple(task.to_human(c) for c in comps),
                correct=tuple(correct),
                loops_used=tuple(used),
            )
        )
    logger.debug("edge cases: %d/%d passed", sum(r.passed for r in results), len(results))
    return results

"""The probabilistic expression grammar of the ReTran reference, and its hashed train/test split.

Miller et al., "Attention Ain't All: Recurrent Transformer" (ACL 2025) generate arithmetic
problems by leftmost expansion of a PCFG over a symbol stack, starting from EQ:

    EQ   -> VAL OP VAL (0.5) | '(' VAL OP VAL ')' (0.5)
    VAL  -> EQ (0.46) | NUM (0.54)
    OP   -> '+' (0.35) | '-' (0.35) | '*' (0.30)
    NUM  -> '0' (0.05) | NUMH NUMT (0.95)
    NUMH -> '1'..'9' (1/18 each) | '-' '1'..'9' (1/18 each)
    NUMT -> d NUMT (0.02 for each digit d) | empty (0.8)

Signs merge as they are written: a number's '-' right after a binary '-' turns the pair into
'+', right after '+' into '-'; after '*', '(' or at the start it stays a unary minus. So the
human text reads like "3*-4+(-5-2)", and its value (ordinary precedence) is unchanged by the
merging. A problem is kept when min_len <= len(text) <= max_len and its answer is short
enough (the caller's `build` decides); the reference's dataset uses 8..30 characters and
answers of at most 5 characters, its out-of-distribution set 31..40 characters.

This module only writes human text; `ExpressionTask` evaluates it and turns it into model
order. Nothing here depends on the rest of the package.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from typing import TypeVar

from ..errors import UserError

T = TypeVar("T")

REFERENCE_MIN_LEN = 8
REFERENCE_MAX_LEN = 30
REFERENCE_MAX_ANSWER_LEN = 5
REFERENCE_OOD_LENGTHS = (31, 40)  # the reference's out-of-distribution problem lengths

P_PARENS = 0.5  # EQ -> '(' VAL OP VAL ')'
P_NESTED = 0.46  # VAL -> EQ
P_PLUS, P_MINUS = 0.35, 0.35  # OP; '*' takes the remaining 0.30
P_ZERO = 0.05  # NUM -> '0'
P_STOP = 0.8  # NUMT -> empty; each further digit 0.02

TEST_FRACTION = 0.1  # share of distinct problems in the held-out test split
_TEST_THRESHOLD = int(TEST_FRACTION * 2**64)
SPLITS = ("train", "test", None)
MAX_ATTEMPTS = 5_000_000  # per problem; only unreachable lengths come near it

_EQ, _VAL, _OP = 0, 1, 2  # nonterminals; terminals on the stack are str
_EQ_FLAT = (_VAL, _OP, _VAL)  # symmetric, so the push order needs no reversal
_EQ_PARENS = (")", _VAL, _OP, _VAL, "(")  # reversed: '(' is popped first


def derive(rng: random.Random, max_len: int) -> str | None:
    """One leftmost derivation from EQ: its human text, or None once it cannot fit `max_len`.

    The reference abandons a derivation when its stack grows past max_len + 2 symbols. Here
    it is abandoned as soon as the text so far plus the fewest characters the stacked
    symbols can still write (EQ 3, every other symbol 1: a number's '-' may merge into the
    operator before it, but its first digit cannot) exceeds `max_len`. Such a derivation
    could never be kept, so cutting it early leaves the distribution of the kept problems
    unchanged. (The reference's rule cuts only such derivations too: a stack of max_len + 3
    symbols writes more than max_len characters.)
    """
    draw = rng.random
    out: list[str] = []
    stack: list[int | str] = [_EQ]
    bound = 3  # len(out) + the fewest characters the stack can still write
    while stack:
        sym = stack.pop()
        if sym == _VAL:
            if draw() < P_NESTED:
                stack.append(_EQ)
                bound += 2  # EQ writes at least 3 characters where VAL wrote at least 1
            else:  # NUM, written at once: its expansion depends on nothing else
                written = len(out)
                _write_number(draw, out)
                bound += len(out) - written - 1
            if bound > max_len:
                return None
        elif sym == _EQ:
            if draw() < P_PARENS:
                stack.extend(_EQ_PARENS)
                bound += 2
                if bound > max_len:
                    return None
            else:
                stack.extend(_EQ_FLAT)
        elif sym == _OP:
            r = draw()
            out.append("+" if r < P_PLUS else "-" if r < P_PLUS + P_MINUS else "*")
        else:
            out.append(sym)  # '(' or ')'
    return "".join(out)  # len(out) == bound <= max_len here


def _write_number(draw: Callable[[], float], out: list[str]) -> None:
    """Expand NUM onto `out`, merging a leading '-' into a binary '+' or '-' before it."""
    if draw() < P_ZERO:
        out.append("0")
        return
    head = min(int(draw() * 18), 17)  # NUMH: 0..8 -> '1'..'9', 9..17 -> '-' '1'..'9'
    if head >= 9:
        head -= 9
        if out and out[-1] == "-":
            out[-1] = "+"
        elif out and out[-1] == "+":
            out[-1] = "-"
        else:
            out.append("-")
    out.append("123456789"[head])
    while True:  # NUMT
        r = draw()
        if r < P_STOP:
            return
        out.append("0123456789"[min(int((r - P_STOP) * 50), 9)])


def reverse_numbers(text: str) -> str:
    """Model order of a human text: every run of digits reversed ("12*-305" -> "21*-503")."""
    return re.sub(r"[0-9]+", lambda m: m.group()[::-1], text)


def in_test_split(text: str) -> bool:
    """True for the ~10% of distinct problems held out for testing.

    A stable hash of the human text (blake2b, not Python's salted `hash`), so the split is
    the same in every process, on every machine, for every seed.
    """
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") < _TEST_THRESHOLD


def check_lengths(min_len: int, max_len: int, max_answer_len: int | None = None) -> None:
    """Validate problem-length bounds (characters of the human text, both inclusive)."""
    named = {"min_len": min_len, "max_len": max_len, "max_answer_len": max_answer_len}
    for label, v in named.items():
        if v is not None or label != "max_answer_len":
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UserError(f"{label} must be an integer >= 1, got {v!r}")
    if max_len < 3:
        raise UserError(
            f"max_len={max_len} admits no problem: the shortest, e.g. '1+2', has 3 characters"
        )
    if min_len > max_len:
        raise UserError(
            f"min_len ({min_len}) is larger than max_len ({max_len}); pass min_len <= max_len"
        )


def draw_problem(
    rng: random.Random,
    min_len: int,
    max_len: int,
    split: str | None,
    build: Callable[[str], T | None],
) -> T:
    """Derive problems until one has min_len..max_len characters, lies in `split` ("train",
    "test", or None for both) and `build(text)` accepts it (returns not None); return that.

    Plain rejection, so the result follows the grammar's distribution conditioned on all
    three; every draw comes from `rng` alone.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of 'train', 'test' or None (both), got {split!r}")
    want_test = split == "test"
    for _ in range(MAX_ATTEMPTS):
        text = derive(rng, max_len)
        if text is None or len(text) < min_len:
            continue
        if split is not None and in_test_split(text) != want_test:
            continue
        built = build(text)
        if built is not None:
            return built
    raise UserError(
        f"no problem of {min_len}..{max_len} characters was accepted in {MAX_ATTEMPTS} derivations; "
        "such lengths are too rare under the grammar: lower max_len or widen the range"
    )

"""Per-answer-digit labels for addition, the token positions they refer to, and a balanced
problem generator.

Token layout (LSD first): `321+654=975<eos>`. For operands of `la` and `lb` digits the prompt
has P = la + lb + 2 tokens; operand digit a_i sits at i, b_i at la + 1 + i, '=' at P - 1 and
answer digit i at P + i. The logits that predict answer digit i are read at P - 1 + i (the
'=' for i = 0, answer digit i - 1 otherwise). A digit past an operand's length counts as 0
and has no position (-1).

Sub-tasks (Quirke & Barez, "Understanding addition in transformers"): every answer digit gets
non-exclusive tags and one exclusive `subtask`, the hardest step it needs:

    use_sum9    a carry arrives through >= 1 digits with a + b == 9 (cascade, chain >= 2)
    use_carry   a carry generated at digit i-1 arrives (chain length 1)
    make_carry  no carry in, a_i + b_i >= 10 (the digit wraps and starts a chain)
    make_sum9   no carry in, a_i + b_i == 9 (the digit would pass a carry on)
    base_add    no carry in, a_i + b_i <= 8
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.evaluation.cascades import CASCADE_BUCKETS, cascade_bucket, sample_with_cascade
from abacus_interp.tasks.base import Example
from abacus_interp.tasks.carries import carry_chain_lengths, carry_in, longest_cascade

SUBTASKS = ("base_add", "make_carry", "make_sum9", "use_carry", "use_sum9")
GROUPS = ("all", "no_carry_in", "carry_in", "cascade")


def digit_labels(a: int, b: int) -> list[dict]:
    """One dict per answer digit i of a + b (LSD first) with the operand digits, carry-in,
    sum-is-9, chain length, sub-task tags and exclusive sub-task."""
    n = len(str(a + b))
    cin, chains = carry_in(a, b), carry_chain_lengths(a, b)
    out = []
    for i in range(n):
        x, y = (a // 10**i) % 10, (b // 10**i) % 10
        tags = {
            "base_add": cin[i] == 0 and x + y <= 8,
            "make_carry": x + y >= 10,
            "make_sum9": x + y == 9,
            "use_carry": chains[i] == 1,
            "use_sum9": chains[i] >= 2,
        }
        if chains[i] >= 2:
            subtask = "use_sum9"
        elif chains[i] == 1:
            subtask = "use_carry"
        elif x + y >= 10:
            subtask = "make_carry"
        elif x + y == 9:
            subtask = "make_sum9"
        else:
            subtask = "base_add"
        out.append({"digit": i, "a": x, "b": y, "carry_in": cin[i], "sum_is_nine": x + y == 9,
                    "chain_length": chains[i], "tags": tags, "subtask": subtask,
                    "answer_digit": ((a + b) // 10**i) % 10})
    return out


def digit_positions(len_a: int, len_b: int, i: int) -> dict[str, int]:
    """Token positions that matter for answer digit i (-1 where the digit does not exist)."""
    p = len_a + len_b + 2
    return {
        "pred": p - 1 + i,
        "a_i": i if i < len_a else -1,
        "b_i": len_a + 1 + i if i < len_b else -1,
        "a_prev": i - 1 if 0 <= i - 1 < len_a else -1,
        "b_prev": len_a + i if 0 <= i - 1 < len_b else -1,
        "prev_answer": p - 2 + i,  # the token before the predicting one ('=' when i == 1)
        "answer_start": p,  # earlier answer digits are at answer_start .. pred (i >= 1)
    }


def slot_names(max_digits: int) -> list[str]:
    """Semantic key slots shared by problems of any length: a0.., '+', b0.., '=', c0.., eos."""
    d = max_digits
    return ([f"a{k}" for k in range(d)] + ["+"] + [f"b{k}" for k in range(d)] + ["="]
            + [f"c{k}" for k in range(d + 1)] + ["eos"])


def token_slots(len_a: int, len_b: int, n_answer: int, max_digits: int) -> list[int]:
    """Slot index (see `slot_names`) of every token of one problem, EOS included."""
    d = max_digits
    return ([k for k in range(len_a)] + [d] + [d + 1 + k for k in range(len_b)] + [2 * d + 1]
            + [2 * d + 2 + k for k in range(n_answer)] + [3 * d + 3])


@dataclass
class ProblemSet:
    """Encoded problems plus one row per (problem, answer digit) with labels and positions.

    Row arrays (numpy, length R): problem, digit, a, b, carry_in, sum_is_nine, chain_length,
    subtask (index into SUBTASKS), tag_<name> (bool), complexity (longest cascade), target
    (token id of the answer digit) and the positions of `digit_positions`.
    """

    examples: list[Example]
    tokens: torch.Tensor  # [n pos], right-padded, EOS included
    slots: torch.Tensor  # [n pos] slot index, -1 on padding
    prompt_lengths: torch.Tensor  # [n]
    max_digits: int
    rows: dict[str, np.ndarray]

    @property
    def n_rows(self) -> int:
        return len(self.rows["problem"])

    def group_mask(self, group: str) -> np.ndarray:
        r = self.rows
        if group == "all":
            return np.ones(self.n_rows, dtype=bool)
        if group == "no_carry_in":
            return r["carry_in"] == 0
        if group == "carry_in":
            return r["carry_in"] == 1
        if group == "cascade":
            return r["chain_length"] >= 2
        raise UserError(f"unknown group {group!r}; choose one of {GROUPS}")

    def summary(self) -> dict:
        r = self.rows
        comp = [cascade_bucket(longest_cascade(*e.operands)) for e in self.examples]
        return {
            "n_problems": len(self.examples),
            "n_digits": self.n_rows,
            "max_digits": self.max_digits,
            "complexity_counts": {b: comp.count(b) for b in CASCADE_BUCKETS},
            "subtask_counts": {s: int((r["subtask"] == k).sum()) for k, s in enumerate(SUBTASKS)},
            "carry_in_fraction": float(r["carry_in"].mean()) if self.n_rows else None,
            "chain_length_counts": {int(v): int((r["chain_length"] == v).sum())
                                    for v in np.unique(r["chain_length"])},
        }


def build_problem_set(vocab, examples: list[Example], max_digits: int | None = None) -> ProblemSet:
    """Encode addition examples and label every answer digit."""
    if not examples:
        raise UserError("build_problem_set needs at least one example")
    ops = [e.operands for e in examples]
    longest = max(max(len(str(a)), len(str(b))) for a, b in ops)
    max_digits = longest if max_digits is None else max(max_digits, longest)
    batch = encode_batch(vocab, [e.prompt for e in examples], [e.target for e in examples])
    slots = torch.full_like(batch.tokens, -1)
    cols: dict[str, list] = {}
    for n, (a, b) in enumerate(ops):
        la, lb = len(str(a)), len(str(b))
        labels = digit_labels(a, b)
        row_slots = token_slots(la, lb, len(labels), max_digits)
        slots[n, : len(row_slots)] = torch.tensor(row_slots)
        comp = longest_cascade(a, b)
        for lab in labels:
            pos = digit_positions(la, lb, lab["digit"])
            entry = {"problem": n, "digit": lab["digit"], "a": lab["a"], "b": lab["b"],
                     "carry_in": lab["carry_in"], "sum_is_nine": lab["sum_is_nine"],
                     "chain_length": lab["chain_length"], "subtask": SUBTASKS.index(lab["subtask"]),
                     "complexity": comp,
                     "target": vocab.encode(str(lab["answer_digit"]))[0], **pos}
            entry.update({f"tag_{k}": v for k, v in lab["tags"].items()})
            for k, v in entry.items():
                cols.setdefault(k, []).append(v)
    rows = {k: np.asarray(v) for k, v in cols.items()}
    return ProblemSet(examples=list(examples), tokens=batch.tokens, slots=slots,
                      prompt_lengths=batch.prompt_lengths, max_digits=max_digits, rows=rows)


def balanced_problems(task, n: int, rng: random.Random, max_digits: int | None = None,
                      uniform_fraction: float = 0.2) -> list[Example]:
    """`n` addition problems with the longest-cascade buckets 0..4, 5+ equally represented
    (cascades are rare under uniform sampling), plus `uniform_fraction` of them from
    `task.sample` (unequal operand lengths, natural carry statistics). Shuffled by `rng`."""
    d = max_digits if max_digits is not None else task.max_digits
    lo = task.digit_range[0]
    n_uniform = int(round(n * uniform_fraction))
    out = task.sample(n_uniform, rng, min_digits=min(lo, d), max_digits=d) if n_uniform else []
    buckets = list(range(min(d, 5) + 1))
    offset = rng.randrange(len(buckets))  # so that small n (even 1) still covers every bucket
    for k in range(n - n_uniform):
        bucket = buckets[(k + offset) % len(buckets)]
        length = rng.randint(5, d) if bucket == 5 else bucket
        digits = rng.randint(max(length, lo, 1), d) if max(length, lo, 1) <= d else d
        out.append(task.make(*sample_with_cascade(length, digits, rng)))
    rng.shuffle(out)
    return out

"""Clean and corrupted problems that differ in one thing, and the metric read off them.

Addition (any answer format): carry pairs of `chain_pair` (analyses/carry_wave/patching.py),
both operands of the trained length D. In the clean problem the units column generates a
carry that travels up a chain of c - 1 columns summing to 9 and lands in column c; in the
corrupted one the units column does not carry. Only the units digits differ, both answers
have D digits, and answer digits 1..c differ: the carried digits, which the metric reads.
The chain c runs over 1..D-1 across the pairs, so the carry travels from one to D - 1
columns (as many loops, in a model that moves it one column per loop).

Modular addition: (a, b) against (a', b), a' != a, read at the answer.

The metric of a run is the mean over pairs of the summed logit differences
logit[clean digit] - logit[corrupted digit] at the positions that predict a digit the two
answers disagree on: every carried digit weighs the same (a pair whose carry travels four
columns counts four times one whose carry stops after one; averaging per pair instead gave
larger circuits that held up worse on held-out pairs, on extrap-add). Its value on the
clean run is positive, on the corrupted run negative.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import Tensor

from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from analyses.carry_wave.patching import chain_pair


@dataclass(frozen=True)
class Pairs:
    label: str  # the sample, in words (findings name it)
    clean: Tensor  # [pair pos]
    corrupted: Tensor  # [pair pos], the same layout
    rows: Tensor  # [read] the pair of each metric read
    cols: Tensor  # [read] the position whose logits predict the digit read
    clean_ids: Tensor  # [read] the clean answer's token there
    corrupted_ids: Tensor  # [read] the corrupted answer's
    weights: Tensor  # [read] 1 / pairs: the metric is a weighted sum of the reads
    problems: tuple[tuple[str, str], ...]  # (clean, corrupted) in human order

    def __len__(self) -> int:
        return self.clean.shape[0]

    def metric(self, logits: Tensor) -> Tensor:
        """Mean over pairs of the summed logit differences (clean digit - corrupted digit) over
        the digits the pair's answers disagree on."""
        return (self._differences(logits) * self.weights).sum()

    def per_pair(self, logits: Tensor) -> Tensor:
        """[pair] each pair's summed logit difference (`metric` is their mean)."""
        differences = self._differences(logits)
        return torch.zeros(len(self), device=differences.device).index_add(0, self.rows, differences)

    def _differences(self, logits: Tensor) -> Tensor:
        at = logits[self.rows, self.cols].float()  # [read d_vocab]
        reads = torch.arange(len(self.rows), device=at.device)
        return at[reads, self.clean_ids] - at[reads, self.corrupted_ids]

    def to(self, device) -> Pairs:
        moved = {k: getattr(self, k).to(device) for k in ("clean", "corrupted", "rows", "cols", "clean_ids",
                                                           "corrupted_ids", "weights")}
        return Pairs(label=self.label, problems=self.problems, **moved)


def pairs_reason(task) -> str | None:
    """Why no pairs can be made for `task` (None when they can)."""
    if getattr(task, "has_carries", False):
        return None if task.max_digits >= 2 else "carry pairs need operands of at least 2 digits (max_digits >= 2)"
    if task.modulus is not None:
        return None
    return (f"task {task.name!r} has no counterfactual pairs here: the circuit is traced on addition carries "
            "and on modular addition")


def make_pairs(task, vocab, n: int, rng: random.Random, exclude: frozenset[str] = frozenset()) -> Pairs:
    """`n` pairs for `task` (see the module docstring), none of whose clean problems is in
    `exclude` (human text), so a held-out set shares no problem with the one it checks."""
    reason = pairs_reason(task)
    if reason:
        raise UserError(reason)
    clean, corrupted, differ = [], [], []
    tries = 0
    while len(clean) < n:
        tries += 1
        if tries > 100 * n + 100:
            raise UserError(f"could not draw {n} distinct pairs outside the {len(exclude)} excluded problems")
        if task.modulus is not None:
            a, b = rng.randrange(task.p), rng.randrange(task.p)
            other = (a + rng.randrange(1, task.p)) % task.p
            pair = (task.make(a, b), task.make(other, b))
            digits = [0]
        else:
            chain = 1 + len(clean) % (task.max_digits - 1)
            ops = chain_pair(task.max_digits, chain, rng)
            pair = (task.make(*ops[0]), task.make(*ops[1]))
            digits = list(range(1, chain + 1))
        text = _human(task, pair[0])
        if text in exclude or text in {_human(task, c) for c in clean}:
            continue
        clean.append(pair[0])
        corrupted.append(pair[1])
        differ.append(digits)
    return _encode(task, vocab, clean, corrupted, differ)


def _human(task, example) -> str:
    symbol = getattr(task, "op_symbol", " ")
    return symbol.join(str(x) for x in example.operands)


def _encode(task, vocab, clean, corrupted, differ) -> Pairs:
    cb = encode_batch(vocab, [e.prompt for e in clean], [e.target for e in clean])
    rb = encode_batch(vocab, [e.prompt for e in corrupted], [e.target for e in corrupted])
    if cb.tokens.shape != rb.tokens.shape or not torch.equal(cb.valid, rb.valid):
        raise ValueError("clean and corrupted problems must have the same layout")
    rows, cols, c_ids, r_ids = [], [], [], []
    for i, digits in enumerate(differ):
        start = int(cb.prompt_lengths[i])  # the first answer token; the logits before it predict it
        for k in digits:
            c, r = int(cb.tokens[i, start + k]), int(rb.tokens[i, start + k])
            if c != r:
                rows.append(i)
                cols.append(start + k - 1)
                c_ids.append(c)
                r_ids.append(r)
    if task.modulus is not None:
        label = (f"modular pairs: (a, b) against (a', b), a' != a, mod {task.p} (n={len(clean)}); "
                 "metric: logit difference of the two answers")
    else:
        d = task.max_digits
        label = (f"carry pairs: {d}-digit operands whose units column starts a carry through a chain of "
                 f"1-{d - 1} columns (clean) or does not (corrupted), n={len(clean)}; metric: summed logit "
                 "difference of the carried answer digits")
    if len(set(rows)) < len(clean):
        raise ValueError("every pair must differ in at least one answer digit the metric reads")
    return Pairs(label=label, clean=cb.tokens, corrupted=rb.tokens, rows=_long(rows), cols=_long(cols),
                 clean_ids=_long(c_ids), corrupted_ids=_long(r_ids),
                 weights=torch.full((len(rows),), 1 / len(clean)),
                 problems=tuple((_human(task, c), _human(task, r)) for c, r in zip(clean, corrupted, strict=True)))


def _long(values: list[int]) -> Tensor:
    return torch.tensor(values, dtype=torch.long)

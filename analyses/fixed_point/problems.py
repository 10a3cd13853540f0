"""Problems for the fixed-point analysis: a carry-balanced addition set and the position
classes of an encoded batch.

Under uniform sampling long carry chains are rare (each extra link needs a digit pair that
sums to exactly 9), so lock-in "by carry-chain length" would have no data where it matters.
`balanced_problems` plants chains of every length 0..max_chain (through the library's
`sample_with_cascade`) and mixes in a share of the task's own uniform samples, which have
unequal operand lengths.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch
from jaxtyping import Bool
from torch import Tensor

from abacus_interp.core.tokens import Batch
from abacus_interp.errors import UserError
from abacus_interp.evaluation.cascades import sample_with_cascade
from abacus_interp.tasks.base import Example
from abacus_interp.tasks.carries import carry_chain_lengths

# Disjoint token classes, plus two overlapping views:
#   operand  digit tokens of the prompt
#   operator the non-digit prompt tokens ("+", "=")
#   answer   the answer digit tokens (teacher-forced), EOS excluded
#   readout  the positions whose logits are scored: "=" through the last answer digit,
#            i.e. where answer digit k (and finally EOS) is read off
#   all      every real token
CLASSES = ("operand", "operator", "answer", "readout", "all")


def balanced_problems(task: Any, n: int = 300, seed: int = 0, max_chain: int = 5,
                      min_digits: int | None = None, max_digits: int | None = None) -> list[Example]:
    """`n` addition problems within the task's trained digit range, cycling over longest
    carry chains 0..max_chain (planted, both operands of equal length) plus one uniform
    task sample per cycle. Deterministic in `seed`.

    Non-addition tasks get `task.sample_held_out(n, rng)`."""
    rng = random.Random(seed)
    if not task.has_carries:
        return task.sample_held_out(n, rng)
    lo = task.min_digits if min_digits is None else min_digits
    hi = task.max_digits if max_digits is None else max_digits
    top = min(max_chain, hi)
    out = []
    for i in range(n):
        bucket = i % (top + 2)
        if bucket == top + 1:
            out.extend(task.sample(1, rng, min_digits=lo, max_digits=hi))
            continue
        digits = rng.randint(max(lo, bucket, 1), hi)
        out.append(task.make(*sample_with_cascade(bucket, digits, rng)))
    return out


def as_examples(task: Any, problems: Sequence) -> list[Example]:
    """Examples as given, or built from operand tuples `(a, b)` or human strings "123+45"."""
    out = []
    for p in problems:
        if isinstance(p, Example):
            out.append(p)
        elif isinstance(p, str):
            out.append(task.from_human(p))
        elif isinstance(p, (tuple, list)):
            out.append(task.make(*p))
        else:
            raise UserError(
                f"cannot read problem {p!r}: pass task Examples, operand tuples (a, b) or "
                "human strings like '123+45'"
            )
    if not out:
        raise UserError("problems is empty; pass at least one problem or None for the default set")
    return out


def chain_lengths(task: Any, examples: Sequence[Example]) -> list[list[int]] | None:
    """Carry-chain length reaching each answer digit (LSD first), for addition; else None."""
    if not task.has_carries:
        return None
    return [carry_chain_lengths(*e.operands) for e in examples]


def class_masks(batch: Batch, digit_ids: Tensor, target_lengths: Tensor) -> Bool[Tensor, "cls batch pos"]:
    """Masks of `CLASSES` (in that order) over a right-padded prompt+target+EOS batch."""
    tokens, valid = batch.tokens, batch.valid
    pos = torch.arange(tokens.shape[1])[None, :]
    plen = batch.prompt_lengths[:, None]
    is_digit = torch.isin(tokens, digit_ids.cpu())
    prompt = pos < plen
    answer = (pos >= plen) & (pos < plen + target_lengths[:, None])
    return torch.stack([
        prompt & is_digit,
        prompt & ~is_digit & valid,
        answer,
        batch.loss_mask,
        valid,
    ])

"""Which head reads which digit, loop by loop, in an answer-slot multiplier (N x k).

Answer digit i (units first) of a * b is (sum_j a_(i-j) * b_j + carry) mod 10. In the
answer-slot format the position predicting digit i holds Abacus index i ("=" for the units
digit, then the slot of digit i - 1), multiplicand digit a_c holds index c + 1 and multiplier
digit b_j index j + 1. Relative to the digit being predicted, the key groups are:

* the multiplicand around the column: a_(i+1), a_i, a_(i-1), a_(i-2), a_(i-3) (a window
  of +-2 on the index reaches exactly these; a_i, a_(i-1), a_(i-2) are the ones a 3-digit
  multiplier needs);
* each multiplier digit b_0, b_1, b_2 (units first), wherever the query is;
* the answer slot below (the position predicting digit i - 1: where a carry comes from) and
  the one below it, and the query itself.

`head_reading` splits every answer position's attention, per loop and head, into these
groups; `knockout` forbids one head one group in every loop and measures exact match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from abacus_interp.core.masks import HeadKinds, number_ordinal
from abacus_interp.core.tokens import encode_batch
from analyses._head_groups import Knockout, group_attention_mass, head_names
from analyses._head_groups import knockout as knock_out_groups

MULTIPLICAND_OFFSETS = (1, 0, -1, -2, -3)
MULTIPLIER_DIGITS = 3
GROUP_NAMES: tuple[str, ...] = (
    *(f"a_(i{c:+d})" if c else "a_i" for c in MULTIPLICAND_OFFSETS),
    *(f"b_{j}" for j in range(MULTIPLIER_DIGITS)),
    "answer slot below",
    "two slots below",
    "query itself",
    "other",
)


def _column_batches(model, examples, batch_size: int):
    """Per batch: tokens, the (row, position) of every answer query and its key-group masks
    [query group key] (float, every key in at most one group; "other" is what is left)."""
    vocab = model.cfg.vocab
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        batch = encode_batch(vocab, [e.prompt for e in chunk], [e.target for e in chunk])
        tokens = batch.tokens.to(model.W_E.device)
        index = model.attention_index(tokens)  # [batch pos]
        ordinal = number_ordinal(index)  # [batch pos]: 1 multiplicand, 2 multiplier, 3 answer
        queries, masks = [], []
        n_pos = tokens.shape[1]
        for row, example in enumerate(chunk):
            equals = int(batch.prompt_lengths[row]) - 1
            n_answer = len(vocab.encode(example.target))
            for i in range(n_answer):
                query = equals + i
                groups = torch.zeros(len(GROUP_NAMES), n_pos)
                for g, c in enumerate(MULTIPLICAND_OFFSETS):
                    groups[g] = ((ordinal[row] == 1) & (index[row] == i + c + 1)).float()
                for j in range(MULTIPLIER_DIGITS):
                    groups[len(MULTIPLICAND_OFFSETS) + j] = ((ordinal[row] == 2) & (index[row] == j + 1)).float()
                below = len(MULTIPLICAND_OFFSETS) + MULTIPLIER_DIGITS
                if i >= 1:
                    groups[below, query - 1] = 1.0
                if i >= 2:
                    groups[below + 1, query - 2] = 1.0
                groups[below + 2, query] = 1.0
                groups[-1] = 1.0 - groups[:-1].sum(0).clamp(max=1.0)
                queries.append((row, query))
                masks.append(groups)
        yield tokens, torch.tensor(queries), torch.stack(masks)


@dataclass(frozen=True)
class HeadReading:
    """Mean attention mass of the answer positions on each key group, per loop and head."""

    label: str  # the sample, e.g. "uniform, 5 x 3 digits"
    n_problems: int
    n_rows: int  # (problem, answer digit) pairs averaged over
    heads: tuple[str, ...]  # "L0H1", ...
    multiplier_heads: tuple[str, ...]  # the heads that see only the multiplier
    groups: tuple[str, ...]  # GROUP_NAMES
    mass: tuple[tuple[tuple[float, ...], ...], ...]  # [loop][head][group]
    # each head's kind in `heads` order ("offset -1", "windowed", "multiplier"), () when every
    # head is of one kind (`HeadKinds.kind_of`)
    kinds: tuple[str, ...] = ()

    def labelled(self, head: str) -> str:
        """`head` with its kind, "L0H0 (offset -1)", or alone in a model of one kind."""
        return f"{head} ({self.kinds[self.heads.index(head)]})" if self.kinds else head

    def settled(self) -> np.ndarray:
        """[head group] mass averaged over the last half of the loops read."""
        loops = np.asarray(self.mass)
        return loops[len(loops) // 2 :].mean(0)

    def main_group(self, head: str) -> tuple[str, float]:
        """The group `head` reads most once settled, and its mass."""
        row = self.settled()[self.heads.index(head)]
        best = int(np.argmax(row[:-1]))  # "other" is not a reading
        return self.groups[best], float(row[best])


def head_reading(model, examples, n_loops: int, label: str, batch_size: int = 64) -> HeadReading:
    """Attention mass of every answer position on each key group, per loop and head, over
    `examples` (teacher-forced inputs as in training; the slots hide the answer digits)."""
    cfg = model.cfg
    mean, n_rows = group_attention_mass(model, _column_batches(model, examples, batch_size), n_loops,
                                        len(GROUP_NAMES))
    mass = tuple(tuple(tuple(round(float(v), 4) for v in head) for head in loop) for loop in mean)
    multiplier = tuple(f"L{layer}H{h}" for layer in range(cfg.n_layers)
                       for h in range(cfg.n_heads - cfg.multiplier_heads, cfg.n_heads))
    kinds = HeadKinds.of(cfg)
    described = () if kinds is None else tuple(kinds.kind_of(h) for _ in range(cfg.n_layers) for h in range(cfg.n_heads))
    return HeadReading(label=label, n_problems=len(examples), n_rows=n_rows, heads=head_names(cfg),
                       multiplier_heads=multiplier, groups=GROUP_NAMES, mass=mass, kinds=described)


def knockout(model, examples, n_loops: int, label: str, groups: Sequence[str], batch_size: int = 64) -> Knockout:
    """Exact match after `n_loops` when one head may not attend to one of `groups` (every
    answer position, every loop), for each (group, head)."""
    return knock_out_groups(model, _column_batches(model, examples, batch_size), len(examples), n_loops, label,
                            groups, GROUP_NAMES)

"""The pairwise answer read pair by pair (`ModelConfig.item_comparator`): how often the comparison
orders two numbers, by their length and the place of the digit that decides, after every loop.

A pairwise answer sums one comparison per pair of remaining items, so a list is sorted when
each comparison it sums is; with the items kept apart (`list_items_read_alone`) a pair compares
alike in a list of two and of ten (`tests/test_item_comparator.py`), and lists of two read it.
Each pair `a:X,b:Y=` holds two numbers of `digits` digits equal above the deciding place (place
0 is the leading digit) and different there, the digits below drawn anew; which of the two
comes first is drawn too. The comparison of loop t reads the item summaries of that loop's
state (the sorting analogue of a carry digit's lock-in loop): the place at which it is right
from an early loop, and the length past which it is not right at all.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from abacus_interp.core.positions import abacus_indices
from abacus_interp.core.tokens import encode_batch
from abacus_interp.tasks.base import random_with_digits

BATCH = 128


@dataclass(frozen=True)
class PairCell:
    digits: int  # both numbers' length
    place: int  # the deciding digit, counted from the leading one (0)
    n_pairs: int
    right: tuple[float, ...]  # [loop]: share of pairs the comparison of loops 1..n orders right
    median_margin: float  # at the trained loops: the median log-odds toward the right order


@dataclass(frozen=True)
class PairwiseReading:
    label: str  # the pairs read, in words
    n_loops: int
    alone: bool  # the answer's labels are the comparison's only (`item_comparator_alone`)
    cells: tuple[PairCell, ...]  # by length, then place

    @property
    def lengths(self) -> list[int]:
        return list(dict.fromkeys(c.digits for c in self.cells))

    @property
    def places(self) -> list[int]:
        return sorted({c.place for c in self.cells})

    def cell(self, digits: int, place: int) -> PairCell | None:
        """The cell of that length and place; None for a place past the length's last digit."""
        return next((c for c in self.cells if (c.digits, c.place) == (digits, place)), None)


def decided_pair(digits: int, place: int, rng: random.Random) -> tuple[int, int]:
    """Two `digits`-digit numbers equal above `place` (0: the leading digit) and different at it."""
    x = random_with_digits(rng, digits)
    text = str(x)
    lowest = 1 if place == 0 else 0  # a leading digit stays nonzero
    other = rng.choice([d for d in range(lowest, 10) if d != int(text[place])])
    below = "".join(str(rng.randrange(10)) for _ in range(digits - place - 1))
    return x, int(text[:place] + str(other) + below)


def pairwise_reading(model, task, lengths: Sequence[int], places: Sequence[int], n_pairs: int,
                     seed: int) -> PairwiseReading:
    """Each (length, place) cell over `n_pairs` pairs, at loops 1..`model.cfg.n_loops`; places
    past a length's last digit are left out."""
    rng = random.Random(seed)
    cells = [_cell(model, task, digits, place, n_pairs, rng) for digits in sorted(set(lengths)) for place in places
             if place < digits]
    return PairwiseReading(label=f"pairs of two equal-length numbers, {n_pairs} per cell, held-out draws (seed {seed})",
                           n_loops=model.cfg.n_loops, alone=model.cfg.item_comparator_alone, cells=tuple(cells))


@torch.no_grad()
def _cell(model, task, digits: int, place: int, n_pairs: int, rng: random.Random) -> PairCell:
    pairs = [decided_pair(digits, place, rng) for _ in range(n_pairs)]
    pairs = [(x, y) if rng.random() < 0.5 else (y, x) for x, y in pairs]
    examples = [task.make(x, y, labels=task.draw_labels(2, rng)) for x, y in pairs]
    odds = torch.cat([_log_odds_by_loop(model, task, examples[i : i + BATCH]) for i in range(0, n_pairs, BATCH)], 1)
    first_smaller = torch.tensor([x < y for x, y in pairs], device=odds.device)  # [pair]
    toward_right = torch.where(first_smaller, odds, -odds)  # [loop pair]
    return PairCell(digits=digits, place=place, n_pairs=n_pairs,
                    right=tuple(round(float(v), 4) for v in (toward_right > 0).float().mean(1)),
                    median_margin=round(float(toward_right[-1].median()), 3))


def _log_odds_by_loop(model, task, examples) -> torch.Tensor:
    """[loop pair]: the log-odds that the first number is the smaller, read off each loop's state."""
    tokens = encode_batch(task.vocab, [e.prompt for e in examples], [e.target for e in examples]).tokens
    tokens = tokens.to(model.W_E.device)
    inputs, index = model.embed(tokens), model.attention_index(tokens)
    digit_index = abacus_indices(tokens, model.digit_table)  # unshifted: digits are where index > 0
    state, out = None, []
    for t in range(model.cfg.n_loops):
        state = model.run_loops(inputs, range(t, t + 1), state=state, index=index)
        _, odds = model.comparator.item_log_odds(model.ln_final(state), tokens, digit_index)
        out.append(odds[:, 0, 1].float())
    return torch.stack(out)

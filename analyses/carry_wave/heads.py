"""Which heads read which column, loop by loop, in an answer-slot adder that attends by the
Abacus index.

In the answer-slot format the position that predicts answer digit i (units first) holds
Abacus index i: it is "=" for the units digit and the slot of digit i - 1 after that. The
operand digits of column j hold index j + 1. So, counted in columns relative to the digit
being predicted (column offset 0 = column i):

* operand digits a_i, b_i (the aligned pair) sit at index offset +1, column offset 0;
* a_(i-1), b_(i-1) (the column a carry comes from) at index offset 0, column offset -1;
* a_(i-2), b_(i-2) at index offset -1, column offset -2;
* the position predicting digit i - 1 ("answer slot below") at index offset -1, column
  offset -1: the only way a carry decided further down can reach digit i under a window
  of 1, one column per loop;
* the query position itself ("query itself": "=" for the units digit, else the slot of
  digit i - 1). Later positions are never visible (attention is causal).

`head_reading` splits every answer position's attention pattern, per loop and head, into
those key groups; everything else (the "+" sign, the end token, farther keys where the
window allows them) is "other".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from analyses._head_groups import Knockout, group_attention_mass, head_names
from analyses._head_groups import knockout as knock_out_groups

__all__ = ["GROUP_NAMES", "KEY_GROUPS", "HeadReading", "Knockout", "head_reading", "knockout", "reads_columns"]

# (name, kind of key, column offset from the predicted digit)
KEY_GROUPS: tuple[tuple[str, str, int], ...] = (
    ("aligned a_i, b_i", "operand", 0),
    ("carry source a_(i-1), b_(i-1)", "operand", -1),
    ("two below a_(i-2), b_(i-2)", "operand", -2),
    ("answer slot below", "answer", -1),
    ("query itself", "answer", 0),
)
GROUP_NAMES: tuple[str, ...] = (*(name for name, _, _ in KEY_GROUPS), "other")


@dataclass(frozen=True)
class HeadReading:
    """Mean attention mass of the answer positions on each key group, per loop and head."""

    label: str  # the sample, e.g. "planted chains, 20 digits"
    n_problems: int
    n_rows: int  # (problem, answer digit) pairs averaged over
    heads: tuple[str, ...]  # "L0H1", ...
    groups: tuple[str, ...]  # GROUP_NAMES
    mass: tuple[tuple[tuple[float, ...], ...], ...]  # [loop][head][group]

    def top_head(self, group: str, loop: int) -> tuple[str, float]:
        """The head with the most mass on `group` in `loop` (0-based), and that mass."""
        column = [row[self.groups.index(group)] for row in self.mass[loop]]
        best = int(np.argmax(column))
        return self.heads[best], column[best]


def _key_groups(tokens: torch.Tensor, index: torch.Tensor, equals_id: int, plus_id: int,
                prompt_lengths: Sequence[int], n_answer: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per (problem, answer digit) row: the query position and [row group key] masks."""
    batch = tokens.shape[0]
    is_equals = (tokens == equals_id).long()
    # "=" and the answer slots after it; the end token and padding (index 0 after "=") are "other"
    in_answer = (is_equals.cumsum(1) > 0) & ((tokens == equals_id) | (index > 0))
    is_operand = ~in_answer & (tokens != plus_id) & (index > 0)
    # the column a key speaks for: an operand digit at index j is column j - 1, an answer
    # position at index j predicts digit j
    column = torch.where(is_operand, index - 1, index)
    queries, masks = [], []
    for b in range(batch):
        for i in range(n_answer[b]):
            query = int(prompt_lengths[b]) - 1 + i
            groups = [(is_operand[b] if kind == "operand" else in_answer[b]) & (column[b] == i + offset)
                      for _, kind, offset in KEY_GROUPS]
            named = torch.stack(groups).any(0)
            masks.append(torch.stack([*groups, ~named]))
            queries.append((b, query))
    return torch.tensor(queries), torch.stack(masks).float()  # [row 2], [row group key]


def reads_columns(model) -> bool:
    """Whether the column bookkeeping here applies: an answer-slot model whose attention reads
    the Abacus index (rotary positions or a window on it)."""
    return bool(model.cfg.answer_slots and model.cfg.attends_by_index)


def check_reads_columns(model) -> None:
    if not reads_columns(model):
        raise UserError("head reading and knockouts need an answer-slot model whose attention reads the Abacus "
                        "index (model.rotary='abacus' or model.abacus_window)")


def _column_batches(model, examples, batch_size: int):
    """(tokens, queries, masks) per batch of `examples`: the teacher-forced tokens on the
    model's device, the (row, position) of every answer slot and its KEY_GROUPS masks."""
    vocab = model.cfg.vocab
    equals_id, plus_id = vocab.encode("=")[0], vocab.encode("+")[0]
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        batch = encode_batch(vocab, [e.prompt for e in chunk], [e.target for e in chunk])
        tokens = batch.tokens.to(model.W_E.device)
        index = model.attention_index(tokens)
        n_answer = [len(vocab.encode(e.target)) for e in chunk]
        queries, masks = _key_groups(tokens.cpu(), index.cpu(), equals_id, plus_id, batch.prompt_lengths, n_answer)
        yield tokens, queries, masks


def head_reading(model, examples, n_loops: int, label: str, batch_size: int = 64) -> HeadReading:
    """Attention mass of every answer position on the KEY_GROUPS, per loop and head, over
    `examples` (teacher-forced inputs as in training; the slots hide the answer digits)."""
    check_reads_columns(model)
    mean, n_rows = group_attention_mass(model, _column_batches(model, examples, batch_size), n_loops,
                                        len(GROUP_NAMES))
    mass = tuple(tuple(tuple(round(float(v), 4) for v in head) for head in loop) for loop in mean)
    return HeadReading(label=label, n_problems=len(examples), n_rows=n_rows, heads=head_names(model.cfg),
                       groups=GROUP_NAMES, mass=mass)


def knockout(model, examples, n_loops: int, label: str, groups: Sequence[str], batch_size: int = 64) -> Knockout:
    """Exact match (greedy readout of every answer position after `n_loops`) when head h's
    scores on key group g are set to -inf at every answer position and loop, for each (g, h):
    the head's access to that column removed, its attention renormalised over the rest."""
    check_reads_columns(model)
    unknown = [g for g in groups if g not in GROUP_NAMES[:-1]]
    if unknown:
        raise UserError(f"unknown key groups {unknown}; choose from {GROUP_NAMES[:-1]}")
    return knock_out_groups(model, _column_batches(model, examples, batch_size), len(examples), n_loops, label,
                            groups, GROUP_NAMES)

"""Training batches, drawn from generators seeded by (seed, step).

Because every random draw of a step is a function of its step number, a resumed run sees
exactly the batches, Abacus offsets and progressive-loss depths of the uninterrupted one.

Under several processes every rank draws the same whole batch and trains on its own rows
of it (`shard_rows`), and each rank's loss is weighted by its share of the batch
(`ShardWeights`), so the averaged gradient is the whole batch's: the number of processes
changes the speed, not the training (up to the order of floating-point sums).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int

from ..core.scoring import without_eos
from ..core.tokens import Batch, encode_batch
from ..errors import UserError
from .config import TrainConfig


def step_seed(seed: int, step: int) -> int:
    # the formula ranks once had with rank 0, so earlier runs resume on the same data
    return (seed * 1_000_003 + step) % (2**63)


class BatchSource:
    def __init__(self, task, cfg: TrainConfig, max_seq_len: int):
        self.task, self.cfg, self.max_seq_len = task, cfg, max_seq_len
        self.full_batch: Batch | None = None
        if cfg.batch_size is None:
            if not task.has_fixed_split:
                raise UserError(
                    f"train.batch_size=null (full batch) needs a task with a fixed training split; "
                    f"{task.name!r} generates problems, so set train.batch_size"
                )
            # full batch: every step sees the whole training split
            self.full_batch = self._encode(task.full_split("train"))

    def _encode(self, examples) -> Batch:
        batch = encode_batch(
            self.task.vocab, [e.prompt for e in examples], [e.target for e in examples], max_len=self.max_seq_len
        )
        if self.cfg.running_sum_loss:
            batch.running_sum = running_sum_targets(self.task, examples, batch)
        if self.cfg.partial_product_loss:
            batch.partial_products = partial_product_targets(self.task, examples, batch)
        if self.cfg.carry_loss:
            batch.carries = carry_targets(self.task, examples, batch)
        if self.cfg.order_loss:
            batch.item_values = order_targets(self.task, examples, batch)
        return batch

    def batch(self, step: int) -> Batch:
        """The whole batch of `step` (every rank draws the same one)."""
        if self.full_batch is not None:
            return self.full_batch
        rng = random.Random(step_seed(self.cfg.seed, step))
        return self._encode(self.task.sample(self.cfg.batch_size, rng))

    def generator(self, step: int) -> torch.Generator:
        """For Abacus offsets, start noise and progressive-loss depths of this step; the
        same on every rank, so all ranks run the same depths."""
        return torch.Generator().manual_seed(step_seed(self.cfg.seed + 1, step))


def running_sum_targets(task, examples, batch: Batch) -> Float[torch.Tensor, "batch pos"]:
    """Each answer column's running sum (`Task.running_sums`) at the position that predicts
    that answer digit, in units of ten; NaN at every other position (the prompt, EOS, pads)."""
    rows, positions, values = _per_answer_digit(examples, batch, task.running_sums, type(task).__name__)
    targets = torch.full(batch.tokens.shape, float("nan"))  # [batch pos]
    targets[rows, positions] = torch.tensor(values, dtype=torch.float32) / 10  # one assignment: a tensor per row is slow
    return targets


def carry_targets(task, examples, batch: Batch) -> Int[torch.Tensor, "batch pos"]:
    """The carry into each answer column (`Task.carries_in`) at the position that predicts that
    answer digit; -100 (cross_entropy's ignore_index) at every other position."""
    rows, positions, values = _per_answer_digit(examples, batch, task.carries_in, type(task).__name__)
    targets = torch.full(batch.tokens.shape, -100, dtype=torch.long)  # [batch pos]
    targets[rows, positions] = torch.tensor(values, dtype=torch.long)  # one assignment: a tensor per row is slow
    return targets


def order_targets(task, examples, batch: Batch) -> Float[torch.Tensor, "batch pos"]:
    """Each item's value at the separator that closes it (`Task.item_closers`), in float64 so
    that values past 2^24 keep their order (up to 2^53: numbers of 16 digits or more may tie);
    NaN at every other position."""
    rows, positions, values = [], [], []
    for row, example in enumerate(examples):
        for position, value in task.item_closers(example):
            rows.append(row)
            positions.append(position)
            values.append(float(value))
    targets = torch.full(batch.tokens.shape, float("nan"), dtype=torch.float64)  # [batch pos]
    targets[rows, positions] = torch.tensor(values, dtype=torch.float64)  # one assignment: a tensor per row is slow
    return targets


def _per_answer_digit(examples, batch: Batch, values_of, task_name: str) -> tuple[list[int], list[int], list]:
    """`values_of(example)` (one value per answer digit) laid out where each answer digit is
    predicted: the batch rows, positions and values, one entry per answer digit of `examples`."""
    rows, positions, values = [], [], []
    for row, (example, start) in enumerate(zip(examples, batch.prompt_lengths.tolist(), strict=True)):
        per_digit = values_of(example)
        if len(per_digit) != len(example.target):
            raise ValueError(f"{task_name}.{values_of.__name__} gave {len(per_digit)} values for the "
                             f"{len(example.target)}-digit answer of {example.prompt}{example.target}")
        # logits at position p predict token p + 1: answer digit i is read at prompt_length - 1 + i
        rows += [row] * len(per_digit)
        positions += range(start - 1, start - 1 + len(per_digit))
        values += per_digit
    return rows, positions, values


def scored_positions(batch: Batch, loss_positions: str) -> Bool[torch.Tensor, "batch pos"]:
    """Where the loss reads the logits: the positions whose next token it scores."""
    if loss_positions == "answer":
        return batch.loss_mask
    if loss_positions == "answer_tokens":  # no EOS term (Nanda et al.)
        return without_eos(batch.tokens, batch.loss_mask)
    # "all": every position whose next token is real
    return torch.cat([batch.valid[:, 1:], torch.zeros_like(batch.valid[:, :1])], dim=1)


def shard_rows(n_examples: int, rank: int, world_size: int) -> slice:
    """Rank `rank`'s contiguous rows of a batch of `n_examples` (sizes differ by at most one)."""
    return slice(rank * n_examples // world_size, (rank + 1) * n_examples // world_size)


def partial_product_targets(task, examples, batch: Batch) -> Int[torch.Tensor, "batch pos k 2"]:
    """The units and tens of each partial product a_(i-j) * b_j (`Task.partial_products`) at
    the position that predicts answer digit i, for j < k (the task's most multiplier digits);
    -100 (cross_entropy's ignore_index) at every other position and for the multiplier digits
    a problem lacks. Where a_(i-j) does not exist the product is 0, which the column adds."""
    k = task.max_partial_products
    rows, positions, products = [], [], []
    for row, (example, start) in enumerate(zip(examples, batch.prompt_lengths.tolist(), strict=True)):
        columns = task.partial_products(example)  # one tuple per answer digit
        if len(columns) != len(example.target) or len(columns[0]) > k:
            raise ValueError(f"{type(task).__name__}.partial_products gave {len(columns)} columns of "
                             f"{len(columns[0])} products for the {len(example.target)}-digit answer of "
                             f"{example.prompt}{example.target} (k={k})")
        padded = [(*column, *[-1] * (k - len(column))) for column in columns]  # -1: no such multiplier digit
        # logits at position p predict token p + 1: answer digit i is read at prompt_length - 1 + i
        rows += [row] * len(padded)
        positions += range(start - 1, start - 1 + len(padded))
        products += padded
    values = torch.tensor(products, dtype=torch.long)  # [answer_digits k]
    digits = torch.stack([values % 10, values // 10], dim=-1)  # [answer_digits k 2]
    digits[values < 0] = -100
    targets = torch.full((*batch.tokens.shape, k, 2), -100, dtype=torch.long)  # [batch pos k 2]
    targets[rows, positions] = digits  # one assignment: a tensor per row is slow
    return targets


@dataclass(frozen=True)
class ShardWeights:
    """What turns a rank's means over its own rows into its part of the whole batch's mean:
    gradients are averaged over ranks, so a rank's term is weighted by world_size times its
    share. Both are exactly 1.0 on one process."""

    per_token: float  # for a mean over scored positions (the cross-entropy)
    per_example: float  # for a mean over examples (the step penalty)

    @classmethod
    def of(cls, scored: Bool[torch.Tensor, "batch pos"], rows: slice, world_size: int) -> ShardWeights:
        n_examples = scored.shape[0]
        n_scored = int(scored.sum())
        return cls(
            per_token=world_size * int(scored[rows].sum()) / max(n_scored, 1),
            per_example=world_size * (rows.stop - rows.start) / n_examples,
        )

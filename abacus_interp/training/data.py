"""Training batches, drawn from generators seeded by (seed, rank, step).

Because every random draw of a step is a function of its step number, a resumed run sees
exactly the batches, Abacus offsets and progressive-loss depths of the uninterrupted one,
and ranks of a multi-process run draw different data, without saving any RNG state.
"""

from __future__ import annotations

import random

import torch

from ..tokens import Batch, encode_batch
from .config import TrainConfig


def step_seed(seed: int, rank: int, step: int) -> int:
    return (seed * 1_000_003 + rank * 10_007 + step) % (2**63)


class BatchSource:
    def __init__(self, task, cfg: TrainConfig, max_seq_len: int, rank: int = 0, world_size: int = 1):
        self.task, self.cfg, self.max_seq_len = task, cfg, max_seq_len
        self.rank, self.world_size = rank, world_size
        self.full_batch: Batch | None = None
        if cfg.batch_size is None:
            if not task.has_fixed_split:
                raise ValueError(
                    f"train.batch_size=null (full batch) needs a task with a fixed training split; "
                    f"{task.name!r} generates problems, so set train.batch_size"
                )
            # full batch: every step sees the whole training split (each rank its shard)
            examples = task.full_split("train")[rank::world_size]
            self.full_batch = self._encode(examples)

    def _encode(self, examples) -> Batch:
        return encode_batch(
            self.task.vocab, [e.prompt for e in examples], [e.target for e in examples], max_len=self.max_seq_len
        )

    def batch(self, step: int) -> Batch:
        if self.full_batch is not None:
            return self.full_batch
        rng = random.Random(step_seed(self.cfg.seed, self.rank, step))
        return self._encode(self.task.sample(self.cfg.batch_size, rng))

    def generator(self, step: int) -> torch.Generator:
        """For Abacus offsets and progressive-loss depths of this step."""
        return torch.Generator().manual_seed(step_seed(self.cfg.seed + 1, self.rank, step))

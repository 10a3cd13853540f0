"""Process-wide torch settings that a job changes for its own duration and then restores."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with `n` intra-op threads (None: leave torch's setting alone).

    Small models run many times faster on one thread, above all on a shared machine where
    the spinning OpenMP threads of concurrent processes fight over the cores (measured: 25x
    on the evaluation suite with two busy cores)."""
    if n is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)

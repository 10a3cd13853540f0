"""Multi-process training under `torchrun`: gloo on CPU, nccl on CUDA.

Each rank draws its own batches (seeded by rank), gradients are averaged with one
all-reduce per parameter, and only rank 0 writes files. Without torchrun's environment
every function here is a no-op on a single process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class World:
    rank: int
    world_size: int
    device: torch.device
    initialised_here: bool = False

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _pick_device(requested: str, local_rank: int) -> torch.device:
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("train.device=cuda but no CUDA device is visible; use train.device=cpu")
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def setup(requested_device: str) -> World:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = _pick_device(requested_device, local_rank)
    initialised_here = False
    if world_size > 1 and not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend)
        initialised_here = True
    return World(rank=rank, world_size=world_size, device=device, initialised_here=initialised_here)


def teardown(world: World, finished: bool) -> None:
    if world.initialised_here and dist.is_initialized():
        if finished:
            # wait for rank 0's last evaluation and checkpoint: a rank that tears its gloo
            # connections down while another still holds them can abort the process. (After
            # an error the other ranks may never arrive, so no barrier then.)
            dist.barrier()
        dist.destroy_process_group()


def broadcast_parameters(model: torch.nn.Module, world: World) -> None:
    """Start every rank from rank 0's weights."""
    if world.distributed:
        for p in model.parameters():
            dist.broadcast(p.data, src=0)


def average_gradients(model: torch.nn.Module, world: World) -> None:
    if not world.distributed:
        return
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= world.world_size


def sum_across_ranks(value: float, world: World) -> float:
    if not world.distributed:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=world.device if world.device.type == "cuda" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t)


def mean_across_ranks(value: float, world: World) -> float:
    """The mean of a scalar over ranks, so every rank takes the same stop decisions."""
    return sum_across_ranks(value, world) / world.world_size


def barrier(world: World) -> None:
    if world.distributed:
        dist.barrier()

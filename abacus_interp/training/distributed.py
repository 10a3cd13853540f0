"""Multi-process training under `torchrun`: gloo on CPU, nccl on CUDA.

`abacus-interp train` starts the processes itself when `train.processes` > 1 (`launch`).
Every rank draws the step's whole batch and trains on its own rows of it
(`data.shard_rows`), gradients are averaged with one all-reduce per step, and only rank 0
writes files. Without torchrun's environment every function here is a no-op on a single
process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..errors import UserError


@dataclass
class World:
    rank: int
    world_size: int
    device: torch.device
    initialised_here: bool = False

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def pick_device(requested: str, local_rank: int) -> torch.device:
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UserError("train.device=cuda but no CUDA device is visible; use train.device=cpu")
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def setup(requested_device: str) -> World:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(requested_device, local_rank)
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


def average_gradients(params: list[torch.nn.Parameter], world: World, stop: bool = False) -> bool:
    """Average the gradients of `params` over ranks, and tell whether any rank asked to stop
    (its `stop`). One all-reduce of one flat buffer carries both: a message per parameter
    costs a round trip each (tens of microseconds with gloo), a step's compute on a small
    model is a few milliseconds. Every rank must pass the same parameters in the same order.
    (On CUDA, reading the stop flag makes the host wait for the all-reduce once per step.)"""
    if not world.distributed:
        return stop
    grads = [p.grad for p in params]
    flag = torch.tensor([float(stop)], dtype=grads[0].dtype, device=grads[0].device)
    flat = torch.cat([*(g.flatten() for g in grads), flag])  # [n_parameters + 1]
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    stop_requested = bool(flat[-1] > 0)
    flat = flat[:-1] / world.world_size
    for grad, averaged in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
        grad.copy_(averaged.view_as(grad))
    return stop_requested


def sum_across_ranks(value: float, world: World) -> float:
    if not world.distributed:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=world.device if world.device.type == "cuda" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t)


def mean_across_ranks(value: float, world: World) -> float:
    """The mean of a scalar over ranks, so every rank takes the same stop decisions."""
    return sum_across_ranks(value, world) / world.world_size


def weighted_mean_across_ranks(value: float, weight: float, world: World) -> float:
    """The mean of per-rank means, each weighted by its rank's `weight` (e.g. its examples)."""
    if not world.distributed:
        return value
    return sum_across_ranks(value * weight, world) / sum_across_ranks(weight, world)


def barrier(world: World) -> None:
    if world.distributed:
        dist.barrier()

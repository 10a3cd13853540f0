"""What truncating the backward (`train.backprop_loops`) saves per training step: a preset's
own recipe against the same recipe with the gradient through its last N loops only, blocks of
steps alternated (A, B, C, A, B, C, ...) in one process so that machine load hits every side
alike. Each side trains its own model from the same seed on the same batches (one rank's
rows, as a two-process run's rank takes them). Prints ms per step and the ratio to the
recipe; asserts nothing. What it does to learning is not here: train both and evaluate.

    python benchmarks/backprop_loops.py [--preset demo-add] [--loops 2,4,6] [--threads 1]
        [--blocks 6] [--steps 30] [--ranks 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from contextlib import nullcontext

import torch

from abacus_interp.core.families import build_model
from abacus_interp.training import get_preset
from abacus_interp.training.data import BatchSource
from abacus_interp.training.decay import build_optimizer
from abacus_interp.training.losses import training_losses

WARMUP_STEPS = 10


def block_seconds(cfg, steps: int, ranks: int) -> float:
    """Seconds of `steps` training steps of `cfg` after a warmup, from a fresh model."""
    cpu = torch.device("cpu")
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model).train()
    optimizer = build_optimizer(model, cfg.train, cpu)
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    parameters = list(model.parameters())  # listed once, as the loop does: a walk visits every HookPoint
    for step in range(1, WARMUP_STEPS + steps + 1):
        if step == WARMUP_STEPS + 1:
            start = time.perf_counter()
        batch = source.batch(step)
        loss, *_ = training_losses(model, batch, source.generator(step), cfg, cpu, nullcontext(), None, (0, ranks))
        optimizer.zero_grad(set_to_none=True)  # the loop's update, on one process
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, cfg.train.grad_clip or float("inf"))
        optimizer.step()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="demo-add")
    parser.add_argument("--loops", default="2,4,6", help="values of train.backprop_loops to time")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per block")
    parser.add_argument("--ranks", type=int, default=2, help="time the rows one of this many ranks takes")
    args = parser.parse_args()
    if args.steps < 1 or args.blocks < 1:
        parser.error("--steps and --blocks must be >= 1")
    torch.set_num_threads(args.threads)
    recipe = get_preset(args.preset)
    sides = [None] + [int(n) for n in args.loops.split(",")]
    seconds: dict[int | None, list[float]] = {n: [] for n in sides}
    for _ in range(args.blocks):
        for n in sides:
            cfg = dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, backprop_loops=n))
            seconds[n].append(block_seconds(cfg, args.steps, args.ranks))
    base = statistics.median(seconds[None])
    print(f"{args.preset}: {args.blocks} blocks of {args.steps} steps per side, {args.threads} thread(s), "
          f"the rows of 1 of {args.ranks} ranks; medians")
    print(f"{'backprop_loops':>15} {'ms/step':>8} {'x recipe':>9}")
    for n in sides:
        median = statistics.median(seconds[n])
        print(f"{'all' if n is None else n:>15} {1000 * median / args.steps:8.1f} {median / base:9.2f}")


if __name__ == "__main__":
    main()

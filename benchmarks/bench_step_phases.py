"""Where a training step's time goes on this machine: batch sampling (Python), encoding,
forward with the configured loss, backward, clipping + AdamW, and the per-step host work the
loop does for logging. Medians over `--steps` steps of a preset's own recipe. Prints one
table of milliseconds and shares, asserts nothing.

    python benchmarks/bench_step_phases.py [--preset demo-add] [--threads 2] [--steps 60]
        [--set key=value ...]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from contextlib import nullcontext

import torch

from abacus_interp.model import LoopedTransformer
from abacus_interp.tokens import encode_batch
from abacus_interp.training import apply_overrides, get_preset
from abacus_interp.training.data import BatchSource, step_seed
from abacus_interp.training.loop import training_losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="demo-add")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = apply_overrides(get_preset(args.preset), args.set)
    task, tcfg = cfg.make_task(), cfg.train
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=tcfg.lr)
    source = BatchSource(task, tcfg, cfg.model.max_seq_len)
    device = torch.device("cpu")

    phases: dict[str, list[float]] = {k: [] for k in ("sample", "encode", "forward", "backward", "clip+adamw", "host sync")}
    for step in range(1, args.steps + 6):
        t0 = time.perf_counter()
        examples = task.sample(tcfg.batch_size, random.Random(step_seed(tcfg.seed, 0, step)))
        t1 = time.perf_counter()
        batch = encode_batch(task.vocab, [e.prompt for e in examples], [e.target for e in examples],
                             max_len=cfg.model.max_seq_len)
        t2 = time.perf_counter()
        loss, full, _, _ = training_losses(model, batch, source.generator(step), cfg, device, nullcontext())
        t3 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        t4 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg.grad_clip or float("inf"))
        optimizer.step()
        t5 = time.perf_counter()
        _ = loss.item(), full.item()  # what the loop reads every step
        t6 = time.perf_counter()
        if step > 5:  # warm-up steps are not timed
            for name, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5), strict=True):
                phases[name].append(dt * 1e3)

    medians = {k: statistics.median(v) for k, v in phases.items()}
    total = sum(medians.values())
    print(f"{args.preset}: {sum(p.numel() for p in model.parameters()):,} parameters, batch {tcfg.batch_size}, "
          f"{cfg.model.n_loops} loops, progressive={tcfg.progressive}, threads {torch.get_num_threads()}")
    print(f"{'phase':<12}{'ms':>8}{'share':>8}")
    for name, ms in medians.items():
        print(f"{name:<12}{ms:>8.2f}{100 * ms / total:>7.1f}%")
    print(f"{'total':<12}{total:>8.2f}   -> {1e3 / total:.1f} steps/s")


if __name__ == "__main__":
    main()

"""Training throughput of the presets through the real training loop (`train`): tokens/s
and steps/s over `--steps` steps after `--warmup` steps. Prints one table, asserts nothing.

Timing comes from the loop's own metrics (`elapsed_s`, `tokens`), logged every
`--log-every` steps (default 10, the presets' own interval; 1 adds a read-back from the
device every step), so it includes everything a step does (batch generation, forward with
the progressive loss, backward, clipping, AdamW, logging) but not evaluation or checkpoint
writes, which are scheduled outside the measured window. The last column is the model
FLOP/s (see `_flops.py`), and on an H100/H200 in bf16 the model FLOPs utilisation.

    python benchmarks/bench_training.py [--threads 1] [--presets demo-add small-add]
        [--steps 30] [--warmup 10] [--log-every 10] [--device cpu|cuda] [--set key=value ...]

`--set train.compile=true` trains with the looped block compiled.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from _flops import device_peak, throughput, training_step_flops

from abacus_interp.checkpoints import read_metrics
from abacus_interp.devices import resolve_device
from abacus_interp.training import apply_overrides, get_preset, train


def measure(
    preset: str, steps: int, warmup: int, log_every: int, device: str, extra: list[str], root: Path
) -> dict:
    total = warmup + steps
    cfg = apply_overrides(
        get_preset(preset),
        [
            f"train.steps={total}",
            f"train.log_every={log_every}",
            f"train.eval_every={10**9}",
            "train.eval_problems=8",
            "train.dense_checkpoints=1",
            "train.dense_until=1",
            f"train.checkpoint_every={10**9}",
            f"train.device={device}",
            *extra,
        ],
    )
    train(cfg, root / preset, progress=False)
    rows = {r["step"]: r for r in read_metrics(root / preset)}
    start, end = rows[warmup], rows[total]
    seconds = end["elapsed_s"] - start["elapsed_s"]
    tokens = end["tokens"] - start["tokens"]
    from abacus_interp.checkpoints import load_model

    n_params = sum(p.numel() for p in load_model(root / preset, device="cpu").parameters())
    tokens_per_step = tokens / steps
    sequences = cfg.train.batch_size or len(cfg.make_task().full_split("train"))
    return dict(
        flops=steps * training_step_flops(cfg, tokens_per_step, tokens_per_step / sequences),
        peak=device_peak(resolve_device(device), cfg.train.bf16),
        preset=preset,
        params=n_params,
        batch=cfg.train.batch_size,
        loops=cfg.model.n_loops,
        progressive=cfg.train.progressive,
        steps=steps,
        seconds=seconds,
        tokens=tokens,
        steps_per_s=steps / seconds,
        tokens_per_s=tokens / seconds,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (default 1: shared machine)"
    )
    parser.add_argument("--presets", nargs="+", default=["demo-add", "small-add"])
    parser.add_argument("--steps", type=int, default=30, help="timed steps")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first (a multiple of --log-every)")
    parser.add_argument("--log-every", type=int, default=10, help="the loop's log interval (its reads from the device)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="extra config override"
    )
    args = parser.parse_args()
    if args.warmup < 1 or args.warmup % args.log_every:
        parser.error("--warmup must be a positive multiple of --log-every: the window starts at a logged step")
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        results = [
            measure(p, args.steps, args.warmup, args.log_every, args.device, args.set, Path(tmp))
            for p in args.presets
        ]

    print(
        f"training throughput: {args.steps} steps after {args.warmup} warmup, logged every {args.log_every}, "
        f"device={args.device}, threads={torch.get_num_threads()}"
    )
    print(
        f"{'preset':<16}{'params':>11}{'batch':>7}{'loops':>7}{'loss':>9}{'tokens/step':>13}"
        f"{'steps/s':>9}{'tokens/s':>10}{'ms/step':>9}  model FLOP/s"
    )
    for r in results:
        print(
            f"{r['preset']:<16}{r['params']:>11,}{r['batch'] or 'full':>7}{r['loops']:>7}{r['progressive']:>9}"
            f"{r['tokens'] / r['steps']:>13.0f}{r['steps_per_s']:>9.2f}{r['tokens_per_s']:>10.0f}"
            f"{1e3 * r['seconds'] / r['steps']:>9.1f}  {throughput(r['flops'], r['seconds'], r['peak'])}"
        )
    if results and results[0]["peak"] is None:
        print("(no MFU: the stated peak is dense bf16 on an H100/H200; elsewhere the achieved FLOP/s only)")
    if len(results) > 1:
        base = results[0]
        for r in results[1:]:
            print(
                f"{base['preset']} / {r['preset']}: {base['steps_per_s'] / r['steps_per_s']:.2f}x steps/s, "
                f"{base['tokens_per_s'] / r['tokens_per_s']:.2f}x tokens/s"
            )


if __name__ == "__main__":
    main()

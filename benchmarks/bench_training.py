"""Training throughput of the presets through `abacus-interp train`, as a user runs it (its
default processes and threads): tokens/s and steps/s over `--steps` steps after `--warmup`
steps. Prints one table, asserts nothing.

Timing comes from the run's own metrics (`elapsed_s`, `tokens`), logged every
`--log-every` steps (default 10, the presets' own interval; 1 adds a read-back from the
device every step), so it includes everything a step does (batch generation, forward with
the progressive loss, backward, clipping, AdamW, the all-reduce of several processes,
logging) but not evaluation or checkpoint writes, which are scheduled outside the measured
window. The last column is the model FLOP/s (see `_flops.py`) and, on the CPU, its share of
the fp32 matmul peak of the cores the run uses, measured in the same run (the CPU "MFU");
on an H100/H200 in bf16 the model FLOPs utilisation.

    python benchmarks/bench_training.py [--threads N] [--presets demo-add loop-add]
        [--steps 30] [--warmup 10] [--log-every 10] [--device cpu|cuda] [--set key=value ...]

`--threads N`: the torch threads of a one-process run (default: torch's default, every core);
a run of several processes (`train.processes`) gets one core per process whatever it says.
`--set train.processes=1` measures one process; `--set train.compile=true` the compiled block.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _flops import cpu_matmul_peak, device_peak, throughput, training_step_flops

from abacus_interp.checkpoints import read_metrics
from abacus_interp.core.devices import resolve_device
from abacus_interp.training import apply_overrides, get_preset
from abacus_interp.training.launch import available_cores, processes_to_start


def measure(
    preset: str, steps: int, warmup: int, log_every: int, device: str, extra: list[str], threads: int | None,
    root: Path,
) -> dict:
    total = warmup + steps
    sets = [
        f"train.steps={total}",
        f"train.log_every={log_every}",
        f"train.eval_every={10**9}",
        "train.eval_problems=8",
        "train.dense_checkpoints=1",
        "train.dense_until=1",
        f"train.checkpoint_every={10**9}",
        f"train.device={device}",
        *extra,
    ]
    cfg = apply_overrides(get_preset(preset), sets)
    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    command = [sys.executable, "-m", "abacus_lab.cli", "train", "--preset", preset, "--out", str(root / preset)]
    subprocess.run([*command, *(a for s in sets for a in ("--set", s))], env=env, check=True, capture_output=True)
    rows = {r["step"]: r for r in read_metrics(root / preset)}
    start, end = rows[warmup], rows[total]
    seconds = end["elapsed_s"] - start["elapsed_s"]
    tokens = end["tokens"] - start["tokens"]
    from abacus_interp.checkpoints import load_model

    n_params = sum(p.numel() for p in load_model(root / preset, device="cpu").parameters())
    processes = processes_to_start(cfg.train)
    # several processes: the launcher gives each one core; one process: its threads
    cores = processes if processes > 1 else min(available_cores(), threads or available_cores())
    tokens_per_step = tokens / steps
    sequences = cfg.train.batch_size or len(cfg.make_task().full_split("train"))
    on_cpu = resolve_device(device).type == "cpu"
    return dict(
        flops=steps * training_step_flops(cfg, tokens_per_step, tokens_per_step / sequences),
        peak=cpu_matmul_peak(cores) if on_cpu else device_peak(resolve_device(device), cfg.train.bf16),
        preset=preset,
        params=n_params,
        batch=cfg.train.batch_size,
        loops=cfg.model.n_loops,
        progressive=cfg.train.progressive,
        processes=processes,
        cores=cores,
        steps=steps,
        seconds=seconds,
        tokens=tokens,
        steps_per_s=steps / seconds,
        tokens_per_s=tokens / seconds,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, help="torch threads of a one-process run (default: torch's, every core)")
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

    with tempfile.TemporaryDirectory() as tmp:
        results = [
            measure(p, args.steps, args.warmup, args.log_every, args.device, args.set, args.threads, Path(tmp))
            for p in args.presets
        ]

    print(
        f"training throughput: {args.steps} steps after {args.warmup} warmup, logged every {args.log_every}, "
        f"device={args.device}, threads of a one-process run: {args.threads or 'default'}"
    )
    print(
        f"{'preset':<16}{'params':>11}{'batch':>7}{'loops':>7}{'loss':>9}{'procs':>7}{'cores':>7}{'tokens/step':>13}"
        f"{'steps/s':>9}{'tokens/s':>10}{'ms/step':>9}  model FLOP/s"
    )
    for r in results:
        print(
            f"{r['preset']:<16}{r['params']:>11,}{r['batch'] or 'full':>7}{r['loops']:>7}{r['progressive']:>9}"
            f"{r['processes']:>7}{r['cores']:>7}{r['tokens'] / r['steps']:>13.0f}{r['steps_per_s']:>9.2f}"
            f"{r['tokens_per_s']:>10.0f}{1e3 * r['seconds'] / r['steps']:>9.1f}  "
            f"{throughput(r['flops'], r['seconds'], r['peak'])}"
        )
    if results and results[0]["peak"] is None:
        print("(no MFU: no stated peak for this GPU; the achieved FLOP/s only)")
    if len(results) > 1:
        base = results[0]
        for r in results[1:]:
            print(
                f"{base['preset']} / {r['preset']}: {base['steps_per_s'] / r['steps_per_s']:.2f}x steps/s, "
                f"{base['tokens_per_s'] / r['tokens_per_s']:.2f}x tokens/s"
            )


if __name__ == "__main__":
    main()

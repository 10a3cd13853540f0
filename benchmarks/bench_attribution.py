"""Attribution patching against exhaustive activation patching over the same nodes: every
(loop, layer, residual | head output | MLP output, position) of a looped model, the one
side from a handful of passes (`core.attribution.attribution_patch`), the other from one
patched forward pass per node (`core.attribution.activation_patch`, through
`core.patching`). Prints one table, asserts nothing. Goal: attribution >= 50x faster.

Both sides run on the circuit analysis's carry pairs (analyses/circuit/pairs.py) of the
checkpoint, with its metric, at the trained depth. After one untimed warmup of each, the
sides alternate (patching, one gradient, integrated, patching, ...) `--reps` times and the
medians are reported, with each estimate's Pearson r against the real patches.

    python benchmarks/bench_attribution.py [--checkpoint checkpoints/extrap-add] [--pairs 32]
        [--steps 5] [--reps 3] [--threads 1] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from abacus_interp.checkpoints import load_model, load_task
from abacus_interp.core.attribution import activation_patch, attribution_patch, node_sites
from abacus_interp.core.devices import resolve_device
from abacus_interp.evaluation.common import section_rng
from analyses.circuit.nodes import pearson
from analyses.circuit.pairs import make_pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="checkpoints/extrap-add", help="run directory or .safetensors")
    parser.add_argument("--pairs", type=int, default=32, help="clean/corrupted pairs in the batch")
    parser.add_argument("--steps", type=int, default=5, help="integrated-gradient steps of the second estimate")
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions per side (median reported)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1: shared machine)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    device = resolve_device(args.device)
    model, task = load_model(args.checkpoint, device=device).eval(), load_task(args.checkpoint)
    pairs = make_pairs(task, model.cfg.vocab, args.pairs, section_rng(args.seed, "circuit search")).to(device)
    sites = node_sites(model)
    call = (model, pairs.clean, pairs.corrupted, pairs.metric, sites)
    sides = {
        "activation patching (one pass per node)": lambda: activation_patch(*call),
        "attribution, one gradient": lambda: attribution_patch(*call, steps=1),
        f"attribution, {args.steps} integrated steps": lambda: attribution_patch(*call, steps=args.steps),
    }
    results = {name: fn() for name, fn in sides.items()}  # warmup, and the values compared
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.reps):
        for name, fn in sides.items():
            start = time.perf_counter()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)

    patching_name = next(iter(sides))
    real = results[patching_name].flat(sites)
    n_nodes = real.numel()
    patching_s = statistics.median(times[patching_name])
    print(f"attribution against activation patching: {args.checkpoint}, {n_nodes} nodes ({', '.join(sites)} at "
          f"{model.cfg.n_loops} loops x {model.cfg.n_layers} layers x {pairs.clean.shape[1]} positions), "
          f"{len(pairs)} pairs, device={model.device}, threads={torch.get_num_threads()}, median of {args.reps}")
    print(f"{'method':<44}{'seconds':>10}{'speed-up':>11}{'r vs patching':>15}")
    for name in sides:
        seconds = statistics.median(times[name])
        r = 1.0 if name == patching_name else pearson(real, results[name].flat(sites))
        print(f"{name:<44}{seconds:>10.3f}{patching_s / seconds:>10.1f}x{'n/a' if r is None else f'{r:.3f}':>15}")
    print("goal: attribution >= 50x faster than patching the same nodes")


if __name__ == "__main__":
    main()

"""Time the two evolution analyses on a run with 50 checkpoints of the small model.

    python benchmarks/bench_evolution.py                 # builds a synthetic run in a temp dir
    python benchmarks/bench_evolution.py --run RUN       # times an existing run instead
    python benchmarks/bench_evolution.py --threads 2 --checkpoints 50 --keep /tmp/bench-run

The synthetic run is the small-add model (d_model 128, 4 heads, 1 layer, 4 loops,
max_seq_len 128, addition vocabulary) whose weights take a random walk from the
initialisation, saved with `save_checkpoint` at log-spaced then regular steps. The goal
is <= 60 s for both analyses on 2 CPU threads. Prints seconds per phase.
"""

from __future__ import annotations

import os
import sys

# Before torch loads OpenMP: idle intra-op threads sleep instead of spinning. On a shared
# machine (more runnable threads than cores) spinning threads make 2-thread torch 10-50x
# slower than 1 thread; pass --spin to measure with the default policy.
if "--spin" not in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


def make_run(run_dir: Path, n_checkpoints: int, seed: int = 0) -> Path:
    from abacus_interp import LoopedTransformer, ModelConfig
    from abacus_interp.checkpoints import save_checkpoint, write_json
    from abacus_interp.tasks import get_task

    task = get_task("addition", max_digits=10)
    cfg = ModelConfig(vocab=task.vocab, d_model=128, n_heads=4, n_layers=1, n_loops=4, max_seq_len=128,
                      abacus_max_offset=30)
    torch.manual_seed(seed)
    model = LoopedTransformer(cfg)
    write_json(run_dir / "config.json", {"task": {"name": "addition", **task.config()}, "model": cfg.to_dict()})
    dense = np.unique(np.round(np.geomspace(1, 250, n_checkpoints // 3)).astype(int))
    steps = [0, *dense.tolist()]
    steps += [250 * (i + 2) for i in range(n_checkpoints - len(steps))]
    rows = []
    for step in steps:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.002)
        save_checkpoint(run_dir, model, step, {"tokens": step * 1000, "metrics": {}})
        rows.append(f'{{"step": {max(step, 1)}, "loss": {2.5 / (1 + step / 500):.4f}}}')
    (run_dir / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    return run_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, help="an existing run directory (default: build a synthetic one)")
    parser.add_argument("--checkpoints", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="build the synthetic run here and keep it")
    parser.add_argument("--spin", action="store_true", help="keep OpenMP's default (spinning) wait policy")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    from analyses import checkpoint_compare, embedding_evolution

    t_import = time.perf_counter() - t0
    tmp = None
    run_dir = args.run
    t_make = 0.0
    if run_dir is None:
        run_dir = args.keep or Path(tmp := tempfile.mkdtemp(prefix="bench-evolution-"))
        t0 = time.perf_counter()
        make_run(run_dir, args.checkpoints)
        t_make = time.perf_counter() - t0
    timings = {}

    def timed(name, fn):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        timings[name] = (time.perf_counter() - wall, time.process_time() - cpu)
        return out

    try:
        n = len(embedding_evolution.checkpoint_series(run_dir)[1])
        # every checkpoint, as this benchmark has always timed (the configs' defaults read 24 and 16)
        evo = timed("embedding_evolution.run",
                    lambda: embedding_evolution.run(run_dir, max_checkpoints=None, progress=False))
        cmp = timed("checkpoint_compare.run",
                    lambda: checkpoint_compare.run(run_dir, max_checkpoints=None, progress=False))
        timed("to_dict + figures (both)", lambda: (evo.to_dict(), cmp.to_dict(), evo.figures(), cmp.figures()))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"run: {run_dir} ({n} checkpoints), torch threads: {torch.get_num_threads()}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(default)')}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'phase':30s} {'wall s':>8s} {'cpu s':>8s}")
    print(f"{'import analyses':30s} {t_import:8.2f}")
    if t_make:
        print(f"{'build synthetic run (extra)':30s} {t_make:8.2f}")
    for name, (wall, cpu) in timings.items():
        print(f"{name:30s} {wall:8.2f} {cpu:8.2f}")
    wall = sum(w for w, _ in timings.values())
    cpu = sum(c for _, c in timings.values())
    print(f"{'total (analyses + output)':30s} {wall:8.2f} {cpu:8.2f}   goal <= 60 s wall -> {'OK' if wall <= 60 else 'SLOW'}")
    print(f"checkpoint_compare: {cmp.problems.n_samples} token samples, {cmp.a.n_loops} loops")


if __name__ == "__main__":
    main()

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
    try:
        n = len(embedding_evolution.checkpoint_series(run_dir)[1])
        t0 = time.perf_counter()
        evo = embedding_evolution.run(run_dir, progress=False)
        t_evo = time.perf_counter() - t0
        t0 = time.perf_counter()
        cmp = checkpoint_compare.run(run_dir, progress=False)
        t_cmp = time.perf_counter() - t0
        t0 = time.perf_counter()
        evo.to_dict(), cmp.to_dict(), evo.figures(), cmp.figures()
        t_out = time.perf_counter() - t0
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    total = t_evo + t_cmp + t_out
    print(f"run: {run_dir} ({n} checkpoints), torch threads: {torch.get_num_threads()}")
    print(f"import analyses:              {t_import:6.2f} s")
    if t_make:
        print(f"build synthetic run:          {t_make:6.2f} s (not counted)")
    print(f"embedding_evolution.run:      {t_evo:6.2f} s")
    print(f"checkpoint_compare.run:       {t_cmp:6.2f} s  ({cmp.problems['n_samples']} token samples, "
          f"{cmp.a.n_loops} loops)")
    print(f"to_dict + figures (both):     {t_out:6.2f} s")
    print(f"total (analyses + output):    {total:6.2f} s   goal <= 60 s -> {'OK' if total <= 60 else 'SLOW'}")


if __name__ == "__main__":
    main()

"""Wall seconds until an adder first meets the extrapolation bar, for two recipes in one run.

    python benchmarks/time_to_criterion.py                              # extrap-add vs demo-add
    python benchmarks/time_to_criterion.py --recipes extrap-add demo-add --n 100
    python benchmarks/time_to_criterion.py --keep runs/ttc               # keep the runs to look at

Each recipe is trained once, as `abacus-interp train --preset NAME` does (its own process
count, both cores), with a checkpoint every `--every` steps and no held-out evaluation during
training (which would count against its time). Then each checkpoint is scored, in order of
steps, on held-out uniform problems at the trained length and at 10x it (adaptive loops, the
run's own halting); the recipe's time to criterion is the training clock (metrics.jsonl's
elapsed_s) at the first checkpoint where

    exact match = 100% at the trained length  and  >= 99% at 10x the trained length,

and later checkpoints are scored too, so a criterion met by luck once and lost again shows.
The recipes run one after the other in this process's machine state; the table prints them
side by side with the ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from abacus_interp import checkpoints as ckpt
from abacus_interp.checkpoints import load_task
from abacus_interp.evaluation.extrapolation import length_extrapolation

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Scored:
    step: int
    elapsed_s: float
    in_distribution: float
    at_10x: float

    @property
    def passes(self) -> bool:
        return self.in_distribution == 1.0 and self.at_10x >= 0.99


def train(preset: str, out: Path, every: int) -> None:
    edits = [f"train.checkpoint_every={every}", "train.eval_every=1000000", "train.dense_checkpoints=0",
             "train.dense_until=0"]
    command = [sys.executable, "-m", "abacus_lab.cli", "train", "--preset", preset,
               *[a for e in edits for a in ("--set", e)], "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True)
    if done.returncode:
        raise SystemExit(f"training {preset} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")


def score(run: Path, n: int) -> list[Scored]:
    elapsed = {row["step"]: row["elapsed_s"] for row in ckpt.read_metrics(run) if "elapsed_s" in row}
    rows = []
    for step, path in ckpt.list_checkpoints(run):
        if step == 0 or step not in elapsed:
            continue
        loaded = ckpt.load_checkpoint(path)
        task = load_task(run)
        trained = task.max_digits
        result = length_extrapolation(loaded.model, task, [trained, 10 * trained], n=n, seed=1)
        rows.append(Scored(step, elapsed[step], result.row(trained).exact_match, result.row(10 * trained).exact_match))
        print(f"  {run.name} step {step:5d} ({elapsed[step]:6.1f} s): {rows[-1].in_distribution:.0%} at "
              f"{trained} digits, {rows[-1].at_10x:.0%} at {10 * trained}", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", nargs=2, default=["extrap-add", "demo-add"], metavar=("OLD", "NEW"))
    parser.add_argument("--every", type=int, nargs=2, default=[250, 50], metavar=("OLD", "NEW"),
                        help="checkpoint spacing in steps of each recipe: the resolution of its time")
    parser.add_argument("--n", type=int, default=100, help="held-out problems per length")
    parser.add_argument("--keep", type=Path, help="write the runs here instead of a temporary folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        results = {}
        for preset, every in zip(args.recipes, args.every, strict=True):
            run = folder / preset
            print(f"training {preset} (a checkpoint every {every} steps)", flush=True)
            train(preset, run, every)
            results[preset] = score(run, args.n)
    print(f"\n{'recipe':<14} {'steps':>6} {'train s':>8} {'first pass':>11} {'time to criterion':>18} {'later fails':>12}")
    times = {}
    for preset, rows in results.items():
        first = next((r for r in rows if r.passes), None)
        times[preset] = None if first is None else first.elapsed_s
        later = 0 if first is None else sum(not r.passes for r in rows if r.step > first.step)
        print(f"{preset:<14} {rows[-1].step:>6} {rows[-1].elapsed_s:>8.1f} "
              f"{'never' if first is None else f'step {first.step}':>11} "
              f"{'n/a' if first is None else f'{first.elapsed_s:.1f} s':>18} {later:>12}")
    old, new = (times[p] for p in args.recipes)
    if old and new:
        print(f"\n{args.recipes[1]} reaches the criterion in {new / old:.2f}x the wall time of {args.recipes[0]} "
              f"({old / new:.1f}x faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The loss curves of two versions of the code on the same recipe: train a preset with
`abacus-interp train` at a commit and at the working tree (or another commit), then print how
far their logged losses differ, step range by step range. Asserts nothing.

This is how a speed change shows what it does to the numbers: the first steps should agree
to float precision; later, a chaotic training amplifies any change of summation order, so
what matters there is that both end equally trained (the mean of the last logged losses).

    python benchmarks/compare_losses.py BEFORE [AFTER] [--preset loop-add] [--steps 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_commits import WORKTREE, export


def logged_losses(tree: Path, preset: str, steps: int, out: Path) -> list[dict]:
    sets = [f"train.steps={steps}", "train.eval_every=1000000", "train.checkpoint_every=1000000",
            "train.eval_problems=8"]
    cli = "abacus_lab.cli" if (tree / "abacus_lab" / "cli").is_dir() else "abacus_interp.cli"  # before 42238e1
    command = [sys.executable, "-m", cli, "train", "--preset", preset, "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([*command, *(a for s in sets for a in ("--set", s))], cwd=tree, env=env, check=True,
                   capture_output=True)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["step"] > 1]  # the loop also logs step 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default=WORKTREE)
    parser.add_argument("--preset", default="loop-add")
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        for i, version in enumerate((args.before, args.after)):
            tree = export(version, Path(tmp) / f"v{i}")
            runs[version] = logged_losses(tree, args.preset, args.steps, Path(tmp) / f"run{i}")
    before, after = runs[args.before], runs[args.after]
    if [r["step"] for r in before] != [r["step"] for r in after]:
        raise SystemExit("the two runs logged different steps; compare versions with the same log interval")
    relative = [abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(after, before, strict=True)]
    print(f"{args.preset}, {args.steps} steps: {args.before} against {args.after}")
    for k in (1, 10, 20, 50, 100, 200):
        if k <= len(relative):
            print(f"first {k:>3} logged losses (to step {before[k - 1]['step']}): "
                  f"max relative difference {max(relative[:k]):.1e}")
    apart = next((before[i]["step"] for i, r in enumerate(relative) if r > 1e-3), None)
    print(f"first logged step differing by more than 0.1%: {apart}")
    tail = min(50, len(before))
    print(f"mean loss of the last {tail} logged steps: {statistics.mean(r['loss'] for r in before[-tail:]):.4f} "
          f"before, {statistics.mean(r['loss'] for r in after[-tail:]):.4f} after")
    print(f"wall time of the {args.steps} steps: {before[-1]['elapsed_s']:.1f} s before, {after[-1]['elapsed_s']:.1f} s after")


if __name__ == "__main__":
    main()

"""Training throughput of two versions of the code side by side: `bench_training.py` of each
version (a commit, or the working tree), alternating A, B, A, B, ... `--repeats` times in
fresh processes, then the median steps/s of each preset and the ratio B/A. Asserts nothing.

This is how a change to the training loop is measured before/after on one machine under
one load (a shared machine drifts too much for two separate runs to compare). Each version
runs its own `bench_training.py` against its own library, so the arguments after `--` must
be ones both versions accept.

    python benchmarks/bench_commits.py BEFORE [AFTER] [--repeats 3] -- [bench_training.py arguments]

BEFORE and AFTER are commits (AFTER defaults to the working tree, "worktree"). Example:

    python benchmarks/bench_commits.py 7f253ef -- --threads 1 --presets demo-add --steps 30 --warmup 10 \\
        --set train.log_every=10
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKTREE = "worktree"


def export(version: str, into: Path) -> Path:
    """The source tree of `version` (a commit) in a fresh folder; the repository itself for
    the working tree."""
    if version == WORKTREE:
        return REPO
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", version], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def steps_per_second(tree: Path, bench_args: list[str]) -> dict[str, float]:
    """Run `tree`'s bench_training.py against `tree`'s library; {preset: steps/s}."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    result = subprocess.run(
        [sys.executable, str(tree / "benchmarks" / "bench_training.py"), *bench_args],
        cwd=tree, env=env, capture_output=True, text=True,
    )
    if result.returncode:
        raise SystemExit(f"bench_training.py of {tree} failed:\n{result.stderr[-2000:]}")
    rates = {}
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("preset"))
    column = lines[header].split().index("steps/s")  # versions differ in the columns before it
    for line in lines[header + 1 :]:
        fields = line.split()
        if len(fields) <= column or not fields[1].replace(",", "").isdigit():  # a preset row: name, parameters, ...
            continue
        rates[fields[0]] = float(fields[column])
    return rates


def main() -> None:
    argv = sys.argv[1:]
    bench_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    own_args = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default=WORKTREE)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(own_args)

    runs: dict[str, dict[str, list[float]]] = {args.before: {}, args.after: {}}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {version: export(version, Path(tmp) / f"v{i}") for i, version in enumerate(runs)}
        for repeat in range(args.repeats):
            for version, tree in trees.items():
                for preset, rate in steps_per_second(tree, bench_args).items():
                    runs[version].setdefault(preset, []).append(rate)
                print(f"repeat {repeat + 1}/{args.repeats}: {version} done", file=sys.stderr)

    print(f"bench_training.py {' '.join(bench_args)}")
    print(f"median steps/s over {args.repeats} alternating runs")
    print(f"{'preset':<16}{args.before[:12]:>14}{args.after[:12]:>14}{'after/before':>14}")
    for preset, before in runs[args.before].items():
        after = runs[args.after].get(preset)
        if after is None:
            continue
        b, a = statistics.median(before), statistics.median(after)
        print(f"{preset:<16}{b:>14.2f}{a:>14.2f}{a / b:>13.2f}x")


if __name__ == "__main__":
    main()

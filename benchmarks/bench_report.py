"""Time the report of a shipped run at its default sizes and at `ReportSizes.fast()`, section
by section, side by side.

    python benchmarks/bench_report.py                          # checkpoints/small-add
    python benchmarks/bench_report.py --run checkpoints/extrap-add --threads 2

Goal: the default report of checkpoints/small-add in <= 180 s on this project's 2-core CPU at
one torch thread, as `abacus-interp report` runs it (`ReportSizes` is sized for that budget;
`abacus-interp report --fast` and `make demo` use the fast sizes). A report takes minutes, so
each side runs once, default first: compare sections whose times differ by more than the
machine's noise, and rerun on an idle machine before concluding anything from the total
against the goal.
"""

from __future__ import annotations

import os
import sys

# Before torch loads OpenMP: idle intra-op threads sleep instead of spinning (bench_evolution.py)
if "--spin" not in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 180.0  # the default report of checkpoints/small-add


def time_report(run: Path, sizes, threads: int) -> dict:
    from analyses.report import build_report, load_report_json

    with tempfile.TemporaryDirectory() as out:
        build_report(run, Path(out), sizes=sizes, progress=False, torch_threads=threads)
        report = load_report_json(Path(out))
    failed = report["failed_sections"]
    if failed:
        raise SystemExit(f"sections failed, the timing would compare different work: {failed}")
    return report["timing"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, default=ROOT / "checkpoints" / "small-add")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads while the report runs (1: as abacus-interp report)")
    parser.add_argument("--spin", action="store_true", help="keep OpenMP's default (spinning) wait policy")
    args = parser.parse_args(argv)
    if not (args.run / "config.json").exists():
        raise SystemExit(f"{args.run} is not a run directory (no config.json): pass --run checkpoints/NAME")

    from analyses.report import ReportSizes

    default = time_report(args.run, ReportSizes(), args.threads)
    fast = time_report(args.run, ReportSizes.fast(), args.threads)
    print(f"report of {args.run.name}, {args.threads} thread(s), one run per side (seconds)")
    print(f"{'section':<22}{'default':>10}{'fast':>10}{'fast/default':>14}")
    for key, seconds in default["sections"].items():
        other = fast["sections"][key]
        ratio = f"{other / seconds:.2f}" if seconds >= 0.05 else "-"
        print(f"{key:<22}{seconds:>10.1f}{other:>10.1f}{ratio:>14}")
    total, total_fast = default["total_s"], fast["total_s"]
    print(f"{'total':<22}{total:>10.1f}{total_fast:>10.1f}{total_fast / total:>14.2f}")
    if args.run.name == "small-add":
        verdict = "met" if total <= GOAL_S else "NOT met"
        print(f"goal: the default report of small-add <= {GOAL_S:.0f} s at {args.threads} thread(s): "
              f"{verdict} ({total:.0f} s)")


if __name__ == "__main__":
    main()

"""`abacus-interp ablate` and `abacus-interp compare`: the experiments that train one run per
cell and read them with the report."""

from __future__ import annotations

import dataclasses
from pathlib import Path


def cmd_ablate(args) -> int:
    from abacus_lab.experiments.ablation import get_spec, run_ablation

    spec = get_spec(args.spec)
    data = run_ablation(dataclasses.replace(spec, base=(*spec.base, *args.set)), args.out)
    _print_findings(data, Path(args.out) / "ablation.json", "--ablation")
    return 0


def cmd_compare(args) -> int:
    from abacus_lab.experiments.compare import get_spec, run_comparison

    def names(text: str | None) -> tuple[str, ...] | None:
        return tuple(x.strip() for x in text.split(",") if x.strip()) if text else None

    spec = get_spec(args.spec)
    spec = dataclasses.replace(spec, base=(*spec.base, *args.set))
    data = run_comparison(spec, args.out, sizes=names(args.sizes), families=names(args.families),
                          cells=names(args.cells), seed=args.seed,
                          look_inside=not args.skip_inside)
    print(f"{'cell':<15} {'params':>9} {'exact':>7} {'train s':>8} {'train FLOPs':>11}")
    for cell in [*data["cells"], *data["seeds"]]:
        seconds = cell["train_seconds"]
        curve = cell["curve"] or []
        flops = f"{curve[-1]['train_flops']:.2g}" if curve else "-"
        print(f"{cell['cell']:<15} {cell['params']:>9,} {100 * cell['exact_match']:>6.1f}% "
              f"{'-' if seconds is None else f'{seconds:.0f}':>8} {flops:>11}")
    _print_findings(data, Path(args.out) / "comparison.json", "--architectures")
    return 0


def _print_findings(data: dict, written: Path, report_option: str) -> None:
    """An experiment's findings, the file it wrote and how to show it in a report."""
    for line in data["findings"]:
        print(line)
    print(f"wrote {written}; add it to a report with `abacus-interp report RUN {report_option} {written.parent} --out DIR`")


def _add_ablate_command(sub) -> None:
    p = sub.add_parser("ablate", help="train one run per variant of a recipe; exact match vs operand length")
    p.add_argument("--spec", default="extrapolation", help="the ablation to run (abacus_lab.experiments.ablation.SPECS)")
    p.add_argument("--out", required=True, help="directory for the cells and ablation.json (resumes)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="edit every cell's config, e.g. --set train.processes=1 (pass the same edits to resume)")
    p.set_defaults(func=cmd_ablate)


def _add_compare_command(sub) -> None:
    p = sub.add_parser("compare", help="train one run per model family and size; accuracy vs params and length")
    p.add_argument("--spec", default="expressions", help="the comparison to run (abacus_lab.experiments.compare.SPECS)")
    p.add_argument("--out", required=True, help="directory for the cells and comparison.json (resumes)")
    p.add_argument("--sizes", help="comma-separated sizes to train, e.g. S or S,M (default: all of S,M,L)")
    p.add_argument("--families", help="comma-separated families, e.g. gpt,lstm (default: looped,gpt,lstm,retran)")
    p.add_argument("--cells", help="comma-separated cells, e.g. gpt-m,looped-m (default: every cell of --sizes/--families)")
    p.add_argument("--seed", type=int, default=0,
                   help="train.seed of the cells to train; a seed other than 0 writes cells/<cell>-seed<N> beside the "
                        "first run, and the findings then use both (default 0: the first run)")
    p.add_argument("--skip-inside", action="store_true",
                   help="do not run the carry-attention and fixed-point sections on the best looped and GPT cells")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="edit every cell's config, e.g. --set train.device=cuda --set train.steps=12800")
    p.set_defaults(func=cmd_compare)


def add_commands(sub) -> None:
    _add_ablate_command(sub)
    _add_compare_command(sub)

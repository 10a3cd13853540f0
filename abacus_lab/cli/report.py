"""`abacus-interp summary` (parameters, config, metrics of a run) and `abacus-interp report`
(the offline HTML + JSON interpretability report, with a digest of its findings printed)."""

from __future__ import annotations

import json
from pathlib import Path

from abacus_interp.errors import UserError

from .args import add_device_option


def cmd_summary(args) -> int:
    from abacus_interp.checkpoints import (
        list_checkpoints,
        load_model,
        read_metrics,
        read_run_config,
    )
    from abacus_interp.core.summary import format_summary, parameter_summary

    model = load_model(args.run, device=args.device)
    cfg = read_run_config(args.run)
    print(f"run {args.run} (preset {cfg.get('preset')}), task {json.dumps(cfg['task'])}")
    model_cfg = {k: v for k, v in cfg["model"].items() if k != "vocab"}
    print("model: " + ", ".join(f"{k}={v}" for k, v in model_cfg.items()))
    print("train: " + ", ".join(f"{k}={v}" for k, v in cfg["train"].items()))
    print(format_summary(parameter_summary(model)))
    steps = [s for s, _ in list_checkpoints(args.run)]
    print(f"checkpoints: {len(steps)} (steps {', '.join(map(str, steps))})")
    metrics = read_metrics(args.run)
    evals = [r for r in metrics if any(k.endswith("_exact_match") and k != "train_exact_match" for k in r)]
    if evals:
        last = evals[-1]
        shown = {k: round(v, 4) for k, v in last.items() if isinstance(v, float) and ("loss" in k or "exact" in k)}
        print(f"last evaluation (step {last['step']}): " + ", ".join(f"{k}={v}" for k, v in shown.items()))
        if "averaged_steps" in last:  # train.average_from: the held-out figures and checkpoints read a mean
            print(f"  the held-out figures and the checkpoint are of the mean of the weights over the last "
                  f"{last['averaged_steps']:,} steps (train.average_from); the training loss is of the live weights")
    return 0


def cmd_report(args) -> int:
    from analyses.report import build_report
    from analyses.report.sections import ReportSizes

    # only what was asked for: build_report's own defaults hold otherwise (a caller that wraps
    # it with other sizes, as benchmarks/fuzz_cli.py does, keeps them)
    chosen = {"sizes": ReportSizes.fast()} if args.fast else {}
    if args.skip:
        chosen["sections"] = _sections(args.skip)
    path = build_report(args.run, args.out, compare=args.compare, ablation=args.ablation,
                        architectures=args.architectures, device=args.device, step=args.step, **chosen)
    print(report_digest(json.loads((Path(path).parent / "report.json").read_text())))
    print(f"report written to {path}")
    return 0


def _sections(skip: str | None) -> list[str] | None:
    """Every report section but the comma-separated keys of `--skip` (None: all of them)."""
    if not skip:
        return None
    from analyses.report.sections import SECTIONS

    keys = [s.key for s in SECTIONS]
    unknown = sorted({k.strip() for k in skip.split(",")} - set(keys))
    if unknown:
        raise UserError(f"--skip {skip}: unknown sections {unknown}; choose from {', '.join(keys)}")
    return [k for k in keys if k not in {k.strip() for k in skip.split(",")}]


def report_digest(report: dict, per_section: int = 1) -> str:
    """What a newcomer reads first: the page's summary opening (how far past its training the
    model goes, where it was measured that far), the evaluation's accuracy findings, then the
    first finding of every other analysis that ran (the rest are in the HTML)."""
    from analyses.report.summary import summary_of

    lines = [f"Findings for {report['run']}:"]
    opening = summary_of(report["sections"].get("evaluation"))
    if opening and opening[0].startswith("Far past its training"):
        lines.append(f"  [Summary] {opening[0]}")
    for key, section in report["sections"].items():
        findings = section.get("findings") or []
        if section.get("status") != "ok" or not findings or key == "model_card":
            continue
        shown = findings[:2] if key == "evaluation" else findings[:per_section]
        lines.extend(f"  [{section['title']}] {text}" for text in shown)
    return "\n".join(lines)


def _add_summary_command(sub) -> None:
    p = sub.add_parser("summary", help="parameters by component, config, metrics")
    p.add_argument("run")
    add_device_option(p)
    p.set_defaults(func=cmd_summary)


def _add_report_command(sub) -> None:
    p = sub.add_parser("report", help="offline HTML + JSON interpretability report")
    p.add_argument("run")
    p.add_argument("--compare", help="a second run to compare with")
    p.add_argument("--ablation", help="a directory written by `abacus-interp ablate`, shown as a section")
    p.add_argument("--architectures", help="a directory written by `abacus-interp compare`, shown as a section")
    p.add_argument("--step", type=int,
                   help="checkpoint step of the model to report on (default: latest); the analyses over "
                        "training still read every checkpoint")
    p.add_argument("--out", required=True)
    p.add_argument("--fast", action="store_true",
                   help="the carry wave and the circuit at a smaller sample (each finding states its n): a first "
                        "look, as `make demo` writes")
    p.add_argument("--skip", metavar="SECTION,...",
                   help="sections to leave out, listed as not requested (e.g. circuit, the slowest)")
    add_device_option(p)
    p.set_defaults(func=cmd_report)


def add_commands(sub) -> None:
    _add_summary_command(sub)
    _add_report_command(sub)

"""`abacus-interp` command line: train, eval, solve, summary, report, ablate, compare.

The CLI prints; the library only logs. Every user error (`abacus_interp.errors.UserError`)
ends with a one-line message that says what to do, and exit status 2, and so does an OSError
(a full disk, a folder that cannot be written: the machine, not the toolkit); any other
exception is a bug and ends with its traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import logging
import os
import re
import sys
from pathlib import Path

from .errors import UserError, check_output_dir


def _parse_int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 1,2,4,8; got {text!r}") from e


def _parse_loop_count(text: str) -> int:
    from .core.config import MAX_LAYERS_AND_LOOPS

    try:
        value = int(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected a loop count (an integer >= 1); got {text!r}") from e
    if value < 1:
        raise argparse.ArgumentTypeError(f"a loop count is an integer >= 1; got {text!r}")
    if value > MAX_LAYERS_AND_LOOPS:  # each loop runs the block once more: 10**9 would not end
        raise argparse.ArgumentTypeError(f"a loop count is at most {MAX_LAYERS_AND_LOOPS:,}; got {text!r}")
    return value


def _parse_range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(".."))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected a digit range like 1..20; got {text!r}") from e
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError(f"range {text!r} must satisfy 1 <= A <= B")
    return lo, hi


def cmd_train(args) -> int:
    from .training import TrainingDiverged, TrainingInterrupted, apply_overrides, get_preset, train
    from .training.launch import launch, processes_to_start

    out = check_output_dir(args.out)
    if (out / "resume" / "state.json").exists() and args.preset is None:
        from .checkpoints import read_run_config
        from .training.config import RunConfig

        cfg = RunConfig.from_dict(read_run_config(out))
    elif args.preset is None:
        raise UserError("train needs --preset NAME for a new run (or --out pointing at a run to resume)")
    else:
        cfg = get_preset(args.preset)
    cfg = apply_overrides(cfg, args.set or [])
    processes = processes_to_start(cfg.train)
    if processes > 1:
        print(f"training in {processes} processes, one per core (train.processes={cfg.train.processes})")
        preset = ["--preset", args.preset] if args.preset else []
        return launch(["train", "--out", str(out), *preset, *(a for s in args.set or [] for a in ("--set", s))],
                      processes)
    lead = os.environ.get("RANK", "0") == "0"  # under several processes, one reports
    try:
        result = train(cfg, out)
    except TrainingInterrupted as e:
        if lead:
            print(f"interrupted: {e}")
        return 130
    except TrainingDiverged as e:
        if lead:
            print(f"training diverged: {e}")
        return 1
    except UserError:  # rank 0 says it (main prints it)
        if not lead:
            return 2
        raise
    if result.is_writer:  # under torchrun, one rank reports
        metrics = {k: round(v, 4) if isinstance(v, float) else v for k, v in result.last_metrics.items()}
        print(f"trained {out} to step {result.final_step}: {json.dumps(metrics)}")
    return 0


def cmd_eval(args) -> int:
    from .checkpoints import checkpoint_at, load_model, load_task, read_run_config, run_dir_of
    from .core.config import ModelConfig
    from .core.scoring import run_readout
    from .evaluation.suite import evaluate, format_report

    run = Path(args.run)
    _check_json_path(args.json)  # now, not after the evaluation
    path = checkpoint_at(run, args.step) if args.step is not None else run
    saved_capacity = ModelConfig.from_dict(read_run_config(run)["model"]).max_loops
    # more hook sets only when asked for deeper loops; never fewer than the model has
    model = load_model(path, max_loops=max([saved_capacity, *(args.loops or [])]), device=args.device)
    task = load_task(run_dir_of(run))
    if args.multipliers and not args.lengths:
        raise UserError("--multipliers scores N x k products at the --lengths given: add --lengths, e.g. --lengths 5,20,50")
    for k in args.multipliers if hasattr(task, "check_multiplier") and args.multipliers else ():
        task.check_multiplier(k)
    if args.lengths or args.chains:
        with _eval_threads(model):
            return _eval_extrapolation(model, task, args)
    readout = run_readout(read_run_config(run)["train"], task)  # score it the way it was trained
    with _eval_threads(model):
        report = evaluate(model, task, grid=args.grid, loops=args.loops, n_per_cell=args.n, seed=args.seed, **readout)
    print(format_report(report))
    if args.json:
        _write_json(args.json, report.to_dict())
        print(f"wrote {args.json}")
    return 0


def _check_json_path(path: str | None) -> None:
    """A UserError when eval's --json names no file that can be written: empty, an existing
    folder, or below a file."""
    if path is None:
        return
    if not path.strip() or Path(path).is_dir():
        raise UserError(f"--json {path!r} is {'empty' if not path.strip() else 'a folder'}; pass a file path, "
                        "e.g. --json results/eval.json")
    check_output_dir(Path(path).parent, "--json's folder")


def _write_json(path: str, data: dict) -> None:
    """`data` as JSON at `path`, through a temporary file renamed into place: a full disk
    leaves the file that was there, not half of a new one."""
    from .checkpoints import atomic_write

    text = json.dumps(data, indent=2)
    atomic_write(Path(path), lambda tmp: Path(tmp).write_text(text))


def _eval_threads(model):
    """One intra-op torch thread while a model on the CPU is evaluated, as the report does:
    these models are too small to keep several threads busy, and on a machine whose cores
    are taken (a training run) spinning OpenMP threads fight over them (`core.runtime`: 25x
    slower on the evaluation suite with two busy cores)."""
    from .core.runtime import torch_threads

    return torch_threads(1 if model.W_E.device.type == "cpu" else None)


def _parse_chains(text: str) -> list[tuple[int, int]]:
    """"5,10,20" (a chain of c columns in c-digit operands) or "5:20" (5 columns in 20 digits)."""
    out = []
    for item in text.split(","):
        chain, _, digits = item.strip().partition(":")
        try:
            c, d = int(chain), int(digits or chain)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"expected chains like 5,10 or 5:20 (chain:digits); got {text!r}") from e
        if not 1 <= c <= d:
            raise argparse.ArgumentTypeError(f"chain {item!r}: need 1 <= chain <= digits")
        out.append((d, c))
    return out


def _eval_extrapolation(model, task, args) -> int:
    from .evaluation.extrapolation import format_table, length_extrapolation

    counts = args.loops or [None]  # None: the model's default loops (adaptive when it has halt_tol)
    results = []
    for n_loops in counts:
        result = length_extrapolation(model, task, args.lengths or [], args.chains or [], n=args.n, n_loops=n_loops,
                                      tol=args.halt_tol, seed=args.seed, multipliers=args.multipliers or ())
        print(format_table(result))
        results.append(result.to_dict())
    print("samples: 'uniform' = both operands of exactly that many digits, digits uniform; "
          "'uniform x k' = a multiplicand of that many digits times a k-digit multiplier, digits uniform; "
          "'chain c' = a planted carry chain of c columns (tasks.carries.sample_with_cascade)")
    if args.json:
        _write_json(args.json, {"extrapolation": results})
        print(f"wrote {args.json}")
    return 0


def _beyond_trained_length(task, example, run) -> str | None:
    """A warning when an operand has more digits than the run was trained on, else None.
    Only tasks configured with a digit range (`max_digits`) have a trained length."""
    from .tasks.base import digit_count

    trained = task.config()
    max_digits = trained.get("max_digits")
    if max_digits is None:
        return None
    numbers = [op for op in example.operands if isinstance(op, int) and not isinstance(op, bool)]
    longest = max((digit_count(abs(n)) for n in numbers), default=0)
    if longest <= max_digits:
        return None
    min_digits = trained.get("min_digits", 1)
    # a digit task's --lengths scores that one length (a --grid 1..5000 would be 25 million cells)
    if task.name == "sorting":  # no grid: the report's comparisons section scores longer numbers
        return (f"a number has {longest} digits but {run} was trained on numbers of {min_digits}..{max_digits} "
                f"digits; past that range answers may be wrong, and how often they are right is what the "
                f"comparisons section of `abacus-interp report {run} --out DIR` measures")
    measure = f"--lengths {longest}" if task.has_digit_grid else f"--grid 1..{longest}"
    return (
        f"an operand has {longest} digits but {run} was trained on operands of {min_digits}..{max_digits} "
        f"digits; past that range answers may be wrong, and how often they are right is what "
        f"`abacus-interp eval {run} {measure}` measures"
    )


def cmd_solve(args) -> int:
    from .checkpoints import load_model, load_task, read_run_config
    from .core.scoring import decode_budget, run_readout
    from .evaluation.common import check_fits_model
    from .tasks.base import digit_count

    model = load_model(args.run, device=args.device)
    task = load_task(args.run)
    example = task.from_human(args.problem)
    if hasattr(task, "check_multiplier"):
        task.check_multiplier(digit_count(example.operands[1]))
    check_fits_model(model, example)  # the rule eval --lengths applies
    warning = _beyond_trained_length(task, example, args.run)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    from .core.halting import generate_adaptive, resolve_halting

    # the answer's tokens (and EOS if the run was trained to write it), as eval decodes it
    budget = decode_budget(task, [example], run_readout(read_run_config(args.run)["train"], task)["eos"])
    fixed, tol = resolve_halting(model, args.loops, None)
    if fixed is None:
        decoded = generate_adaptive(model, [example.prompt], tol=tol, max_new_tokens=budget)
        completion = decoded.completions[0]
        loops = f"{decoded.loops_used[0]} loops ({'converged' if decoded.converged[0] else 'cap reached'}, tol {tol:g})"
    else:
        completion = model.generate([example.prompt], n_loops=fixed, max_new_tokens=budget)[0]
        loops = f"{fixed} loops"
    print(task.to_human(completion))
    if args.verbose:
        verdict = "correct" if task.check(example, completion) else f"wrong (expected {task.to_human(example.target)})"
        print(f"model order: {example.prompt}{completion}  -> {verdict}; {loops}")
    return 0


def cmd_summary(args) -> int:
    from .checkpoints import list_checkpoints, load_model, read_metrics, read_run_config
    from .core.summary import format_summary, parameter_summary

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


def cmd_ablate(args) -> int:
    from analyses.report.ablation import findings

    from .experiments.ablation import get_spec, run_ablation

    spec = get_spec(args.spec)
    data = run_ablation(dataclasses.replace(spec, base=(*spec.base, *args.set)), args.out, findings=findings)
    for line in data["findings"]:
        print(line)
    print(f"wrote {Path(args.out) / 'ablation.json'}; add it to a report with "
          f"`abacus-interp report RUN --ablation {args.out} --out DIR`")
    return 0


def cmd_compare(args) -> int:
    from analyses.report.architectures import findings
    from analyses.report.inside import inspect_winners

    from .experiments.compare import get_spec, run_comparison

    def names(text: str | None) -> tuple[str, ...] | None:
        return tuple(x.strip() for x in text.split(",") if x.strip()) if text else None

    spec = get_spec(args.spec)
    spec = dataclasses.replace(spec, base=(*spec.base, *args.set))
    data = run_comparison(spec, args.out, sizes=names(args.sizes), families=names(args.families),
                          cells=names(args.cells), seed=args.seed,
                          inspect_winners=None if args.skip_inside else inspect_winners, findings=findings)
    print(f"{'cell':<15} {'params':>9} {'exact':>7} {'train s':>8} {'train FLOPs':>11}")
    for cell in [*data["cells"], *data["seeds"]]:
        seconds = cell["train_seconds"]
        curve = cell["curve"] or []
        flops = f"{curve[-1]['train_flops']:.2g}" if curve else "-"
        print(f"{cell['cell']:<15} {cell['params']:>9,} {100 * cell['exact_match']:>6.1f}% "
              f"{'-' if seconds is None else f'{seconds:.0f}':>8} {flops:>11}")
    for line in data["findings"]:
        print(line)
    print(f"wrote {Path(args.out) / 'comparison.json'}; add it to a report with "
          f"`abacus-interp report RUN --architectures {args.out} --out DIR`")
    return 0


def _add_device_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto",
                   help="where the model runs: auto (default: CUDA when a GPU is visible, else CPU), cpu, cuda, cuda:N")


class _WholeWordsHelp(argparse.HelpFormatter):
    """Wraps help text between words only, so a preset name such as grok-mod113-fast stays whole."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="abacus-interp", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose-logs", action="store_true", help="show library log messages")
    sub = parser.add_subparsers(dest="command", required=True)
    for add_command in (_add_train_command, _add_eval_command, _add_solve_command, _add_summary_command,
                        _add_report_command, _add_ablate_command, _add_compare_command):
        add_command(sub)
    return parser


def _add_train_command(sub) -> None:
    from .training.presets import PRESETS

    p = sub.add_parser("train", help="train a preset into a run directory (resumes if it has resume/)",
                       formatter_class=_WholeWordsHelp)
    p.add_argument("--preset", help=", ".join(PRESETS))
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field, e.g. train.lr=3e-4")
    p.add_argument("--out", required=True, help="run directory")
    p.set_defaults(func=cmd_train)


def _add_eval_command(sub) -> None:
    p = sub.add_parser("eval", help="exact-match grid, accuracy vs loops, edge cases")
    p.add_argument("run")
    p.add_argument("--step", type=int, help="checkpoint step (default: latest)")
    p.add_argument("--grid", type=_parse_range, help="operand digit range, e.g. 1..20")
    p.add_argument("--loops", type=_parse_int_list,
                   help="loop counts, e.g. 1,2,4,8 (default: powers of two and 1x, 2x, 4x the trained loops, up to 4x)")
    p.add_argument("--n", type=int, default=25,
                   help="problems per grid cell (default 25, so eval takes seconds; 100 for finer cells); whole sets "
                        "(vs loops, perplexity) get 4x this (per row with --lengths/--chains)")
    p.add_argument("--lengths", type=_parse_int_list,
                   help="length extrapolation instead: exact match on operands of exactly these digit counts, e.g. 5,10,50")
    p.add_argument("--chains", type=_parse_chains,
                   help="length extrapolation on planted carry chains: 5,10 (chain c in c digits) or 5:20")
    p.add_argument("--multipliers", type=_parse_int_list,
                   help="with --lengths, multiplication: score each length times multipliers of these digit counts, e.g. 1,2,3")
    p.add_argument("--halt-tol", type=float,
                   help="with --lengths/--chains: adaptive loops at this tolerance (default: the model's halt_tol)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write every number to this file")
    _add_device_option(p)
    p.set_defaults(func=cmd_eval)


def _add_solve_command(sub) -> None:
    p = sub.add_parser("solve", help='solve one problem in human order, e.g. "123+456"')
    p.add_argument("run")
    # optional to argparse only: main() takes a problem that starts with "-" (an expression
    # such as "-5+3") from the arguments argparse read as an unknown option
    p.add_argument("problem", nargs="?", help='the problem, e.g. "123+456" (one that starts with "-" may also follow --)')
    p.add_argument("--loops", type=_parse_loop_count, help="a fixed loop count (default: the model's, adaptive when it has halt_tol)")
    p.add_argument("--verbose", action="store_true", help="also show the model-order text, a verdict and the loops used")
    _add_device_option(p)
    p.set_defaults(func=cmd_solve)


def _add_summary_command(sub) -> None:
    p = sub.add_parser("summary", help="parameters by component, config, metrics")
    p.add_argument("run")
    _add_device_option(p)
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
    _add_device_option(p)
    p.set_defaults(func=cmd_report)


def _add_ablate_command(sub) -> None:
    p = sub.add_parser("ablate", help="train one run per variant of a recipe; exact match vs operand length")
    p.add_argument("--spec", default="extrapolation", help="the ablation to run (abacus_interp.experiments.ablation.SPECS)")
    p.add_argument("--out", required=True, help="directory for the cells and ablation.json (resumes)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="edit every cell's config, e.g. --set train.processes=1 (pass the same edits to resume)")
    p.set_defaults(func=cmd_ablate)


def _add_compare_command(sub) -> None:
    p = sub.add_parser("compare", help="train one run per model family and size; accuracy vs params and length")
    p.add_argument("--spec", default="expressions", help="the comparison to run (abacus_interp.experiments.compare.SPECS)")
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


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, except that solve's problem may start with a minus sign ("-5+3"), which
    argparse alone takes for an unknown option and then reports "problem required"."""
    args, extra = parser.parse_known_args(argv)
    if args.command == "solve" and args.problem is None and len(extra) == 1 and re.match(r"-\s*[0-9(]", extra[0]):
        args.problem = extra.pop()
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "solve" and args.problem is None:
        parser.error('solve needs a problem after the run, e.g. abacus-interp solve RUN "123+45"')
    return args


def _os_error_message(e: OSError) -> str:
    """An OSError as one line that says what to do: the disk is full, a folder cannot be
    written, a path is in the way or too long."""
    where = f": {e.filename}" if e.filename else ""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        advice = "free some disk space, then run the same command again (what was written before is intact)"
    elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        advice = "make it writable, or choose another path"
    else:
        advice = "check the path, or choose another"
    return f"{e.strerror or e}{where}; {advice}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    logging.basicConfig(level=logging.INFO if args.verbose_logs else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except UserError as e:  # anything else is a bug: its traceback shows where
        print(f"error: {' '.join(str(e).splitlines())}", file=sys.stderr)
        return 2
    except OSError as e:
        # the machine, not the toolkit: a full disk or a folder that cannot be written. Every
        # file is written through a temporary file renamed into place, so nothing that was
        # there before is half-overwritten
        print(f"error: {_os_error_message(e)}", file=sys.stderr)
        return 2


def _exit_rank(code: int) -> None:
    """Leave a training rank without the interpreter's and the C++ runtime's teardown.

    The process group is already destroyed (`training.distributed.teardown`) and every file
    written atomically; what is left at exit is destructors, and in a gloo rank one of them
    aborts now and then ("terminate called without an active exception", exit -6): 2 of 30
    torchrun runs of `benchmarks/stress_training.py processes` on a busy machine, after the
    rank had trained and saved. So a rank flushes its output and ends with its exit status
    at once, as torch's own multiprocessing workers do."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    status = main()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # a rank of a multi-process training
        _exit_rank(status)
    sys.exit(status)

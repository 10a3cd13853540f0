"""`abacus-interp eval` (exact-match grid, accuracy against loops, edge cases, length
extrapolation, sorting's longer and longer lists) and `abacus-interp solve` (one problem, in
human order)."""

from __future__ import annotations

import sys
from pathlib import Path

from abacus_interp.errors import UserError

from .args import (
    add_device_option,
    check_json_path,
    parse_chains,
    parse_int_list,
    parse_loop_count,
    parse_range,
    parse_tolerance,
    write_json,
)


def cmd_eval(args) -> int:
    from abacus_interp.checkpoints import (
        checkpoint_at,
        load_model,
        load_task,
        read_run_config,
        run_dir_of,
    )
    from abacus_interp.core.config import ModelConfig
    from abacus_interp.core.scoring import run_readout
    from abacus_interp.evaluation.suite import evaluate, format_report

    run = Path(args.run)
    check_json_path(args.json)  # now, not after the evaluation
    path = checkpoint_at(run, args.step) if args.step is not None else run
    saved = ModelConfig.from_dict(read_run_config(run)["model"])
    task = load_task(run_dir_of(run))
    _check_adaptive_flags(args, task, saved)  # before the model is built with the hook sets they ask for
    # more hook sets only when asked for deeper loops; never fewer than the model has
    model = load_model(path, max_loops=max([saved.max_loops, *(args.loops or []), args.max_loops or 0]),
                       device=args.device)
    if task.name == "sorting" and (args.lengths or args.counts):
        with _eval_threads(model):
            return _eval_lists(model, task, args)
    if args.counts:
        raise UserError(f"--counts scores sorting lists of that many numbers; this run's task is {task.name}: "
                        f"drop --counts (--lengths alone scores longer operands)")
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
        write_json(args.json, report.to_dict())
        print(f"wrote {args.json}")
    return 0


def _check_adaptive_flags(args, task, cfg) -> None:
    """--halt-tol and --max-loops set the adaptive loops of addition's and multiplication's
    --lengths/--chains rows: refuse them, saying what to do, wherever they would mean nothing."""
    given = [f"--{flag.replace('_', '-')}" for flag in ("halt_tol", "max_loops") if getattr(args, flag) is not None]
    if not given:
        return
    what = " and ".join(given)
    if not (task.has_carries or task.name == "multiplication"):
        raise UserError(f"{what} set the adaptive loops of addition's and multiplication's --lengths/--chains rows; "
                        f"this run's task is {task.name}: drop {what} (--loops sets the loop counts read)")
    # what the run can do first, so that no advice below leads to another refusal
    if cfg.family != "looped":
        raise UserError(f"a {cfg.family} model has no loop to run adaptively: drop {what}")
    if not cfg.answer_slots:
        raise UserError(f"this run writes its answer token by token, so it decodes at a fixed loop count, not "
                        f"adaptively: drop {what} (--loops sets the count)")
    if not (args.lengths or args.chains):
        raise UserError(f"{what} set the adaptive loops of --lengths/--chains rows: add --lengths (e.g. --lengths "
                        f"5,20) or drop {what}")
    if args.loops:
        raise UserError(f"{what} set adaptive loops and --loops fixes the loop count: give one of them")
    if args.max_loops is not None and cfg.halt_tol is None and args.halt_tol is None:
        raise UserError("--max-loops caps adaptive loops, and this run decodes at a fixed loop count (its model has "
                        "no halt_tol): add --halt-tol (e.g. 1e-3) to decode it adaptively, or drop --max-loops")


def _eval_threads(model):
    """One intra-op torch thread while a model on the CPU is evaluated, as the report does:
    these models are too small to keep several threads busy, and on a machine whose cores
    are taken (a training run) spinning OpenMP threads fight over them (`core.runtime`: 25x
    slower on the evaluation suite with two busy cores)."""
    from abacus_interp.core.runtime import torch_threads

    return torch_threads(1 if model.W_E.device.type == "cpu" else None)


def _eval_extrapolation(model, task, args) -> int:
    from abacus_interp.evaluation.extrapolation import format_table, length_extrapolation

    counts = args.loops or [None]  # None: the model's default loops (adaptive when it has halt_tol)
    results = []
    for n_loops in counts:
        result = length_extrapolation(model, task, args.lengths or [], args.chains or [], n=args.n, n_loops=n_loops,
                                      tol=args.halt_tol, max_loops=args.max_loops, seed=args.seed,
                                      multipliers=args.multipliers or ())
        print(format_table(result))
        results.append(result.to_dict())
    print("samples: 'uniform' = both operands of exactly that many digits, digits uniform; "
          "'uniform x k' = a multiplicand of that many digits times a k-digit multiplier, digits uniform; "
          "'chain c' = a planted carry chain of c columns (tasks.carries.sample_with_cascade)")
    if args.json:
        write_json(args.json, {"extrapolation": results})
        print(f"wrote {args.json}")
    return 0


def _eval_lists(model, task, args) -> int:
    from abacus_interp.evaluation.lists import format_list_table, list_rows
    from abacus_interp.jsonsafe import to_json

    for flag in ("chains", "multipliers"):
        if getattr(args, flag):
            raise UserError(f"--{flag.replace('_', '-')} does not apply to sorting; --lengths (digits per number) "
                            f"and --counts (numbers per list) choose the rows, --loops the loop counts read")
    written = []
    for n_loops in args.loops or [model.cfg.n_loops]:  # each loop count reads the same lists
        rows = list_rows(model, task, lengths=args.lengths or (), counts=args.counts or (), n=args.n, seed=args.seed,
                         n_loops=n_loops)
        print(format_list_table(rows, task, n_loops, trained_loops=model.cfg.n_loops))
        written += [{**to_json(row), "n_loops": n_loops} for row in rows]
    if args.json:
        write_json(args.json, {"lists": written})
        print(f"wrote {args.json}")
    return 0


def _beyond_trained_length(task, example, run) -> str | None:
    """A warning when an operand has more digits than the run was trained on, else None.
    Only tasks configured with a digit range (`max_digits`) have a trained length."""
    from abacus_interp.tasks.base import digit_count

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
    if task.name == "sorting":
        return (f"a number has {longest} digits but {run} was trained on numbers of {min_digits}..{max_digits} "
                f"digits; past that range answers may be wrong, and how often they are right is what "
                f"`abacus-interp eval {run} --lengths {longest}` measures")
    measure = f"--lengths {longest}" if task.has_digit_grid else f"--grid 1..{longest}"
    return (
        f"an operand has {longest} digits but {run} was trained on operands of {min_digits}..{max_digits} "
        f"digits; past that range answers may be wrong, and how often they are right is what "
        f"`abacus-interp eval {run} {measure}` measures"
    )


def cmd_solve(args) -> int:
    from abacus_interp.checkpoints import load_model, load_task, read_run_config
    from abacus_interp.core.scoring import decode_budget, run_readout
    from abacus_interp.evaluation.common import check_fits_model
    from abacus_interp.tasks.base import digit_count

    model = load_model(args.run, device=args.device)
    task = load_task(args.run)
    example = task.from_human(args.problem)
    if hasattr(task, "check_multiplier"):
        task.check_multiplier(digit_count(example.operands[1]))
    check_fits_model(model, example)  # the rule eval --lengths applies
    warning = _beyond_trained_length(task, example, args.run)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    from abacus_interp.core.halting import generate_adaptive, resolve_halting

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


def _add_eval_command(sub) -> None:
    p = sub.add_parser("eval", help="exact-match grid, accuracy vs loops, edge cases")
    p.add_argument("run")
    p.add_argument("--step", type=int, help="checkpoint step (default: latest)")
    p.add_argument("--grid", type=parse_range, help="operand digit range, e.g. 1..20")
    p.add_argument("--loops", type=parse_int_list,
                   help="loop counts, e.g. 1,2,4,8 (default: powers of two and 1x, 2x, 4x the trained loops, up to 4x); "
                        "with --lengths/--chains/--counts every row is read at each (default: the run's own loops)")
    p.add_argument("--n", type=int, default=25,
                   help="problems per grid cell (default 25, so eval takes seconds; 100 for finer cells); whole sets "
                        "(vs loops, perplexity) get 4x this (per row with --lengths/--chains)")
    p.add_argument("--lengths", type=parse_int_list,
                   help="length extrapolation instead: exact match on operands (sorting: numbers) of exactly these digit "
                        "counts, e.g. 5,10,50")
    p.add_argument("--counts", type=parse_int_list,
                   help="sorting: score lists of these many numbers (with --lengths, also of those digits), e.g. 10")
    p.add_argument("--chains", type=parse_chains,
                   help="length extrapolation on planted carry chains: 5,10 (chain c in c digits) or 5:20")
    p.add_argument("--multipliers", type=parse_int_list,
                   help="with --lengths, multiplication: score each length times multipliers of these digit counts, e.g. 1,2,3")
    p.add_argument("--halt-tol", type=parse_tolerance,
                   help="with --lengths/--chains: adaptive loops at this tolerance (default: the model's halt_tol)")
    p.add_argument("--max-loops", type=parse_loop_count,
                   help="with --lengths/--chains: adaptive loops stop at this many at most (default: the model's "
                        "max_loops); a wrong answer that converged below the cap is a wrong fixed point, not a cut")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write every number to this file")
    add_device_option(p)
    p.set_defaults(func=cmd_eval)


def _add_solve_command(sub) -> None:
    p = sub.add_parser("solve", help='solve one problem in human order, e.g. "123+456"')
    p.add_argument("run")
    # optional to argparse only: main() takes a problem that starts with "-" (an expression
    # such as "-5+3") from the arguments argparse read as an unknown option
    p.add_argument("problem", nargs="?", help='the problem, e.g. "123+456" (one that starts with "-" may also follow --)')
    p.add_argument("--loops", type=parse_loop_count, help="a fixed loop count (default: the model's, adaptive when it has halt_tol)")
    p.add_argument("--verbose", action="store_true", help="also show the model-order text, a verdict and the loops used")
    add_device_option(p)
    p.set_defaults(func=cmd_solve)


def add_commands(sub) -> None:
    _add_eval_command(sub)
    _add_solve_command(sub)

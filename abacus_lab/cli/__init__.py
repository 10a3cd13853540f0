"""`abacus-interp` command line: train, eval, solve, summary, report, ablate, compare.

The CLI prints (and so does a training rank, `abacus_interp.training.worker`, which is a
process entry point too); the library only logs. Every user error (`abacus_interp.errors.UserError`)
ends with a one-line message that says what to do, and exit status 2, and so does an OSError
(a full disk, a folder that cannot be written: the machine, not the toolkit); any other
exception is a bug and ends with its traceback. Each command group is one module here
(train, evaluate, report, experiments) that adds its subcommands to the parser.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys

from abacus_interp.errors import UserError, one_line_error
from abacus_interp.training.worker import LOG_FORMAT

from . import evaluate, experiments, report, train

COMMAND_GROUPS = (train, evaluate, report, experiments)  # in the order --help lists them


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="abacus-interp", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose-logs", action="store_true", help="show library log messages")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        group.add_commands(sub)
    return parser


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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    logging.basicConfig(level=logging.INFO if args.verbose_logs else logging.WARNING, format=LOG_FORMAT)
    try:
        return args.func(args)
    except (UserError, OSError) as e:  # anything else is a bug: its traceback shows where
        print(one_line_error(e), file=sys.stderr)
        return 2

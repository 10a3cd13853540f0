"""`abacus-interp` command line: train, eval, solve, summary, report, ablate, compare.

The CLI prints; the library only logs. Every user error (`abacus_interp.errors.UserError`)
ends with a one-line message that says what to do, and exit status 2, and so does an OSError
(a full disk, a folder that cannot be written: the machine, not the toolkit); any other
exception is a bug and ends with its traceback. Each command group is one module here
(train, evaluate, report, experiments) that adds its subcommands to the parser.
"""

from __future__ import annotations

import argparse
import errno
import logging
import re
import sys

from abacus_interp.errors import UserError

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

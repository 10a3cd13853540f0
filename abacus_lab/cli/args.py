"""What several commands parse and write the same way: integer lists, digit ranges, loop
counts and carry chains as argparse types, the --device option, and eval's --json file."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from abacus_interp.errors import UserError, check_output_dir


def parse_int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 1,2,4,8; got {text!r}") from e


def parse_loop_count(text: str) -> int:
    from abacus_interp.core.config import MAX_LAYERS_AND_LOOPS

    try:
        value = int(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected a loop count (an integer >= 1); got {text!r}") from e
    if value < 1:
        raise argparse.ArgumentTypeError(f"a loop count is an integer >= 1; got {text!r}")
    if value > MAX_LAYERS_AND_LOOPS:  # each loop runs the block once more: 10**9 would not end
        raise argparse.ArgumentTypeError(f"a loop count is at most {MAX_LAYERS_AND_LOOPS:,}; got {text!r}")
    return value


def parse_tolerance(text: str) -> float:
    """A halting tolerance: a finite number >= 0 (0 runs every problem to the cap)."""
    try:
        value = float(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected a tolerance (a number >= 0, e.g. 1e-3); got {text!r}") from e
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"a tolerance is a finite number >= 0 (0 runs every problem to the cap); "
                                         f"got {text!r}")
    return value


def parse_range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(".."))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected a digit range like 1..20; got {text!r}") from e
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError(f"range {text!r} must satisfy 1 <= A <= B")
    return lo, hi


def parse_chains(text: str) -> list[tuple[int, int]]:
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


def add_device_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto",
                   help="where the model runs: auto (default: CUDA when a GPU is visible, else CPU), cpu, cuda, cuda:N")


class WholeWordsHelp(argparse.HelpFormatter):
    """Wraps help text between words only, so a preset name such as grok-mod113-fast stays whole."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def check_json_path(path: str | None) -> None:
    """A UserError when eval's --json names no file that can be written: empty, an existing
    folder, or below a file."""
    if path is None:
        return
    if not path.strip() or Path(path).is_dir():
        raise UserError(f"--json {path!r} is {'empty' if not path.strip() else 'a folder'}; pass a file path, "
                        "e.g. --json results/eval.json")
    check_output_dir(Path(path).parent, "--json's folder")


def write_json(path: str, data: dict) -> None:
    """`data` as JSON at `path`, through a temporary file renamed into place: a full disk
    leaves the file that was there, not half of a new one."""
    from abacus_interp.checkpoints import atomic_write

    text = json.dumps(data, indent=2)
    atomic_write(Path(path), lambda tmp: Path(tmp).write_text(text))

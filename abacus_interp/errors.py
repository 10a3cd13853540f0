"""The exceptions that mean "the input is wrong", as opposed to a bug in the toolkit.

`UserError` is raised where the library checks what a person typed or passed: command-line
arguments, `--set` values and config files, task options, problems, presets, specs, analysis
options, paths and checkpoint files. Its message says what to do. The CLI prints it on one
line with exit status 2; any other exception is a bug and keeps its traceback.

It subclasses ValueError, so code that catches ValueError (or tests that expect one) still
sees it; internal consistency checks (tensor shapes, hook names, arguments the library passes
itself) stay plain ValueErrors.
"""

from __future__ import annotations

from pathlib import Path


class UserError(ValueError):
    """Bad input that the person running the toolkit can fix; the message says how."""


class MissingPathError(UserError, FileNotFoundError):
    """A path that was given does not exist, or is not the kind of path expected."""


def check_output_dir(path: str | Path, option: str = "--out") -> Path:
    """`path` as a Path, when it is a directory or does not exist yet; a UserError when it
    names an existing file (mkdir would fail with a bare FileExistsError), or is empty (which
    would write into the current folder)."""
    if not str(path).strip():
        raise UserError(f"{option} is empty; pass a directory path (a new one is created)")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{option} {path} is an existing file, not a directory; pass a directory path "
                        "(a new one is created)")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{option} {path}: {parent} is a file, so no directory can be created "
                                "under it; pass another path")
            break
    return path

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

import errno
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


def one_line_error(e: UserError | OSError) -> str:
    """What a command (the CLI, a training rank) prints for an error that is not a bug: a
    UserError's message on one line, or an OSError (the machine: a full disk, a folder that
    cannot be written, a path in the way) with what to do. Every file is written through a
    temporary file renamed into place, so nothing that was there before is half-overwritten."""
    if isinstance(e, UserError):
        return "error: " + " ".join(str(e).splitlines())
    where = f": {e.filename}" if e.filename else ""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        advice = "free some disk space, then run the same command again (what was written before is intact)"
    elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        advice = "make it writable, or choose another path"
    else:
        advice = "check the path, or choose another"
    return f"error: {e.strerror or e}{where}; {advice}"

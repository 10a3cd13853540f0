"""Feed the command line bad input and check that it fails cleanly and loses nothing (issue 39).

    python benchmarks/fuzz_cli.py                                  # 1,000 inputs, seed 0
    python benchmarks/fuzz_cli.py --inputs 3000 --seed 7
    python benchmarks/fuzz_cli.py --categories solve-text config-types --show 10
    python benchmarks/fuzz_cli.py --list                           # the categories
    python benchmarks/fuzz_cli.py --samples 5                      # and 5 error lines of each

On a shared machine: `OMP_NUM_THREADS=1 nice -n 10 python benchmarks/fuzz_cli.py` (about 5
minutes on two busy cores); `ulimit -v 12000000` first keeps a case that misjudges memory
from reaching other processes.

Every input is one call of `abacus_lab.cli.main(argv)` in this process (`solve`, `eval`,
`summary`, `report` or `train`) on a fresh copy of a small run, damaged first where the
category says so: random and unicode text, huge numbers, odd option values, a config.json
with values of the wrong type or a broken file, a metrics.jsonl with a torn or garbage line,
a checkpoint folder with a missing, empty, truncated or foreign file, a run directory that
cannot be written, and a disk that fills while a checkpoint, a metrics line, a report or an
evaluation is written (simulated by making every write from the k-th on fail with ENOSPC
after writing half its bytes; and, where a tmpfs can be mounted (as root; `--real-disk N`,
default 10), by resuming a training on a tmpfs too small for its next checkpoints).

Each call is judged:
  ok         exit 0 and, where the category can tell, the right result (solve's answer and
             verdict against Python's own sum, summary's checkpoint count, train's new
             checkpoint, a report whose sections failed with nothing but user errors)
  error      exit 2 and stderr ending in one line: `error: ...` (a UserError) or argparse's
             `abacus-interp ...: error: ...` after its usage lines
  traceback  any other exception, exit status or error output, or a report section that
             failed with a bug (the report shows it, the exit status does not)
  hang       no answer within --timeout seconds
  wrong      exit 0 with a wrong result (or a run that no longer resumes after a failure)
  lost       a file that existed before the call is gone or changed after a call that
             failed (after one that succeeded, only the files it is meant to rewrite may
             change; a training stopped by a full disk may have saved progress first, so
             there the metrics may grow and the run must resume afterwards), or a
             temporary file is left behind
The goal: >= 1,000 inputs, no traceback, hang, wrong result or lost file; the script exits 1
otherwise and shows examples of each (--show N).

The runs copied are checkpoints/extrap-add (its config, metrics and 4 of its checkpoints; the
shipped folder is never touched) and a plain-add run trained here for 2 steps (with resume
state, for `train` to resume). `report` builds only the sections that read the damaged
files (the model card, the checkpoint comparison and the embedding evolution, at
`ReportSizes.quick()`), so one report takes a second, not minutes. `eval` runs with tiny
sizes (--n 1, --grid 1..2, --loops 1) unless the option under test is one of those.
Huge *valid* requests are a long computation rather than bad input and are not generated
(--n 10**9; solve on 5,000-digit operands, which extrap-add, with no position table, may
read and answers in minutes); huge numbers appear where they are invalid or must be refused
(100,000-digit operands, grids, lengths, steps, seeds, loop counts, config values).

tests/test_fuzz_inputs.py runs every fixed case (`fixed_cases`; a representative subset of
them outside the slow marker) and 60 random inputs (slow).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import functools
import io
import json
import logging
import os
import random
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_RUN = ROOT / "checkpoints" / "extrap-add"
REPORT_SECTIONS = ("model_card", "checkpoint_compare", "embedding_evolution")
# the temporary names the library writes through (checkpoints.atomic_write, the report's staging folder)
LEFTOVER = re.compile(r"^\..*\.(tmp|partial)$")
FAILURES = ("traceback", "hang", "wrong")


# ---------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Place:
    """An argument known only when the case runs, before its damage: a path in the case's
    folder, the copy of the run ("run") or a path that does not exist yet ("out"), plus
    `rel` below it; or "latest-step", the step of the run's latest checkpoint."""

    base: str
    rel: str = ""

    def resolve(self, run: Path, out: Path) -> str:
        if self.base == "latest-step":
            from abacus_interp.checkpoints import list_checkpoints

            return str(list_checkpoints(run)[-1][0])
        root = run if self.base == "run" else out
        return str(root / self.rel) if self.rel else str(root)

    def __str__(self) -> str:
        return self.base.upper() + (f"/{self.rel}" if self.rel else "")


RUN, OUT, LATEST_STEP = Place("run"), Place("out"), Place("latest-step")


@dataclass
class Call:
    """What one call of `main` did."""

    argv: list[str]
    rc: int | None  # None when it raised
    stdout: str
    stderr: str
    exception: BaseException | None
    run: Path
    out: Path
    cwd: Path  # where it ran: a relative path in argv or in its output is relative to this
    seconds: float = 0.0


@dataclass
class Case:
    category: str
    name: str
    argv: list[str | Place]
    # what the case's run is a copy of: "run" (extrap-add), "resumable" (plain-add with resume
    # state) or None (no run: the argv names paths under OUT only)
    source: str | None = "run"
    damage: Callable[[Path], None] | None = None
    # a context manager around the call, given (run, out): read-only folders, a full disk
    during: Callable[[Path, Path], contextlib.AbstractContextManager] | None = None
    # what is wrong with a call that ended in exit 0 or 2, or None; runs after the loss check
    check: Callable[[Call], str | None] | None = None
    # paths (relative to the case folder) a successful call may rewrite: train's metrics,
    # config and resume state; never a checkpoint
    may_rewrite: Callable[[str], bool] = lambda rel: False
    # a failed call may have saved progress first (a training stopped by a full disk): the
    # files of `may_rewrite` may change after a failure too, except that metrics.jsonl may
    # only grow (its old lines kept), and the case's check resumes the run
    keeps_progress: bool = False
    # a tmpfs of this many KiB is mounted for the case (the real full disk); needs root
    disk_kib: int | None = None

    def shown_argv(self) -> str:
        return " ".join(_shell_word(str(a)) for a in self.argv)


def _shell_word(text: str) -> str:
    shown = text if len(text) <= 80 else f"{text[:40]}...{text[-20:]} ({len(text)} chars)"
    return repr(shown) if not shown or any(c.isspace() or not c.isprintable() for c in shown) else shown


def trained_files(rel: str) -> bool:
    """What a successful `train` rewrites in a run it resumes."""
    return rel in ("run/config.json", "run/metrics.jsonl") or rel.startswith("run/resume/")


# ---------------------------------------------------------------------------- the runs


@dataclass
class Fixtures:
    """The runs every case copies, built once in a temporary folder."""

    root: Path
    run: Path  # extrap-add: config, metrics, 4 checkpoints
    resumable: Path  # plain-add trained 2 steps here, with resume state
    foreign_weights: Path  # a checkpoint of another shape (plain-add's)


TINY_TRAIN = ["--set", "train.steps=2", "--set", "train.processes=1", "--set", "train.eval_problems=8",
              "--set", "train.log_every=1"]


def build_fixtures(root: Path) -> Fixtures:
    from abacus_interp import checkpoints as ckpt
    from abacus_lab.cli import main

    run = root / "extrap-add"
    (run / "checkpoints").mkdir(parents=True)
    for name in ("config.json", "metrics.jsonl"):
        shutil.copy(SHIPPED_RUN / name, run / name)
    series = ckpt.list_checkpoints(SHIPPED_RUN)
    for _, path in [series[0], series[3], series[-2], series[-1]]:
        for file in (path, path.with_suffix(".json")):
            shutil.copy(file, run / "checkpoints" / file.name)
    resumable = root / "plain-add"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = main(["train", "--preset", "plain-add", "--out", str(resumable), *TINY_TRAIN])
    if rc != 0:
        raise RuntimeError(f"training the plain-add fixture ended with exit status {rc}")
    os.chmod(root, 0o755)  # the read-only cases run as another user where they can
    return Fixtures(root=root, run=run, resumable=resumable,
                    foreign_weights=ckpt.list_checkpoints(resumable)[-1][1])


# ---------------------------------------------------------------------------- damage


def write_bytes(rel: str, data: bytes) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        path = run / rel
        if path.is_dir():
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return damage


def truncate(rel: str, keep: float) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        path = run / rel
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * keep)])

    return damage


def remove(rel: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        path = run / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()

    return damage


def replace_with_folder(rel: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        path = run / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()
        (path / "inside").mkdir(parents=True)

    return damage


def copy_in(source: Path, rel: str) -> Callable[[Path], None]:
    return lambda run: shutil.copy(source, run / rel)


def edit_json(rel: str, edit: Callable[[object], object]) -> Callable[[Path], None]:
    """Rewrite a JSON file as `edit(its value)` (Python's json writes NaN and Infinity)."""

    def damage(run: Path) -> None:
        path = run / rel
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))

    return damage


def set_key(keys: tuple[str, ...], value: object) -> Callable[[object], object]:
    """An edit of a JSON value: the item at `keys` set to `value` (deleted when value is DELETE)."""

    def edit(obj: object) -> object:
        target = obj
        for key in keys[:-1]:
            target = target[key]
        if value is DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
        return obj

    return edit


DELETE = object()


def append_text(rel: str, text: bytes) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        with open(run / rel, "ab") as f:
            f.write(text)

    return damage


def insert_line(rel: str, line: bytes, where: float) -> Callable[[Path], None]:
    """`line` inserted among the lines of `rel`, at `where` (0: first, 1: last)."""

    def damage(run: Path) -> None:
        lines = (run / rel).read_bytes().splitlines(keepends=True)
        at = round(where * len(lines))
        lines.insert(at, line if line.endswith(b"\n") else line + b"\n")
        (run / rel).write_bytes(b"".join(lines))

    return damage


def several(*damages: Callable[[Path], None]) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        for d in damages:
            d(run)

    return damage


def latest_weights(run: Path) -> str:
    return sorted(p.name for p in (run / "checkpoints").glob("step_*.safetensors"))[-1]


def on_latest(make: Callable[[str], Callable[[Path], None]], suffix: str = ".safetensors") -> Callable[[Path], None]:
    """A damage of the run's latest checkpoint file (weights, or with suffix=".json" its sidecar)."""

    def damage(run: Path) -> None:
        name = latest_weights(run).removesuffix(".safetensors") + suffix
        make(f"checkpoints/{name}")(run)

    return damage


# ---------------------------------------------------------------------------- environments


def _chmod_tree(path: Path, dirs: int, files: int) -> None:
    for folder, _, names in os.walk(path):
        os.chmod(folder, dirs)
        for name in names:
            os.chmod(os.path.join(folder, name), files)


@contextlib.contextmanager
def read_only(run: Path, out: Path) -> Iterator[None]:
    """The run's folders and files cannot be written. Root writes anywhere, so as root the
    call runs as the user `nobody` (seteuid); the folders stay readable to everyone."""
    _chmod_tree(run, 0o555, 0o444)
    as_root = os.geteuid() == 0
    try:
        if as_root:
            os.setegid(65534)
            os.seteuid(65534)
        yield
    finally:
        if as_root:
            os.seteuid(0)
            os.setegid(0)
        _chmod_tree(run, 0o755, 0o644)


class DiskFull:
    """Every write from the `from_write`-th on fails as on a full disk: it writes half its
    bytes, then raises OSError(ENOSPC). Counts each file `checkpoints.atomic_write_all`
    writes (checkpoints, sidecars, resume state, config.json, metrics rewrites, eval --json),
    the training loop's metrics appends and `Path.write_text` (the report's files)."""

    def __init__(self, from_write: int):
        self.from_write = from_write
        self.writes = 0

    def _full(self) -> bool:
        self.writes += 1
        return self.writes >= self.from_write

    @staticmethod
    def _no_space() -> OSError:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    @contextlib.contextmanager
    def __call__(self, run: Path, out: Path) -> Iterator[None]:
        import pathlib

        from abacus_interp import checkpoints
        from abacus_interp.training import loop

        disk = self
        disk.writes = 0
        real_atomic_write_all, real_write_text = checkpoints.atomic_write_all, pathlib.Path.write_text

        def filling(write):
            def write_or_fill(tmp):
                if not disk._full():
                    return write(tmp)
                write(tmp)
                os.truncate(tmp, os.path.getsize(tmp) // 2)
                raise disk._no_space()

            return write_or_fill

        def atomic_write_all(files):  # every file of the group is a write of its own
            return real_atomic_write_all([(path, filling(write)) for path, write in files])

        def write_text(self_path, data, *args, **kwargs):
            if disk._full():
                real_write_text(self_path, data[: len(data) // 2], *args, **kwargs)
                raise disk._no_space()
            return real_write_text(self_path, data, *args, **kwargs)

        class MetricsFile(io.TextIOWrapper):
            def write(self, text):
                if disk._full():
                    super().write(text[: len(text) // 2])
                    raise disk._no_space()
                return super().write(text)

        def open_metrics(path, mode="r", *args, **kwargs):
            handle = open(path, mode, *args, **kwargs)
            if "a" not in mode:
                return handle
            return MetricsFile(handle.detach(), encoding="utf-8", line_buffering=False)

        patches = [(checkpoints, "atomic_write_all", atomic_write_all), (pathlib.Path, "write_text", write_text),
                   (loop, "open", open_metrics)]
        for owner, name, value in patches:
            setattr(owner, name, value)
        try:
            yield
        finally:
            checkpoints.atomic_write_all, pathlib.Path.write_text = real_atomic_write_all, real_write_text
            del loop.open  # back to the builtin


@contextlib.contextmanager
def tmpfs(path: Path, kib: int) -> Iterator[bool]:
    """A tmpfs of `kib` KiB mounted at `path` for the block; yields False (nothing mounted)
    where mounting is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "fuzz-cli", str(path)],
                             capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", str(path)], check=True)


def can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    with tempfile.TemporaryDirectory() as folder, tmpfs(Path(folder) / "probe", 64) as mounted:
        return mounted


# ---------------------------------------------------------------------------- checks


def solve_answer_is_right(a: int, b: int) -> Callable[[Call], str | None]:
    """solve --verbose printed the model's answer and a verdict that agrees with Python's a + b."""
    truth = str(a + b)

    def check(call: Call) -> str | None:
        if call.rc != 0:
            return None
        lines = call.stdout.splitlines()
        if len(lines) != 2:
            return f"expected the answer and the model-order line, got {call.stdout!r}"
        answer, detail = lines
        verdict = re.search(r"-> (correct|wrong \(expected (\S+)\));", detail)
        if verdict is None:
            return f"no verdict in {detail!r}"
        if verdict.group(1) == "correct" and answer != truth:
            return f"says correct for {answer!r}, but {a} + {b} = {truth}"
        if verdict.group(2) is not None and (verdict.group(2) != truth or answer == truth):
            return f"says wrong (expected {verdict.group(2)}) for {answer!r}, but {a} + {b} = {truth}"
        return None

    return check


def summary_counts_checkpoints(call: Call) -> str | None:
    if call.rc != 0:
        return None
    from abacus_interp.checkpoints import STEP_FILE

    present = sum(bool(STEP_FILE.match(p.name)) for p in (call.run / "checkpoints").iterdir())
    said = re.search(r"^checkpoints: (\d+)", call.stdout, re.M)
    if said is None or int(said.group(1)) != present:
        return f"summary counts {said.group(1) if said else 'no'} checkpoints; the run has {present}"
    return None


def report_sections_fine(call: Call) -> str | None:
    """A report that was written: every section ok or omitted, or failed with a user error."""
    if call.rc != 0:
        return None
    from abacus_interp.errors import UserError

    user_errors = {cls.__name__ for cls in _subclasses(UserError)}
    path = call.cwd / Path(re.search(r"report written to (.+)$", call.stdout, re.M).group(1)).parent / "report.json"
    for key, section in json.loads(path.read_text())["sections"].items():
        if section["status"] == "failed" and section["error"].split(":")[0] not in user_errors:
            raise SectionBug(f"report section {key} failed with a bug: {section['error']}")
    return None


class SectionBug(Exception):
    """A report section that failed with something other than a UserError: a traceback the
    report caught and showed, which the fuzzer counts as one."""


def _subclasses(cls: type) -> set[type]:
    out = {cls}
    for sub in cls.__subclasses__():
        out |= _subclasses(sub)
    return out


def out_of(call: Call) -> Path:
    """The run directory a train call wrote: the value of its --out."""
    return call.cwd / call.argv[call.argv.index("--out") + 1]


def train_reached(step: int) -> Callable[[Call], str | None]:
    def check(call: Call) -> str | None:
        if call.rc != 0:
            return None
        from abacus_interp import checkpoints as ckpt

        out = out_of(call)
        if not ckpt.step_path(out, step).exists():
            return f"train exited 0 but {ckpt.step_path(out, step)} does not exist"
        ckpt.load_model(out)  # raises (counted as a traceback) when the new checkpoint does not load
        return None

    return check


def resumes_afterwards(step: int) -> Callable[[Call], str | None]:
    """After a failed train, the same command without the fault still resumes and reaches
    `step`: the failure lost nothing the run needs."""

    def check(call: Call) -> str | None:
        if call.rc == 0:
            return train_reached(step)(call)
        from abacus_lab.cli import main

        here = os.getcwd()
        os.chdir(call.cwd)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
                rc = main(call.argv)
        finally:
            os.chdir(here)
        if rc != 0:
            return f"after the failure the run no longer resumes: exit {rc}, {err.getvalue().strip()[-300:]}"
        return train_reached(step)(call)

    return check


# ---------------------------------------------------------------------------- generators

# Text a shell could pass in argv: no NUL (argv entries are C strings), but anything else,
# lone surrogates included (how Python decodes bytes that are not UTF-8 in argv).
UNICODE = ("١٢٣٤٥٦٧٨٩٠" "１２３４５６" "¹²³⁴" "߀߁߂" "𝟏𝟐𝟑" "ⅫⅣ" "½¾" "\u200b\u200e\u202e\ufeff"
           "é\u0301" "🙂🧮💥" "＋＝" "−–—" "\x07\x1b\x7f\x85" "\udcff\udc80" "漢字" "ß" "ﬁ" "\t\n\r\x0b\x0c")
ASCII = string.printable


def random_text(rng: random.Random, max_len: int | None = None) -> str:
    length = rng.choice([0, 1, 2, 3, 5, 8, 13, 40, 200, 5000])
    if max_len is not None:
        length = min(length, max_len)
    pools = [ASCII, UNICODE, "0123456789+=", "0123456789+= -*()_", ASCII + UNICODE]
    pool = rng.choice(pools)
    return "".join(rng.choice(pool) for _ in range(length))


def digits(rng: random.Random, n: int) -> int:
    """A random integer of exactly n digits."""
    return rng.randrange(10 ** (n - 1) if n > 1 else 0, 10**n)


def number_text(rng: random.Random, n_digits: int) -> str:
    """A string of n_digits decimal digits (built as text: str() of a huge int is refused)."""
    first = rng.choice("123456789") if n_digits > 1 else rng.choice("0123456789")
    return first + "".join(rng.choice("0123456789") for _ in range(n_digits - 1))


ODD_VALUES = ["", " ", "0", "-1", "-0", "+3", "3.5", "1e3", "nan", "inf", "-inf", "0x10", "1_000", "٣", "３",
              "²", "1,2", "1,,2", ",", "1..2", "2..1", "0..3", "1..", "..", "a..b", "1..2..3", "5:20", "20:5",
              "0:0", "1,2,3,4,5,6,7,8", str(10**30), str(-(10**30)), "9" * 5000, "1," * 500, "true", "null",
              "[1, 2]", "{}", "auto", "cpu", "cuda", "cuda:7", "tpu", "-5..3", "1e309", "٣..٥"]


def odd_value(rng: random.Random) -> str:
    return rng.choice(ODD_VALUES) if rng.random() < 0.8 else random_text(rng, max_len=40).replace("\x00", "")


EVAL_CHEAP = {"--n": "1", "--grid": "1..2", "--loops": "1"}
OPTIONS = {
    "solve": ["--loops", "--device", "--verbose"],
    "eval": ["--step", "--grid", "--loops", "--n", "--lengths", "--chains", "--multipliers", "--halt-tol",
             "--max-loops", "--seed", "--json", "--device"],
    "summary": ["--device"],
    "report": ["--step", "--compare", "--ablation", "--architectures", "--device", "--out"],
}
FLAGS = {"--verbose"}


def command_argv(command: str, run: str | Place = RUN, fuzzed: dict[str, str | Place] | None = None,
                 problem: str = "12+34") -> list[str | Place]:
    """argv for `command` on `run` with the options in `fuzzed` and cheap settings for the rest."""
    fuzzed = fuzzed or {}
    argv: list[str | Place] = [command, run]
    if command == "solve":
        argv += ["--", problem] if problem.startswith("-") else [problem]
    if command == "eval":
        for option, value in EVAL_CHEAP.items():
            if option not in fuzzed and not (option == "--grid" and ({"--lengths", "--chains"} & set(fuzzed))):
                argv += [option, value]
    if command == "report" and "--out" not in fuzzed:
        argv += ["--out", OUT]
    for option, value in fuzzed.items():
        argv += [option] if option in FLAGS else [option, value]
    return argv


def checks_for(command: str) -> Callable[[Call], str | None] | None:
    return {"summary": summary_counts_checkpoints, "report": report_sections_fine}.get(command)


# Each category: fixed cases (the suite runs them all) and a generator of random ones.


def solve_text_fixed(fx: Fixtures) -> list[Case]:
    texts = ["", " ", "+", "=", "1+", "+1", "1++2", "1+2+3", "12 plus 3", "١٢+٣", "１２+３", "1²+2", "🙂+1",
             "1+2\n3", "\udcff+1", "1" * 5000, "a" * 100000, "12+34=46", "0x1+1", "1_0+1", "-5+3", "12+-3",
             "12−3", " 12 + 34 = "]
    return [Case("solve-text", f"solve {t[:20]!r}", command_argv("solve", problem=t)) for t in texts]


def solve_text_random(rng: random.Random, fx: Fixtures) -> Case:
    text = random_text(rng).replace("\x00", "")
    return Case("solve-text", "solve random text", command_argv("solve", problem=text))


def solve_number_case(rng: random.Random, a_digits: int, b_digits: int, spaced: bool = False,
                      equals: bool = False) -> Case:
    if max(a_digits, b_digits) > 1000:  # refused by solve's memory rule everywhere (>= 1 TB of attention)
        a_text, b_text = number_text(rng, a_digits), number_text(rng, b_digits)
        check = None
    else:
        a, b = digits(rng, a_digits), digits(rng, b_digits)
        a_text, b_text = str(a), str(b)
        check = solve_answer_is_right(a, b)
    join = " + " if spaced else "+"
    problem = f"{a_text}{join}{b_text}{' =' if equals else ''}"
    return Case("solve-numbers", f"solve {a_digits}+{b_digits} digits", command_argv("solve", problem=problem) + ["--verbose"],
                check=check)


def solve_numbers_fixed(fx: Fixtures) -> list[Case]:
    rng = random.Random(0)
    cases = [solve_number_case(rng, a, b) for a, b in [(1, 1), (5, 5), (3, 5), (6, 2), (12, 12), (50, 1), (1000, 1000),
                                                      (200000, 3)]]
    cases.append(solve_number_case(rng, 4, 4, spaced=True, equals=True))
    cases.append(Case("solve-numbers", "solve leading zeros", command_argv("solve", problem="007+0003") + ["--verbose"],
                      check=solve_answer_is_right(7, 3)))
    return cases


def solve_numbers_random(rng: random.Random, fx: Fixtures) -> Case:
    size = rng.choice([1, 2, 3, 4, 5, 5, 6, 8, 12, 30, 300, 1000, 10**5, 10**6])
    other = rng.choice([1, size, rng.randint(1, max(1, min(size, 12)))])
    sizes = (size, other) if rng.random() < 0.5 else (other, size)
    return solve_number_case(rng, *sizes, spaced=rng.random() < 0.2, equals=rng.random() < 0.2)


def options_fixed(fx: Fixtures) -> list[Case]:
    cases = []
    for command, option, value in [
        ("eval", "--step", "7"), ("eval", "--step", "-1"), ("eval", "--step", str(10**30)), ("eval", "--step", "٣"),
        ("eval", "--grid", "0..3"), ("eval", "--grid", "2..1"), ("eval", "--grid", f"1..{10**30}"),
        ("eval", "--loops", "0"), ("eval", "--loops", "-1"), ("eval", "--loops", str(10**9)),
        ("eval", "--n", "0"), ("eval", "--n", "-5"), ("eval", "--lengths", "0"), ("eval", "--lengths", "-3"),
        ("eval", "--lengths", str(10**30)), ("eval", "--chains", "20:5"), ("eval", "--multipliers", "2"),
        ("eval", "--halt-tol", "nan"), ("eval", "--halt-tol", "-1"), ("eval", "--halt-tol", "inf"),
        ("eval", "--max-loops", "0"), ("eval", "--max-loops", str(10**9)), ("eval", "--max-loops", "8"),
        ("eval", "--seed", str(2**64)), ("eval", "--seed", "-1"), ("eval", "--device", "tpu"),
        ("eval", "--device", "cuda:7"), ("eval", "--json", OUT), ("solve", "--loops", "0"),
        ("solve", "--loops", str(10**9)), ("solve", "--device", "🙂"), ("summary", "--device", ""),
        ("report", "--step", "7"), ("report", "--compare", OUT), ("report", "--ablation", RUN),
        ("report", "--architectures", Place("run", "config.json")), ("report", "--out", Place("run", "config.json")),
    ]:
        cases.append(Case("options", f"{command} {option} {str(value)[:20]}", command_argv(command, fuzzed={option: value}),
                          check=checks_for(command)))
    # the adaptive loops' flags on a row they apply to (command_argv's cheap --loops would refuse them first)
    for flags in (["--max-loops", "8"], ["--halt-tol", "0", "--max-loops", "3"], ["--halt-tol", "1e-9"]):
        cases.append(Case("options", f"eval --chains 3 {' '.join(flags)}", ["eval", RUN, "--n", "1", "--chains", "3", *flags]))
    for command in ("solve", "eval", "summary", "report"):
        for run in (OUT, Place("run", "config.json"), Place("run", "checkpoints"), "", "-", "🙂/nowhere",
                    Place("run", "checkpoints/step_0000000.json")):
            cases.append(Case("options", f"{command} on {str(run)[:30]!r}", command_argv(command, run=run)))
    return cases


def options_random(rng: random.Random, fx: Fixtures) -> Case:
    command = rng.choice(list(OPTIONS))
    fuzzed: dict[str, str | Place] = {}
    for option in rng.sample(OPTIONS[command], k=min(len(OPTIONS[command]), rng.choice([1, 1, 2, 3]))):
        if option in ("--json", "--out", "--compare", "--ablation", "--architectures") and rng.random() < 0.5:
            fuzzed[option] = rng.choice([OUT, RUN, Place("run", "config.json"), Place("out", "deep/er/x.json"),
                                         Place("run", "checkpoints"), Place("run", "metrics.jsonl/below")])
        elif option in ("--n", "--grid") and rng.random() < 0.6:
            fuzzed[option] = rng.choice(["1", "2", "1..1", "1..3", "0", "-1"])
        else:
            fuzzed[option] = odd_value(rng)
    argv = command_argv(command, fuzzed=fuzzed)
    if rng.random() < 0.15:  # an option that does not exist, or a stray word
        argv.insert(rng.randrange(1, len(argv) + 1), rng.choice(["--bogus", "-x", "--n=", "--", "stray", "--loops="]))
    return Case("options", f"{command} {' '.join(fuzzed)}", argv, check=checks_for(command))


CONFIG_FIELDS = [("task", "name"), ("task", "max_digits"), ("task", "answer_format"), ("task", "cascade_fraction"),
                 ("model", "vocab"), ("model", "vocab", "symbols"), ("model", "vocab", "separator"), ("model", "d_model"),
                 ("model", "n_heads"), ("model", "d_head"), ("model", "d_mlp"), ("model", "n_layers"),
                 ("model", "n_loops"), ("model", "max_loops"), ("model", "activation"), ("model", "positional"),
                 ("model", "rotary"), ("model", "abacus_window"), ("model", "max_seq_len"), ("model", "halt_tol"),
                 ("model", "answer_slots"), ("model", "ln_eps"), ("model", "tie_unembed"), ("train", "steps"),
                 ("train", "readout"), ("train", "loss_positions"), ("train", "betas"), ("train", "mix_depths"),
                 ("train", "lr"), ("train", "seed"), ("preset",), ("task",), ("model",), ("train",)]
WRONG_VALUES: list[object] = ["text", "", "١٢", "🙂", [], {}, [1, 2], ["a"], None, True, False, 1.5, -1, 0,
                              10**40, -(10**40), float("nan"), float("inf"), {"a": 1}, "\x00", DELETE, [[1]], "64"]
CONFIG_COMMANDS = ["solve", "eval", "summary", "report"]


def config_types_fixed(fx: Fixtures) -> list[Case]:
    picks = [(("model", "d_model"), "64"), (("model", "d_model"), 10**40), (("model", "n_loops"), 10**40),
             (("model", "vocab"), 5), (("model", "vocab", "symbols"), "0123"), (("model", "max_loops"), [1]),
             (("model", "halt_tol"), "small"), (("task", "max_digits"), "five"), (("task", "name"), 7),
             (("task",), "addition"), (("model",), []), (("train",), None), (("train", "readout"), 3),
             (("model", "n_layers"), DELETE), (("task", "name"), DELETE), (("model", "d_model"), float("nan"))]
    return [Case("config-types", f"{command}: config {'.'.join(keys)} = {value if value is not DELETE else 'deleted'!r}",
                 command_argv(command), damage=edit_json("config.json", set_key(keys, value)), check=checks_for(command))
            for (keys, value), command in zip(picks, CONFIG_COMMANDS * 4, strict=True)]


def config_types_random(rng: random.Random, fx: Fixtures) -> Case:
    edits = [(rng.choice(CONFIG_FIELDS), rng.choice(WRONG_VALUES)) for _ in range(rng.choice([1, 1, 1, 2]))]

    def edit(obj):
        for keys, value in edits:
            try:
                set_key(keys, value)(obj)
            except (KeyError, TypeError):  # an earlier edit removed or replaced the section
                pass
        return obj

    if rng.random() < 0.2:  # the resumable run's config, read by train's resume
        return Case("config-types", "train resume: " + ", ".join(".".join(k) for k, _ in edits),
                    ["train", "--out", RUN, "--set", "train.steps=3"], source="resumable",
                    damage=edit_json("config.json", edit), check=train_reached(3), may_rewrite=trained_files)
    command = rng.choice(CONFIG_COMMANDS)
    return Case("config-types", f"{command}: " + ", ".join(".".join(k) for k, _ in edits), command_argv(command),
                damage=edit_json("config.json", edit), check=checks_for(command))


BROKEN_FILES: dict[str, Callable[[str], Callable[[Path], None]]] = {
    "empty": lambda rel: write_bytes(rel, b""),
    "truncated": lambda rel: truncate(rel, 0.5),
    "garbage": lambda rel: write_bytes(rel, bytes(range(256)) * 3),
    "not UTF-8": lambda rel: write_bytes(rel, b'{"task": "\xff\xfe"}'),
    "a JSON list": lambda rel: write_bytes(rel, b"[1, 2, 3]"),
    "a JSON string": lambda rel: write_bytes(rel, b'"config"'),
    "JSON null": lambda rel: write_bytes(rel, b"null"),
    "NaN": lambda rel: write_bytes(rel, b"NaN"),
    "deep nesting": lambda rel: write_bytes(rel, b"[" * 100000 + b"]" * 100000),
    "missing": lambda rel: remove(rel),
    "a folder": lambda rel: replace_with_folder(rel),
    "a UTF-8 BOM": lambda rel: lambda run: (run / rel).write_bytes(b"\xef\xbb\xbf" + (run / rel).read_bytes()),
}


def config_file_fixed(fx: Fixtures) -> list[Case]:
    return [Case("config-file", f"{command}: config.json {how}", command_argv(command),
                 damage=make("config.json"), check=checks_for(command))
            for (how, make), command in zip(BROKEN_FILES.items(), CONFIG_COMMANDS * 3, strict=True)]


def config_file_random(rng: random.Random, fx: Fixtures) -> Case:
    how = rng.choice(list(BROKEN_FILES))
    if rng.random() < 0.25:
        return Case("config-file", f"train resume: config.json {how}", ["train", "--out", RUN, "--set", "train.steps=3"],
                    source="resumable", damage=BROKEN_FILES[how]("config.json"), check=train_reached(3),
                    may_rewrite=trained_files)
    command = rng.choice(CONFIG_COMMANDS)
    return Case("config-file", f"{command}: config.json {how}", command_argv(command),
                damage=BROKEN_FILES[how]("config.json"), check=checks_for(command))


METRICS_LINES: dict[str, bytes] = {
    "torn": b'{"step": 20, "loss": 0.5, "full_de',
    "garbage": bytes(range(1, 256)),
    "not UTF-8": b'{"step": 3, "loss": "\xff"}',
    "a list": b"[1, 2, 3]",
    "a number": b"42",
    "null": b"null",
    "no step": b'{"loss": 0.1}',
    "step as text": b'{"step": "ten", "loss": 0.1}',
    "step null": b'{"step": null, "loss": 0.1}',
    "step huge": b'{"step": 1e400, "loss": 0.1}',
    "step negative": b'{"step": -5, "loss": 0.1}',
    "loss as text": b'{"step": 7, "loss": "low", "in_distribution_exact_match": "high"}',
    "NaN loss": b'{"step": 7, "loss": NaN, "in_distribution_exact_match": Infinity}',
    "nested": b'{"step": 7, "loss": {"a": [1]}, "in_distribution_exact_match": [0.5]}',
    "bool step": b'{"step": true, "loss": 0.1}',
}
METRICS_COMMANDS = ["summary", "report", "train"]


def metrics_case(how: str, where: float, command: str) -> Case:
    line = METRICS_LINES[how]
    if where >= 1 and how == "torn":  # a crash mid-append: the last line has no newline
        damage = append_text("metrics.jsonl", line)
    else:
        damage = insert_line("metrics.jsonl", line, where)
    if command == "train":
        return Case("metrics", f"train resume: metrics.jsonl {how} line at {where:.0%}",
                    ["train", "--out", RUN, "--set", "train.steps=3"], source="resumable", damage=damage,
                    check=train_reached(3), may_rewrite=trained_files)
    return Case("metrics", f"{command}: metrics.jsonl {how} line at {where:.0%}", command_argv(command),
                damage=damage, check=checks_for(command))


def metrics_fixed(fx: Fixtures) -> list[Case]:
    cases = [metrics_case(how, where, command) for (how, where), command in
             zip([("torn", 1.0), ("garbage", 0.5), ("a list", 0.0), ("step as text", 1.0), ("no step", 0.3),
                  ("NaN loss", 1.0), ("step huge", 0.5), ("nested", 1.0), ("bool step", 0.0)],
                 METRICS_COMMANDS * 3, strict=True)]
    for how, make in [("empty", lambda: write_bytes("metrics.jsonl", b"")), ("missing", lambda: remove("metrics.jsonl")),
                      ("a folder", lambda: replace_with_folder("metrics.jsonl"))]:
        for command in ("summary", "train"):
            source = "resumable" if command == "train" else "run"
            argv = ["train", "--out", RUN, "--set", "train.steps=3"] if command == "train" else command_argv(command)
            cases.append(Case("metrics", f"{command}: metrics.jsonl {how}", argv, source=source, damage=make(),
                              check=train_reached(3) if command == "train" else checks_for(command),
                              may_rewrite=trained_files if command == "train" else (lambda rel: False)))
    return cases


def metrics_random(rng: random.Random, fx: Fixtures) -> Case:
    return metrics_case(rng.choice(list(METRICS_LINES)), rng.choice([0.0, 0.5, 1.0, rng.random()]),
                        rng.choice(METRICS_COMMANDS))


CHECKPOINT_DAMAGE: dict[str, Callable[[Fixtures], Callable[[Path], None]]] = {
    "latest weights missing": lambda fx: on_latest(remove),
    "latest sidecar missing": lambda fx: on_latest(remove, ".json"),
    "latest weights empty": lambda fx: on_latest(lambda rel: write_bytes(rel, b"")),
    "latest sidecar empty": lambda fx: on_latest(lambda rel: write_bytes(rel, b""), ".json"),
    "latest weights truncated": lambda fx: on_latest(lambda rel: truncate(rel, 0.5)),
    "latest weights cut in the header": lambda fx: on_latest(lambda rel: truncate(rel, 0.0002)),
    "latest weights garbage": lambda fx: on_latest(lambda rel: write_bytes(rel, os.urandom(3000))),
    "latest weights a huge header length": lambda fx: on_latest(
        lambda rel: write_bytes(rel, (2**62).to_bytes(8, "little") + b"{}")),
    "latest weights of another model": lambda fx: on_latest(lambda rel: copy_in(fx.foreign_weights, rel)),
    "latest weights a folder": lambda fx: on_latest(replace_with_folder),
    "latest sidecar garbage": lambda fx: on_latest(lambda rel: write_bytes(rel, b"\x00\xff{"), ".json"),
    "every checkpoint removed": lambda fx: several(remove("checkpoints"), lambda run: (run / "checkpoints").mkdir()),
    "no checkpoints folder": lambda fx: remove("checkpoints"),
    "checkpoints is a file": lambda fx: several(remove("checkpoints"), write_bytes("checkpoints", b"x")),
    "a stray step name": lambda fx: write_bytes("checkpoints/step_abc.safetensors", b"x"),
    "a step past the others, empty": lambda fx: write_bytes(f"checkpoints/step_{10**12:07d}.safetensors", b""),
    "a huge step number": lambda fx: lambda run: shutil.copy(
        run / "checkpoints" / latest_weights(run), run / "checkpoints" / f"step_{'9' * 40}.safetensors"),
    "a hidden temporary file": lambda fx: write_bytes("checkpoints/.step_0009999.safetensors.abc.tmp", b"half"),
}
CHECKPOINT_COMMANDS = ["solve", "eval", "summary", "report", "eval --step", "report --step"]


def checkpoint_case(fx: Fixtures, how: str, command: str) -> Case:
    fuzzed: dict[str, str | Place] = {"--step": LATEST_STEP} if command.endswith("--step") else {}
    name = command.split()[0]
    return Case("checkpoints", f"{command}: {how}", command_argv(name, fuzzed=fuzzed),
                damage=CHECKPOINT_DAMAGE[how](fx), check=checks_for(name))


def checkpoints_fixed(fx: Fixtures) -> list[Case]:
    return [checkpoint_case(fx, how, command)
            for how, command in zip(CHECKPOINT_DAMAGE, CHECKPOINT_COMMANDS * 3, strict=True)]


RESUME_DAMAGE: dict[str, Callable[[Path], None]] = {
    "state.json empty": write_bytes("resume/state.json", b""),
    "state.json torn": truncate("resume/state.json", 0.5),
    "state.json a list": write_bytes("resume/state.json", b"[]"),
    "state.json step as text": edit_json("resume/state.json", set_key(("step",), "two")),
    "state.json step past the checkpoints": edit_json("resume/state.json", set_key(("step",), 99)),
    "state.json step negative": edit_json("resume/state.json", set_key(("step",), -1)),
    "state.json without param_groups": edit_json("resume/state.json", set_key(("param_groups",), DELETE)),
    "state.json param_groups wrong": edit_json("resume/state.json", set_key(("param_groups",), [{"lr": "x"}])),
    "state.json scalars a list": edit_json("resume/state.json", set_key(("scalars",), [1])),
    "state.safetensors empty": write_bytes("resume/state.safetensors", b""),
    "state.safetensors truncated": truncate("resume/state.safetensors", 0.5),
    "state.safetensors missing": remove("resume/state.safetensors"),
    "state.safetensors of the weights": lambda run: shutil.copy(run / "checkpoints" / latest_weights(run),
                                                                run / "resume" / "state.safetensors"),
    "resumed checkpoint missing": lambda run: (run / "checkpoints" / latest_weights(run)).unlink(),
    "resumed checkpoint empty": lambda run: (run / "checkpoints" / latest_weights(run)).write_bytes(b""),
    "resume is a file": several(remove("resume"), write_bytes("resume", b"x")),
}


def train_resume_case(how: str, steps: int = 3) -> Case:
    return Case("train-resume", f"train resume: {how}", ["train", "--out", RUN, "--set", f"train.steps={steps}"],
                source="resumable", damage=RESUME_DAMAGE[how], check=train_reached(steps), may_rewrite=trained_files)


def train_resume_fixed(fx: Fixtures) -> list[Case]:
    return [train_resume_case(how) for how in RESUME_DAMAGE]


def train_resume_random(rng: random.Random, fx: Fixtures) -> Case:
    return train_resume_case(rng.choice(list(RESUME_DAMAGE)), rng.choice([2, 3, 4]))


PRESET_NAMES = ["plain-add", "plain-add", "nope", "", "DEMO-ADD", "plain-add ", "🙂", "demo_add", "small-add\x85"]
SET_KEYS = ["train.lr", "train.steps", "train.batch_size", "train.seed", "train.betas", "train.mix_depths",
            "train.readout", "train.schedule", "train.grad_clip", "train.device", "train.bf16", "train.eval_every",
            "model.d_model", "model.n_heads", "model.n_loops", "model.max_loops", "model.activation", "model.vocab",
            "model.halt_tol", "model.max_seq_len", "model.d_head", "model.abacus_window", "model.family",
            "task.max_digits", "task.name", "task.answer_format", "task.min_digits", "task.bogus", "lr", "steps",
            "nope.lr", "train.", ".lr", "", "model.d_model.x", "train.lrate", "🙂"]


def train_args_random(rng: random.Random, fx: Fixtures) -> Case:
    sets = []
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        key = rng.choice(SET_KEYS)
        value = odd_value(rng) if rng.random() < 0.8 else rng.choice(["1", "2", "0.001", "64", "true", "[1, 2]"])
        sets += ["--set", f"{key}={value}" if rng.random() < 0.95 else key]
    out: str | Place = OUT
    if rng.random() < 0.2:
        out = rng.choice([Place("run", "config.json"), Place("run", "config.json/below"), RUN, Place("out", "🙂 ü"),
                          "", Place("out", "a" * 300)])
    preset = rng.choice(PRESET_NAMES)
    argv = ["train", *(["--preset", preset] if rng.random() < 0.9 else []), "--out", out, *sets, *TINY_TRAIN]
    return Case("train-args", f"train --preset {preset!r} " + " ".join(s for s in sets if s != "--set"), argv,
                source="run" if out != OUT else None, check=train_reached(2))


def train_args_fixed(fx: Fixtures) -> list[Case]:
    def case(name: str, *extra: str, out: str | Place = OUT, preset: str | None = "plain-add") -> Case:
        argv = ["train", *(["--preset", preset] if preset is not None else []), "--out", out, *extra, *TINY_TRAIN]
        return Case("train-args", name, argv, source=None if out == OUT else "run", check=train_reached(2))

    return [case("a tiny valid run"), case("unknown preset", preset="nope"), case("no preset, no run", preset=None),
            case("lr as text", "--set", "train.lr=fast"), case("steps huge then capped", "--set", f"train.steps={10**30}"),
            case("d_model a list", "--set", "model.d_model=[1, 2]"), case("no '='", "--set", "train.lr"),
            case("unicode key", "--set", "🙂=1"), case("seed huge", "--set", f"train.seed={2**64}"),
            case("seed negative", "--set", "train.seed=-1"), case("max_digits zero", "--set", "task.max_digits=0"),
            case("max_digits huge", "--set", f"task.max_digits={10**30}"),
            case("out is a file", out=Place("run", "config.json")),
            case("out under a file", out=Place("run", "config.json/below")),
            case("out is a run without resume state", out=RUN)]


def read_only_fixed(fx: Fixtures) -> list[Case]:
    cases = [Case("read-only", f"{command} on a read-only run", command_argv(command), during=read_only,
                  check=checks_for(command)) for command in ("solve", "eval", "summary", "report")]
    cases += [
        Case("read-only", "report --out inside a read-only run", command_argv("report", fuzzed={"--out": Place("run", "r")}),
             during=read_only),
        Case("read-only", "eval --json inside a read-only run", command_argv("eval", fuzzed={"--json": Place("run", "e.json")}),
             during=read_only),
        Case("read-only", "train resume in a read-only run", ["train", "--out", RUN, "--set", "train.steps=3"],
             source="resumable", during=read_only),
        Case("read-only", "train resume, nothing to train, read-only", ["train", "--out", RUN], source="resumable",
             during=read_only),
        Case("read-only", "train a new run under a read-only folder",
             ["train", "--preset", "plain-add", "--out", Place("run", "new"), *TINY_TRAIN], during=read_only),
    ]
    return cases


def read_only_random(rng: random.Random, fx: Fixtures) -> Case:
    return rng.choice(read_only_fixed(fx))


def disk_full_case(from_write: int, command: str, steps: int = 4) -> Case:
    disk = DiskFull(from_write)
    if command == "train":
        argv = ["train", "--out", RUN, "--set", f"train.steps={steps}", "--set", "train.log_every=1"]
        return Case("disk-full", f"train resume, disk full from write {from_write}", argv, source="resumable",
                    during=disk, check=resumes_afterwards(steps), may_rewrite=trained_files, keeps_progress=True)
    if command == "train new":
        argv = ["train", "--preset", "plain-add", "--out", OUT, *TINY_TRAIN]
        return Case("disk-full", f"train a new run, disk full from write {from_write}", argv, source=None,
                    during=disk, check=train_reached(2))
    if command == "eval --json":
        return Case("disk-full", f"eval --json, disk full from write {from_write}",
                    command_argv("eval", fuzzed={"--json": Place("out", "e.json")}), during=disk)
    return Case("disk-full", f"report, disk full from write {from_write}", command_argv("report"), during=disk,
                check=report_sections_fine)


def disk_full_fixed(fx: Fixtures) -> list[Case]:
    return ([disk_full_case(k, "train") for k in (1, 2, 3, 4, 5, 7, 9)] + [disk_full_case(k, "train new") for k in (1, 3)]
            + [disk_full_case(1, "eval --json"), disk_full_case(1, "report"), disk_full_case(2, "report")])


def disk_full_random(rng: random.Random, fx: Fixtures) -> Case:
    command = rng.choice(["train", "train", "train", "train new", "eval --json", "report"])
    return disk_full_case(rng.randint(1, 14), command, steps=rng.choice([3, 4, 6]))


def real_disk_random(rng: random.Random, fx: Fixtures) -> Case:
    """Resume the plain-add run on a tmpfs with room for part of the next checkpoints."""
    used_kib = sum(p.stat().st_size for p in fx.resumable.rglob("*") if p.is_file()) // 1024
    spare = rng.randint(0, 1500)
    argv = ["train", "--out", RUN, "--set", "train.steps=6", "--set", "train.log_every=1"]
    return Case("disk-full-real", f"train resume on a tmpfs with {spare} KiB spare", argv, source="resumable",
                disk_kib=used_kib + 64 + spare, check=resumes_afterwards_elsewhere(6), may_rewrite=trained_files,
                keeps_progress=True)


def resumes_afterwards_elsewhere(steps: int) -> Callable[[Call], str | None]:
    """The tmpfs case: the run is copied off the full disk, then must resume to `steps`."""

    def check(call: Call) -> str | None:
        if call.rc == 0:
            return train_reached(steps)(call)
        moved = call.run.parent / "moved"
        shutil.copytree(call.run, moved, ignore=shutil.ignore_patterns(".*.tmp"))
        argv = [str(moved) if a == str(call.run) else a for a in call.argv]
        return resumes_afterwards(steps)(dataclasses.replace(call, run=moved, argv=argv))

    return check


@dataclass(frozen=True)
class Category:
    key: str
    what: str
    weight: float  # share of the random inputs
    fixed: Callable[[Fixtures], list[Case]]
    random: Callable[[random.Random, Fixtures], Case]
    needs_mount: bool = False


CATEGORIES = [
    Category("solve-text", "solve: random and unicode text", 0.14, solve_text_fixed, solve_text_random),
    Category("solve-numbers", "solve: numbers, short to huge", 0.09, solve_numbers_fixed, solve_numbers_random),
    Category("options", "eval/solve/summary/report: option values", 0.17, options_fixed, options_random),
    Category("config-types", "config.json: wrong types", 0.14, config_types_fixed, config_types_random),
    Category("config-file", "config.json: broken file", 0.06, config_file_fixed, config_file_random),
    Category("metrics", "metrics.jsonl: torn or garbage line", 0.08, metrics_fixed, metrics_random),
    Category("checkpoints", "checkpoints: missing/empty/foreign", 0.1,
             checkpoints_fixed, lambda rng, fx: checkpoint_case(fx, rng.choice(list(CHECKPOINT_DAMAGE)),
                                                                rng.choice(CHECKPOINT_COMMANDS))),
    Category("train-args", "train: presets, --set, --out", 0.09, train_args_fixed, train_args_random),
    Category("train-resume", "train: damaged resume state", 0.05, train_resume_fixed, train_resume_random),
    Category("read-only", "read-only run directory", 0.02, read_only_fixed, read_only_random),
    Category("disk-full", "disk full while writing (simulated)", 0.06, disk_full_fixed, disk_full_random),
    Category("disk-full-real", "disk full: training on a small tmpfs", 0.0, lambda fx: [], real_disk_random,
             needs_mount=True),
]


def fixed_cases(fx: Fixtures, keys: list[str] | None = None) -> list[Case]:
    return [case for cat in CATEGORIES if keys is None or cat.key in keys for case in cat.fixed(fx)]


def generate(fx: Fixtures, n_inputs: int, seed: int, keys: list[str] | None = None, real_disk: int = 0) -> list[Case]:
    """The fixed cases of the chosen categories, then random ones (by weight) up to n_inputs,
    plus `real_disk` tmpfs cases."""
    chosen = [c for c in CATEGORIES if keys is None or c.key in keys]
    cases = fixed_cases(fx, [c.key for c in chosen])
    rng = random.Random(seed)
    weighted = [c for c in chosen if c.weight > 0]
    while weighted and len(cases) < n_inputs:
        category = rng.choices(weighted, weights=[c.weight for c in weighted])[0]
        cases.append(category.random(rng, fx))
    real = next((c for c in chosen if c.needs_mount), None)
    cases += [real.random(rng, fx) for _ in range(real_disk)] if real else []
    return cases


# ---------------------------------------------------------------------------- running


class CaseTimeout(BaseException):
    """Raised by the alarm; a BaseException, so no `except Exception` inside the library
    (the report's per-section guard) takes it for an error of its own."""


@contextlib.contextmanager
def alarm(seconds: float) -> Iterator[None]:
    def ring(signum, frame):
        raise CaseTimeout(f"no answer within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def small_reports() -> Iterator[None]:
    """`report` builds the sections that read the run's files, at test sizes."""
    import analyses.report as report
    from analyses.report.sections import ReportSizes

    real = report.build_report
    report.build_report = functools.partial(real, sections=REPORT_SECTIONS, sizes=ReportSizes.quick(), progress=False)
    try:
        yield
    finally:
        report.build_report = real


def snapshot(folder: Path) -> dict[str, bytes]:
    """The bytes of every file under `folder` (a few MB: copies of small runs), by path
    relative to it."""
    out = {}
    if not folder.exists():
        return out
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[str(path.relative_to(folder))] = path.read_bytes()
    return out


@dataclass
class Verdict:
    case: Case
    outcome: str
    detail: str = ""
    lost: list[str] = field(default_factory=list)
    seconds: float = 0.0


def call_main(argv: list[str], timeout: float) -> tuple[int | None, str, str, BaseException | None]:
    from abacus_lab.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    rc, exception = None, None
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            with alarm(timeout):
                rc = main(argv)
        except SystemExit as e:  # argparse's own errors (and --help, exit 0)
            rc = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
        except BaseException as e:  # a traceback; a CaseTimeout is a hang
            exception = e
    return rc, stdout.getvalue(), stderr.getvalue(), exception


def is_clean_error(stderr: str) -> str | None:
    """What is wrong with the error output of an exit-2 call, or None when it ends in one
    error line (`error: ...`, or argparse's `abacus-interp ...: error: ...`)."""
    if "Traceback" in stderr:
        return "a traceback in the error output"
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "exit 2 without a message"
    last = lines[-1]
    if last.startswith("error: ") or re.match(r"^abacus-interp( \w+)?: error: ", last):
        return None
    return f"the error output does not end in one error line: {stderr.strip()[-300:]!r}"


def run_case(case: Case, fx: Fixtures, workdir: Path, timeout: float) -> Verdict:
    """Copy the case's run into `workdir`, damage it, call main, judge the call."""
    run, out = workdir / "run", workdir / "out"
    mount = tmpfs(run, case.disk_kib) if case.disk_kib else contextlib.nullcontext(True)
    with mount as mounted:
        if not mounted:
            return Verdict(case, "skipped", "mounting a tmpfs is not allowed here")
        if case.source is not None:
            source = fx.run if case.source == "run" else fx.resumable
            shutil.copytree(source, run, dirs_exist_ok=True)
        argv = [a.resolve(run, out) if isinstance(a, Place) else a for a in case.argv]
        if case.damage is not None:
            case.damage(run)
        before = snapshot(workdir)
        during = case.during(run, out) if case.during is not None else contextlib.nullcontext()
        started = time.perf_counter()
        here = os.getcwd()
        os.chdir(workdir)  # a relative or empty path in argv lands in the case's folder
        try:
            with during:
                rc, stdout, stderr, exception = call_main(argv, timeout)
        finally:
            os.chdir(here)
        seconds = time.perf_counter() - started
        call = Call(argv, rc, stdout, stderr, exception, run, out, workdir, seconds)
        verdict = judge(case, call)
        verdict.lost = lost_files(case, before, snapshot(workdir), rc)
        verdict.seconds = seconds
        if verdict.outcome in ("ok", "error") and case.check is not None:
            try:
                problem = case.check(call)
            except SectionBug as e:
                verdict.outcome, verdict.detail = "traceback", str(e)
            except Exception as e:  # the check itself met a bug of the library (a checkpoint that does not load)
                verdict.outcome, verdict.detail = "traceback", f"while checking the result: {type(e).__name__}: {e}"
            else:
                if problem is not None:
                    verdict.outcome, verdict.detail = "wrong", problem
    return verdict


def judge(case: Case, call: Call) -> Verdict:
    if isinstance(call.exception, CaseTimeout):
        return Verdict(case, "hang", str(call.exception))
    if call.exception is not None:
        import traceback

        frames = traceback.extract_tb(call.exception.__traceback__)
        where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames)
                      if "abacus_interp" in f.filename or "analyses" in f.filename), "?")
        return Verdict(case, "traceback", f"{type(call.exception).__name__} at {where}: {str(call.exception)[:300]}")
    if call.rc == 0:
        return Verdict(case, "ok")
    if call.rc == 2:
        problem = is_clean_error(call.stderr)
        if problem is None:
            return Verdict(case, "error", [line for line in call.stderr.splitlines() if line.strip()][-1][:300])
        return Verdict(case, "traceback", problem)
    return Verdict(case, "traceback", f"exit status {call.rc}: {call.stderr.strip()[-300:]!r}")


def lost_files(case: Case, before: dict[str, bytes], after: dict[str, bytes], rc: int | None) -> list[str]:
    """Files gone or changed that the call had no business changing, and temporary files left."""
    lost = []
    for rel, data in before.items():
        now = after.get(rel)
        if now == data:
            continue
        if now is not None and case.may_rewrite(rel):
            if rc == 0:
                continue
            if case.keeps_progress and (not rel.endswith("metrics.jsonl") or now.startswith(data)):
                continue
        lost.append(f"{rel} {'gone' if now is None else 'changed'}")
    leftovers = [rel for rel in after if rel not in before and any(LEFTOVER.match(part) for part in Path(rel).parts)]
    return lost + [f"{rel} left behind" for rel in leftovers]


class _ToCurrentStderr(logging.Handler):
    """Library log lines go to whatever sys.stderr is when they are emitted, so each call's
    warnings land in its own captured output, as they would in a process of its own."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr)


def quiet_logging() -> None:
    root = logging.getLogger()
    if not any(isinstance(h, _ToCurrentStderr) for h in root.handlers):
        handler = _ToCurrentStderr()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)


def run_one(case: Case, fx: Fixtures, workdir: Path, timeout: float) -> Verdict:
    """`run_case` in a new folder `workdir`, logging and reports set up as `run_cases` does."""
    quiet_logging()
    workdir.mkdir(parents=True)
    os.chmod(workdir, 0o777)  # the read-only cases run as `nobody`, who writes OUT here
    with small_reports():
        return run_case(case, fx, workdir, timeout)


def run_cases(cases: list[Case], fx: Fixtures, workroot: Path, timeout: float, keep: bool = False,
              progress: bool = True) -> list[Verdict]:
    verdicts = []
    started = time.perf_counter()
    for i, case in enumerate(cases):
        workdir = workroot / f"case{i:05d}"
        verdict = run_one(case, fx, workdir, timeout)
        verdicts.append(verdict)
        if not (keep and (verdict.outcome in FAILURES or verdict.lost)):
            shutil.rmtree(workdir, ignore_errors=True)
        if progress and (i + 1) % 50 == 0:
            bad = sum(v.outcome in FAILURES or bool(v.lost) for v in verdicts)
            print(f"  {i + 1}/{len(cases)} inputs, {bad} failing, {time.perf_counter() - started:.0f} s",
                  file=sys.stderr, flush=True)
    return verdicts


def summary_table(verdicts: list[Verdict]) -> str:
    rows: dict[str, Counter] = defaultdict(Counter)
    for v in verdicts:
        rows[v.case.category][v.outcome] += 1
        rows[v.case.category]["lost"] += bool(v.lost)
        rows[v.case.category]["inputs"] += 1
    total = sum(rows.values(), Counter())
    columns = ["inputs", "ok", "error", "traceback", "hang", "wrong", "lost"]
    if total["skipped"]:
        columns.append("skipped")
    names = {c.key: c.what for c in CATEGORIES}
    width = max(len(names[k]) for k in rows) + 2
    lines = [f"{'category':<{width}}" + "".join(f"{c:>10}" for c in columns)]
    for key in [c.key for c in CATEGORIES if c.key in rows]:
        lines.append(f"{names[key]:<{width}}" + "".join(f"{rows[key][c]:>10}" for c in columns))
    lines.append(f"{'total':<{width}}" + "".join(f"{total[c]:>10}" for c in columns))
    return "\n".join(lines)


def examples(verdicts: list[Verdict], show: int) -> str:
    out = []
    for kind in [*FAILURES, "lost"]:
        bad = [v for v in verdicts if (v.lost if kind == "lost" else v.outcome == kind)]
        for v in bad[:show]:
            what = "; ".join(v.lost) if kind == "lost" else v.detail
            out.append(f"[{kind}] {v.case.category}: {v.case.name}\n    argv: {v.case.shown_argv()}\n    {what}")
        if len(bad) > show:
            out.append(f"[{kind}] ... and {len(bad) - show} more")
    return "\n".join(out)


def samples(verdicts: list[Verdict], per_category: int) -> str:
    """A few calls of each category and what they printed last: to read the error messages."""
    out = []
    for key in [c.key for c in CATEGORIES]:
        chosen = [v for v in verdicts if v.case.category == key][:per_category]
        for v in chosen:
            out.append(f"[{v.outcome}] {key}: {v.case.name[:70]}\n    {v.detail[:300] or '(exit 0)'}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=1000, help="inputs in all, fixed cases included (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--categories", nargs="+", choices=[c.key for c in CATEGORIES], help="only these")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one call may take (default 120)")
    parser.add_argument("--real-disk", type=int, default=None,
                        help="tmpfs full-disk cases to add (default: 10 where mounting is allowed, else 0)")
    parser.add_argument("--show", type=int, default=3, help="examples shown of each kind of failure")
    parser.add_argument("--keep", action="store_true", help="keep the folders of failing cases (printed)")
    parser.add_argument("--samples", type=int, default=0, help="also show the first N calls of each category "
                        "and their error line")
    parser.add_argument("--list", action="store_true", help="list the categories and exit")
    args = parser.parse_args(argv)
    if args.list:
        for c in CATEGORIES:
            print(f"{c.key:<16} {c.what}")
        return 0
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    real_disk = args.real_disk if args.real_disk is not None else (10 if can_mount() else 0)
    workroot = Path(tempfile.mkdtemp(prefix="fuzz-cli-"))
    os.chmod(workroot, 0o755)  # the read-only cases run as `nobody`, who must reach the runs
    try:
        started = time.perf_counter()
        fx = build_fixtures(workroot / "fixtures")
        cases = generate(fx, args.inputs, args.seed, args.categories, real_disk=real_disk)
        print(f"{len(cases)} inputs (seed {args.seed}, {real_disk} on a real tmpfs), workdir {workroot}", file=sys.stderr)
        verdicts = run_cases(cases, fx, workroot / "cases", args.timeout, keep=args.keep)
        elapsed = time.perf_counter() - started
    finally:
        if not args.keep:
            shutil.rmtree(workroot, ignore_errors=True)
    print(summary_table(verdicts))
    slowest = max(verdicts, key=lambda v: v.seconds)
    print(f"{len(verdicts)} inputs in {elapsed:.0f} s; slowest {slowest.seconds:.1f} s ({slowest.case.category}: "
          f"{slowest.case.name})")
    if args.samples:
        print(samples(verdicts, args.samples))
    failing = [v for v in verdicts if v.outcome in FAILURES or v.lost]
    if failing:
        print(examples(verdicts, args.show))
        if args.keep:
            print(f"failing cases kept under {workroot / 'cases'}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())

"""`abacus-interp eval RUN --lengths/--chains ... --max-loops N`: adaptive loops stop at N at
most, so a user can tell a wrong answer that converged (a wrong fixed point) from one the cap
cut short; every way to ask for it where it means nothing ends in one `error:` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from abacus_lab.cli import main

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_EXTRAP = ROOT / "checkpoints" / "extrap-add"  # adaptive loops (halt_tol 1e-3, at most 128)
SHIPPED_FIXED = ROOT / "checkpoints" / "small-add"  # no halt_tol: a fixed loop count
SHIPPED_SORT = ROOT / "checkpoints" / "extrap-sort"
SHIPPED_SLOTS = ROOT / "checkpoints" / "loop-add"  # answer slots, no halt_tol: a fixed loop count unless told


def shipped(run: Path) -> Path:
    if not (run / "config.json").exists():
        pytest.skip(f"{run} is not in this checkout")
    return run


def chain_row(run: Path, tmp_path: Path, *flags: str) -> dict:
    out = tmp_path / f"eval{len(flags)}.json"
    assert main(["eval", str(run), "--chains", "20", "--n", "4", "--device", "cpu", *flags, "--json", str(out)]) == 0
    (result,) = json.loads(out.read_text())["extrapolation"]
    (row,) = result["rows"]
    return {**row, "cap": result["cap"]}


def test_the_cap_stops_every_problem_that_needs_more_loops(tmp_path, capsys):
    run = shipped(SHIPPED_EXTRAP)
    # a carry through 20 columns needs more than 8 loops: with the model's own cap (128) every
    # problem converges, with a cap of 8 none does and each stops at exactly 8
    free = chain_row(run, tmp_path)
    capped = chain_row(run, tmp_path, "--max-loops", "8")
    assert free["cap"] == 128 and free["converged"] == 1.0 and free["loops_max"] > 8, free
    assert capped["cap"] == 8 and capped["converged"] == 0.0 and capped["loops_max"] == 8, capped
    assert "at most 8" in capsys.readouterr().out


def test_a_cap_past_the_models_hook_sets_loads_more_of_them(tmp_path):
    run = shipped(SHIPPED_EXTRAP)
    row = chain_row(run, tmp_path, "--max-loops", "200", "--halt-tol", "0")  # tol 0: every problem runs to the cap
    assert row["cap"] == 200 and row["loops_max"] == 200 and row["converged"] == 0.0, row


@pytest.mark.parametrize("run, flags, says", [
    (SHIPPED_EXTRAP, ["--chains", "5", "--max-loops", "8", "--loops", "4"], "give one of them"),
    (SHIPPED_EXTRAP, ["--chains", "5", "--halt-tol", "1e-4", "--loops", "4"], "give one of them"),
    (SHIPPED_EXTRAP, ["--max-loops", "8"], "add --lengths"),
    (SHIPPED_EXTRAP, ["--halt-tol", "1e-4"], "add --lengths"),
    # small-add writes its answer token by token: no tolerance makes it loop adaptively, which is
    # said first, whatever else is missing
    (SHIPPED_FIXED, ["--lengths", "5", "--max-loops", "8"], "token by token"),
    (SHIPPED_FIXED, ["--halt-tol", "1e-3"], "token by token"),
    (SHIPPED_FIXED, ["--lengths", "5", "--loops", "4", "--halt-tol", "1e-3"], "token by token"),
    # loop-add has answer slots but no halt_tol of its own: a cap needs a tolerance
    (SHIPPED_SLOTS, ["--lengths", "5", "--max-loops", "8"], "add --halt-tol"),
    # sorting has no adaptive loops, with or without rows of lists asked for
    (SHIPPED_SORT, ["--counts", "6", "--max-loops", "8"], "task is sorting: drop --max-loops"),
    (SHIPPED_SORT, ["--max-loops", "8"], "task is sorting: drop --max-loops"),
    (SHIPPED_SORT, ["--counts", "6", "--max-loops", "8", "--loops", "4"], "task is sorting: drop --max-loops"),
])
def test_a_cap_that_means_nothing_is_refused_in_one_line(run, flags, says, capsys):
    assert main(["eval", str(shipped(run)), "--n", "2", "--device", "cpu", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], err


@pytest.mark.parametrize("flag, value, says", [
    ("--max-loops", "0", "loop count"), ("--max-loops", "-3", "loop count"), ("--max-loops", "eight", "loop count"),
    ("--max-loops", str(10**9), "loop count"), ("--halt-tol", "nan", "tolerance"), ("--halt-tol", "inf", "tolerance"),
    ("--halt-tol", "-1", "tolerance"), ("--halt-tol", "tight", "tolerance"),
])
def test_a_value_that_is_no_loop_count_or_tolerance_is_refused_by_the_parser(flag, value, says, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["eval", str(SHIPPED_EXTRAP), "--chains", "5", flag, value])
    assert stop.value.code == 2 and says in capsys.readouterr().err

"""User errors against bugs: `UserError` is a one-line message with exit status 2, anything
else keeps its traceback. Also solve's problems with a minus sign and report's --step and
all-or-nothing output folder, on a copy of the shipped checkpoints/small-add."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from abacus_interp import checkpoints as ckpt
from abacus_interp.errors import MissingPathError, UserError
from abacus_lab.cli import main

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_ADD = ROOT / "checkpoints" / "small-add"
SHIPPED_EXPR = ROOT / "checkpoints" / "expr-compare" / "cells" / "looped-s"
needs_shipped_add = pytest.mark.skipif(not (SHIPPED_ADD / "config.json").exists(),
                                       reason="checkpoints/small-add is not in this checkout")


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def small_run(tmp_path) -> Path:
    """checkpoints/small-add with three of its checkpoints (steps 0, 10 and the last)."""
    run = tmp_path / "small-add"
    (run / "checkpoints").mkdir(parents=True)
    for name in ("config.json", "metrics.jsonl"):
        shutil.copy(SHIPPED_ADD / name, run / name)
    series = dict(ckpt.list_checkpoints(SHIPPED_ADD))  # step -> path
    for path in (series[0], series[10], series[max(series)]):
        shutil.copy(path, run / "checkpoints" / path.name)
        shutil.copy(path.with_suffix(".json"), run / "checkpoints" / path.with_suffix(".json").name)
    return run


def truncate_latest(run: Path) -> Path:
    latest = ckpt.list_checkpoints(run)[-1][1]
    latest.write_bytes(latest.read_bytes()[:1000])
    return latest


# ------------------------------------------------------------------ user errors against bugs


def test_train_out_an_existing_file_is_a_one_line_error(tmp_path, capsys):
    out = tmp_path / "notes.txt"
    out.write_text("mine")
    assert main(["train", "--preset", "plain-add", "--out", str(out)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line == f"error: --out {out} is an existing file, not a directory; pass a directory path (a new one is created)"
    assert out.read_text() == "mine"
    assert main(["train", "--preset", "plain-add", "--out", str(out / "run")]) == 2
    assert f"{out} is a file" in one_error_line(capsys.readouterr().err)


@needs_shipped_add
def test_a_bug_in_the_library_keeps_its_traceback(monkeypatch):
    def broken(model):
        raise ValueError("a bug, not the user's mistake")

    monkeypatch.setattr("abacus_interp.core.summary.parameter_summary", broken)
    with pytest.raises(ValueError, match="a bug, not the user's mistake") as info:
        main(["summary", str(SHIPPED_ADD)])
    assert not isinstance(info.value, UserError)


@needs_shipped_add
def test_a_truncated_checkpoint_is_a_user_error(small_run, capsys):
    latest = truncate_latest(small_run)
    assert main(["summary", str(small_run)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"cannot read checkpoint {latest}" in line and "truncated or corrupt" in line
    with pytest.raises(ckpt.CheckpointError) as info:
        ckpt.load_model(small_run)
    assert isinstance(info.value, UserError) and isinstance(info.value, RuntimeError)


def _user_input_mistakes():
    from abacus_interp.core.devices import resolve_device
    from abacus_interp.tasks import get_task
    from abacus_interp.training import apply_overrides, get_preset
    from abacus_lab.experiments import ablation, compare
    from analyses.fixed_point.problems import as_examples

    demo = get_preset("plain-add")
    return {
        "unknown preset": lambda: get_preset("nope"),
        "unknown --set field": lambda: apply_overrides(demo, ["train.lrate=1e-3"]),
        "--set value of the wrong type": lambda: apply_overrides(demo, ["train.lr=abc"]),
        "bad --set value": lambda: apply_overrides(demo, ["model.activation=tanh"]),
        "bad task option": lambda: apply_overrides(demo, ["task.max_digits=0"]),
        "unknown ablation": lambda: ablation.get_spec("nope"),
        "unknown comparison": lambda: compare.get_spec("nope"),
        "unknown task": lambda: get_task("nope"),
        "unreadable problem": lambda: get_task("addition", max_digits=3).from_human("12 plus 3"),
        "unknown device": lambda: resolve_device("tpu"),
        "empty problem list": lambda: as_examples(get_task("addition", max_digits=3), []),
        "problem of the wrong type": lambda: as_examples(get_task("addition", max_digits=3), [1.5]),
    }


@pytest.mark.parametrize("mistake", sorted(_user_input_mistakes()))
def test_mistakes_in_user_input_raise_user_errors(mistake):
    with pytest.raises(UserError):
        _user_input_mistakes()[mistake]()


def test_cuda_training_without_a_gpu_is_a_user_error(monkeypatch):
    from abacus_interp.training.distributed import pick_device

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(UserError, match="train.device=cuda but no CUDA device is visible; use train.device=cpu"):
        pick_device("cuda", 0)


def test_a_missing_run_for_the_report_is_a_missing_path(tmp_path):
    from analyses.report import build_report

    with pytest.raises(MissingPathError) as info:
        build_report(tmp_path / "nope", tmp_path / "out")
    assert isinstance(info.value, FileNotFoundError)  # what callers caught before
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ solve: a minus sign


@needs_shipped_add
@pytest.mark.parametrize("argv, problem", [(["-5+3"], "-5+3"), (["--", "-5+3"], "-5+3"),
                                           (["-5+3", "--verbose"], "-5+3"), (["12+-3"], "12+-3")])
def test_solve_says_negative_operands_are_not_part_of_the_task(argv, problem, capsys):
    assert main(["solve", str(SHIPPED_ADD), *argv]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line == (f"error: {problem!r} has a negative operand: negative numbers are not part of the "
                    "addition task, which takes non-negative integers, e.g. '123+45'")


@needs_shipped_add
def test_solve_accepts_double_dash_before_the_problem(capsys):
    assert main(["solve", str(SHIPPED_ADD), "--", "5+3"]) == 0
    assert capsys.readouterr().out.strip() == "8"


@pytest.mark.skipif(not (SHIPPED_EXPR / "config.json").exists(), reason="checkpoints/expr-compare is not here")
def test_solve_passes_a_leading_minus_to_an_expression_task(capsys):
    assert main(["solve", str(SHIPPED_EXPR), "-5+3", "--verbose"]) == 0
    model_order = capsys.readouterr().out.splitlines()[1]
    assert re.fullmatch(r"model order: -5\+3=\S*\s+-> (correct|wrong \(expected -2\)); \d+ loops", model_order)


@needs_shipped_add
def test_zero_loops_is_a_user_error_not_a_type_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["solve", str(SHIPPED_ADD), "1+2", "--loops", "0"])
    assert info.value.code == 2
    assert "argument --loops: a loop count is an integer >= 1; got '0'" in capsys.readouterr().err
    # the cached decoding path used to fail inside with "'NoneType' object is not subscriptable"
    with pytest.raises(UserError, match="n_loops must be >= 1, got 0"):
        ckpt.load_model(SHIPPED_ADD).generate(["1+2="], n_loops=0)


def test_solve_without_a_problem_says_what_to_pass(capsys):
    with pytest.raises(SystemExit) as info:
        main(["solve", "RUN"])
    assert info.value.code == 2
    assert 'solve needs a problem after the run, e.g. abacus-interp solve RUN "123+45"' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["solve", "RUN", "5+3", "-x"])
    assert "unrecognized arguments: -x" in capsys.readouterr().err


# ------------------------------------------------------------------ report: --step, output folder


@needs_shipped_add
def test_report_at_a_step(small_run, tmp_path):
    from analyses.report import build_report, load_report_json

    build_report(small_run, tmp_path / "out", step=10, sections=["model_card"], progress=False)
    report = load_report_json(tmp_path / "out")
    assert report["checkpoint"] == str(ckpt.step_path(small_run, 10))
    assert report["sections"]["model_card"]["data"]["checkpoint"] == str(ckpt.step_path(small_run, 10))


def test_cli_report_passes_step(tmp_path, monkeypatch):
    seen = {}

    def fake(run, out, **kw):
        seen.update(kw)
        raise UserError("stop here")

    monkeypatch.setattr("analyses.report.build_report", fake)
    assert main(["report", "RUN", "--step", "10", "--out", str(tmp_path / "r")]) == 2
    assert seen["step"] == 10


@needs_shipped_add
def test_report_at_a_missing_step_names_the_steps_and_writes_nothing(small_run, tmp_path, capsys):
    out = tmp_path / "new" / "report"
    assert main(["report", str(small_run), "--step", "7", "--out", str(out)]) == 2
    line = one_error_line(capsys.readouterr().err)
    last = ckpt.list_checkpoints(small_run)[-1][0]
    assert line == f"error: {small_run} has no checkpoint at step 7; its steps: 0, 10, {last}"
    assert not (tmp_path / "new").exists()


@needs_shipped_add
def test_a_failed_report_leaves_no_new_folder(small_run, tmp_path, capsys):
    truncate_latest(small_run)
    out = tmp_path / "new" / "deeper" / "report"
    assert main(["report", str(small_run), "--out", str(out)]) == 2
    assert "truncated or corrupt" in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "new").exists()


@needs_shipped_add
def test_a_failure_while_writing_keeps_the_users_folder_and_leaves_nothing_partial(small_run, tmp_path,
                                                                                  monkeypatch):
    from analyses.report import build_report

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("analyses.report.render_html", disk_full)
    new = tmp_path / "fresh" / "report"
    with pytest.raises(OSError):
        build_report(small_run, new, sections=["model_card"], progress=False)
    assert not (tmp_path / "fresh").exists()

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(OSError):
        build_report(small_run, mine, sections=["model_card"], progress=False)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "small-add"]  # no staging folder left

    monkeypatch.undo()
    build_report(small_run, mine, sections=["model_card"], progress=False)
    assert sorted(p.name for p in mine.iterdir()) == ["index.html", "notes.txt", "report.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "small-add"]

"""The `abacus-interp` command line, called in-process through `cli.main([...])`."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from abacus_interp import checkpoints as ckpt
from abacus_lab.cli import main

TINY_SETS = [
    "model.d_model=32",
    "model.d_head=8",
    "model.d_mlp=128",
    "train.steps=8",
    "train.batch_size=8",
    "train.eval_every=4",
    "train.eval_problems=8",
    "train.checkpoint_every=4",
    "train.dense_until=2",
    "train.dense_checkpoints=2",
    "task.max_digits=3",
    "model.max_seq_len=24",
]


def set_args(assignments: list[str]) -> list[str]:
    return [arg for a in assignments for arg in ("--set", a)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, str]:
    """(run dir, what `train` printed) for a tiny plain-add run trained through the CLI."""
    run = tmp_path_factory.mktemp("cli") / "run"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["train", "--preset", "plain-add", *set_args(TINY_SETS), "--out", str(run)])
    assert rc == 0, out.getvalue()
    return run, out.getvalue()


def test_train_writes_a_run_and_reports_it(trained):
    run, printed = trained
    assert f"trained {run} to step 8" in printed
    assert json.loads(printed.split(": ", 1)[1])["step"] == 8
    config = ckpt.read_run_config(run)
    assert config["preset"] == "plain-add" and config["model"]["d_model"] == 32
    assert config["task"] == {"name": "addition", "max_digits": 3}
    assert [s for s, _ in ckpt.list_checkpoints(run)] == [0, 1, 2, 4, 8]


def test_train_resumes_without_preset(trained, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained[0], run)
    # no --preset: the run's own config.json, edited by --set
    assert main(["train", "--set", "train.steps=9", "--out", str(run)]) == 0
    assert f"trained {run} to step 9" in capsys.readouterr().out
    assert ckpt.list_checkpoints(run)[-1][0] == 9


def test_summary_prints_parameters_by_component(trained, capsys):
    run, _ = trained
    assert main(["summary", str(run)]) == 0
    out = capsys.readouterr().out
    assert "preset plain-add" in out
    assert "parameters by component" in out
    for component in (
        "token_embedding",
        "positions",
        "attention",
        "mlp",
        "norms",
        "unembedding",
        "total",
    ):
        assert re.search(rf"^\s+{component}\s+[\d,]+", out, re.M), f"no row for {component}:\n{out}"
    model = ckpt.load_model(run)
    total = sum(p.numel() for p in model.parameters())
    assert f"{total:,}" in out
    assert "checkpoints: 5 (steps 0, 1, 2, 4, 8)" in out
    assert "last evaluation (step 8)" in out and "in_distribution_exact_match" in out


def test_solve_prints_digits_in_human_order(trained, capsys):
    run, _ = trained
    assert main(["solve", str(run), "12+3"]) == 0
    answer = capsys.readouterr().out.strip()
    # A barely trained model answers anything its vocabulary allows: nothing (EOS first), digits,
    # or garbage such as "52418+448" (seen after 8 steps), which to_human shows as it is,
    # reversed. The number case is pinned down in test_solve_converts_between_human_and_model_order.
    assert re.fullmatch(r"[0-9+=]*", answer), f"solve printed {answer!r}"

    assert main(["solve", str(run), "12+3", "--verbose"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].strip() == answer
    # the human problem 12+3 is given to the model least-significant digit first: 21+3=
    m = re.fullmatch(
        r"model order: 21\+3=([0-9+=]*)\s+-> (correct|wrong \(expected 15\)); 2 loops", lines[1]
    )
    assert m, lines[1]
    assert m.group(1)[::-1] == answer
    assert (m.group(2) == "correct") == (m.group(1) == "51")


def test_solve_converts_between_human_and_model_order(trained, capsys, monkeypatch):
    from abacus_interp.core.model import LoopedTransformer

    seen = []

    def fake_generate(self, prompts, n_loops=None, max_new_tokens=None, **kw):
        seen.append((list(prompts), n_loops))
        return ["0021"]  # model order (LSD first) for 1200

    monkeypatch.setattr(LoopedTransformer, "generate", fake_generate)
    assert main(["solve", str(run_dir := trained[0]), "987+213", "--loops", "6", "--verbose"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert seen == [(["789+312="], 6)]
    assert lines[0] == "1200"
    assert lines[1] == "model order: 789+312=0021  -> correct; 6 loops"
    assert run_dir.exists()

    monkeypatch.setattr(
        LoopedTransformer, "generate", lambda self, prompts, n_loops=None, **kw: ["51"]
    )
    assert main(["solve", str(run_dir), "12+3", "--verbose"]) == 0
    assert capsys.readouterr().out.splitlines() == ["15", "model order: 21+3=51  -> correct; 2 loops"]
    monkeypatch.setattr(
        LoopedTransformer, "generate", lambda self, prompts, n_loops=None, **kw: ["61"]
    )
    assert main(["solve", str(run_dir), "12+3", "--verbose"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "16",
        "model order: 21+3=61  -> wrong (expected 15); 2 loops",
    ]


def test_solve_matches_generate(trained, capsys):
    run, _ = trained
    model = ckpt.load_model(run)
    # solve decodes the answer's 2 digits and the EOS, as eval does, not on into garbage
    completion = model.generate(["54+7="], n_loops=4, max_new_tokens=3)[0]
    assert main(["solve", str(run), "45 + 7", "--loops", "4"]) == 0
    assert capsys.readouterr().out.strip() == completion[::-1]


def test_solve_bad_problem_exits_2(trained, capsys):
    run, _ = trained
    assert main(["solve", str(run), "12 plus 3"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "123+45" in err


def test_bad_set_key_exits_2_with_a_helpful_message(tmp_path, capsys):
    rc = main(
        [
            "train",
            "--preset",
            "plain-add",
            "--set",
            "train.lrate=1e-3",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert "lrate" in err and "fields:" in err and "lr" in err
    assert not (tmp_path / "run").exists(), "nothing should be written for a rejected config"

    assert (
        main(
            [
                "train",
                "--preset",
                "plain-add",
                "--set",
                "model.activation=tanh",
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 2
    )
    assert "gelu" in capsys.readouterr().err


def test_set_with_a_wrong_type_exits_2_naming_field_value_and_type(tmp_path, capsys):
    out = tmp_path / "x"
    rc = main(["train", "--preset", "plain-add", "--set", "train.lr=abc", "--out", str(out)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "error: --set train.lr=abc: train.lr must be a number (float), e.g. train.lr=" in err
    assert "TypeError" not in err and "not supported between" not in err
    assert not out.exists()


SHIPPED_ADD = Path(__file__).resolve().parents[1] / "checkpoints" / "small-add"  # up to 8 digits
needs_shipped_add = pytest.mark.skipif(
    not (SHIPPED_ADD / "config.json").exists(), reason="checkpoints/small-add is not in this checkout"
)


@needs_shipped_add
def test_solve_warns_past_the_trained_length_and_still_answers(capsys):
    assert main(["solve", str(SHIPPED_ADD), "123456789012345678901+1"]) == 0
    captured = capsys.readouterr()
    assert re.fullmatch(r"[0-9]+", captured.out.strip()), captured.out  # the answer, on stdout
    warning = captured.err.strip()
    assert warning.startswith("warning: an operand has 21 digits")
    assert "trained on operands of 1..8 digits" in warning
    assert f"abacus-interp eval {SHIPPED_ADD} --lengths 21` measures" in warning
    assert "warning" not in captured.out


@needs_shipped_add
def test_solve_within_the_trained_length_does_not_warn(capsys):
    assert main(["solve", str(SHIPPED_ADD), "12345678+87654321"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "99999999" and captured.err == ""


SHIPPED_GROK = SHIPPED_ADD.parent / "grok-mod113"  # trained on the answer token only, no EOS


@pytest.mark.skipif(not (SHIPPED_GROK / "config.json").exists(), reason="checkpoints/grok-mod113 is not here")
def test_solve_stops_after_the_one_token_answer_of_a_run_trained_without_eos(capsys):
    # it never learned to write the EOS, so decoding on past its residue wrote "12 68"
    assert main(["solve", str(SHIPPED_GROK), "5+7", "--verbose"]) == 0
    assert capsys.readouterr().out.splitlines() == ["12", "model order: 5 7 =12  -> correct; 1 loops"]


@needs_shipped_add
def test_solve_refuses_a_number_longer_than_the_abacus_position_table(capsys):
    # small-add's Abacus table indexes digits 1..116 (max_seq_len 96 + offsets to 20) inside
    # each number, whatever the sequence's length: 125 tokens of 60-digit numbers fit it, as
    # `eval --lengths 60` scores them
    assert main(["solve", str(SHIPPED_ADD), "9" * 60 + "+1"]) == 0
    assert capsys.readouterr().out.strip().isdigit()
    # a 131-digit answer does not: refused up front, not by the embedding mid-run
    assert main(["solve", str(SHIPPED_ADD), "9" * 130 + "+1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no truncated answer
    assert captured.err.startswith("error: this problem (prompt 133 tokens + answer 131 + EOS) has a 131-digit number")
    assert "digits 1..116: max_seq_len=96 + abacus_max_offset=20" in captured.err
    assert "larger model.max_seq_len" in captured.err and captured.err.count("\n") == 1


def test_unknown_preset_exits_2(tmp_path, capsys):
    assert main(["train", "--preset", "nope", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "plain-add" in err and "small-add" in err


def test_train_without_preset_on_a_new_dir_exits_2(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "new")]) == 2
    err = capsys.readouterr().err
    assert "--preset" in err
    assert not (tmp_path / "new").exists()


def test_missing_run_exits_2(tmp_path, capsys):
    assert main(["summary", str(tmp_path / "nowhere")]) == 2
    assert "nowhere" in capsys.readouterr().err


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["eval", "RUN", "--grid", "5..1"])
    assert info.value.code == 2
    assert "1 <= A <= B" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "RUN", "--loops", "1,x"])


def _stub_suite(calls: list):
    """Stand-in for abacus_interp.evaluation.suite, to test the CLI's own wiring."""

    class Report:
        def to_dict(self):
            return {"stub": True}

    def evaluate(model, task, grid, loops, n_per_cell, seed, allowed=None, eos=True):
        calls.append(dict(model=model, task=task, grid=grid, loops=loops, n=n_per_cell, seed=seed, eos=eos))
        return Report()

    return types.SimpleNamespace(evaluate=evaluate, format_report=lambda report: "stub report")


def test_eval_wiring_with_loops_below_trained_depth(trained, tmp_path, monkeypatch, capsys):
    run, _ = trained
    calls: list = []
    monkeypatch.setitem(sys.modules, "abacus_interp.evaluation.suite", _stub_suite(calls))
    out = tmp_path / "eval.json"
    rc = main(
        [
            "eval",
            str(run),
            "--step",
            "4",
            "--grid",
            "1..2",
            "--n",
            "4",
            "--loops",
            "1,2",
            "--json",
            str(out),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert calls[0]["grid"] == (1, 2) and calls[0]["loops"] == [1, 2] and calls[0]["n"] == 4
    assert calls[0]["model"].checkpoint_path == str(ckpt.step_path(run, 4))
    assert json.loads(out.read_text()) == {"stub": True}


def test_eval_wiring_with_deeper_loops(trained, tmp_path, monkeypatch, capsys):
    run, _ = trained
    calls: list = []
    monkeypatch.setitem(sys.modules, "abacus_interp.evaluation.suite", _stub_suite(calls))
    out = tmp_path / "sub" / "eval.json"
    rc = main(
        ["eval", str(run), "--grid", "1..2", "--n", "4", "--loops", "1,4,32", "--json", str(out)]
    )
    assert rc == 0, capsys.readouterr().err
    assert "stub report" in capsys.readouterr().out
    model = calls[0]["model"]
    assert model.cfg.max_loops == 32 and model.checkpoint_path == str(ckpt.step_path(run, 8))
    assert calls[0]["task"].max_digits == 3 and calls[0]["loops"] == [1, 4, 32]
    assert json.loads(out.read_text()) == {"stub": True}


def test_eval_writes_json(trained, tmp_path, capsys):
    pytest.importorskip(
        "abacus_interp.evaluation.suite",
        reason="abacus_interp/evaluation/suite.py is not written yet (eval command)",
    )
    run, _ = trained
    out = tmp_path / "eval.json"
    rc = main(
        ["eval", str(run), "--grid", "1..2", "--n", "4", "--loops", "1,2", "--json", str(out)]
    )
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    assert printed.out.strip() and f"wrote {out}" in printed.out
    report = json.loads(out.read_text())
    assert isinstance(report, dict) and report


def test_train_help_lists_every_preset():
    from abacus_interp.training.presets import PRESETS

    help_text = subprocess.run([sys.executable, "-m", "abacus_lab.cli", "train", "--help"], capture_output=True,
                               text=True, cwd=Path(__file__).resolve().parents[1]).stdout
    assert not [name for name in PRESETS if name not in help_text]


def test_report_skip_leaves_sections_out_by_name_and_refuses_unknown_ones():
    from abacus_interp.errors import UserError
    from abacus_lab.cli.report import _sections
    from analyses.report.sections import SECTIONS

    assert _sections(None) is None
    kept = _sections("circuit, fourier")
    assert "circuit" not in kept and "fourier" not in kept and len(kept) == len(SECTIONS) - 2
    with pytest.raises(UserError, match="unknown sections"):
        _sections("circuits")


def test_fast_report_sizes_shrink_only_the_two_slowest_analyses():
    from analyses.report.sections import ReportSizes

    fast, full = ReportSizes.fast(), ReportSizes()
    changed = {k for k in full.analyses if fast.analyses[k] != full.analyses[k]}
    assert changed == {"circuit", "carry_wave"} and fast.evaluation == full.evaluation
    assert fast.analyses["carry_wave"].n_problems < full.analyses["carry_wave"].n_problems


def test_the_help_names_every_command():
    from abacus_lab.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(commands) >= {"train", "eval", "solve", "summary", "report", "ablate", "compare"}
    for command in commands:
        assert command in parser.description, f"--help's first line omits {command}"

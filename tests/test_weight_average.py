"""train.average_from: checkpoints hold the mean of the weights since that step, training
itself is untouched, and a run stopped while averaging resumes bit for bit."""

from __future__ import annotations

import signal

import pytest
import torch
from test_training import assert_same_weights, interrupt_at, metric_rows, tiny_cfg, weights

from abacus_interp import checkpoints as ckpt
from abacus_interp.errors import UserError
from abacus_interp.training import TrainConfig, TrainingInterrupted, train

EVERY_STEP = ("train.checkpoint_every=1",)  # 12 steps: a checkpoint of each


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("plain") / "run"
    train(tiny_cfg(*EVERY_STEP), run_dir, progress=False)
    return run_dir


@pytest.fixture(scope="module")
def averaged_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("averaged") / "run"
    train(tiny_cfg(*EVERY_STEP, "train.average_from=7"), run_dir, progress=False)
    return run_dir


def test_the_checkpoints_hold_the_mean_of_the_live_weights_since_average_from(plain_run, averaged_run):
    # before averaging begins, the two runs write the same weights
    for step in (1, 6):
        assert_same_weights(weights(ckpt.step_path(averaged_run, step)), weights(ckpt.step_path(plain_run, step)))
    for last in (7, 9, 12):
        live = [weights(ckpt.step_path(plain_run, s)) for s in range(7, last + 1)]
        averaged = weights(ckpt.step_path(averaged_run, last))
        moved = 0
        for name, tensor in averaged.items():
            mean = torch.stack([w[name] for w in live]).mean(0)
            torch.testing.assert_close(tensor, mean, rtol=1e-5, atol=1e-7)
            moved += int(not torch.equal(tensor, live[-1][name]))
        # the mean is not the last step's weights (but at step 7, a mean of one)
        assert (moved > 0) == (last > 7)


def test_averaging_leaves_the_training_itself_unchanged(plain_run, averaged_run):
    plain, averaged = metric_rows(plain_run), metric_rows(averaged_run)
    assert [r["loss"] for r in averaged] == [r["loss"] for r in plain]
    assert [r["grad_norm"] for r in averaged] == [r["grad_norm"] for r in plain]
    assert [r.get("averaged_steps") for r in averaged] == [None] * 6 + [1, 2, 3, 4, 5, 6]
    assert "averaged_steps" not in plain[-1]
    # the held-out figures of step 12 read the averaged weights, so they differ from the plain run's
    assert averaged[-1]["in_distribution_loss"] != plain[-1]["in_distribution_loss"]


def test_a_run_stopped_while_averaging_resumes_bit_for_bit(averaged_run, tmp_path, monkeypatch):
    cfg = tiny_cfg(*EVERY_STEP, "train.average_from=7")
    run_dir = tmp_path / "run"
    with monkeypatch.context() as m:
        interrupt_at(m, 9, signal.SIGINT)
        with pytest.raises(TrainingInterrupted):
            train(cfg, run_dir, progress=False)
    assert ckpt.read_json(run_dir / "resume" / "state.json")["averaged_steps"] == 3
    assert ckpt.live_weights_path(run_dir).exists()
    train(cfg, run_dir, progress=False)
    assert metric_rows(run_dir) == metric_rows(averaged_run)
    assert_same_weights(weights(ckpt.step_path(run_dir, 12)), weights(ckpt.step_path(averaged_run, 12)))
    assert_same_weights(weights(ckpt.live_weights_path(run_dir)), weights(ckpt.live_weights_path(averaged_run)))


def test_a_resume_must_keep_the_step_averaging_began(averaged_run, tmp_path):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(averaged_run, run_dir)
    with pytest.raises(UserError, match="average_from=7"):
        train(tiny_cfg(*EVERY_STEP, "train.average_from=8", "train.steps=14"), run_dir, progress=False)


@pytest.mark.parametrize("value", [0, 13, 2.5, True, "7"])
def test_an_average_from_outside_the_run_is_refused(value):
    with pytest.raises(UserError, match="average_from"):
        TrainConfig(steps=12, average_from=value)


def test_the_config_leaves_average_from_out_while_off():
    assert "average_from" not in tiny_cfg().to_dict()["train"]
    cfg = tiny_cfg("train.average_from=7")
    assert cfg.to_dict()["train"]["average_from"] == 7
    assert type(cfg).from_dict(cfg.to_dict()) == cfg


def test_the_model_card_says_the_checkpoints_hold_an_average(plain_run, averaged_run, tmp_path):
    from analyses.report import build_report, load_report_json

    for run, expected in [(averaged_run, 7), (plain_run, None)]:
        out = tmp_path / f"report-{run.parent.name}"
        build_report(run, out, sections=["model_card"], progress=False)
        card = load_report_json(out)["sections"]["model_card"]
        assert card["data"]["averaged_from"] == expected
        said = [f for f in card["findings"] if "train.average_from" in f]
        assert len(said) == (1 if expected else 0)
        assert all(f.startswith("From step 7 on, the checkpoints hold the mean") for f in said)


def test_summary_says_the_figures_are_of_the_mean(plain_run, averaged_run, capsys):
    from abacus_lab.cli import main

    said = "the held-out figures and the checkpoint are of the mean of the weights over the last 6 steps"
    assert main(["summary", str(averaged_run)]) == 0
    assert said in capsys.readouterr().out
    assert main(["summary", str(plain_run)]) == 0
    assert "mean of the weights" not in capsys.readouterr().out

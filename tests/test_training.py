"""Training loop: exact resume, signals, divergence, checkpoint schedule, loss modes,
full-batch training, config overrides and multi-process training (gloo on CPU).

Every run here is tiny (d_model 32, <= 3-digit addition, a dozen steps) so the whole file
stays within a few tens of seconds on two shared CPU cores.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import poison_loss_from

from abacus_interp import checkpoints as ckpt
from abacus_interp.training import (
    RunConfig,
    TrainConfig,
    TrainingDiverged,
    TrainingInterrupted,
    apply_overrides,
    get_preset,
    train,
)
from abacus_interp.training import loop as loop_module
from abacus_interp.training.data import BatchSource, ShardWeights, shard_rows
from abacus_interp.training.schedule import checkpoint_steps, lr_multiplier

REPO = Path(__file__).resolve().parents[1]

TINY = [
    "model.d_model=32",
    "model.d_head=8",
    "model.d_mlp=128",
    "train.steps=12",
    "train.batch_size=8",
    "train.eval_every=6",
    "train.eval_problems=16",
    "train.checkpoint_every=6",
    "train.dense_until=4",
    "train.dense_checkpoints=3",
    "task.max_digits=3",
    "model.max_seq_len=24",
    "train.log_every=1",
    "train.warmup_steps=3",
]
# checkpoint_steps of TINY: step 0, geomspace(1, 4, 3) = 1, 2, 4, then every 6, and the last
TINY_CHECKPOINTS = [0, 1, 2, 4, 6, 12]


def tiny_cfg(*extra: str, preset: str = "plain-add") -> RunConfig:
    return apply_overrides(get_preset(preset), [*TINY, *extra])


def metric_rows(run_dir: Path) -> list[dict]:
    """metrics.jsonl without wall-clock fields, which legitimately differ between runs."""
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in ckpt.read_metrics(run_dir)]


def weights(path: Path) -> dict[str, torch.Tensor]:
    return ckpt.load_tensors(path)


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), f"{name} differs"


def interrupt_at(monkeypatch, step: int, signum: int) -> None:
    """Deliver `signum` to this process while the loop fetches the batch of `step`: the loop
    must finish that step, checkpoint it and raise TrainingInterrupted."""
    original = BatchSource.batch

    def batch(self, s):
        if s == step:
            signal.raise_signal(signum)
        return original(self, s)

    monkeypatch.setattr(BatchSource, "batch", batch)


@pytest.fixture(scope="module")
def baseline_run(tmp_path_factory) -> Path:
    """The tiny config trained to the end without interruption."""
    run_dir = tmp_path_factory.mktemp("baseline") / "run"
    result = train(tiny_cfg(), run_dir, progress=False)
    assert result.final_step == 12
    return run_dir


# ----------------------------------------------------------------------------- resume
def test_resume_after_sigint_reproduces_the_run_bit_for_bit(baseline_run, tmp_path, monkeypatch):
    cfg = tiny_cfg()
    run_dir = tmp_path / "run"
    previous = signal.getsignal(signal.SIGINT)
    with monkeypatch.context() as m:
        interrupt_at(m, 5, signal.SIGINT)
        with pytest.raises(TrainingInterrupted, match="SIGINT") as info:
            train(cfg, run_dir, progress=False)
    assert "step 5" in str(info.value)
    assert signal.getsignal(signal.SIGINT) is previous, "the loop must restore the SIGINT handler"
    # the stopped step was checkpointed (5 is not on the schedule) with its resume state
    assert [s for s, _ in ckpt.list_checkpoints(run_dir)] == [0, 1, 2, 4, 5]
    assert ckpt.read_json(run_dir / "resume" / "state.json")["step"] == 5
    assert [r["step"] for r in ckpt.read_metrics(run_dir)] == [1, 2, 3, 4, 5]

    result = train(cfg, run_dir, progress=False)
    assert result.final_step == 12

    resumed, uninterrupted = metric_rows(run_dir), metric_rows(baseline_run)
    steps = [r["step"] for r in resumed]
    assert steps == sorted(set(steps)), f"duplicated or unordered steps after resume: {steps}"
    assert steps == list(range(1, 13))
    # exactly equal, not allclose: the same batches, offsets, depths, optimizer state
    assert [r["loss"] for r in resumed] == [r["loss"] for r in uninterrupted]
    assert resumed == uninterrupted
    assert_same_weights(
        weights(ckpt.step_path(run_dir, 12)), weights(ckpt.step_path(baseline_run, 12))
    )
    # the scheduled checkpoints both runs share are identical too
    assert_same_weights(
        weights(ckpt.step_path(run_dir, 6)), weights(ckpt.step_path(baseline_run, 6))
    )


def test_sigterm_checkpoints_the_stopped_step(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    previous = signal.getsignal(signal.SIGTERM)
    interrupt_at(monkeypatch, 3, signal.SIGTERM)
    with pytest.raises(TrainingInterrupted, match="SIGTERM"):
        train(tiny_cfg(), run_dir, progress=False)
    assert signal.getsignal(signal.SIGTERM) is previous, "the loop must restore the SIGTERM handler"
    assert [s for s, _ in ckpt.list_checkpoints(run_dir)] == [0, 1, 2, 3]
    state = ckpt.read_json(run_dir / "resume" / "state.json")
    assert state["step"] == 3 and state["tokens"] > 0
    assert (run_dir / "resume" / "state.safetensors").exists()
    sidecar = ckpt.read_json(ckpt.step_path(run_dir, 3).with_suffix(".json"))
    assert sidecar["step"] == 3 and sidecar["tokens"] == state["tokens"]
    assert ckpt.read_metrics(run_dir)[-1]["step"] == 3


def test_resume_refuses_a_different_model(baseline_run, tmp_path):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(baseline_run, run_dir)
    with pytest.raises(ValueError, match="different model or task"):
        train(tiny_cfg("model.d_model=16"), run_dir, progress=False)


def test_extending_a_finished_run_continues_its_curve_and_records_the_new_target(baseline_run, tmp_path):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(baseline_run, run_dir)
    result = train(tiny_cfg("train.steps=18"), run_dir, progress=False)
    assert result.final_step == 18
    # config.json says what the run is trained to now, the model and task as they were
    saved = ckpt.read_run_config(run_dir)
    assert saved["train"]["steps"] == 18
    assert saved["model"] == ckpt.read_run_config(baseline_run)["model"]
    # the first 12 steps are the baseline's, untouched; the extension logs past them
    rows = metric_rows(run_dir)
    assert [r for r in rows if r["step"] <= 12] == metric_rows(baseline_run)
    assert rows[-1]["step"] == 18
    assert_same_weights(weights(ckpt.step_path(run_dir, 12)), weights(ckpt.step_path(baseline_run, 12)))


# ------------------------------------------------------------------------- divergence
def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    poison_loss_from(monkeypatch, 5)
    with pytest.raises(TrainingDiverged) as info:
        train(tiny_cfg(), run_dir, progress=False)
    message = str(info.value)
    assert "step 5" in message and "last good checkpoint is step 4" in message
    assert str(run_dir / "checkpoints") in message

    found = ckpt.list_checkpoints(run_dir)
    assert [s for s, _ in found] == [0, 1, 2, 4], "nothing may be saved at or after the divergence"
    for _, path in found:
        for name, tensor in ckpt.load_tensors(path).items():
            assert torch.isfinite(tensor).all(), f"{path.name}:{name} is not finite"
    assert ckpt.read_json(run_dir / "resume" / "state.json")["step"] == 4
    assert max(r["step"] for r in ckpt.read_metrics(run_dir)) == 4


def test_non_finite_gradients_are_never_checkpointed(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    current = {"step": 0}
    original_batch, original_clip = BatchSource.batch, torch.nn.utils.clip_grad_norm_

    def batch(self, s):
        current["step"] = s
        return original_batch(self, s)

    def clip(params, max_norm, *args, **kw):
        norm = original_clip(params, max_norm, *args, **kw)
        if current["step"] == 4:  # a checkpoint step
            for p in params:
                p.grad.fill_(float("nan"))
            return torch.tensor(float("nan"))
        return norm

    monkeypatch.setattr(BatchSource, "batch", batch)
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip)
    with pytest.raises(TrainingDiverged):
        train(tiny_cfg(), run_dir, progress=False)
    for step, path in ckpt.list_checkpoints(run_dir):
        for name, tensor in ckpt.load_tensors(path).items():
            assert torch.isfinite(tensor).all(), f"checkpoint of step {step} has non-finite {name}"


# ------------------------------------------------------------------ checkpoint schedule
def test_checkpoint_schedule_is_log_spaced_then_regular():
    cfg = TrainConfig(steps=1000, dense_until=100, dense_checkpoints=8, checkpoint_every=250)
    steps = checkpoint_steps(cfg)
    assert steps == sorted(set(steps))
    assert steps[0] == 0 and steps[-1] == 1000
    early = [s for s in steps if 0 < s <= 100]
    assert early[0] == 1 and early[-1] == 100 and len(early) == 8
    gaps = [b - a for a, b in zip(early, early[1:], strict=False)]
    assert gaps == sorted(gaps), f"early checkpoints should spread out geometrically: {early}"
    assert gaps[-1] > 10 * gaps[0]
    assert [s for s in steps if s > 100] == [250, 500, 750, 1000]


def test_checkpoint_schedule_includes_an_off_grid_last_step():
    cfg = TrainConfig(steps=1010, dense_until=100, dense_checkpoints=5, checkpoint_every=250)
    steps = checkpoint_steps(cfg)
    assert steps[0] == 0 and steps[-1] == 1010 and 1000 in steps
    # dense_until defaults to checkpoint_every; never beyond the run
    assert max(checkpoint_steps(TrainConfig(steps=3, dense_checkpoints=10))) == 3
    assert checkpoint_steps(TrainConfig(steps=3, dense_checkpoints=10))[0] == 0


def test_run_saves_exactly_the_scheduled_checkpoints(baseline_run):
    cfg = tiny_cfg()
    found = ckpt.list_checkpoints(baseline_run)
    assert [s for s, _ in found] == checkpoint_steps(cfg.train) == TINY_CHECKPOINTS
    assert all(path == ckpt.step_path(baseline_run, s) for s, path in found)
    # every checkpoint step past 0 was logged (and evaluated), with held-out metrics
    rows = {r["step"]: r for r in ckpt.read_metrics(baseline_run)}
    for s in TINY_CHECKPOINTS[1:]:
        assert "in_distribution_exact_match" in rows[s]
        assert (
            ckpt.read_json(ckpt.step_path(baseline_run, s).with_suffix(".json"))["metrics"]
            == rows[s]
        )


def test_list_checkpoints_sorts_by_step_number(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    # an 8-digit step sorts before a 7-digit one as text; it must come last here
    for name in [
        "step_10000000.safetensors",
        "step_0000100.safetensors",
        "step_0000002.safetensors",
        "step_0000100.json",
        "notes.txt",
    ]:
        (folder / name).write_bytes(b"")
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path)] == [2, 100, 10_000_000]


def test_lr_schedule_warmup_then_cosine_to_floor():
    cfg = TrainConfig(steps=100, warmup_steps=10, min_lr_ratio=0.1)
    assert lr_multiplier(1, cfg) == pytest.approx(0.1)
    assert lr_multiplier(10, cfg) == pytest.approx(1.0)
    assert lr_multiplier(100, cfg) == pytest.approx(0.1)
    values = [lr_multiplier(s, cfg) for s in range(10, 101)]
    assert values == sorted(values, reverse=True)
    assert lr_multiplier(50, TrainConfig(steps=100, warmup_steps=10, schedule="constant")) == 1.0


# ------------------------------------------------------------------------- loss modes
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["none", "mcleish", "mix"])
def test_progressive_loss_modes_train(mode, tmp_path):
    cfg = tiny_cfg(
        f"train.progressive={mode}",
        "train.steps=30",
        "train.lr=3e-3",
        "train.warmup_steps=0",
        "train.eval_every=1000",
        "train.checkpoint_every=1000",
        "train.dense_checkpoints=1",
        "train.dense_until=1",
    )
    train(cfg, tmp_path / "run", progress=False)
    rows = ckpt.read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == list(range(1, 31))
    assert all(math.isfinite(r["loss"]) and math.isfinite(r["full_depth_loss"]) for r in rows)
    first = sum(r["full_depth_loss"] for r in rows[:5]) / 5
    last = sum(r["full_depth_loss"] for r in rows[-5:]) / 5
    assert last < first - 0.1, (
        f"{mode}: full-depth loss did not decrease ({first:.3f} -> {last:.3f})"
    )
    if mode == "none":
        assert all(r["loss"] == r["full_depth_loss"] for r in rows)
    else:
        # the progressive term (a random depth) makes the optimised loss differ from full depth
        assert any(r["loss"] != r["full_depth_loss"] for r in rows)


def test_loss_positions_all_differs_from_answer(tmp_path):
    losses = {}
    for positions in ("answer", "all"):
        cfg = tiny_cfg(
            f"train.loss_positions={positions}", "train.steps=1", "train.progressive=none"
        )
        result = train(cfg, tmp_path / positions, progress=False)
        losses[positions] = result.last_metrics["loss"]
    assert all(math.isfinite(v) for v in losses.values())
    assert losses["answer"] != losses["all"]


def test_full_batch_modular_addition_logs_test_exact_match(tmp_path):
    cfg = apply_overrides(
        get_preset("grok-mod113"),
        [
            "task.p=13",
            "model.d_model=32",
            "model.d_head=8",
            "model.d_mlp=64",
            "model.max_seq_len=5",
            "train.steps=6",
            "train.eval_every=3",
            "train.log_every=1",
            "train.checkpoint_every=3",
            "train.dense_checkpoints=2",
            "train.dense_until=3",
        ],
    )
    # work around apply_overrides keeping the p=113 vocabulary (see test_override_of_task_rebuilds_vocab)
    cfg = dataclasses.replace(cfg, model=cfg.model.replace(vocab=cfg.make_task().vocab))
    assert cfg.train.batch_size is None
    task = cfg.make_task()
    n_train = len(task.full_split("train"))
    train(cfg, tmp_path / "run", progress=False)
    rows = ckpt.read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == list(range(1, 7))
    # full batch: every step sees the whole training split (a, b, =, c, EOS: 5 tokens each)
    assert [r["tokens"] for r in rows] == [5 * n_train * s for s in range(1, 7)]
    evals = [r for r in rows if "test_exact_match" in r]
    assert [r["step"] for r in evals] == [1, 3, 6]
    for r in evals:
        assert 0.0 <= r["test_exact_match"] <= 1.0 and math.isfinite(r["test_loss"])
    assert all(math.isfinite(r["loss"]) for r in rows)


def _small_grok(*extra: str, preset: str = "grok-mod113") -> RunConfig:
    cfg = apply_overrides(
        get_preset(preset), ["task.p=13", "model.d_model=32", "model.d_head=8", "model.d_mlp=64", *extra]
    )
    return dataclasses.replace(cfg, model=cfg.model.replace(vocab=cfg.make_task().vocab))


def test_answer_token_loss_with_a_residue_readout_matches_a_direct_computation():
    """The residue readout's loss (answer token only, softmax over the p residues: the shipped
    grok-mod113 run's) equals the cross-entropy of the full forward's '=' logits restricted to
    the residue columns, although the loop feeds the model only the prompt "a b =" (the model
    is causal)."""
    from abacus_interp.core.model import LoopedTransformer
    from abacus_interp.core.scoring import without_eos

    cfg = _small_grok("train.readout=answer_symbols")
    assert (cfg.train.loss_positions, cfg.train.readout) == ("answer_tokens", "answer_symbols")
    task = cfg.make_task()
    assert task.answer_token_ids == tuple(task.vocab.encode(" ".join(map(str, range(13)))))
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model).double()
    batch = BatchSource(task, cfg.train, cfg.model.max_seq_len).batch(1)
    allowed = loop_module.readout_ids(cfg, task)
    losses = loop_module.training_losses(
        model, batch, torch.Generator(), cfg, torch.device("cpu"), loop_module.nullcontext(), allowed
    )
    loss, state, mask = losses.loss, losses.state, losses.loss_mask
    assert state.shape[1] == 3  # "a b =": the answer and EOS inputs are not computed
    assert torch.equal(mask, without_eos(batch.tokens, batch.loss_mask)) and int(mask.sum()) == len(batch.tokens)
    logits = model(batch.tokens)[:, 2]  # at '=', predicting c
    residues = torch.tensor(task.answer_token_ids)
    targets = (batch.tokens[:, 3, None] == residues[None]).float().argmax(-1)
    expected = torch.nn.functional.cross_entropy(logits[:, residues].double(), targets)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-9)
    # the whole-vocabulary readout differs (the softmax also covers '=', PAD and EOS)
    every = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, readout="all"))
    loss_all = loop_module.training_losses(
        model, batch, torch.Generator(), every, torch.device("cpu"), loop_module.nullcontext(), None
    )[0]
    assert loss_all.item() == pytest.approx(torch.nn.functional.cross_entropy(logits.double(), batch.tokens[:, 3]).item())
    assert loss_all.item() > loss.item()


def test_readout_and_loss_position_options_are_validated():
    with pytest.raises(ValueError, match="loss_positions=answer_tokens"):
        TrainConfig(readout="answer_symbols")  # the default "answer" also scores the EOS
    with pytest.raises(ValueError, match="train.readout='residues'; choose one of"):
        TrainConfig(readout="residues")
    with pytest.raises(ValueError, match="train.loss_positions='eos'; choose one of"):
        TrainConfig(loss_positions="eos")
    TrainConfig(loss_positions="answer_tokens", readout="answer_symbols")
    with pytest.raises(ValueError, match="answer_token_ids"):  # addition declares no answer symbols
        tiny_cfg("train.loss_positions=answer_tokens", "train.readout=answer_symbols")


def test_restricted_readout_scoring():
    from abacus_interp.core.scoring import next_token_loss, score_examples

    logits = torch.randn(2, 3, 6)
    tokens = torch.tensor([[2, 3, 1], [4, 5, 1]])  # answer then EOS (id 1)
    mask = torch.tensor([[True, False, False], [True, False, False]])
    allowed = torch.tensor([2, 3, 4, 5])
    expected = torch.nn.functional.cross_entropy(logits[:, 0][:, allowed], torch.tensor([1, 3]))
    assert float(next_token_loss(logits, tokens, mask, allowed=allowed)) == pytest.approx(float(expected))
    with pytest.raises(ValueError, match="outside the restricted readout"):  # the EOS is not an answer symbol
        next_token_loss(logits, tokens, torch.tensor([[True, True, False]] * 2), allowed=allowed)
    # evaluation reads out the same way: answer token only, argmax over the residues
    cfg = _small_grok()
    task = cfg.make_task()
    from abacus_interp.core.model import LoopedTransformer

    model = LoopedTransformer(cfg.model)
    examples = task.full_split("test")[:20]
    residues = torch.tensor(task.answer_token_ids)
    before = score_examples(model, examples, allowed=residues, eos=False)
    with torch.no_grad():  # a shared shift of the residue logits: every full-vocabulary argmax is lost
        model.b_U[residues] -= 50.0
    after = score_examples(model, examples, allowed=residues, eos=False)
    assert score_examples(model, examples).exact_match == 0.0
    assert after.loss == pytest.approx(before.loss, rel=1e-5) and after.exact_match == before.exact_match
    assert after.per_example_correct == before.per_example_correct
    assert len(after.answer_logprob) == 20 and all(math.isfinite(x) for x in after.answer_logprob)


def test_evaluation_scores_a_run_the_way_it_was_trained():
    """`run_readout` turns config.json's train section into scoring keywords; the evaluation
    suite then scores a residue-readout run on the answer token only (its EOS never trained)."""
    from abacus_interp.core.model import LoopedTransformer
    from abacus_interp.core.scoring import run_readout
    from abacus_interp.evaluation.suite import evaluate

    cfg = _small_grok()
    task = cfg.make_task()
    readout = run_readout(cfg.to_dict()["train"], task)
    # grok-mod113 reads out over the p + 1 symbols (residues and "="), as Nanda et al.'s model
    assert readout["eos"] is False and readout["allowed"].tolist() == [*task.answer_token_ids, *task.vocab.encode("=")]
    fast = _small_grok(preset="grok-mod113-fast")
    assert run_readout(fast.to_dict()["train"], task) == {"allowed": None, "eos": True}
    model = LoopedTransformer(cfg.model)
    report = evaluate(model, task, progress=False, **readout).to_dict()
    assert set(report["splits"]) == {"train", "test"}
    assert report["agreement"]["n"] > 0


def test_grok_preset_trains_a_step(tmp_path):
    cfg = apply_overrides(
        get_preset("grok-mod113"),
        ["model.d_model=32", "model.d_head=8", "model.d_mlp=64", "train.steps=1", "task.p=13"],
    )
    cfg = dataclasses.replace(cfg, model=cfg.model.replace(vocab=cfg.make_task().vocab))
    train(cfg, tmp_path / "run", progress=False)


# -------------------------------------------------------------------------- overrides
def test_apply_overrides_qualified_and_unqualified():
    cfg = apply_overrides(
        get_preset("plain-add"),
        [
            "train.lr=3e-4",
            "model.d_model=48",
            "task.max_digits=4",
            "steps=7",
            "n_loops=2",
            "grad_clip=null",
            "betas=[0.8, 0.9]",
            "progressive=mix",
            "bf16=false",
        ],
    )
    assert cfg.train.lr == 3e-4 and cfg.train.steps == 7 and cfg.train.grad_clip is None
    assert (
        cfg.train.betas == (0.8, 0.9) and cfg.train.progressive == "mix" and cfg.train.bf16 is False
    )
    assert cfg.model.d_model == 48 and cfg.model.n_loops == 2
    assert cfg.task_kwargs == {"max_digits": 4} and cfg.make_task().max_digits == 4
    assert cfg.preset == "plain-add"
    # unqualified keys that live in the task section work too
    assert apply_overrides(cfg, ["max_digits=2"]).task_kwargs["max_digits"] == 2
    # a round trip through config.json rebuilds the same config
    assert RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_apply_overrides_unknown_key_lists_fields():
    with pytest.raises(ValueError) as info:
        apply_overrides(get_preset("plain-add"), ["train.lrate=1"])
    message = str(info.value)
    assert "lrate" in message and "lr" in message and "warmup_steps" in message
    with pytest.raises(ValueError, match="no section"):
        apply_overrides(get_preset("plain-add"), ["lrate=1"])
    with pytest.raises(ValueError, match="section must be one of"):
        apply_overrides(get_preset("plain-add"), ["optim.lr=1"])
    with pytest.raises(ValueError, match="key=value"):
        apply_overrides(get_preset("plain-add"), ["train.lr"])


def test_apply_overrides_ambiguous_key(monkeypatch):
    base = get_preset("plain-add")
    # no two built-in sections share a field name today, so make a task option collide: a
    # task the addition task itself refuses, so the config is built without RunConfig's checks
    monkeypatch.setattr(RunConfig, "__post_init__", lambda self: None)
    cfg = dataclasses.replace(base, task_kwargs={**base.task_kwargs, "seed": 3})
    with pytest.raises(ValueError) as info:
        apply_overrides(cfg, ["seed=1"])
    message = str(info.value)
    assert "several sections" in message and "task" in message and "train" in message
    assert "train.seed" in message or "section.seed" in message


@pytest.mark.parametrize(
    "assignment, needle",
    [
        ("model.activation=tanh", "tanh"),
        ("train.schedule=step", "cosine"),
        ("train.steps=0", "steps"),
        ("model.norm=batch", "pre"),
    ],
)
def test_apply_overrides_invalid_value(assignment, needle):
    with pytest.raises(ValueError) as info:
        apply_overrides(get_preset("plain-add"), [assignment])
    assert needle in str(info.value)
    assert "invalid --set" in str(info.value)


@pytest.mark.parametrize(
    "assignment, message",
    [
        ("train.lr=abc", "--set train.lr=abc: train.lr must be a number (float), e.g. train.lr="),
        ("lr=abc", "--set lr=abc: train.lr must be a number (float), e.g. train.lr="),
        ("train.steps=2.5", "train.steps must be an integer (int), e.g. train.steps="),
        ("train.steps=true", "train.steps must be an integer (int)"),
        ("model.d_model=wide", "model.d_model must be an integer (int), e.g. model.d_model="),
        ("train.bf16=yes", "train.bf16 must be true or false (bool), e.g. train.bf16="),
        ("train.betas=0.9", "train.betas must be a list of 2 numbers, e.g. train.betas=[0.9, 0.98]"),
        ("train.betas=[0.9]", "train.betas must be a list of 2 numbers"),
        ("train.grad_clip=off", "train.grad_clip must be a number (float) or null, e.g. train.grad_clip="),
        ("train.batch_size=all", "train.batch_size must be an integer (int) or null"),
        ("train.mix_depths=[1, 2.5]", "train.mix_depths must be a list of 2 integers or null"),
    ],
)
def test_apply_overrides_wrong_type_names_field_value_and_type(assignment, message):
    with pytest.raises(ValueError) as info:
        apply_overrides(get_preset("plain-add"), [assignment])
    assert message in str(info.value)
    assert "TypeError" not in str(info.value) and "not supported between" not in str(info.value)


def test_apply_overrides_converts_between_compatible_numbers():
    cfg = apply_overrides(
        get_preset("plain-add"),
        ["train.lr=1", "train.steps=1e3", "train.grad_clip=null", "train.mix_depths=[1, 4]",
         "model.max_loops=16", "train.schedule=linear"],
    )
    # an integer is a fine float; an integral float a fine integer; null where None is allowed
    assert cfg.train.lr == 1.0 and isinstance(cfg.train.lr, float)
    assert cfg.train.steps == 1000 and isinstance(cfg.train.steps, int)
    assert cfg.train.grad_clip is None and cfg.train.mix_depths == (1, 4)
    assert cfg.train.schedule == "linear"
    # a string field takes text that would parse as a number, and its own check still runs
    with pytest.raises(ValueError, match="invalid --set: train.schedule='1'; choose one of"):
        apply_overrides(get_preset("plain-add"), ["train.schedule=1"])


def test_overrides_rederive_dependent_model_fields():
    cfg = apply_overrides(get_preset("plain-add"), ["model.d_model=32"])
    assert cfg.model.d_head == 32 // cfg.model.n_heads and cfg.model.d_mlp == 128
    assert apply_overrides(get_preset("plain-add"), ["model.n_loops=20"]).model.max_loops == 80
    # an explicitly set value is kept
    assert (
        apply_overrides(get_preset("plain-add"), ["model.d_model=32", "model.d_mlp=50"]).model.d_mlp
        == 50
    )


def test_apply_overrides_refuses_vocab():
    with pytest.raises(ValueError, match="vocabulary comes from the task"):
        apply_overrides(get_preset("plain-add"), ["model.vocab=[1,2]"])
    with pytest.raises(ValueError, match="vocabulary comes from the task"):
        apply_overrides(get_preset("plain-add"), ["vocab=[1,2]"])


def test_override_of_task_rebuilds_vocab():
    cfg = apply_overrides(get_preset("grok-mod113"), ["task.p=13"])
    assert cfg.model.vocab == cfg.make_task().vocab


# --------------------------------------------------------------------- multi-process
def test_ranks_share_each_batch_and_split_its_rows():
    cfg = tiny_cfg()
    source = BatchSource(cfg.make_task(), cfg.train, 24)
    assert torch.equal(source.batch(1).tokens, BatchSource(cfg.make_task(), cfg.train, 24).batch(1).tokens)
    assert not torch.equal(source.batch(1).tokens, source.batch(2).tokens)
    for n, world in [(8, 2), (7, 2), (5, 3)]:
        rows = [shard_rows(n, rank, world) for rank in range(world)]
        covered = [i for r in rows for i in range(n)[r]]
        assert covered == list(range(n)), "the ranks' rows partition the batch, in order"
        assert max(r.stop - r.start for r in rows) - min(r.stop - r.start for r in rows) <= 1


def test_shard_weights_make_the_rank_average_the_batch_mean():
    """Per-rank means, weighted and averaged as the gradient all-reduce does, give the whole
    batch's mean, per scored token and per example, also for uneven shards."""
    generator = torch.Generator().manual_seed(0)
    scored = torch.rand(7, 9, generator=generator) < 0.4  # [batch pos]
    scored[:, 0] = True  # every example scores something
    values = torch.randn(7, 9, generator=generator)
    world = 2
    per_token = per_example = 0.0
    for rank in range(world):
        rows = shard_rows(7, rank, world)
        w = ShardWeights.of(scored, rows, world)
        per_token += w.per_token * values[rows][scored[rows]].mean().item() / world
        per_example += w.per_example * values[rows, 0].mean().item() / world
    assert per_token == pytest.approx(values[scored].mean().item(), abs=1e-6)
    assert per_example == pytest.approx(values[:, 0].mean().item(), abs=1e-6)
    whole = ShardWeights.of(scored, shard_rows(7, 0, 1), 1)
    assert whole.per_token == whole.per_example == 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


MULTI = [*TINY, "train.steps=6", "train.checkpoint_every=3", "train.eval_every=3", "train.device=cpu",
         "train.log_every=1"]


def _assert_same_training(multi_dir: Path, single_dir: Path) -> None:
    """Two processes train as one does: the same batches, tokens, losses and weights up to
    the order of floating-point sums."""
    multi, single = ckpt.read_metrics(multi_dir), ckpt.read_metrics(single_dir)
    assert [r["step"] for r in multi] == [r["step"] for r in single] == list(range(1, 7))
    for m, s in zip(multi, single, strict=True):
        assert m["tokens"] == s["tokens"]
        for key in ("loss", "full_depth_loss", "grad_norm", "train_exact_match"):
            assert m[key] == pytest.approx(s[key], rel=1e-4, abs=1e-6), (m["step"], key)
    final_multi, final_single = weights(ckpt.step_path(multi_dir, 6)), weights(ckpt.step_path(single_dir, 6))
    for name, tensor in final_single.items():
        torch.testing.assert_close(final_multi[name], tensor, rtol=1e-4, atol=1e-5)
    assert sorted(p.name for p in multi_dir.iterdir()) == ["checkpoints", "config.json", "metrics.jsonl", "resume"]
    assert not [p for p in multi_dir.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_train_command_starts_processes_that_train_as_one(tmp_path):
    """`abacus-interp train` with train.processes=2 starts two ranks itself (no torchrun),
    with mix depths, start noise and a step penalty drawn alike on both, warm-started from
    another run's weights on both."""
    source = tmp_path / "source"
    train(apply_overrides(get_preset("plain-add"), [*MULTI, "train.steps=2"]), source, progress=False)
    sets = [*MULTI, "train.progressive=mix", "train.mix_depths=[1,3]", "train.init_state_noise=0.5",
            "train.step_penalty=0.5", f"train.init_from={source}"]
    args = [a for s in sets for a in ("--set", s)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "abacus_lab.cli", "train", "--preset", "plain-add", *args]
    proc = subprocess.run([*command, "--set", "train.processes=2", "--out", str(tmp_path / "two")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"train failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "training in 2 processes" in proc.stdout and proc.stdout.count("trained ") == 1
    train(apply_overrides(get_preset("plain-add"), sets), tmp_path / "one", progress=False)
    _assert_same_training(tmp_path / "two", tmp_path / "one")


@pytest.mark.slow
def test_torchrun_two_processes_gloo(tmp_path):
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--nnodes=1",
        f"--master_port={_free_port()}",
        "-m",
        "abacus_lab.cli",
        "train",
        "--preset",
        "plain-add",
        *[arg for s in MULTI for arg in ("--set", s)],
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"torchrun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "trained " in proc.stdout
    single_dir = tmp_path / "single"
    train(apply_overrides(get_preset("plain-add"), MULTI), single_dir, progress=False)
    _assert_same_training(out, single_dir)
    # both ranks started from the same weights as a single process
    assert_same_weights(weights(ckpt.step_path(out, 0)), weights(ckpt.step_path(single_dir, 0)))


@pytest.mark.slow
def test_train_command_processes_stop_together_on_sigterm(tmp_path):
    """A SIGTERM to `abacus-interp train` reaches both ranks; they agree on the step to stop
    after, rank 0 saves it, and the run resumes from there."""
    out = tmp_path / "run"
    sets = [*TINY, "train.steps=100000", "train.checkpoint_every=100000", "train.device=cpu", "train.processes=2"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "abacus_lab.cli", "train", "--preset", "plain-add",
               *[a for s in sets for a in ("--set", s)], "--out", str(out)]
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "metrics.jsonl").exists() or max((r["step"] for r in ckpt.read_metrics(out)), default=0) < 20:
        assert time.monotonic() < deadline and proc.poll() is None, "training did not get going"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert stdout.count("interrupted: SIGTERM received") == 1
    saved = json.loads((out / "resume" / "state.json").read_text())["step"]
    assert saved >= 20 and ckpt.step_path(out, saved).exists()
    # resumed without --preset, in two ranks again: the ranks get the run's own config (config.json
    # with this --set applied) as JSON from the launcher, and train on to the new last step
    resume = [sys.executable, "-m", "abacus_lab.cli", "train", "--out", str(out), "--set", f"train.steps={saved + 4}"]
    proc = subprocess.run(resume, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "training in 2 processes" in proc.stdout and f"to step {saved + 4}" in proc.stdout
    assert max(r["step"] for r in ckpt.read_metrics(out)) == saved + 4


def test_rotary_positions_train_with_the_random_abacus_offset(tmp_path):
    """A rotary model reads the offset too (a digit's distance to the index-0 tokens); before,
    the training drew offsets for the position table only and a rotary run ignored them."""
    losses = {}
    for offset in (0, 30):
        cfg = tiny_cfg("model.positional=none", "model.rotary=abacus", f"model.abacus_max_offset={offset}",
                       "train.steps=2", "train.progressive=none", "train.processes=1", preset="extrap-add")
        losses[offset] = [r["loss"] for r in metric_rows(train(cfg, tmp_path / str(offset), progress=False).run_dir)]
    assert losses[0] != losses[30]

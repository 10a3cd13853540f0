"""Run directories and checkpoints: loading, corruption errors, atomic writes, no pickle,
exact optimizer-state round trip."""

from __future__ import annotations

import copy
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from abacus_interp import checkpoints as ckpt
from abacus_interp.checkpoints import CheckpointError, list_checkpoints, load_model
from abacus_interp.training import apply_overrides, get_preset, train

TINY = [
    "model.d_model=32",
    "model.d_head=8",
    "model.d_mlp=128",
    "train.steps=6",
    "train.batch_size=8",
    "train.eval_every=6",
    "train.eval_problems=8",
    "train.checkpoint_every=3",
    "train.dense_until=2",
    "train.dense_checkpoints=2",
    "task.max_digits=3",
    "model.max_seq_len=24",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A finished tiny run; tests that damage files work on a copy (see `run_copy`)."""
    path = tmp_path_factory.mktemp("ckpt") / "run"
    train(apply_overrides(get_preset("plain-add"), TINY), path, progress=False)
    return path


@pytest.fixture
def run_copy(run_dir, tmp_path) -> Path:
    path = tmp_path / "run"
    shutil.copytree(run_dir, path)
    return path


def assert_same_state(model, state: dict[str, torch.Tensor]) -> None:
    own = model.state_dict()
    assert own.keys() == state.keys()
    for name, tensor in state.items():
        assert torch.equal(own[name], tensor), name


# ----------------------------------------------------------------------------- loading
def test_load_model_from_run_dir_is_the_latest_step(run_dir):
    found = list_checkpoints(run_dir)
    assert [s for s, _ in found] == [0, 1, 2, 3, 6]
    model = load_model(run_dir)
    assert model.checkpoint_path == str(ckpt.step_path(run_dir, 6))
    assert not model.training
    assert model.cfg.d_model == 32
    assert_same_state(model, ckpt.load_tensors(ckpt.step_path(run_dir, 6)))
    # and it differs from an earlier checkpoint: training moved the weights
    earlier = ckpt.load_tensors(ckpt.step_path(run_dir, 0))
    assert not torch.equal(model.W_E, earlier["W_E"])


def test_load_model_from_a_safetensors_file(run_dir):
    path = ckpt.step_path(run_dir, 2)
    model = load_model(path)
    assert model.checkpoint_path == str(path)
    assert_same_state(model, ckpt.load_tensors(path))
    assert load_model(str(path)).checkpoint_path == str(path)


def test_load_model_max_loops_override_keeps_weights(run_dir):
    default = load_model(run_dir)
    deep = load_model(run_dir, max_loops=40)
    assert deep.cfg.max_loops == 40 and default.cfg.max_loops == 4 * default.cfg.n_loops
    assert deep.cfg.n_loops == default.cfg.n_loops
    assert_same_state(deep, default.state_dict())
    tokens = default.to_tokens(["21+3="])
    assert torch.equal(deep(tokens), default(tokens))
    with pytest.raises(ValueError, match="max_loops"):
        default(tokens, n_loops=40)
    assert deep(tokens, n_loops=40).shape == default(tokens).shape


def test_load_model_rejects_other_paths(run_dir, tmp_path):
    with pytest.raises(CheckpointError, match="neither a run directory"):
        load_model(run_dir / "config.json")
    with pytest.raises(CheckpointError, match="does not exist"):
        list_checkpoints(tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_model(run_dir / "checkpoints" / "step_0009999.safetensors")


# -------------------------------------------------------------------------- corruption
def test_truncated_checkpoint_names_the_file(run_copy):
    path = ckpt.step_path(run_copy, 6)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    for load in (
        lambda: load_model(run_copy),
        lambda: load_model(path),
        lambda: ckpt.load_tensors(path),
    ):
        with pytest.raises(CheckpointError) as info:
            load()
        assert str(path) in str(info.value)
        assert "truncated or corrupt" in str(info.value)
    # the earlier checkpoints of the run still load
    load_model(ckpt.step_path(run_copy, 3))


def test_garbage_checkpoint_names_the_file(run_copy):
    path = ckpt.step_path(run_copy, 3)
    path.write_bytes(os.urandom(64) + b"not a safetensors file" * 10)
    with pytest.raises(CheckpointError) as info:
        load_model(path)
    assert str(path) in str(info.value)
    empty = ckpt.step_path(run_copy, 2)
    empty.write_bytes(b"")
    with pytest.raises(CheckpointError, match=str(empty)):
        load_model(empty)


def test_missing_or_corrupt_config_names_the_path(run_copy):
    config = run_copy / "config.json"
    text = config.read_text()
    config.unlink()
    with pytest.raises(CheckpointError) as info:
        load_model(run_copy)
    assert str(config) in str(info.value)
    with pytest.raises(CheckpointError, match=str(config)):
        load_model(ckpt.step_path(run_copy, 3))
    config.write_text(text[: len(text) // 2])
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_model(run_copy)


def test_checkpoint_with_wrong_shapes_or_names_is_reported(run_copy):
    path = ckpt.step_path(run_copy, 3)
    tensors = ckpt.load_tensors(path)
    tensors["unexpected"] = torch.zeros(1)
    ckpt.save_tensors(path, tensors)
    with pytest.raises(CheckpointError, match="unexpected"):
        load_model(path)


def test_empty_run_dir_says_so(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(CheckpointError, match="no checkpoints"):
        load_model(tmp_path)


# ----------------------------------------------------------------------- atomic writes
def test_run_leaves_no_temporary_files(run_dir):
    leftovers = [p for p in run_dir.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".")]
    assert leftovers == []


def test_failed_tensor_write_keeps_the_previous_file(run_copy, monkeypatch):
    path = ckpt.step_path(run_copy, 6)
    before, listing = path.read_bytes(), sorted(os.listdir(path.parent))

    def crash_midway(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(ckpt, "save_file", crash_midway)
    with pytest.raises(OSError, match="disk full"):
        ckpt.save_tensors(path, {"x": torch.zeros(3)})
    assert path.read_bytes() == before
    assert sorted(os.listdir(path.parent)) == listing, "the temporary file must be removed"
    load_model(path)


def test_failed_json_write_keeps_the_previous_file(run_copy):
    path = run_copy / "config.json"
    before = path.read_text()
    with pytest.raises(TypeError):
        ckpt.write_json(path, {"a": 1, "b": object()})  # json.dump fails after writing part of it
    assert path.read_text() == before
    assert not [p for p in run_copy.iterdir() if p.name.endswith(".tmp")]


# ----------------------------------------------------------------------------- no pickle
def test_run_dir_holds_only_json_and_safetensors(run_dir):
    allowed = {".json", ".jsonl", ".safetensors"}
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert files
    assert {p.suffix for p in files} <= allowed, sorted(
        str(p) for p in files if p.suffix not in allowed
    )
    assert (run_dir / "resume" / "state.safetensors").exists()
    assert (run_dir / "resume" / "state.json").exists()


def test_nothing_is_unpickled_by_load_or_resume(run_copy, monkeypatch):
    def refuse(*args, **kw):
        raise AssertionError("pickle/torch.load must never be used to read a checkpoint")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    load_model(run_copy)
    load_model(ckpt.step_path(run_copy, 3))
    # resume: two more steps on top of the finished run
    result = train(
        apply_overrides(get_preset("plain-add"), [*TINY, "train.steps=8"]), run_copy, progress=False
    )
    assert result.final_step == 8
    steps = [r["step"] for r in ckpt.read_metrics(run_copy)]
    assert steps[-1] == 8 and steps == sorted(set(steps))
    assert list_checkpoints(run_copy)[-1][0] == 8


# ------------------------------------------------------------------------ resume state
def _adamw(model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-3,
        betas=(0.9, 0.98),
    )


def _step(model, optimizer, tokens):
    optimizer.zero_grad(set_to_none=True)
    model(tokens).logsumexp(-1).mean().backward()
    optimizer.step()


def test_resume_state_round_trip_restores_optimizer_exactly(tiny_model, tmp_path):
    model = tiny_model()
    model.train()
    optimizer = _adamw(model)
    tokens = torch.randint(2, len(model.cfg.vocab), (4, 10))
    for _ in range(3):
        _step(model, optimizer, tokens)
    ckpt.save_resume(tmp_path, optimizer, 3, {"tokens": 123})

    restored_model = copy.deepcopy(model)
    restored = _adamw(restored_model)
    meta = ckpt.load_resume(tmp_path, restored)
    assert meta["step"] == 3 and meta["tokens"] == 123

    original_state, restored_state = optimizer.state_dict(), restored.state_dict()
    assert original_state["state"].keys() == restored_state["state"].keys()
    for pid, slots in original_state["state"].items():
        assert slots.keys() == restored_state["state"][pid].keys()
        for slot, value in slots.items():
            other = restored_state["state"][pid][slot]
            assert other.dtype == value.dtype and torch.equal(other, value), f"param {pid} {slot}"
    for group, other in zip(
        original_state["param_groups"], restored_state["param_groups"], strict=True
    ):
        assert {k: (list(v) if isinstance(v, tuple) else v) for k, v in group.items()} == {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in other.items()
        }
    # the next update is bit-identical
    _step(model, optimizer, tokens)
    _step(restored_model, restored, tokens)
    assert_same_state(restored_model, model.state_dict())
    assert {p.suffix for p in tmp_path.rglob("*") if p.is_file()} == {".json", ".safetensors"}


def test_sidecar_records_step_tokens_and_metrics(run_dir):
    rows = {r["step"]: r for r in ckpt.read_metrics(run_dir)}
    for step, path in list_checkpoints(run_dir)[1:]:
        sidecar = ckpt.read_json(path.with_suffix(".json"))
        assert sidecar["step"] == step and sidecar["metrics"] == rows[step]
        assert sidecar["tokens"] == rows[step]["tokens"]


def test_read_metrics_skips_a_partial_last_line(run_copy):
    path = run_copy / "metrics.jsonl"
    n = len(ckpt.read_metrics(run_copy))
    with open(path, "a") as f:
        f.write('{"step": 7, "loss": 1.')
    assert len(ckpt.read_metrics(run_copy)) == n


def test_load_checkpoint_says_which_file_step_and_run(run_dir):
    latest = ckpt.load_checkpoint(run_dir)
    assert latest.step == 6 and latest.path == ckpt.step_path(run_dir, 6) and latest.run_dir == run_dir
    assert latest.config == latest.model.cfg and latest.model.checkpoint_path == str(latest.path)
    earlier = ckpt.load_checkpoint(ckpt.step_path(run_dir, 2), max_loops=9)
    assert (earlier.step, earlier.run_dir, earlier.config.max_loops) == (2, run_dir, 9)

"""What a training step does and does not do (issue 17): the progressive losses run no loop
twice, a step reads nothing back from the device, and a divergence between logged steps is
still caught before anything after it is saved."""

from __future__ import annotations

import warnings
from contextlib import nullcontext

import pytest
import torch
from conftest import poison_loss_from

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.model import LoopedTransformer
from abacus_interp.core.scoring import next_token_loss
from abacus_interp.training import TrainingDiverged, apply_overrides, get_preset, train
from abacus_interp.training import loop as loop_module
from abacus_interp.training.data import BatchSource

TINY = [
    "task.max_digits=3", "model.d_model=16", "model.n_heads=2", "model.n_loops=4", "model.max_seq_len=16",
    "train.batch_size=8", "train.eval_problems=8", "train.warmup_steps=0",
]  # fmt: skip


def tiny(*extra: str):
    return apply_overrides(get_preset("plain-add"), [*TINY, *extra])


def mcleish_loss_with_a_second_pass(model, tokens, loss_mask, inputs, full, n, k, alpha):
    """The McLeish loss as the loop computed it before issue 17: the first n loops again,
    without gradient, in a pass of their own."""
    state = None
    if n:
        with torch.no_grad():
            state = model.run_loops(inputs, range(n)).detach()
    progressive = model.unembed(model.run_loops(inputs, range(n, n + k), state=state))
    return (1 - alpha) * full + alpha * next_token_loss(progressive, tokens, loss_mask)


def test_mcleish_loss_reuses_the_full_pass_and_equals_the_two_pass_loss(single_torch_thread):
    cfg = tiny("train.progressive=mcleish")
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model).train()
    applied = []
    original = LoopedTransformer.apply_layers

    def counting(self, *args, **kwargs):
        applied.append(1)
        return original(self, *args, **kwargs)

    depths_seen = set()
    for step in range(1, 9):
        applied.clear()
        losses = loop_module.training_losses(
            model, source.batch(step), source.generator(step), cfg, torch.device("cpu"), nullcontext()
        )
        loss, full, loss_mask = losses.loss, losses.full, losses.loss_mask
        # the draws of this step, in the order training_losses takes them
        generator = source.generator(step)
        n = int(torch.randint(0, 4, (1,), generator=generator))
        k = int(torch.randint(1, 4 - n + 1, (1,), generator=generator))
        depths_seen.add(n)
        tokens = source.batch(step).tokens
        expected = mcleish_loss_with_a_second_pass(
            model, tokens, loss_mask, model.embed(tokens), full, n, k, cfg.train.progressive_alpha
        )
        assert torch.equal(loss, expected), step  # bit for bit on the CPU
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(LoopedTransformer, "apply_layers", counting)
            loop_module.training_losses(
                model, source.batch(step), source.generator(step), cfg, torch.device("cpu"), nullcontext()
            )
        assert len(applied) == 4 + k, f"step {step}: the full depth and the k progressive loops, not n again"
    assert len(depths_seen) > 1


def test_mix_loss_at_the_full_depth_is_the_full_depth_loss(single_torch_thread):
    cfg = tiny("train.progressive=mix", "train.mix_depths=[4,4]")
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    model = LoopedTransformer(cfg.model).train()
    loss, full, *_ = loop_module.training_losses(
        model, source.batch(1), source.generator(1), cfg, torch.device("cpu"), nullcontext()
    )
    assert torch.equal(loss, 0.5 * (full + full)) and torch.equal(loss, full)


def test_a_divergence_between_logged_steps_is_caught_before_the_next_checkpoint(tmp_path, monkeypatch):
    """Loss NaN from step 5, logged every 4 steps and at the checkpoints (0, 1, 2, 4, 6, 12):
    the loop learns of it at the checkpoint of step 6 and saves nothing from step 5 on."""
    current = poison_loss_from(monkeypatch, 5)
    cfg = tiny("train.steps=12", "train.log_every=4", "train.eval_every=100", "train.checkpoint_every=6",
               "train.dense_until=4", "train.dense_checkpoints=3")
    with pytest.raises(TrainingDiverged) as info:
        train(cfg, tmp_path / "run", progress=False)
    assert current["step"] == 6, "detected at the checkpoint of step 6, the first read after step 5"
    message = str(info.value)
    assert "loss is nan at step 5" in message and "last good checkpoint is step 4" in message
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path / "run")] == [0, 1, 2, 4]
    assert [r["step"] for r in ckpt.read_metrics(tmp_path / "run")] == [1, 2, 4]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("progressive", ["none", "mcleish", "mix"])
def test_steps_between_logs_never_wait_for_the_gpu(tmp_path, monkeypatch, progressive):
    """torch's CUDA sync debug mode warns at every host-device synchronisation; none may come
    from a step that is neither logged nor checkpointed."""
    current = {"step": 0}
    original_batch = BatchSource.batch

    def batch(self, s):
        current["step"] = s
        return original_batch(self, s)

    monkeypatch.setattr(BatchSource, "batch", batch)
    cfg = tiny(f"train.progressive={progressive}", "train.steps=12", "train.log_every=6", "train.eval_every=100",
               "train.checkpoint_every=12", "train.dense_until=1", "train.dense_checkpoints=1",
               "train.device=cuda", "model.abacus_max_offset=10")
    synced_at = []
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            train(cfg, tmp_path / "run", progress=False)
        synced_at = [current["step"] for w in caught if "synchroniz" in str(w.message)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    quiet_steps = set(range(2, 12)) - {6}  # 1, 6 and 12 log (and 1, 12 checkpoint)
    assert not quiet_steps & set(synced_at), f"host-device syncs during steps {sorted(set(synced_at))}"

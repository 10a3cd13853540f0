"""The running-sum auxiliary loss (train.running_sum_loss, Bai et al. 2025): its targets are
multiplication's column totals at the positions that predict each answer digit, its term is
the readout's mean squared error weighted like the cross-entropy across processes, and a
training run logs it and learns it."""

from __future__ import annotations

import json
import random
from contextlib import nullcontext

import pytest
import torch
from conftest import tiny_mul_run

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.model import LoopedTransformer
from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.tasks import get_task
from abacus_interp.tasks.product_carries import carries_in, running_sums
from abacus_interp.training import apply_overrides, get_preset, train
from abacus_interp.training.data import BatchSource
from abacus_interp.training.losses import training_losses


def tiny_mul(*extra: str):
    return tiny_mul_run("model.running_sum_probe=true", "train.running_sum_loss=0.5", *extra)


@pytest.mark.parametrize("a, b", [(0, 7), (9, 9), (99, 99), (12345, 678), (907, 3), (999999, 999)])
def test_running_sums_are_the_answer_digits_and_the_carries_out(a, b):
    sums = running_sums(a, b)
    assert sum((s % 10) * 10**i for i, s in enumerate(sums)) == a * b
    assert [s // 10 for s in sums[:-1]] == carries_in(a, b)[1:]  # the rest of each sum is the next carry
    assert sums[-1] < 10  # the top column passes nothing on


def test_targets_sit_where_each_answer_digit_is_predicted():
    task = get_task("multiplication", max_digits=4)
    examples = task.sample(32, random.Random(0))
    cfg = tiny_mul()
    batch = BatchSource(task, cfg.train, 32)._encode(examples)
    targets = batch.running_sum
    assert targets is not None and targets.shape == batch.tokens.shape
    for row, example in enumerate(examples):
        positions = (~targets[row].isnan()).nonzero()[:, 0].tolist()
        start = int(batch.prompt_lengths[row]) - 1
        assert positions == list(range(start, start + len(example.target)))  # not EOS, not the prompt
        sums = (targets[row, positions] * 10).round().long()
        next_digits = [task.vocab.decode([int(t)]) for t in batch.tokens[row, [p + 1 for p in positions]]]
        assert [str(int(s) % 10) for s in sums] == next_digits


def test_the_term_is_the_readouts_squared_error_and_its_rank_parts_sum_to_it(single_torch_thread):
    cfg = tiny_mul()
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model).double()
    batch = source.batch(1)
    whole = training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"), nullcontext())
    readout = model.read_running_sum(whole.state)
    where = ~batch.running_sum[:, : readout.shape[1]].isnan()
    naive = ((readout[where] - batch.running_sum[:, : readout.shape[1]][where].double()) ** 2).mean()
    assert whole.running_sum.item() == pytest.approx(naive.item(), rel=1e-6)
    assert whole.loss.item() == pytest.approx(whole.full.item() + 0.5 * naive.item(), rel=1e-6)
    # two processes' weighted parts average to the whole batch's term
    parts = [training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"), nullcontext(), part=(r, 2))
             for r in range(2)]
    assert sum(p.running_sum.item() for p in parts) / 2 == pytest.approx(whole.running_sum.item(), rel=1e-6)
    whole.loss.backward()
    assert model.W_sum.grad.abs().sum() > 0 and model.blocks[0].attn.W_Q.grad.abs().sum() > 0


def test_a_run_logs_the_term_learns_the_readout_and_saves_it(tmp_path, single_torch_thread):
    cfg = tiny_mul("train.steps=400", "train.log_every=20", "train.lr=3e-3")
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    targets = torch.cat([source.batch(step).running_sum.flatten() for step in range(1, 50)])
    spread = targets[~targets.isnan()].var().item()  # the error of a readout that gives the mean: ~7
    train(cfg, tmp_path / "run", progress=False)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    last = [r["running_sum_loss"] for r in rows[-4:]]
    # a readout that knew only the layout (operand lengths, column) would leave about half the spread
    assert sum(last) / len(last) < 0.3 * spread
    # the saved readout is the trained one: it reads a fresh batch as well
    model = ckpt.load_model(tmp_path / "run")
    fresh = source.batch(10_000)
    with torch.no_grad():
        term = training_losses(model, fresh, source.generator(10_000), cfg, torch.device("cpu"), nullcontext())
    assert model.cfg.running_sum_probe and term.running_sum.item() < 0.3 * spread


def test_a_resumed_run_continues_the_readouts_curve_exactly(tmp_path, single_torch_thread):
    cfg = tiny_mul("train.steps=20", "train.log_every=5", "train.schedule=constant", "train.checkpoint_every=10",
                   "train.dense_checkpoints=0")
    train(cfg, tmp_path / "straight", progress=False)
    train(apply_overrides(cfg, ["train.steps=10"]), tmp_path / "resumed", progress=False)
    train(cfg, tmp_path / "resumed", progress=False)
    curves = [[(r["step"], r["loss"], r["running_sum_loss"]) for r in map(json.loads, (tmp_path / run / "metrics.jsonl")
               .read_text().splitlines())] for run in ("straight", "resumed")]
    assert curves[0] == curves[1] and len(curves[0]) >= 4


def test_the_readout_runs_in_float32_under_bfloat16_autocast(single_torch_thread):
    cfg = tiny_mul()
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model)
    batch = source.batch(1)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16)
    losses = training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"), autocast)
    assert losses.running_sum.dtype == torch.float32
    targets = batch.running_sum[:, : losses.state.shape[1]]
    where = ~targets.isnan()
    readout = model.read_running_sum(losses.state.float())[where]
    assert losses.running_sum.item() == pytest.approx(((readout - targets[where]) ** 2).mean().item(), rel=1e-5)


def test_bad_settings_say_what_to_set():
    with pytest.raises(UserError, match="model.running_sum_probe=true"):
        tiny_mul("model.running_sum_probe=false")
    with pytest.raises(UserError, match="only train.running_sum_loss trains"):  # an untrained readout
        tiny_mul("train.running_sum_loss=null")
    with pytest.raises(ValueError, match="BatchSource"):
        cfg = tiny_mul()
        batch = encode_batch(cfg.make_task().vocab, ["21*3="], ["36"])
        training_losses(LoopedTransformer(cfg.model), batch, torch.Generator(), cfg, torch.device("cpu"), nullcontext())
    with pytest.raises(UserError, match="Task.running_sums"):
        apply_overrides(get_preset("plain-add"), ["model.running_sum_probe=true", "train.running_sum_loss=0.5"])
    with pytest.raises(UserError, match="running_sum_loss must be >= 0"):
        tiny_mul("train.running_sum_loss=-1")
    with pytest.raises(ValueError, match="no running-sum readout"):
        LoopedTransformer(tiny_mul("train.running_sum_loss=null", "model.running_sum_probe=false").model).read_running_sum(
            torch.zeros(1, 2, 32))

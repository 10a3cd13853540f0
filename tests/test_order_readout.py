"""The order readout (model.order_probe, train.order_loss): its targets are each sorting item's
value at the separator that closes it, its term is a pairwise logistic loss over the items of one
list, weighted across processes like the other readouts, and a training run logs it, learns it,
saves the readout and resumes its curve exactly."""

from __future__ import annotations

import json
import math
import random
from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.model import LoopedTransformer
from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.tasks import get_task
from abacus_interp.training import apply_overrides, get_preset, train
from abacus_interp.training.data import BatchSource
from abacus_interp.training.losses import training_losses
from tests.conftest import tiny_sort_run


def tiny_order(*extra: str):
    return tiny_sort_run("model.order_probe=true", "train.order_loss=0.5", *extra)


def naive_order_loss(scores: torch.Tensor, values: torch.Tensor) -> float:
    """The mean of softplus(score_i - score_j) over the pairs of one row with value_i < value_j, by loops."""
    terms = []
    for row in range(values.shape[0]):
        for i in range(values.shape[1]):
            for j in range(values.shape[1]):
                if values[row, i] < values[row, j]:  # NaN (no item) compares False
                    terms.append(F.softplus(scores[row, i] - scores[row, j]).item())
    return sum(terms) / len(terms)


def test_each_item_but_the_last_is_closed_by_its_comma():
    task = get_task("sorting", max_digits=6)
    example = task.make(5898, 1, 372012)  # a:8985,b:1,c:210273=
    assert task.item_closers(example) == [(6, 5898), (10, 1)]
    assert [example.prompt[p] for p, _ in task.item_closers(example)] == [",", ","]
    assert task.item_closers(task.make(42)) == []  # one number: "=" closes it
    assert get_task("addition", max_digits=3).item_closers(get_task("addition", max_digits=3).make(12, 34)) is None


def test_targets_sit_at_the_closers_and_nowhere_else():
    cfg = tiny_order()
    task = cfg.make_task()
    examples = task.sample(40, random.Random(0))
    batch = BatchSource(task, cfg.train, cfg.model.max_seq_len)._encode(examples)
    assert batch.item_values.dtype == torch.float64 and batch.item_values.shape == batch.tokens.shape
    comma = task.vocab.encode(",")[0]
    for row, example in enumerate(examples):
        at = (~batch.item_values[row].isnan()).nonzero()[:, 0].tolist()
        assert at == (batch.tokens[row] == comma).nonzero()[:, 0].tolist()
        assert batch.item_values[row, at].tolist() == [float(v) for v in example.operands[:-1]]


def test_the_term_is_the_pairwise_loss_and_its_rank_parts_sum_to_it(single_torch_thread):
    cfg = tiny_order()
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model).double()
    batch = source.batch(1)
    whole = training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"), nullcontext())
    scores = model.read_order(whole.state)  # [batch pos]
    naive = naive_order_loss(scores, batch.item_values[:, : scores.shape[1]])
    assert whole.order.item() == pytest.approx(naive, rel=1e-9)
    assert whole.loss.item() == pytest.approx(whole.full.item() + 0.5 * naive, rel=1e-9)
    parts = [training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"), nullcontext(), part=(r, 2))
             for r in range(2)]
    assert sum(p.order.item() for p in parts) / 2 == pytest.approx(whole.order.item(), rel=1e-9)
    whole.loss.backward()
    assert model.W_order.grad.abs().sum() > 0 and model.blocks[0].attn.W_Q.grad.abs().sum() > 0


def test_a_readout_that_orders_the_items_scores_near_zero_and_the_reverse_high(single_torch_thread):
    """Planted scores on the closers: the loss sees only order, and equal values form no pair."""
    cfg = tiny_order()
    model = LoopedTransformer(cfg.model).double()
    task = cfg.make_task()
    examples = [task.make(5, 41, 41, 300), task.make(7, 2)]
    batch = BatchSource(task, cfg.train, cfg.model.max_seq_len)._encode(examples)
    values = batch.item_values
    for sign, ordered in ((10.0, True), (-10.0, False)):
        planted = torch.where(values.isnan(), torch.zeros_like(values), sign * torch.log(values + 1))
        model.read_order = lambda state, planted=planted: planted[:, : state.shape[1]]
        losses = training_losses(model, batch, BatchSource(task, cfg.train, 40).generator(0), cfg,
                                 torch.device("cpu"), nullcontext())
        # the pairs: 5 with each 41; the two 41s form none and 300 is closed by "="; the second list has none
        assert losses.order.item() == pytest.approx(naive_order_loss(planted, values), rel=1e-9)
        if ordered:
            assert losses.order.item() < 0.01
        else:
            assert losses.order.item() > 10 * math.log(2)
        assert naive_order_loss(planted, values) == pytest.approx(
            F.softplus(sign * (torch.log(torch.tensor(6.0)) - torch.log(torch.tensor(42.0)))).item())


def test_a_run_logs_the_term_learns_the_readout_and_saves_it(tmp_path, single_torch_thread):
    cfg = tiny_order("train.steps=300", "train.log_every=20", "train.lr=3e-3")
    train(cfg, tmp_path / "run", progress=False)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    first, last = rows[0]["order_loss"], sum(r["order_loss"] for r in rows[-4:]) / 4
    assert first == pytest.approx(math.log(2), abs=0.05)  # a fresh readout scores every item about alike
    assert last < 0.5 * first
    model = ckpt.load_model(tmp_path / "run")
    assert model.cfg.order_probe and model.W_order.shape == (32,)
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    with torch.no_grad():  # the saved readout is the trained one, on lists it never saw
        fresh = training_losses(model, source.batch(10_000), source.generator(10_000), cfg, torch.device("cpu"),
                                nullcontext())
    assert fresh.order.item() < 0.5 * first


def test_a_resumed_run_continues_the_readouts_curve_exactly(tmp_path, single_torch_thread):
    cfg = tiny_order("train.steps=20", "train.log_every=5", "train.schedule=constant", "train.checkpoint_every=10",
                     "train.dense_checkpoints=0")
    train(cfg, tmp_path / "straight", progress=False)
    train(apply_overrides(cfg, ["train.steps=10"]), tmp_path / "resumed", progress=False)
    train(cfg, tmp_path / "resumed", progress=False)
    curves = [[(r["step"], r["loss"], r["order_loss"]) for r in map(json.loads, (tmp_path / run /
               "metrics.jsonl").read_text().splitlines())] for run in ("straight", "resumed")]
    assert curves[0] == curves[1] and len(curves[0]) >= 4


def test_a_warm_start_adds_the_readout_and_keeps_the_answers(tmp_path, single_torch_thread):
    source_cfg = apply_overrides(tiny_order("train.steps=4", "train.checkpoint_every=4", "train.dense_checkpoints=0"),
                                 ["model.order_probe=false", "train.order_loss=null"])
    train(source_cfg, tmp_path / "source", progress=False)
    train(tiny_order("train.steps=2", f"train.init_from={tmp_path / 'source'}"), tmp_path / "grown", progress=False)
    source = ckpt.load_model(tmp_path / "source")
    grown = ckpt.load_model(tmp_path / "grown" / "checkpoints" / "step_0000000.safetensors")
    tokens = torch.tensor([source_cfg.make_task().vocab.encode("a:21,b:3=")])
    assert grown.W_order.shape == (32,)
    assert torch.equal(source(tokens), grown(tokens))  # a readout writes nothing into the state


def test_bad_settings_say_what_to_set():
    with pytest.raises(UserError, match="set model.order_probe=true"):
        tiny_order("model.order_probe=false")
    with pytest.raises(UserError, match="only train.order_loss trains"):
        tiny_order("train.order_loss=null")
    with pytest.raises(UserError, match="Task.item_closers"):
        apply_overrides(get_preset("plain-add"), ["model.order_probe=true", "train.order_loss=0.5"])
    with pytest.raises(UserError, match="order_loss must be >= 0"):
        tiny_order("train.order_loss=-1")
    with pytest.raises(ValueError, match="BatchSource"):
        cfg = tiny_order()
        batch = encode_batch(cfg.make_task().vocab, ["a:21,b:3="], ["ba"])
        training_losses(LoopedTransformer(cfg.model), batch, torch.Generator(), cfg, torch.device("cpu"), nullcontext())
    with pytest.raises(ValueError, match="no order readout"):
        LoopedTransformer(tiny_sort_run().model).read_order(torch.zeros(1, 2, 32))


def test_the_readout_and_its_loss_are_left_out_of_saved_configs_while_off():
    plain = get_preset("extrap-sort-window").to_dict()
    assert "order_loss" not in plain["train"] and "order_probe" not in plain["model"]
    saved = tiny_order().to_dict()
    assert saved["train"]["order_loss"] == 0.5 and saved["model"]["order_probe"] is True

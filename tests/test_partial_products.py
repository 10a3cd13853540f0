"""The partial-product auxiliary loss (train.partial_product_loss): its targets are the units
and tens of each product a_(i-j) * b_j at the position that predicts answer digit i, its term
is the readout's cross-entropy weighted like the loss across processes, and a training run
logs it, learns it and saves the readout."""

from __future__ import annotations

import json
import random
from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_mul_run

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.model import LoopedTransformer
from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.tasks import get_task
from abacus_interp.training import apply_overrides, get_preset, train
from abacus_interp.training.data import BatchSource
from abacus_interp.training.losses import training_losses


def tiny_mul(*extra: str):
    return tiny_mul_run("model.partial_product_probe=3", "train.partial_product_loss=0.5", *extra)


@pytest.mark.parametrize("a, b", [(0, 7), (9, 9), (99, 99), (12345, 678), (907, 3), (50, 20)])
def test_the_products_of_each_column_add_up_to_the_answer(a, b):
    task = get_task("multiplication", max_digits=6)
    products = task.partial_products(task.make(a, b))
    assert len(products) == len(str(a * b)) and {len(p) for p in products} == {len(str(b))}
    assert sum(sum(p) * 10**i for i, p in enumerate(products)) == a * b


def test_targets_sit_where_each_answer_digit_is_predicted():
    task = get_task("multiplication", max_digits=3)
    examples = [task.make(907, 86), task.make(5, 3), *task.sample(30, random.Random(0))]
    batch = BatchSource(task, tiny_mul().train, 32)._encode(examples)
    targets = batch.partial_products
    assert targets is not None and targets.shape == (*batch.tokens.shape, 3, 2)
    for row, example in enumerate(examples):
        positions = (targets[row] >= 0).flatten(1).any(1).nonzero()[:, 0].tolist()
        start = int(batch.prompt_lengths[row]) - 1
        assert positions == list(range(start, start + len(example.target)))  # not EOS, not the prompt
        a, b = example.operands
        a_digits, b_digits = [int(c) for c in str(a)[::-1]], [int(c) for c in str(b)[::-1]]
        for i, p in enumerate(positions):
            for j in range(3):
                if j >= len(b_digits):  # a digit the multiplier lacks: nothing to read
                    assert targets[row, p, j].tolist() == [-100, -100]
                    continue
                product = a_digits[i - j] * b_digits[j] if 0 <= i - j < len(a_digits) else 0
                assert targets[row, p, j].tolist() == [product % 10, product // 10]
    # 907 * 86: answer digit 1 adds a_1 * b_0 = 0 and a_0 * b_1 = 7 * 8 = 56
    assert targets[0, int(batch.prompt_lengths[0]), :2].tolist() == [[0, 0], [6, 5]]


def test_the_term_is_the_readouts_cross_entropy_and_its_rank_parts_sum_to_it(single_torch_thread):
    cfg = tiny_mul()
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model).double()
    batch = source.batch(1)
    whole = training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"), nullcontext())
    logits = model.read_partial_products(whole.state)  # [batch pos 3 2 10]
    targets = batch.partial_products[:, : logits.shape[1]]
    naive = F.cross_entropy(logits[targets >= 0], targets[targets >= 0])
    assert whole.partial_products.item() == pytest.approx(naive.item(), rel=1e-6)
    assert whole.loss.item() == pytest.approx(whole.full.item() + 0.5 * naive.item(), rel=1e-6)
    # two processes' weighted parts average to the whole batch's term
    parts = [training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"), nullcontext(), part=(r, 2))
             for r in range(2)]
    assert sum(p.partial_products.item() for p in parts) / 2 == pytest.approx(whole.partial_products.item(), rel=1e-6)
    whole.loss.backward()
    assert model.W_products.grad.abs().sum() > 0 and model.blocks[0].attn.W_Q.grad.abs().sum() > 0


def test_a_readout_wider_than_the_task_reads_only_the_tasks_products(single_torch_thread):
    cfg = tiny_mul("model.partial_product_probe=4")  # multipliers of up to 3 digits
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model).double()
    batch = source.batch(1)
    assert batch.partial_products.shape[-2:] == (3, 2)
    term = training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"), nullcontext()).partial_products
    logits = model.read_partial_products(model(batch.tokens[:, :-1], return_type="state"))[:, :, :3]
    targets = batch.partial_products[:, : logits.shape[1]]
    assert term.item() == pytest.approx(F.cross_entropy(logits[targets >= 0], targets[targets >= 0]).item(), rel=1e-6)


def test_a_run_logs_the_term_learns_the_readout_and_saves_it(tmp_path, single_torch_thread):
    cfg = tiny_mul("train.steps=300", "train.log_every=20", "train.lr=3e-3")
    train(cfg, tmp_path / "run", progress=False)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    first, last = rows[0]["partial_product_loss"], sum(r["partial_product_loss"] for r in rows[-4:]) / 4
    assert first > 2.0  # ten classes, a fresh readout: about ln 10
    # the units and tens of one-digit products: a readout that knew only the layout (which
    # products exist, and that most are small) stays near 1.5
    assert last < 0.6 * first
    model = ckpt.load_model(tmp_path / "run")  # the saved readout is the trained one
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    with torch.no_grad():
        fresh = training_losses(model, source.batch(10_000), source.generator(10_000), cfg, torch.device("cpu"),
                                nullcontext())
    assert model.cfg.partial_product_probe == 3 and fresh.partial_products.item() < 0.6 * first


def test_a_resumed_run_continues_the_readouts_curve_exactly(tmp_path, single_torch_thread):
    cfg = tiny_mul("train.steps=20", "train.log_every=5", "train.schedule=constant", "train.checkpoint_every=10",
                   "train.dense_checkpoints=0")
    train(cfg, tmp_path / "straight", progress=False)
    train(apply_overrides(cfg, ["train.steps=10"]), tmp_path / "resumed", progress=False)
    train(cfg, tmp_path / "resumed", progress=False)
    curves = [[(r["step"], r["loss"], r["partial_product_loss"]) for r in map(json.loads, (tmp_path / run /
               "metrics.jsonl").read_text().splitlines())] for run in ("straight", "resumed")]
    assert curves[0] == curves[1] and len(curves[0]) >= 4


def test_the_readout_runs_in_float32_under_bfloat16_autocast(single_torch_thread):
    cfg = tiny_mul()
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model)
    batch = source.batch(1)
    losses = training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"),
                             torch.autocast("cpu", dtype=torch.bfloat16))
    assert losses.partial_products.dtype == torch.float32
    logits = model.read_partial_products(losses.state.float())
    targets = batch.partial_products[:, : logits.shape[1]]
    naive = F.cross_entropy(logits[targets >= 0], targets[targets >= 0])
    assert losses.partial_products.item() == pytest.approx(naive.item(), rel=1e-5)


def test_a_warm_start_adds_the_readout_to_a_run_without_one(tmp_path, single_torch_thread):
    source_cfg = apply_overrides(tiny_mul("train.steps=4", "train.checkpoint_every=4", "train.dense_checkpoints=0"),
                                 ["model.partial_product_probe=null", "train.partial_product_loss=null"])
    train(source_cfg, tmp_path / "source", progress=False)
    cfg = tiny_mul("train.steps=2", f"train.init_from={tmp_path / 'source'}")
    train(cfg, tmp_path / "grown", progress=False)
    source = ckpt.load_model(tmp_path / "source")
    grown = ckpt.load_model(tmp_path / "grown" / "checkpoints" / "step_0000000.safetensors")
    assert torch.equal(source.W_E, grown.W_E) and grown.W_products.shape == (32, 3, 2, 10)


def test_bad_settings_say_what_to_set():
    with pytest.raises(UserError, match="model.partial_product_probe=k"):
        tiny_mul("model.partial_product_probe=null")
    with pytest.raises(UserError, match="only train.partial_product_loss trains"):  # an untrained readout
        tiny_mul("train.partial_product_loss=null")
    with pytest.raises(UserError, match="set model.partial_product_probe=3"):  # multipliers of 3 digits, 2 read
        tiny_mul("model.partial_product_probe=2")
    with pytest.raises(UserError, match="a whole number >= 1"):
        tiny_mul("model.partial_product_probe=0")
    with pytest.raises(UserError, match="must be an integer"):
        tiny_mul("model.partial_product_probe=true")
    with pytest.raises(ValueError, match="BatchSource"):
        cfg = tiny_mul()
        batch = encode_batch(cfg.make_task().vocab, ["21*3="], ["36"])
        training_losses(LoopedTransformer(cfg.model), batch, torch.Generator(), cfg, torch.device("cpu"), nullcontext())
    with pytest.raises(UserError, match="Task.partial_products"):
        apply_overrides(get_preset("plain-add"), ["model.partial_product_probe=1", "train.partial_product_loss=0.5"])
    with pytest.raises(UserError, match="partial_product_loss must be >= 0"):
        tiny_mul("train.partial_product_loss=-1")
    with pytest.raises(ValueError, match="no partial-product readout"):
        LoopedTransformer(tiny_mul("train.partial_product_loss=null", "model.partial_product_probe=null").model
                          ).read_partial_products(torch.zeros(1, 2, 32))


def test_the_loss_is_left_out_of_saved_configs_while_off():
    """Runs saved before the loss existed have no such field: a config without it writes none, so
    theirs and a fresh preset's compare equal, and --set still reaches the field."""
    plain = get_preset("extrap-mul")
    assert "partial_product_loss" not in plain.to_dict()["train"]
    assert tiny_mul().to_dict()["train"]["partial_product_loss"] == 0.5
    assert apply_overrides(plain, ["model.partial_product_probe=3", "train.partial_product_loss=1"]
                           ).train.partial_product_loss == 1.0

"""The carry readout (model.carry_probe, train.carry_loss): its targets are the carry into each
answer column at the position that predicts that digit, its term is the readout's
cross-entropy weighted like the loss across processes, and a training run logs it, learns it,
saves the readout and resumes its curve exactly."""

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
from abacus_interp.tasks.product_carries import carries_in
from abacus_interp.training import apply_overrides, get_preset, train
from abacus_interp.training.data import BatchSource
from abacus_interp.training.losses import training_losses


def tiny_carry(*extra: str):
    # TINY_MUL_RUN multiplies up to 3 x 3 digits: carries of up to 27
    return tiny_mul_run("model.carry_probe=28", "train.carry_loss=0.5", *extra)


@pytest.mark.parametrize("a, b", [(0, 7), (9, 9), (99, 99), (999, 999), (12345, 678), (907, 3)])
def test_each_columns_carry_and_digit_rebuild_the_product(a, b):
    task = get_task("multiplication", max_digits=5)
    carries = task.carries_in(task.make(a, b))
    answer = [int(c) for c in str(a * b)[::-1]]
    a_digits, b_digits = [int(c) for c in str(a)[::-1]], [int(c) for c in str(b)[::-1]]
    assert carries[0] == 0 and len(carries) == len(answer)
    for i, digit in enumerate(answer):  # long multiplication, column by column
        column = sum(x * b_digits[i - k] for k, x in enumerate(a_digits) if 0 <= i - k < len(b_digits))
        assert (column + carries[i]) % 10 == digit
        if i + 1 < len(answer):
            assert carries[i + 1] == (column + carries[i]) // 10


def test_the_largest_carry_is_within_the_tasks_bound_and_reached_by_nines():
    task = get_task("multiplication", max_digits=5, max_multiplier_digits=3)
    assert task.max_carry == 27
    assert max(carries_in(99999, 999)) == 26  # all nines: the most a 3-digit multiplier carries here
    drawn = task.sample(500, random.Random(0))
    assert max(max(task.carries_in(e)) for e in drawn) <= task.max_carry
    assert get_task("addition", max_digits=5).max_carry is None


def test_targets_sit_where_each_answer_digit_is_predicted():
    task = get_task("multiplication", max_digits=3)
    examples = [task.make(999, 99), task.make(5, 3), *task.sample(30, random.Random(0))]
    batch = BatchSource(task, tiny_carry().train, 32)._encode(examples)
    targets = batch.carries
    assert targets is not None and targets.shape == batch.tokens.shape
    for row, example in enumerate(examples):
        positions = (targets[row] >= 0).nonzero()[:, 0].tolist()
        start = int(batch.prompt_lengths[row]) - 1
        assert positions == list(range(start, start + len(example.target)))  # not EOS, not the prompt
        assert targets[row, positions].tolist() == carries_in(*example.operands)
    # 999 * 99 = 98901: columns sum 81, 162, 162, 81 -> carries 0, 8, 17, 17, 9
    assert targets[0, int(batch.prompt_lengths[0]) - 1:][:5].tolist() == [0, 8, 17, 17, 9]


def test_the_term_is_the_readouts_cross_entropy_and_its_rank_parts_sum_to_it(single_torch_thread):
    cfg = tiny_carry()
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model).double()
    batch = source.batch(1)
    whole = training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"), nullcontext())
    logits = model.read_carries(whole.state)  # [batch pos 28]
    targets = batch.carries[:, : logits.shape[1]]
    naive = F.cross_entropy(logits[targets >= 0], targets[targets >= 0])
    assert whole.carries.item() == pytest.approx(naive.item(), rel=1e-6)
    assert whole.loss.item() == pytest.approx(whole.full.item() + 0.5 * naive.item(), rel=1e-6)
    parts = [training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"), nullcontext(), part=(r, 2))
             for r in range(2)]
    assert sum(p.carries.item() for p in parts) / 2 == pytest.approx(whole.carries.item(), rel=1e-6)
    whole.loss.backward()
    assert model.W_carry.grad.abs().sum() > 0 and model.blocks[0].attn.W_Q.grad.abs().sum() > 0


def test_the_readout_runs_in_float32_under_bfloat16_autocast(single_torch_thread):
    cfg = tiny_carry()
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model)
    batch = source.batch(1)
    losses = training_losses(model, batch, source.generator(1), cfg, torch.device("cpu"),
                             torch.autocast("cpu", dtype=torch.bfloat16))
    assert losses.carries.dtype == torch.float32
    logits = model.read_carries(losses.state.float())
    targets = batch.carries[:, : logits.shape[1]]
    assert losses.carries.item() == pytest.approx(F.cross_entropy(logits[targets >= 0], targets[targets >= 0]).item(),
                                                  rel=1e-5)


def test_a_run_logs_the_term_learns_the_readout_and_saves_it(tmp_path, single_torch_thread):
    cfg = tiny_carry("train.steps=300", "train.log_every=20", "train.lr=3e-3")
    train(cfg, tmp_path / "run", progress=False)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    first, last = rows[0]["carry_loss"], sum(r["carry_loss"] for r in rows[-4:]) / 4
    assert first > 2.5  # 28 classes, a fresh readout: about ln 28 = 3.3
    assert last < 0.5 * first
    model = ckpt.load_model(tmp_path / "run")  # the saved readout is the trained one
    assert model.cfg.carry_probe == 28 and model.W_carry.shape == (32, 28)
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    with torch.no_grad():
        fresh = training_losses(model, source.batch(10_000), source.generator(10_000), cfg, torch.device("cpu"),
                                nullcontext())
    assert fresh.carries.item() < 0.5 * first


def test_a_resumed_run_continues_the_readouts_curve_exactly(tmp_path, single_torch_thread):
    cfg = tiny_carry("train.steps=20", "train.log_every=5", "train.schedule=constant", "train.checkpoint_every=10",
                     "train.dense_checkpoints=0")
    train(cfg, tmp_path / "straight", progress=False)
    train(apply_overrides(cfg, ["train.steps=10"]), tmp_path / "resumed", progress=False)
    train(cfg, tmp_path / "resumed", progress=False)
    curves = [[(r["step"], r["loss"], r["carry_loss"]) for r in map(json.loads, (tmp_path / run /
               "metrics.jsonl").read_text().splitlines())] for run in ("straight", "resumed")]
    assert curves[0] == curves[1] and len(curves[0]) >= 4


def test_a_warm_start_adds_the_readout_and_keeps_the_answers(tmp_path, single_torch_thread):
    source_cfg = apply_overrides(tiny_carry("train.steps=4", "train.checkpoint_every=4", "train.dense_checkpoints=0"),
                                 ["model.carry_probe=null", "train.carry_loss=null"])
    train(source_cfg, tmp_path / "source", progress=False)
    train(tiny_carry("train.steps=2", f"train.init_from={tmp_path / 'source'}"), tmp_path / "grown", progress=False)
    source = ckpt.load_model(tmp_path / "source")
    grown = ckpt.load_model(tmp_path / "grown" / "checkpoints" / "step_0000000.safetensors")
    tokens = torch.tensor([source_cfg.make_task().vocab.encode("21*3=")])
    assert grown.W_carry.shape == (32, 28)
    assert torch.equal(source(tokens), grown(tokens))  # a readout writes nothing into the state


def test_bad_settings_say_what_to_set():
    with pytest.raises(UserError, match="set model.carry_probe=n"):
        tiny_carry("model.carry_probe=null")
    with pytest.raises(UserError, match="only train.carry_loss trains"):
        tiny_carry("train.carry_loss=null")
    with pytest.raises(UserError, match="set model.carry_probe=28"):  # carries reach 27
        tiny_carry("model.carry_probe=20")
    with pytest.raises(UserError, match="a whole number >= 2"):
        tiny_carry("model.carry_probe=1")
    with pytest.raises(UserError, match="Task.carries_in"):
        apply_overrides(get_preset("plain-add"), ["model.carry_probe=2", "train.carry_loss=0.5"])
    with pytest.raises(UserError, match="carry_loss must be >= 0"):
        tiny_carry("train.carry_loss=-1")
    with pytest.raises(ValueError, match="BatchSource"):
        cfg = tiny_carry()
        batch = encode_batch(cfg.make_task().vocab, ["21*3="], ["36"])
        training_losses(LoopedTransformer(cfg.model), batch, torch.Generator(), cfg, torch.device("cpu"), nullcontext())
    with pytest.raises(ValueError, match="no carry readout"):
        LoopedTransformer(tiny_carry("train.carry_loss=null", "model.carry_probe=null").model
                          ).read_carries(torch.zeros(1, 2, 32))


def test_the_readout_and_its_loss_are_left_out_of_saved_configs_while_off():
    plain = get_preset("extrap-mul").to_dict()
    assert "carry_loss" not in plain["train"] and "carry_probe" not in plain["model"]
    saved = tiny_carry().to_dict()
    assert saved["train"]["carry_loss"] == 0.5 and saved["model"]["carry_probe"] == 28


def _tensors(path):
    model = ckpt.load_model(path)
    own = {k: v for k, v in model.state_dict().items() if k not in model.readout_parameters}
    return own, {k: v.detach().clone() for k, v in model.readout_parameters.items()}


def test_readouts_first_holds_the_models_own_weights_until_that_step(tmp_path, single_torch_thread):
    cfg = tiny_carry("train.steps=10", "train.checkpoint_every=5", "train.dense_checkpoints=0", "train.lr=3e-3", "train.log_every=1",
                     "train.readouts_first=5", "train.schedule=constant")
    train(cfg, tmp_path / "run", progress=False)
    step = {n: _tensors(tmp_path / "run" / "checkpoints" / f"step_{n:07d}.safetensors") for n in (0, 5, 10)}
    assert set(step[0][1]) == {"W_carry", "b_carry"}
    assert all(torch.equal(step[0][0][k], step[5][0][k]) for k in step[0][0])  # held, bit for bit
    assert not torch.equal(step[0][1]["W_carry"], step[5][1]["W_carry"])  # the readout learned
    moved = [k for k in step[5][0] if not torch.equal(step[5][0][k], step[10][0][k])]
    assert "W_E" in moved and "blocks.0.attn.W_Q" in moved  # and from step 6 on the model does
    # stopped inside the held stretch and resumed: the same curve as the straight run
    train(apply_overrides(cfg, ["train.steps=3"]), tmp_path / "resumed", progress=False)
    train(cfg, tmp_path / "resumed", progress=False)
    curves = [[(r["step"], r["loss"]) for r in map(json.loads, (tmp_path / run / "metrics.jsonl").read_text()
               .splitlines())] for run in ("run", "resumed")]
    assert curves[0] == curves[1]


def test_readouts_first_needs_a_readout_loss_and_a_step_count():
    with pytest.raises(UserError, match="no readout loss is on"):
        apply_overrides(get_preset("extrap-mul"), ["train.readouts_first=10"])
    with pytest.raises(UserError, match="an integer >= 1"):
        tiny_carry("train.readouts_first=0")
    with pytest.raises(UserError, match="must be an integer"):
        tiny_carry("train.readouts_first=true")
    assert "readouts_first" not in get_preset("extrap-mul").to_dict()["train"]

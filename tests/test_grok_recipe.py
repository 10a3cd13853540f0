"""Nanda et al.'s grokking model as options of this one (attention and unembedding without
biases, W_U's init scale, weight decay on every parameter, the softmax over the p + 1
symbols, a warmup from lr 0, their split count), and the one training loss of every device."""

from __future__ import annotations

import dataclasses
import json
import random
from contextlib import nullcontext
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.config import ModelConfig
from abacus_interp.core.families import build_model
from abacus_interp.core.model import LoopedTransformer
from abacus_interp.core.scoring import next_token_loss, run_readout, score_examples
from abacus_interp.tasks import get_task
from abacus_interp.training import RunConfig, TrainConfig, apply_overrides, get_preset, train
from abacus_interp.training import loop as loop_module
from abacus_interp.training.data import BatchSource
from abacus_interp.training.decay import build_optimizer, decayed_names, parameter_groups
from abacus_interp.training.presets import PRESETS
from abacus_interp.training.schedule import lr_multiplier

CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
SMALL = ["task.p=13", "model.d_model=32", "model.d_head=8", "model.d_mlp=64"]
GROK_TASK = get_task("modular_addition", p=13)


def small_grok(*extra: str, preset: str = "grok-mod113") -> RunConfig:
    cfg = apply_overrides(get_preset(preset), [*SMALL, *extra])
    return dataclasses.replace(cfg, model=cfg.model.replace(vocab=cfg.make_task().vocab))


def grok_model_cfg(**changes) -> ModelConfig:
    return small_grok().model.replace(**changes)


# ------------------------------------------------------------------ biases and init
def test_attention_and_unembedding_without_biases_compute_the_same_function_with_the_same_hooks():
    biased = LoopedTransformer(grok_model_cfg(attn_bias=True, unembed_bias=True))
    plain = LoopedTransformer(grok_model_cfg(attn_bias=False, unembed_bias=False))
    names = {n for n, _ in plain.named_parameters()}
    assert names == {"W_E", "W_pos", "W_U", "blocks.0.attn.W_Q", "blocks.0.attn.W_K", "blocks.0.attn.W_V",
                     "blocks.0.attn.W_O", "blocks.0.mlp.W_in", "blocks.0.mlp.b_in", "blocks.0.mlp.W_out",
                     "blocks.0.mlp.b_out"}  # their model's 11 parameters, by the same names
    assert {n for n, _ in biased.named_parameters()} - names == {
        "b_U", "blocks.0.attn.b_Q", "blocks.0.attn.b_K", "blocks.0.attn.b_V", "blocks.0.attn.b_O"}
    assert set(plain.state_dict()) == names  # the zero stand-ins are never saved
    assert plain.b_U.shape == (16,) and plain.blocks[0].attn.b_O.shape == (32,)
    assert float(plain.b_U.abs().sum()) == 0 and float(plain.blocks[0].attn.b_Q.abs().sum()) == 0
    # the biased model with its biases at zero is the same function
    biased.load_state_dict({**plain.state_dict(), **{n: torch.zeros_like(p) for n, p in biased.named_parameters()
                                                    if n not in names}})
    tokens = plain.to_tokens(["3 4 =", "12 5 =", "0 0 ="])
    torch.testing.assert_close(plain(tokens), biased(tokens), atol=0, rtol=0)
    with torch.no_grad():
        biased.b_U += 1.0
        biased.blocks[0].attn.b_O += 0.5
    assert not torch.equal(plain(tokens), biased(tokens))
    # the same hooks with the same shapes, cached, and the explicit path agrees
    logits, cache = plain.run_with_cache(tokens)
    _, biased_cache = biased.run_with_cache(tokens)
    assert {k: v.shape for k, v in cache.items()} == {k: v.shape for k, v in biased_cache.items()}
    assert cache["loops.0.blocks.0.attn.hook_pattern"].shape == (3, 4, 3, 3)
    torch.testing.assert_close(logits, plain(tokens))
    torch.testing.assert_close(cache["ln_final.hook_normalized"] @ plain.W_U, logits, atol=0, rtol=0)


def test_unembed_init_std_sets_only_the_unembedding_scale():
    torch.manual_seed(0)
    default = LoopedTransformer(grok_model_cfg(unembed_init_std=None))
    torch.manual_seed(0)
    explicit = LoopedTransformer(grok_model_cfg(unembed_init_std=128**-0.5))  # the preset's init_std
    assert default.cfg.init_std == 128**-0.5
    for name, tensor in default.state_dict().items():  # unset: the same draws as init_std
        assert torch.equal(tensor, explicit.state_dict()[name]), name
    big = LoopedTransformer(ModelConfig(vocab=GROK_TASK.vocab, d_model=512, init_std=512**-0.5,
                                        unembed_init_std=0.25, max_seq_len=5))
    assert float(big.W_U.detach().std()) == pytest.approx(0.25, rel=0.02)
    assert float(big.W_E.detach().std()) == pytest.approx(512**-0.5, rel=0.05)
    with pytest.raises(ValueError, match="unembed_init_std=0.0 must be > 0"):
        grok_model_cfg(unembed_init_std=0.0)
    with pytest.raises(ValueError, match="tie_unembed=true has no W_U"):
        grok_model_cfg(unembed_init_std=0.1, tie_unembed=True)


def test_new_model_fields_are_left_out_at_their_defaults_so_saved_runs_read_the_same():
    for run in ("grok-mod113-fast", "small-add", "loop-add", "extrap-add"):
        saved = ckpt.read_run_config(CHECKPOINTS / run)["model"]
        written = ModelConfig.from_dict(saved).to_dict()
        assert not {"attn_bias", "unembed_bias", "unembed_init_std"} & set(written), run
        # what was saved is written back, but for fields added before these (answer_slots)
        assert {k: v for k, v in written.items() if k in saved} == saved, run
    cfg = grok_model_cfg(attn_bias=False, unembed_bias=False, unembed_init_std=0.1)
    written = cfg.to_dict()
    assert (written["attn_bias"], written["unembed_bias"], written["unembed_init_std"]) == (False, False, 0.1)
    assert ModelConfig.from_dict(written) == cfg
    assert not {"attn_bias", "unembed_bias", "unembed_init_std"} & set(get_preset("grok-mod113-fast").model.to_dict())
    # the faithful grok run sets them, and its saved model reads back as written
    saved = ckpt.read_run_config(CHECKPOINTS / "grok-mod113")["model"]
    assert (saved["attn_bias"], saved["unembed_bias"], saved["unembed_init_std"]) == (False, False, 114**-0.5)
    assert ModelConfig.from_dict(saved).to_dict() == saved


def test_a_run_saved_before_a_model_field_existed_resumes(tmp_path):
    cfg = small_grok("train.steps=1", preset="grok-mod113-fast")
    train(cfg, tmp_path / "run", progress=False)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    del saved["model"]["answer_slots"]  # as config.json was written before answer_slots existed
    (tmp_path / "run" / "config.json").write_text(json.dumps(saved))
    longer = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=2))
    assert train(longer, tmp_path / "run", progress=False).final_step == 2
    other = dataclasses.replace(cfg, model=cfg.model.replace(attn_bias=False),
                                train=dataclasses.replace(cfg.train, steps=3))
    with pytest.raises(ValueError, match="different model or task config"):  # another model still refuses
        train(other, tmp_path / "run", progress=False)


def test_set_reaches_model_fields_left_out_of_the_saved_config():
    cfg = apply_overrides(get_preset("plain-add"), ["model.attn_bias=false", "model.unembed_bias=false",
                                                   "model.unembed_init_std=0.05", "model.rotary=abacus"])
    assert (cfg.model.attn_bias, cfg.model.unembed_bias, cfg.model.unembed_init_std) == (False, False, 0.05)
    assert cfg.model.rotary == "abacus"
    with pytest.raises(ValueError, match="model.attn_bias must be true or false"):
        apply_overrides(get_preset("plain-add"), ["model.attn_bias=3"])


# ------------------------------------------------------------------ weight decay by name
def _matrices_and_qkv(n_layers: int, positions: bool = True) -> list[str]:
    per_layer = [f"blocks.{i}.{name}" for i in range(n_layers) for name in (
        "attn.W_Q", "attn.W_K", "attn.W_V", "attn.W_O", "attn.b_Q", "attn.b_K", "attn.b_V", "mlp.W_in", "mlp.W_out")]
    return ["W_E", *(["W_pos"] if positions else []), "W_U", *per_layer]  # the model's own parameters first


DECAYED = {
    "demo-add": _matrices_and_qkv(1, positions=False),  # no position table
    "plain-add": _matrices_and_qkv(1),
    "mul": _matrices_and_qkv(2),
    "small-add": _matrices_and_qkv(1),
    "loop-add": _matrices_and_qkv(1),
    "extrap-add": _matrices_and_qkv(1, positions=False),  # no position table
    "extrap-mul": [*_matrices_and_qkv(1, positions=False), "blocks.0.mlp.W_gate"],  # no position table; gated MLP
    "extrap-mul-digits": [*_matrices_and_qkv(1, positions=False)[:2], "W_products",
                          *_matrices_and_qkv(1, positions=False)[2:], "blocks.0.mlp.W_gate"],  # and the readout
    "extrap-sort": _matrices_and_qkv(2, positions=False),  # no position table
    "extrap-sort-window": _matrices_and_qkv(2, positions=False),
    "extrap-sort-pairwise": [*_matrices_and_qkv(2, positions=False), "comparator.W_first", "comparator.W_second"],
    "grok-mod113": ["W_E", "W_pos", "W_U", "blocks.0.attn.W_Q", "blocks.0.attn.W_K", "blocks.0.attn.W_V",
                    "blocks.0.attn.W_O", "blocks.0.mlp.W_in", "blocks.0.mlp.b_in", "blocks.0.mlp.W_out",
                    "blocks.0.mlp.b_out"],  # every parameter
    "grok-mod113-fast": _matrices_and_qkv(1),
    "expressions": _matrices_and_qkv(1),
    "paper-add-1x16": _matrices_and_qkv(1),
    "paper-add-8x2": _matrices_and_qkv(8),
}


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_decays_the_parameters_it_names(preset):
    cfg = get_preset(preset)
    with torch.device("meta"):  # names and shapes only: the paper-size models allocate nothing
        model = build_model(cfg.model)
    assert decayed_names(model, cfg.train.weight_decay_on) == DECAYED[preset]
    if cfg.train.weight_decay_on == "matrices_and_qkv_biases":
        # the default is, name for name, the rank rule every saved run was trained with; but for the
        # partial-product readout's bias b_products [k 2 10], a bias of three axes, which no run
        # before the readout had and the name rule leaves undecayed like every other bias
        assert DECAYED[preset] == [n for n, p in model.named_parameters() if p.dim() >= 2 and n != "b_products"]
        assert [n for n in decayed_names(model, "matrices") if ".b_" in n] == []


@pytest.mark.parametrize("family", ["lstm", "retran"])
def test_decay_rules_name_the_recurrent_families_weights(family):
    cfg = ModelConfig(vocab=GROK_TASK.vocab, family=family, d_model=16, n_heads=2, n_loops=1, max_seq_len=8)
    model = build_model(cfg)
    rank_rule = [n for n, p in model.named_parameters() if p.dim() >= 2]
    assert decayed_names(model, "matrices_and_qkv_biases") == rank_rule
    matrices = decayed_names(model, "matrices")
    assert "blocks.0.lstm.W_ih" in matrices and "blocks.0.lstm.W_hh" in matrices
    assert not [n for n in matrices if n.rsplit(".", 1)[-1].startswith("b")]
    assert decayed_names(model, "all") == [n for n, _ in model.named_parameters()]


def test_parameter_groups_and_the_optimizer_of_a_run(tmp_path):
    model = LoopedTransformer(grok_model_cfg(attn_bias=True, unembed_bias=True))
    groups = parameter_groups(model, 1.0, "all")
    assert len(groups) == 1 and groups[0]["weight_decay"] == 1.0 and len(groups[0]["params"]) == 16
    decay, rest = parameter_groups(model, 0.5, "matrices")
    assert (len(decay["params"]), decay["weight_decay"], len(rest["params"]), rest["weight_decay"]) == (9, 0.5, 7, 0.0)
    with pytest.raises(ValueError, match="train.weight_decay_on='biases'; choose one of"):
        TrainConfig(weight_decay_on="biases")
    # the run's optimizer takes its groups from the rule: one group at wd 1.0 for grok-mod113
    train(small_grok("train.steps=1"), tmp_path / "run", progress=False)
    saved = json.loads((tmp_path / "run" / "resume" / "state.json").read_text())["param_groups"]
    assert [(len(g["params"]), g["weight_decay"]) for g in saved] == [(11, 1.0)]


def test_the_run_optimizer_is_fused_and_updates_as_the_unfused_one_does():
    """The fused AdamW of a run (one kernel for every parameter) takes the steps of the
    per-tensor one, to float rounding, with weight decay on some groups only."""
    cfg = small_grok(preset="grok-mod113-fast").train
    cfg = dataclasses.replace(cfg, weight_decay_on="matrices")
    models = [LoopedTransformer(grok_model_cfg()) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    fused = build_optimizer(models[0], cfg, torch.device("cpu"))
    assert fused.defaults["fused"] and len(fused.param_groups) == 2
    unfused = torch.optim.AdamW(
        parameter_groups(models[1], cfg.weight_decay, cfg.weight_decay_on), lr=cfg.lr, betas=cfg.betas, foreach=False
    )
    tokens = torch.randint(0, 13, (32, 3))
    before = {name: p.detach().clone() for name, p in models[0].named_parameters()}
    for _ in range(20):
        for model, optimizer in zip(models, (fused, unfused), strict=True):
            optimizer.zero_grad()
            model(tokens)[:, -1].logsumexp(-1).mean().backward()
            optimizer.step()
    for (name, a), b in zip(models[0].named_parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    assert all(not torch.equal(a, before[name]) for name, a in models[0].named_parameters())


# ------------------------------------------------------------------ warmup from lr 0
def test_warmup_from_zero_is_lambdalr_stepped_after_each_update(tmp_path):
    theirs = TrainConfig(warmup_steps=10, schedule="constant", warmup_starts_at_zero=True)
    assert [lr_multiplier(s, theirs) for s in range(1, 13)] == [min(e / 10, 1) for e in range(12)]
    ours = dataclasses.replace(theirs, warmup_starts_at_zero=False)
    assert [lr_multiplier(s, ours) for s in range(1, 4)] == [0.1, 0.2, 0.3]
    # the first update moves no weight (AdamW at lr 0: no step and no decay) but fills Adam's moments
    train(small_grok("train.steps=2", "train.dense_until=2", "train.checkpoint_every=1"), tmp_path / "run",
          progress=False)
    step0, step1, step2 = (ckpt.load_tensors(ckpt.step_path(tmp_path / "run", s)) for s in (0, 1, 2))
    assert all(torch.equal(step0[n], step1[n]) for n in step0)
    assert not torch.equal(step1["W_U"], step2["W_U"])
    rows = ckpt.read_metrics(tmp_path / "run")
    assert [r["lr"] for r in rows] == [0.0, 1e-4]


# ------------------------------------------------------------------ their split
def test_floor_split_is_their_training_set():
    task = get_task("modular_addition", p=113, train_fraction=0.3, split_seed=0, split_rounding="floor")
    pairs = [(i, j, 113) for i in range(113) for j in range(113)]  # their gen_train_test, written out
    random.seed(0)
    random.shuffle(pairs)
    div = int(0.3 * len(pairs))
    assert div == 3830 == task.n_train
    assert task.split()[0] == [(a, b) for a, b, _ in pairs[:div]]
    assert task.config()["split_rounding"] == "floor"
    default = get_task("modular_addition", p=113, train_fraction=0.3, split_seed=0)
    assert default.n_train == 3831 and "split_rounding" not in default.config()
    with pytest.raises(ValueError, match="split_rounding must be one of"):
        get_task("modular_addition", p=13, split_rounding="ceil")


# ------------------------------------------------------------------ the readout over p + 1 symbols
def test_symbols_readout_is_their_softmax_over_residues_and_equals():
    cfg = small_grok()
    assert (cfg.train.loss_positions, cfg.train.readout) == ("answer_tokens", "symbols")
    task = cfg.make_task()
    allowed = loop_module.readout_ids(cfg, task)
    assert allowed.tolist() == list(range(2, 16))  # 13 residues and "=": all but PAD and EOS
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model).double()
    batch = BatchSource(task, cfg.train, cfg.model.max_seq_len).batch(1)
    loss = loop_module.training_losses(model, batch, torch.Generator(), cfg, torch.device("cpu"), nullcontext(),
                                       allowed)[0]
    logits = model(batch.tokens)[:, 2, 2:]  # at "=": the 14 symbol logits, as their unembedding's
    expected = F.cross_entropy(logits, batch.tokens[:, 3] - 2)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    assert run_readout(cfg.to_dict()["train"], task)["allowed"].tolist() == list(range(2, 16))
    with pytest.raises(ValueError, match="train.readout='symbols' leaves EOS out"):
        TrainConfig(readout="symbols")


# ------------------------------------------------------------------ one loss on every device
def _loss_inputs():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 9, 14, generator=generator)
    tokens = torch.randint(2, 14, (6, 9), generator=generator)
    loss_mask = torch.rand(6, 9, generator=generator) < 0.4
    loss_mask[0, 3] = True
    return logits, tokens, loss_mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_loss_is_the_boolean_indexed_cross_entropy_bit_for_bit(dtype):
    logits, tokens, loss_mask = _loss_inputs()
    mask = loss_mask[:, :-1]
    selected = logits[:, :-1][mask].to(dtype)
    assert torch.equal(next_token_loss(logits, tokens, loss_mask, dtype),
                       F.cross_entropy(selected, tokens[:, 1:][mask]))
    allowed = torch.arange(2, 14)
    assert torch.equal(next_token_loss(logits, tokens, loss_mask, dtype, allowed),
                       F.cross_entropy(selected[:, allowed], tokens[:, 1:][mask] - 2))


def test_a_target_outside_the_readout_is_a_clear_error_not_nan():
    logits, tokens, loss_mask = _loss_inputs()
    tokens = tokens.clamp(max=11)
    allowed = torch.arange(2, 12)
    assert torch.isfinite(next_token_loss(logits, tokens, loss_mask, allowed=allowed))
    tokens[0, 4] = 12  # the target of the scored position (0, 3)
    with pytest.raises(ValueError, match=r"target token ids \[12\] are outside the restricted readout"):
        next_token_loss(logits, tokens, loss_mask, allowed=allowed)
    # on the accelerator's path too: the logits on a device whose values cannot be read (meta)
    with pytest.raises(ValueError, match=r"target token ids \[12\] are outside the restricted readout"):
        next_token_loss(logits.to("meta"), tokens, loss_mask, allowed=allowed)


def test_the_training_loss_reads_nothing_from_the_device_and_checks_targets_on_the_host():
    """The loop's loss on a device whose values cannot be read (meta, a stand-in for an
    accelerator): it computes, so nothing waits for the device; and a scored target outside
    the readout raises before the step, as on the CPU."""
    cfg = small_grok()
    task = cfg.make_task()
    device = torch.device("meta")
    model = LoopedTransformer(cfg.model).to(device)
    batch = BatchSource(task, cfg.train, cfg.model.max_seq_len).batch(1)
    allowed = loop_module.readout_ids(cfg, task)  # in host memory, as the loop passes it
    loss = loop_module.training_losses(model, batch, torch.Generator(), cfg, device, nullcontext(), allowed)[0]
    assert loss.device.type == "meta" and loss.shape == ()
    narrow = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, readout="answer_symbols"))
    eos_scored = dataclasses.replace(batch, tokens=batch.tokens.clone())
    eos_scored.tokens[0, 3] = task.vocab.encode("=")[0]  # "=" as an answer: outside the 13 residues
    for run_cfg, device in ((narrow, torch.device("cpu")), (narrow, torch.device("meta"))):
        on_device = LoopedTransformer(cfg.model).to(device)
        with pytest.raises(ValueError, match="outside the restricted readout"):
            loop_module.training_losses(on_device, eos_scored, torch.Generator(), run_cfg, device, nullcontext(),
                                        loop_module.readout_ids(run_cfg, task))


# ------------------------------------------------------------------ the preset and the shipped runs
def test_grok_preset_is_their_model_and_optimiser():
    cfg = get_preset("grok-mod113")
    m, t = cfg.model, cfg.train
    assert (m.attn_bias, m.unembed_bias, m.norm, m.activation, m.d_model, m.n_heads, m.d_head, m.d_mlp) == (
        False, False, "none", "relu", 128, 4, 32, 512)
    assert (m.init_std, m.unembed_init_std) == (128**-0.5, 114**-0.5)
    assert (t.weight_decay_on, t.weight_decay, t.lr, t.betas, t.batch_size, t.grad_clip) == (
        "all", 1.0, 1e-3, (0.9, 0.98), None, None)
    assert (t.warmup_steps, t.warmup_starts_at_zero, t.schedule, t.readout, t.loss_positions) == (
        10, True, "constant", "symbols", "answer_tokens")
    task = cfg.make_task()
    assert task.n_train == 3830 and len(loop_module.readout_ids(cfg, task)) == 114
    fast = get_preset("grok-mod113-fast")  # unchanged: its shipped checkpoint's config
    assert (fast.model.attn_bias, fast.model.unembed_bias, fast.train.weight_decay_on) == (
        True, True, "matrices_and_qkv_biases")


@pytest.mark.skipif(not (CHECKPOINTS / "grok-mod113" / "config.json").exists(), reason="shipped run absent")
def test_the_shipped_grok_run_is_their_model_and_groks():
    saved = ckpt.read_run_config(CHECKPOINTS / "grok-mod113")
    model = ckpt.load_model(CHECKPOINTS / "grok-mod113", device="cpu")
    assert (model.cfg.attn_bias, model.cfg.unembed_bias, model.cfg.unembed_init_std) == (False, False, 114**-0.5)
    names = dict(model.named_parameters())
    assert "b_U" not in names and "blocks.0.attn.b_Q" not in names and "blocks.0.mlp.b_in" in names
    run_cfg = RunConfig.from_dict(saved)
    assert run_cfg.to_dict() == RunConfig.from_dict(get_preset("grok-mod113").to_dict()).to_dict()  # the preset, as is
    task = ckpt.load_task(CHECKPOINTS / "grok-mod113")
    assert task.n_train == 3830
    readout = run_readout(saved["train"], task)
    assert readout["eos"] is False and len(readout["allowed"]) == 114  # the residues and "="
    test = score_examples(model, task.full_split("test"), **readout)
    assert len(test.per_example_correct) == 113**2 - 3830 and test.exact_match == 1.0
    assert (run_cfg.train.weight_decay_on, run_cfg.train.steps) == ("all", 20_000)

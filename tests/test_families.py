"""Model families beside the looped transformer (abacus_interp/core/families): each builds from
its config, trains with the project's `train` on the expressions task with its loss falling,
reloads with `load_model` to identical logits, decodes the same with and without a cache,
and caches hooks that differ per layer and per time step.

Everything is tiny (d_model 32, two layers, depth-1 expressions, a few dozen steps), so the
file runs in a few seconds on one thread.
"""

from __future__ import annotations

import pytest
import torch

from abacus_interp import ModelConfig, get_task, load_model
from abacus_interp.core.families import build_model, family_class
from abacus_interp.core.summary import parameter_summary
from abacus_interp.training import RunConfig, TrainConfig, apply_overrides, get_preset, train

FAMILIES = ("lstm", "retran")
TASK_KWARGS = {"max_depth": 1, "max_digits": 2, "max_prompt_len": 12}
PROMPTS = ["21+3=", "(-4)*5=", "9-81="]  # model order (LSD first)


def tiny_model_cfg(family: str, **changes) -> ModelConfig:
    task = get_task("expressions", **TASK_KWARGS)
    fields = dict(
        vocab=task.vocab, family=family, d_model=32, n_heads=4, n_layers=2, n_loops=1, max_seq_len=24,
        positional="none" if family == "lstm" else "abacus", abacus_max_offset=4,
    )
    return ModelConfig(**{**fields, **changes})


def tiny_run_cfg(family: str) -> RunConfig:
    return RunConfig(
        task="expressions",
        task_kwargs=dict(TASK_KWARGS),
        model=tiny_model_cfg(family),
        train=TrainConfig(
            steps=40, batch_size=32, lr=3e-3, warmup_steps=5, log_every=1, eval_every=40, eval_problems=16,
            checkpoint_every=40, dense_checkpoints=2, dense_until=4, device="cpu", bf16=False,
        ),
    )


@pytest.fixture(scope="module", params=FAMILIES)
def trained_run(request, tmp_path_factory):
    family = request.param
    run_dir = tmp_path_factory.mktemp(f"family-{family}")
    torch.manual_seed(0)
    result = train(tiny_run_cfg(family), run_dir, progress=False)
    return family, run_dir, result


def test_config_selects_family_and_keeps_looped_configs_unchanged():
    looped = tiny_model_cfg("looped", n_loops=2)
    assert "family" not in looped.to_dict()  # configs written before the field still match
    assert ModelConfig.from_dict(looped.to_dict()).family == "looped"
    for family in FAMILIES:
        cfg = tiny_model_cfg(family)
        assert cfg.max_loops == 1
        assert ModelConfig.from_dict(cfg.to_dict()) == cfg
        assert isinstance(build_model(cfg), family_class(family))
        with pytest.raises(ValueError, match="n_loops=1"):
            tiny_model_cfg(family, n_loops=2)
    with pytest.raises(ValueError, match="family"):
        tiny_model_cfg("gru")


def test_set_selects_a_family_on_any_preset():
    cfg = apply_overrides(get_preset("plain-add"), ["model.family=retran", "model.n_loops=1"])
    assert (cfg.model.family, cfg.model.max_loops) == ("retran", 1)
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="n_loops=1"):  # plain-add loops twice
        apply_overrides(get_preset("plain-add"), ["model.family=lstm"])


def test_training_lowers_the_loss(trained_run):
    family, run_dir, result = trained_run
    rows = [row for row in _metrics(run_dir) if "loss" in row]
    first, last = rows[0]["loss"], sum(r["loss"] for r in rows[-5:]) / 5
    assert result.final_step == 40
    assert last < 0.8 * first, f"{family}: loss {first:.3f} -> {last:.3f}"


def test_load_model_reproduces_the_trained_logits(trained_run):
    family, run_dir, _ = trained_run
    model = load_model(run_dir, device="cpu")
    assert type(model) is family_class(family)
    reloaded = load_model(run_dir, device="cpu")
    tokens = model.to_tokens(PROMPTS)
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), reloaded(tokens), rtol=0, atol=0)
    # the run's own last weights, not a fresh initialisation
    fresh = build_model(model.cfg).eval()
    with torch.no_grad():
        assert not torch.allclose(fresh(tokens), model(tokens))


def test_cached_and_uncached_decoding_agree_on_ragged_prompts(trained_run):
    _, run_dir, _ = trained_run
    model = load_model(run_dir, device="cpu")
    cached = model.generate(PROMPTS, max_new_tokens=5)
    assert cached == model.generate(PROMPTS, max_new_tokens=5, use_cache=False)
    # left padding is skipped by the recurrence: a prompt decodes alone as it does in a batch
    assert [model.generate([p], max_new_tokens=5)[0] for p in PROMPTS] == cached


@pytest.mark.parametrize("family", FAMILIES)
def test_hooks_differ_per_layer_and_time_step(family):
    torch.manual_seed(0)
    model = build_model(tiny_model_cfg(family)).eval()
    tokens = model.to_tokens(PROMPTS)  # [batch pos]
    logits, cache = model.run_with_cache(tokens)
    batch, n_pos = tokens.shape
    assert logits.shape == (batch, n_pos, model.cfg.d_vocab)
    d = model.cfg.d_model
    for layer in range(model.cfg.n_layers):
        steps = [cache[f"blocks.{layer}.lstm.steps.{p}.hook_hidden"] for p in range(n_pos)]
        assert all(s.shape == (batch, d) for s in steps)
        assert cache[f"blocks.{layer}.lstm.steps.0.hook_cell"].shape == (batch, d)
        assert not torch.allclose(steps[0], steps[1])  # one tensor per time step
        assert cache[f"blocks.{layer}.lstm.hook_gates_in"].shape == (batch, n_pos, 4 * d)
    out = "hook_out" if family == "lstm" else "hook_resid_post"
    assert cache[f"blocks.0.{out}"].shape == (batch, n_pos, d)
    assert not torch.allclose(cache[f"blocks.0.{out}"], cache[f"blocks.1.{out}"])  # one per layer
    if family == "lstm":  # a layer's output is its hidden state at every step
        torch.testing.assert_close(cache["blocks.1.hook_out"][:, 2], cache["blocks.1.lstm.steps.2.hook_hidden"])
    else:
        pattern = cache["blocks.1.attn.hook_pattern"]  # [batch head query_pos key_pos]
        assert pattern.shape == (batch, model.cfg.n_heads, n_pos, n_pos)
        torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))
        assert not torch.allclose(pattern, cache["blocks.0.attn.hook_pattern"])


@pytest.mark.parametrize("family", FAMILIES)
def test_an_edit_inside_the_recurrence_reaches_later_steps_only(family):
    torch.manual_seed(0)
    model = build_model(tiny_model_cfg(family)).eval()
    tokens = model.to_tokens(PROMPTS[:1])  # [1 pos]
    clean = model(tokens)

    def zero_cell(cell, hook):
        return torch.zeros_like(cell)

    edited = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.lstm.steps.2.hook_cell", zero_cell)])
    torch.testing.assert_close(edited[:, :2], clean[:, :2])  # causal: earlier positions unchanged
    assert not torch.allclose(edited[:, 3:], clean[:, 3:])  # the edit is carried forward


@pytest.mark.parametrize("family", FAMILIES)
def test_family_without_a_loop_refuses_loops(family):
    model = build_model(tiny_model_cfg(family))
    tokens = model.to_tokens(PROMPTS[:1])
    with pytest.raises(ValueError, match="n_loops must be 1"):
        model(tokens, n_loops=2)
    with pytest.raises(ValueError, match="train.compile"):
        model.compile_loops()


def _metrics(run_dir):
    from abacus_interp.checkpoints import read_metrics

    return read_metrics(run_dir)


def test_parameter_summary_counts_the_lstm_layers():
    for family in FAMILIES:
        model = build_model(tiny_model_cfg(family))
        summary = parameter_summary(model)
        assert summary["total_parameters"] == sum(p.numel() for p in model.parameters())
        d, layers = model.cfg.d_model, model.cfg.n_layers
        assert summary["parameters"]["lstm"] == layers * (2 * d * 4 * d + 4 * d)  # W_ih, W_hh, b
        assert summary["parameters"]["mlp"] == 0
    # a looped model's summary lists the same components as before the families existed
    assert "lstm" not in parameter_summary(build_model(tiny_model_cfg("looped", n_loops=2)))["parameters"]

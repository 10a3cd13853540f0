"""torch.compile (issue 17): compiled loops agree with eager ones, hooks still work on a
compiled model, checkpoints keep plain keys, and `train.compile` trains the same curve.

Compiling on a CPU needs a C++ compiler and takes seconds per graph, so the models are tiny
(d_model 16, sequences <= 12 tokens). Most tests use the "aot_eager" backend, which traces
and partitions the same graphs as the default "inductor" backend without generating code;
one test runs inductor itself, forward and backward.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from abacus_interp import checkpoints as ckpt
from abacus_interp.core import model as model_module
from abacus_interp.core.model import LoopedTransformer
from abacus_interp.training import apply_overrides, get_preset, train

TRACE_ONLY = "aot_eager"
PROMPTS = ["321+654=975", "12+34=46", "9+9=81"]
TINY_MODEL = dict(d_model=16, n_heads=2, n_layers=2, n_loops=3, max_seq_len=12, abacus_max_offset=0)


@pytest.fixture
def compiled_pair(tiny_model, single_torch_thread):
    """An eager model and a second one with the same weights whose loops are compiled."""
    eager = tiny_model(**TINY_MODEL)
    compiled = tiny_model(**TINY_MODEL)
    compiled.load_state_dict(eager.state_dict())
    return eager, compiled.compile_loops(TRACE_ONLY)


def test_compiled_loops_give_the_eager_logits_at_every_depth(compiled_pair):
    eager, compiled = compiled_pair
    tokens = eager.to_tokens(PROMPTS)
    with torch.no_grad():
        for n_loops in (1, 3, 5):  # one graph serves every depth
            torch.testing.assert_close(compiled(tokens, n_loops), eager(tokens, n_loops), rtol=1e-5, atol=1e-5)
    assert compiled.generate(["12+34="]) == eager.generate(["12+34="])  # cached decoding: eager path


def test_run_with_cache_and_hooks_work_on_a_compiled_model(compiled_pair):
    eager, compiled = compiled_pair
    tokens = eager.to_tokens(PROMPTS)
    compiled(tokens)  # compile first, so the hooks below meet an already compiled model
    logits, cache = compiled.run_with_cache(tokens)
    expected_logits, expected_cache = eager.run_with_cache(tokens)
    torch.testing.assert_close(logits, expected_logits)
    assert cache.keys() == expected_cache.keys()
    for name in expected_cache.keys():
        torch.testing.assert_close(cache[name], expected_cache[name], msg=name)

    # an editing hook in one loop: that loop runs eagerly, the others compiled
    name = "loops.1.blocks.0.hook_attn_out"

    def zero_attention(value, hook):
        return torch.zeros_like(value)

    patched = compiled.run_with_hooks(tokens, fwd_hooks=[(name, zero_attention)])
    torch.testing.assert_close(patched, eager.run_with_hooks(tokens, fwd_hooks=[(name, zero_attention)]))
    assert not torch.allclose(patched, logits)
    torch.testing.assert_close(compiled(tokens), logits)  # hooks removed: back to the compiled graph

    # gradients at every loop's state (backward hooks), as loop-aware attribution reads them
    state_names = lambda name: name.endswith("hook_state_post")  # noqa: E731
    _, grads = compiled.run_with_cache(tokens, names_filter=state_names, incl_bwd=True, return_type="loss")
    _, expected_grads = eager.run_with_cache(tokens, names_filter=state_names, incl_bwd=True, return_type="loss")
    for t in range(3):
        torch.testing.assert_close(grads[f"loops.{t}.hook_state_post_grad"], expected_grads[f"loops.{t}.hook_state_post_grad"])


def test_compiling_leaves_the_state_dict_and_checkpoints_unchanged(compiled_pair, tmp_path):
    eager, compiled = compiled_pair
    assert list(compiled.state_dict()) == list(eager.state_dict())
    # a model wrapped by torch.compile is saved without the wrapper's "_orig_mod." prefix
    run_dir = _write_run(tmp_path / "run", eager)
    path = ckpt.save_checkpoint(run_dir, torch.compile(eager, backend=TRACE_ONLY), 1, {})
    assert not any(key.startswith("_orig_mod.") for key in ckpt.load_tensors(path))

    tokens = eager.to_tokens(PROMPTS)
    loaded = ckpt.load_model(run_dir, device="cpu", compile=TRACE_ONLY)
    assert loaded.compile_backend == TRACE_ONLY
    with torch.no_grad():
        torch.testing.assert_close(loaded(tokens), eager(tokens))


def test_weights_saved_with_the_compile_wrapper_prefix_still_load(tiny_model, tmp_path):
    model = tiny_model(**TINY_MODEL)
    run_dir = _write_run(tmp_path / "run", model)
    prefixed = {f"_orig_mod.{key}": value for key, value in model.state_dict().items()}
    ckpt.save_tensors(ckpt.step_path(run_dir, 3), prefixed)
    loaded = ckpt.load_model(ckpt.step_path(run_dir, 3), device="cpu")
    tokens = model.to_tokens(PROMPTS)
    with torch.no_grad():
        torch.testing.assert_close(loaded(tokens), model(tokens))


@pytest.mark.slow  # about 40 s on two busy cores: inductor generates and builds C++ twice
def test_inductor_compiled_loops_match_eager_forward_and_backward(tiny_model, single_torch_thread):
    eager = tiny_model(**{**TINY_MODEL, "n_layers": 1}).train()
    compiled = LoopedTransformer(eager.cfg).train()
    compiled.load_state_dict(eager.state_dict())
    compiled.compile_loops("inductor")
    tokens = eager.to_tokens(PROMPTS)
    losses = [m(tokens, return_type="loss") for m in (eager, compiled)]
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-6)
    for loss in losses:
        loss.backward()
    for (name, p_eager), p_compiled in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(p_compiled.grad, p_eager.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_train_compile_gives_the_eager_loss_curve(tmp_path, monkeypatch, single_torch_thread):
    """A few steps of the McLeish progressive loss (random depths each step, so one graph
    serving every depth matters) with and without `train.compile`."""
    monkeypatch.setattr(model_module, "DEFAULT_COMPILE_BACKEND", TRACE_ONLY)
    compiled_calls = []
    original = model_module._compiled_layers
    monkeypatch.setattr(model_module, "_compiled_layers", lambda backend: compiled_calls.append(backend) or original(backend))
    overrides = [
        "task.max_digits=2", "model.d_model=16", "model.n_heads=2", "model.n_loops=3", "model.max_seq_len=12",
        "train.progressive=mcleish", "train.steps=6", "train.batch_size=8", "train.log_every=1",
        "train.eval_every=3", "train.eval_problems=8", "train.warmup_steps=0", "train.dense_checkpoints=1",
        "train.dense_until=1", "train.checkpoint_every=6",
    ]  # fmt: skip
    curves = {}
    for compiled in (False, True):
        cfg = apply_overrides(get_preset("plain-add"), [*overrides, f"train.compile={str(compiled).lower()}"])
        train(cfg, tmp_path / str(compiled), progress=False)
        curves[compiled] = ckpt.read_metrics(tmp_path / str(compiled))
    assert compiled_calls and set(compiled_calls) == {TRACE_ONLY}
    assert [r["step"] for r in curves[True]] == list(range(1, 7))
    for eager_row, compiled_row in zip(curves[False], curves[True], strict=True):
        for key in ("loss", "full_depth_loss", "grad_norm", "train_exact_match"):
            assert compiled_row[key] == pytest.approx(eager_row[key], rel=1e-4, abs=1e-6), (eager_row["step"], key)
    assert ckpt.read_run_config(tmp_path / "True")["train"]["compile"] is True
    assert list(ckpt.load_tensors(ckpt.step_path(tmp_path / "True", 6))) == list(
        ckpt.load_tensors(ckpt.step_path(tmp_path / "False", 6))
    )


def _write_run(run_dir: Path, model: LoopedTransformer) -> Path:
    """A minimal run directory around `model` (config.json + one checkpoint), enough for load_model."""
    ckpt.write_json(run_dir / "config.json", {"model": model.cfg.to_dict()})
    ckpt.save_checkpoint(run_dir, model, 0, {})
    return run_dir


@pytest.mark.slow  # about 25 s: dynamo traces the whole forward, then again with hooks attached
def test_run_with_cache_on_a_model_compiled_whole_with_module_compile(tiny_model, single_torch_thread):
    """`model.compile()` (torch's in-place nn.Module.compile) traces the whole forward,
    embedding and Abacus indices included, in one graph, and hooks into it."""
    eager = tiny_model(**{**TINY_MODEL, "n_layers": 1})
    compiled = tiny_model(**{**TINY_MODEL, "n_layers": 1})
    compiled.load_state_dict(eager.state_dict())
    compiled.compile(backend=TRACE_ONLY, fullgraph=True)  # fullgraph: a graph break would raise
    tokens = eager.to_tokens(PROMPTS)
    with torch.no_grad():
        torch.testing.assert_close(compiled(tokens), eager(tokens))
    assert list(compiled.state_dict()) == list(eager.state_dict())
    names = lambda name: "hook_pattern" in name or name.endswith("hook_state_post")  # noqa: E731
    logits, cache = compiled.run_with_cache(tokens, names_filter=names)
    expected_logits, expected_cache = eager.run_with_cache(tokens, names_filter=names)
    torch.testing.assert_close(logits, expected_logits)
    assert cache.keys() == expected_cache.keys() and len(cache.keys()) == 6
    for name in expected_cache.keys():
        torch.testing.assert_close(cache[name], expected_cache[name], msg=name)

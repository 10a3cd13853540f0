"""The loop-aware ActivationCache and loop-aware patching, each checked against a direct
computation from the raw hook tensors of tiny fp32 models."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import make_tiny_model
from transformer_lens import ActivationCache
from transformer_lens import patching as tl_patching

from abacus_interp import act_name
from abacus_interp.core.cache import LoopActivationCache
from abacus_interp.core.patching import (
    patch_attn_out,
    patch_head,
    patch_mlp_out,
    patch_resid,
    patch_state,
    unrolled,
)

INJECTIONS = ("add", "norm_add", "none")
PROMPTS = ["21+43=64", "99+11=011"]


def run(**overrides):
    model = make_tiny_model(**overrides)
    tokens = model.to_tokens(PROMPTS)
    logits, cache = model.run_with_cache(tokens)
    return model, tokens, logits, cache


def final_state(cache):
    return cache[act_name("state_post", loop=cache.n_loops - 1)]


def test_run_with_cache_returns_a_loop_aware_activation_cache():
    model, tokens, logits, cache = run()
    assert isinstance(cache, LoopActivationCache) and isinstance(cache, ActivationCache)
    assert cache.n_loops == model.cfg.n_loops
    torch.testing.assert_close(logits, model(tokens), atol=1e-5, rtol=0)
    assert act_name("pattern", 1, 2) in cache and "loops.3.hook_state_pre" not in cache
    _, plain = model.run_with_cache(tokens, return_cache_object=False)
    assert isinstance(plain, dict) and plain.keys() == cache.keys()
    _, deep = model.run_with_cache(tokens, n_loops=5)
    assert deep.n_loops == 5 and deep.accumulated_resid().shape[0] == 5 * (1 + model.cfg.n_layers)


def test_keys_by_loop_and_by_unrolled_block():
    model, _, _, cache = run()
    k = model.cfg.n_layers
    assert cache["resid_pre", 1, 2] is cache[act_name("resid_pre", 1, loop=2)]  # (name, layer, loop)
    assert cache["resid_pre", 2 * k + 1] is cache[act_name("resid_pre", 1, loop=2)]  # unrolled block
    assert cache["blocks.3.attn.hook_z"] is cache[act_name("z", 3 % k, loop=3 // k)]
    assert cache["resid_post", -1] is cache[act_name("resid_post", k - 1, loop=cache.n_loops - 1)]
    assert cache["embed"] is cache["hook_embed"]
    with pytest.raises(KeyError, match="used 3 loops"):
        cache["resid_pre", 0, 5]
    with pytest.raises(KeyError, match="needs loop"):
        cache["resid_pre"]


# ------------------------------------------------------------- decompositions
@pytest.mark.parametrize("injection", INJECTIONS)
def test_decompose_resid_sums_to_the_final_residual(injection):
    model, _, _, cache = run(input_injection=injection)
    stack, labels = cache.decompose_resid(return_labels=True)
    assert stack.shape == (len(labels), len(PROMPTS), cache["hook_input"].shape[1], model.cfg.d_model)
    torch.testing.assert_close(stack.sum(0), final_state(cache), atol=1e-5, rtol=0)
    last = cache.n_loops - 1
    if injection == "norm_add":  # the sum restarts after the last normalisation
        assert labels[:2] == [f"loop {last + 1} state", f"loop {last + 1} input"]
        ln_state = model.ln_state(cache[act_name("state_post", loop=last - 1)])
        torch.testing.assert_close(stack[0], ln_state, atol=1e-6, rtol=0)
        with pytest.raises(ValueError, match="norm_add"):
            cache.decompose_resid(from_loop=0)
    else:
        assert labels[:3] == ["loop 1 input", "loop 1 L0 attn_out", "loop 1 L0 mlp_out"]
        n_inputs = cache.n_loops if injection == "add" else 1
        assert sum(label.endswith(" input") for label in labels) == n_inputs
    assert labels[-1] == f"loop {last + 1} L{model.cfg.n_layers - 1} mlp_out"
    torch.testing.assert_close(stack[-1], cache[act_name("mlp_out", model.cfg.n_layers - 1, last)])


@pytest.mark.parametrize("injection", INJECTIONS)
def test_decompose_resid_inside_a_loop_and_from_a_later_loop(injection):
    model, _, _, cache = run(input_injection=injection)
    for loop, layer, mlp_input, target in [
        (1, 1, False, act_name("resid_pre", 1, 1)),
        (1, 1, True, act_name("resid_mid", 1, 1)),
        (2, 0, False, act_name("state_pre", loop=2)),
        (0, 2, False, act_name("state_post", loop=0)),
    ]:
        stack = cache.decompose_resid(loop, layer, mlp_input=mlp_input)
        torch.testing.assert_close(stack.sum(0), cache[target], atol=1e-5, rtol=0)
    stack, labels = cache.decompose_resid(from_loop=2, split_input=True, return_labels=True)
    assert labels[:3] == ["loop 3 state", "loop 3 embed", "loop 3 pos_embed"] if injection != "none" else labels[0] == "loop 3 state"
    torch.testing.assert_close(stack.sum(0), final_state(cache), atol=1e-5, rtol=0)
    attn_only, labels = cache.decompose_resid(mode="attn", incl_embeds=False, return_labels=True)
    assert all(label.endswith(" attn_out") for label in labels)


@pytest.mark.parametrize("injection", INJECTIONS)
@pytest.mark.parametrize("expand_neurons", [True, False])
def test_full_resid_decomposition_sums_to_the_final_residual(injection, expand_neurons):
    model, _, _, cache = run(input_injection=injection)
    stack, labels = cache.get_full_resid_decomposition(expand_neurons=expand_neurons, return_labels=True)
    assert len(labels) == stack.shape[0] and labels[-1] == "bias"
    torch.testing.assert_close(stack.sum(0), final_state(cache), atol=1e-5, rtol=0)
    assert "loop 3 L1H3" in labels and (("loop 3 L1N0" in labels) == expand_neurons)
    mid = cache.get_full_resid_decomposition(2, 1, mlp_input=True, expand_neurons=expand_neurons)
    torch.testing.assert_close(mid.sum(0), cache[act_name("resid_mid", 1, 2)], atol=1e-5, rtol=0)


def test_stack_head_results_sum_with_b_O_to_the_attention_output():
    model, _, _, cache = run()
    stack, labels = cache.stack_head_results(return_labels=True)
    r, k, h = cache.n_loops, model.cfg.n_layers, model.cfg.n_heads
    assert labels[: h + 1] == ["loop 1 L0H0", "loop 1 L0H1", "loop 1 L0H2", "loop 1 L0H3", "loop 1 L1H0"] and labels[-1] == f"loop 3 L{k - 1}H{h - 1}"
    per_head = stack.reshape(r, k, h, *stack.shape[1:])  # [loop layer head batch pos d_model]
    for t in range(r):
        for layer in range(k):
            z = cache[act_name("z", layer, t)]
            w_o = model.blocks[layer].attn.W_O
            torch.testing.assert_close(per_head[t, layer, 1], z[:, :, 1] @ w_o[1])
            attn_out = per_head[t, layer].sum(0) + model.blocks[layer].attn.b_O
            torch.testing.assert_close(attn_out, cache[act_name("attn_out", layer, t)], atol=1e-5, rtol=0)
    one_loop, labels = cache.stack_head_results(1, from_loop=1, return_labels=True, incl_remainder=True)
    assert one_loop.shape[0] == k * h + 1 and labels[0] == "loop 2 L0H0" and labels[-1] == "remainder"
    torch.testing.assert_close(one_loop.sum(0), cache[act_name("state_post", loop=1)], atol=1e-5, rtol=0)
    cache.compute_head_results()
    assert act_name("z", 0, 2).replace("hook_z", "hook_result") in cache


def test_accumulated_resid_walks_loops_and_layers_in_execution_order():
    model, _, logits, cache = run()
    stack, labels = cache.accumulated_resid(incl_mid=True, return_labels=True)
    assert labels[:5] == ["loop 1 pre", "loop 1 L0 mid", "loop 1 L0 post", "loop 1 L1 mid", "loop 1 L1 post"]
    assert labels[5] == "loop 2 pre" and labels[-1] == "loop 3 L1 post"
    assert stack.shape == (cache.n_loops * (1 + 2 * model.cfg.n_layers), *final_state(cache).shape)
    raw = {
        "loop 2 pre": act_name("state_pre", loop=1),
        "loop 2 L0 mid": act_name("resid_mid", 0, 1),
        "loop 2 L0 post": act_name("resid_post", 0, 1),
        "loop 3 L1 post": act_name("state_post", loop=2),
    }
    for label, name in raw.items():
        torch.testing.assert_close(stack[labels.index(label)], cache[name], atol=0, rtol=0)
    # the last entry is what ln_final reads
    torch.testing.assert_close(model.ln_final(stack[-1]), cache["ln_final.hook_normalized"], atol=1e-6, rtol=0)
    partial, labels = cache.accumulated_resid(1, 1, mlp_input=True, return_labels=True)
    assert labels == ["loop 1 pre", "loop 1 L0 post", "loop 1 L1 post", "loop 2 pre", "loop 2 L0 post", "loop 2 L1 mid"]
    # the loop lens: ln_final recomputed per entry; the last entry gives the model's logits
    lensed = cache.accumulated_resid(apply_ln=True)
    per_entry = torch.stack([model.unembed(x) for x in cache.accumulated_resid()])
    torch.testing.assert_close(lensed @ model.W_U_effective + model.b_U, per_entry, atol=1e-5, rtol=0)
    lens = cache.logit_lens()
    torch.testing.assert_close(lens[-1], logits, atol=1e-5, rtol=0)
    assert lens.shape == (cache.n_loops * (1 + model.cfg.n_layers), *logits.shape)


def test_accumulated_resid_pos_slice_and_partial_caches():
    model, tokens, _, cache = run()
    last = cache.accumulated_resid(pos_slice=-1)
    assert last.shape == (cache.n_loops * (1 + model.cfg.n_layers), len(PROMPTS), model.cfg.d_model)
    torch.testing.assert_close(last, cache.accumulated_resid()[:, :, -1])
    # resid_post alone is enough: the entries are found under the names that hold them
    _, small = model.run_with_cache(tokens, names_filter=lambda n: n.endswith(("resid_post", "state_pre")))
    torch.testing.assert_close(small.accumulated_resid(), cache.accumulated_resid())
    with pytest.raises(KeyError, match="names_filter"):
        small.decompose_resid()


# ------------------------------------------------------------- norms, logits
@pytest.mark.parametrize("injection", INJECTIONS)
def test_apply_ln_uses_the_cached_final_scale(injection):
    model, _, _, cache = run(input_injection=injection)
    normed = cache.decompose_resid(apply_ln=True)
    expected = cache["ln_final.hook_normalized"] - model.ln_final.b
    torch.testing.assert_close(normed.sum(0), expected, atol=1e-5, rtol=0)
    # inside the block: ln1 of (loop 1, layer 1) with the scale of its own input
    inner = cache.decompose_resid(1, 1, apply_ln=True) if injection != "norm_add" else None
    if inner is not None:
        ln1 = model.blocks[1].ln1
        torch.testing.assert_close(inner.sum(0), ln1(cache[act_name("resid_pre", 1, 1)]) - ln1.b, atol=1e-5, rtol=0)


def test_no_norm_leaves_stacks_unchanged():
    model, _, _, cache = run(norm="none")
    stack = cache.decompose_resid()
    torch.testing.assert_close(cache.apply_ln_to_stack(stack), stack, atol=0, rtol=0)
    lens = cache.logit_lens()
    torch.testing.assert_close(lens[-1], model(model.to_tokens(PROMPTS)), atol=1e-5, rtol=0)


@pytest.mark.parametrize("injection", INJECTIONS)
def test_logit_attrs_of_a_full_decomposition_sum_to_the_logit(injection):
    model, tokens, logits, cache = run(input_injection=injection)
    stack = cache.get_full_resid_decomposition(expand_neurons=False)
    attrs = cache.logit_attrs(stack, tokens)  # one target per (batch, position)
    assert attrs.shape == (stack.shape[0], *tokens.shape)
    const = (model.ln_final.b @ model.W_U_effective + model.b_U)[tokens]
    logit = logits.gather(-1, tokens[..., None])[..., 0]
    torch.testing.assert_close(attrs.sum(0), logit - const, atol=1e-5, rtol=0)
    # a logit difference, one token per example, a single symbol
    four, five = model.cfg.vocab.encode("45")
    diff = cache.logit_attrs(stack[:, :, -1], "4", "5", pos_slice=-1)
    torch.testing.assert_close(diff.sum(0), logits[:, -1, four] - logits[:, -1, five], atol=1e-5, rtol=0)
    per_row = cache.logit_attrs(stack, tokens[:, 0])
    assert per_row.shape == (stack.shape[0], *tokens.shape)


def test_logit_attrs_per_loop_give_each_loops_lens():
    model, tokens, _, cache = run()
    lens = cache.logit_lens()  # the entry that closes loop index t is "loop {t+1} L{K-1} post"
    k = model.cfg.n_layers
    const = (model.ln_final.b @ model.W_U_effective + model.b_U)[tokens]
    for t in range(cache.n_loops):
        heads = cache.stack_head_results(t, incl_remainder=True)
        attrs = cache.logit_attrs(heads, tokens, loop=t)
        loop_logits = lens[(t + 1) * (1 + k) - 1].gather(-1, tokens[..., None])[..., 0]
        torch.testing.assert_close(attrs.sum(0), loop_logits - const, atol=1e-5, rtol=0)


def test_stack_activation_stacks_one_hook_over_loops():
    model, _, _, cache = run()
    r, k = cache.n_loops, model.cfg.n_layers
    patterns = cache.stack_activation("pattern", layer=1)
    assert patterns.shape == (r, len(PROMPTS), model.cfg.n_heads, 9, 9)
    for t in range(r):
        torch.testing.assert_close(patterns[t], cache[act_name("pattern", 1, t)], atol=0, rtol=0)
    assert cache.stack_activation("pattern").shape == (r, k, *patterns.shape[1:])
    torch.testing.assert_close(cache.stack_activation("blocks.1.attn.hook_pattern"), patterns, atol=0, rtol=0)
    states = cache.stack_activation("state_post", loops=[0, -1])
    torch.testing.assert_close(states[1], final_state(cache), atol=0, rtol=0)


# ------------------------------------------------- TransformerLens arguments
def test_names_filter_device_and_remove_batch_dim():
    model = make_tiny_model()
    tokens = model.to_tokens(PROMPTS[:1])
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_pattern"), device="cpu")
    assert len(cache) == model.cfg.n_loops * model.cfg.n_layers
    assert all(v.device.type == "cpu" for v in cache.values())
    _, one = model.run_with_cache(tokens, remove_batch_dim=True)
    _, full = model.run_with_cache(tokens)
    assert not one.has_batch_dim and one["hook_input"].shape == full["hook_input"].shape[1:]
    torch.testing.assert_close(one.decompose_resid().sum(0), final_state(full)[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(one.accumulated_resid(apply_ln=True), full.accumulated_resid(apply_ln=True)[:, 0])
    attrs = one.logit_attrs(one.decompose_resid(), tokens[0])
    torch.testing.assert_close(attrs, full.logit_attrs(full.decompose_resid(), tokens)[:, 0], atol=1e-6, rtol=0)
    with pytest.raises(AssertionError, match="batch size 2"):
        model.run_with_cache(model.to_tokens(PROMPTS), remove_batch_dim=True)
    sliced = full.apply_slice_to_batch_dim(0)
    assert isinstance(sliced, LoopActivationCache) and not sliced.has_batch_dim


def test_incl_bwd_caches_gradients_per_loop():
    model = make_tiny_model()
    tokens = model.to_tokens(PROMPTS)
    loss, cache = model.run_with_cache(tokens, return_type="loss", incl_bwd=True)
    assert loss.ndim == 0 and isinstance(cache, LoopActivationCache)
    grads = cache.stack_activation("hook_state_post_grad")  # [loop batch pos d_model]
    assert grads.shape == (cache.n_loops, *cache["hook_input"].shape)
    torch.testing.assert_close(grads[1], cache[act_name("state_post", loop=1) + "_grad"], atol=0, rtol=0)
    assert not torch.equal(grads[0], grads[-1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cache_on_another_device_than_the_model():
    model = make_tiny_model().cuda()
    assert model.cfg.device.startswith("cuda")
    _, cache = model.run_with_cache(model.to_tokens(PROMPTS), device="cpu")
    assert cache["hook_input"].device.type == "cpu"
    torch.testing.assert_close(cache.logit_lens()[-1], model(model.to_tokens(PROMPTS)).cpu(), atol=1e-5, rtol=0)


# ------------------------------------------------------------------ patching
def answer_metric(model, tokens):
    target = tokens[:, 1:]

    def metric(logits):
        return -F.cross_entropy(logits[:, :-1].flatten(0, 1), target.flatten())

    return metric


@pytest.mark.parametrize("injection", INJECTIONS)
def test_patching_a_clean_run_into_itself_restores_the_metric_exactly(injection):
    # one attention path for the cached and the patched runs, so "the same" is bit-for-bit
    model, tokens, logits, cache = run(input_injection=injection, attention_backend="explicit")
    metric = answer_metric(model, tokens)
    clean = float(metric(logits.detach()))
    r, k, h, p = cache.n_loops, model.cfg.n_layers, model.cfg.n_heads, tokens.shape[1]
    resid = patch_resid(model, tokens, cache, metric, positions=[0, -1])
    assert resid.shape == (r, k, 2) and torch.all(resid == clean)
    assert torch.all(patch_attn_out(model, tokens, cache, metric, loops=[2], positions=[3]) == clean)
    assert torch.all(patch_mlp_out(model, tokens, cache, metric, loops=[0], positions=[3]) == clean)
    heads = patch_head(model, tokens, cache, metric)
    assert heads.shape == (r, k, h) and torch.all(heads == clean)
    assert patch_head(model, tokens, cache, metric, by_pos=True, loops=[1], positions=[2, 5]).shape == (1, k, h, 2)
    state = patch_state(model, tokens, cache, metric, site="state_post")
    assert state.shape == (r, p) and torch.all(state == clean)


def test_patching_locates_the_difference_by_loop():
    model = make_tiny_model()
    clean_tokens, corrupted = model.to_tokens(["21+43=64"]), model.to_tokens(["51+43=94"])
    _, cache = model.run_with_cache(clean_tokens)
    metric = answer_metric(model, clean_tokens)
    result = patch_state(model, corrupted, cache, metric, site="state_pre")
    base = float(metric(model(corrupted).detach()))
    # positions the clean and corrupted inputs share change nothing in loop 0
    same = (clean_tokens[0] == corrupted[0]).nonzero()[:, 0]
    first_diff = int((clean_tokens[0] != corrupted[0]).nonzero()[0, 0])
    assert torch.allclose(result[0, same[same < first_diff]], torch.tensor(base), atol=1e-5)
    assert not torch.allclose(result[0, first_diff], torch.tensor(base), atol=1e-4)


def test_transformer_lens_patching_through_the_unrolled_view():
    model = make_tiny_model()
    clean_tokens, corrupted = model.to_tokens(["21+43=64"]), model.to_tokens(["51+43=94"])
    _, cache = model.run_with_cache(clean_tokens)
    metric = answer_metric(model, clean_tokens)
    r, k, h = cache.n_loops, model.cfg.n_layers, model.cfg.n_heads
    assert model.cfg.device == "cpu"
    view = unrolled(model)
    assert view.cfg.n_layers == r * k and view.hook_name("blocks.3.hook_resid_pre") == "loops.1.blocks.1.hook_resid_pre"
    ours = patch_resid(model, corrupted, cache, metric)
    theirs = tl_patching.get_act_patch_resid_pre(view, corrupted, cache, metric)
    assert theirs.shape == (r * k, clean_tokens.shape[1])
    torch.testing.assert_close(theirs.reshape(ours.shape).cpu(), ours, atol=0, rtol=0)
    heads = tl_patching.get_act_patch_attn_head_out_all_pos(view, corrupted, cache, metric)
    torch.testing.assert_close(heads.reshape(r, k, h).cpu(), patch_head(model, corrupted, cache, metric), atol=0, rtol=0)
    # the bare model has no `blocks.{l}.hook_resid_pre`: a loud failure, not loop 0 alone
    with pytest.raises(KeyError, match="blocks.0.hook_resid_pre"):
        tl_patching.get_act_patch_resid_pre(model, corrupted, cache, metric)


def test_cache_signatures_are_checked():
    import beartype
    from jaxtyping import TypeCheckError, jaxtyped

    def typechecked(function):
        return jaxtyped(typechecker=beartype.beartype)(function)

    errors = (TypeCheckError, beartype.roar.BeartypeCallHintViolation)
    model, tokens, _, cache = run()
    stack = typechecked(LoopActivationCache.decompose_resid)(cache)
    assert typechecked(LoopActivationCache.accumulated_resid)(cache, pos_slice=-1).ndim == 3
    heads = typechecked(LoopActivationCache.stack_head_results)(cache, 1, from_loop=1)
    assert heads.shape[0] == model.cfg.n_layers * model.cfg.n_heads
    assert typechecked(LoopActivationCache.apply_ln_to_stack)(cache, stack, batch_slice=0).ndim == 3
    assert typechecked(LoopActivationCache.logit_attrs)(cache, stack, tokens).shape == (stack.shape[0], *tokens.shape)
    assert typechecked(LoopActivationCache.stack_activation)(cache, "state_pre").shape[0] == cache.n_loops
    metric = answer_metric(model, tokens)
    assert typechecked(patch_state)(model, tokens, cache, metric, positions=[0]).shape == (cache.n_loops, 1)
    with pytest.raises(errors):
        typechecked(LoopActivationCache.logit_attrs)(cache, stack[0, 0, 0], tokens)  # a rank-1 stack
    with pytest.raises(errors):
        typechecked(patch_state)(model, tokens[0], cache, metric)  # rank-1 tokens

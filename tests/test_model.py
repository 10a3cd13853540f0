"""LoopedTransformer: the per-loop hook contract, caching, patching and gradients per loop,
attention backends, Abacus positions, causality, config and parameter summary.

Every check compares numbers: against a second run, an independent computation or a hand
example. Models are tiny (d_model 32) so the whole file runs in a few seconds on CPU.
"""

from __future__ import annotations

import json

import beartype
import pytest
import torch
import torch.nn.functional as F
from jaxtyping import TypeCheckError, jaxtyped

from abacus_interp import LoopedTransformer, ModelConfig, Vocab, act_name
from abacus_interp.core.attention import Attention
from abacus_interp.core.positions import (
    abacus_indices,
    abacus_indices_reference,
    learned_indices,
    sample_offsets,
)
from abacus_interp.core.summary import COMPONENTS, parameter_summary
from abacus_interp.core.tokens import PAD_ID, left_pad

ADDITION_VOCAB = Vocab(tuple("0123456789+="))  # the vocabulary of the `tiny_model` fixture
TOP_LEVEL_HOOKS = ("hook_embed", "hook_pos_embed", "hook_input", "ln_final.hook_normalized")
LOOP_HOOKS = ("hook_state_pre", "hook_state_post")
BLOCK_HOOKS = (
    "hook_resid_pre",
    "hook_resid_mid",
    "hook_resid_post",
    "hook_attn_out",
    "hook_mlp_out",
    "attn.hook_q",
    "attn.hook_k",
    "attn.hook_v",
    "attn.hook_attn_scores",
    "attn.hook_pattern",
    "attn.hook_z",
    "mlp.hook_pre",
    "mlp.hook_post",
)


def expected_hook_names(n_layers: int, max_loops: int) -> set[str]:
    names = set(TOP_LEVEL_HOOKS)
    for t in range(max_loops):
        names.update(f"loops.{t}.{hook}" for hook in LOOP_HOOKS)
        for layer in range(n_layers):
            names.update(f"loops.{t}.blocks.{layer}.{hook}" for hook in BLOCK_HOOKS)
    return names


def addition_tokens(model: LoopedTransformer) -> torch.Tensor:
    """A right-padded batch of model-order addition problems with answers."""
    return model.to_tokens(["321+654=975", "99+1=001", "5+5=01", "1234+8765=99990"])


def random_tokens(model: LoopedTransformer, batch: int = 4, length: int = 16) -> torch.Tensor:
    """Random non-special tokens (digits, '+', '=')."""
    return torch.randint(2, model.cfg.d_vocab, (batch, length))


def next_token_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())


def left_padded_batch(model: LoopedTransformer) -> tuple[torch.Tensor, torch.Tensor]:
    prompts = ["321+654=", "1+2=", "99999+1=", "7+"]
    return left_pad([model.cfg.vocab.encode(p) for p in prompts])


# ------------------------------------------------------------------ 1. hook names


def test_hook_dict_has_exactly_the_design_names(tiny_model):
    model = tiny_model()
    assert model.cfg.max_loops == 12  # default: 4 x the trained depth of 3
    assert set(model.hook_dict) == expected_hook_names(n_layers=2, max_loops=12)
    for name in (
        "loops.3.blocks.1.attn.hook_pattern",
        "loops.0.hook_state_pre",
        "loops.11.hook_state_post",
    ):
        assert name in model.hook_dict


def test_hook_sets_follow_max_loops_and_n_layers(tiny_model):
    model = tiny_model(n_layers=1, max_loops=5)
    assert set(model.hook_dict) == expected_hook_names(n_layers=1, max_loops=5)
    assert "loops.5.hook_state_pre" not in model.hook_dict
    assert "loops.0.blocks.1.hook_resid_pre" not in model.hook_dict


def test_hook_points_are_distinct_objects_per_loop(tiny_model):
    model = tiny_model()
    patterns = [
        model.hook_dict[f"loops.{t}.blocks.0.attn.hook_pattern"] for t in range(model.cfg.max_loops)
    ]
    assert len({id(hook) for hook in patterns}) == model.cfg.max_loops


@pytest.mark.parametrize(
    "args, kwargs, full_name",
    [
        (("pattern", 0), {"loop": 3}, "loops.3.blocks.0.attn.hook_pattern"),
        (("attn", 1, 2), {}, "loops.2.blocks.1.attn.hook_pattern"),
        (("attn_scores", 0, 0), {}, "loops.0.blocks.0.attn.hook_attn_scores"),
        (("scores", 0, 0), {}, "loops.0.blocks.0.attn.hook_attn_scores"),
        (("q", 1, 4), {}, "loops.4.blocks.1.attn.hook_q"),
        (("hook_k", 0, 1), {}, "loops.1.blocks.0.attn.hook_k"),
        (("v", 0, 1), {}, "loops.1.blocks.0.attn.hook_v"),
        (("z", 1, 1), {}, "loops.1.blocks.1.attn.hook_z"),
        (("resid_pre", 0, 2), {}, "loops.2.blocks.0.hook_resid_pre"),
        (("resid_mid", 1, 0), {}, "loops.0.blocks.1.hook_resid_mid"),
        (("resid_post", 1, 2), {}, "loops.2.blocks.1.hook_resid_post"),
        (("attn_out", 0, 5), {}, "loops.5.blocks.0.hook_attn_out"),
        (("mlp_out", 1, 5), {}, "loops.5.blocks.1.hook_mlp_out"),
        (("mlp_pre", 0, 1), {}, "loops.1.blocks.0.mlp.hook_pre"),
        (("pre_mlp", 0, 1), {}, "loops.1.blocks.0.mlp.hook_pre"),
        (("mlp_post", 1, 0), {}, "loops.0.blocks.1.mlp.hook_post"),
        (("state_pre",), {"loop": 2}, "loops.2.hook_state_pre"),
        (("state_post",), {"loop": 0}, "loops.0.hook_state_post"),
        (("embed",), {}, "hook_embed"),
        (("pos_embed",), {}, "hook_pos_embed"),
        (("input",), {}, "hook_input"),
        (("ln_final",), {}, "ln_final.hook_normalized"),
        (("normalized",), {}, "ln_final.hook_normalized"),
    ],
)
def test_act_name_maps_short_names_to_existing_hooks(tiny_model, args, kwargs, full_name):
    assert act_name(*args, **kwargs) == full_name
    assert full_name in tiny_model().hook_dict


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("pattern", 0), {}, "loop"),
        (("state_post",), {}, "loop"),
        (("pattern",), {"loop": 1}, "layer"),
        (("resid_post",), {"loop": 0}, "layer"),
        (("not_a_hook", 0, 0), {}, "unknown"),
    ],
)
def test_act_name_errors_say_what_is_missing(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        act_name(*args, **kwargs)


# ------------------------------------------------------------------ 2. caching


def test_run_with_cache_matches_forward_and_differs_per_loop(tiny_model):
    model = tiny_model()
    tokens = addition_tokens(model)
    logits = model(tokens)
    cached_logits, cache = model.run_with_cache(tokens)

    # caching attaches pattern hooks, so the explicit path ran; it agrees with SDPA
    torch.testing.assert_close(cached_logits, logits, atol=1e-5, rtol=0)

    loops = range(model.cfg.n_loops)
    assert {name for name in cache if name.startswith("loops.")} == {
        name for name in expected_hook_names(2, model.cfg.n_loops) if name.startswith("loops.")
    }
    assert "loops.3.hook_state_pre" not in cache  # only the loops that ran are cached

    for short, layer in [
        ("state_post", None),
        ("pattern", 0),
        ("resid_mid", 1),
        ("mlp_post", 0),
        ("q", 1),
    ]:
        per_loop = [cache[act_name(short, layer, loop=t)] for t in loops]
        for a in range(len(per_loop)):
            for b in range(a + 1, len(per_loop)):
                assert not torch.allclose(per_loop[a], per_loop[b], atol=1e-6), (short, a, b)


def test_cached_activations_fit_together(tiny_model):
    """The shapes the hook points promise (the comments beside each HookPoint), input
    injection, and the last state through the unembedding."""
    model = tiny_model()
    tokens = addition_tokens(model)
    batch, pos = tokens.shape
    cfg = model.cfg
    logits, cache = model.run_with_cache(tokens)

    assert cache["hook_input"].shape == (batch, pos, cfg.d_model)
    assert cache[act_name("q", 0, 0)].shape == (batch, pos, cfg.n_heads, cfg.d_head)
    assert cache[act_name("z", 1, 2)].shape == (batch, pos, cfg.n_heads, cfg.d_head)
    assert cache[act_name("pattern", 0, 1)].shape == (batch, cfg.n_heads, pos, pos)
    assert cache[act_name("mlp_pre", 1, 0)].shape == (batch, pos, cfg.d_mlp)

    torch.testing.assert_close(cache["hook_input"], cache["hook_embed"] + cache["hook_pos_embed"])
    torch.testing.assert_close(cache[act_name("state_pre", loop=0)], cache["hook_input"])
    for t in range(1, cfg.n_loops):
        injected = cache[act_name("state_post", loop=t - 1)] + cache["hook_input"]
        torch.testing.assert_close(cache[act_name("state_pre", loop=t)], injected)
    for t in range(cfg.n_loops):
        torch.testing.assert_close(
            cache[act_name("state_post", loop=t)], cache[act_name("resid_post", 1, t)]
        )
        resid_mid = cache[act_name("resid_pre", 0, t)] + cache[act_name("attn_out", 0, t)]
        torch.testing.assert_close(cache[act_name("resid_mid", 0, t)], resid_mid)

    last_state = cache[act_name("state_post", loop=cfg.n_loops - 1)]
    torch.testing.assert_close(model.unembed(last_state), logits)


# ------------------------------------------------------------------ 3. patching one loop


def test_patching_loop_t_leaves_earlier_loops_bit_identical(tiny_model):
    model = tiny_model()
    tokens = addition_tokens(model)
    patched_name = act_name("attn_out", 0, loop=1)

    def zero_ablate(activation, hook):
        return torch.zeros_like(activation)

    clean_logits, clean = model.run_with_cache(tokens)
    patched_logits = model.run_with_hooks(tokens, fwd_hooks=[(patched_name, zero_ablate)])
    with model.hooks(fwd_hooks=[(patched_name, zero_ablate)]):
        patched_cached_logits, patched = model.run_with_cache(tokens)

    assert not torch.allclose(patched_logits, clean_logits, atol=1e-4)
    torch.testing.assert_close(patched_cached_logits, patched_logits, atol=1e-5, rtol=0)
    assert torch.count_nonzero(patched[patched_name]) == 0  # the cache sees the patched value

    for name in clean:
        if name.startswith("loops.0.") or name in ("hook_embed", "hook_pos_embed", "hook_input"):
            assert torch.equal(patched[name], clean[name]), name
    # inside loop 1, everything upstream of the patched point is untouched...
    for short in ("resid_pre", "q", "k", "v", "attn_scores", "pattern", "z"):
        name = act_name(short, 0, loop=1)
        assert torch.equal(patched[name], clean[name]), name
    # ...and everything downstream differs, including all of loop 2
    downstream = [
        act_name("resid_mid", 0, 1),
        act_name("state_post", loop=1),
        act_name("state_pre", loop=2),
    ]
    downstream += [
        act_name(short, layer, 2) for short in ("pattern", "resid_post") for layer in (0, 1)
    ]
    for name in downstream:
        assert not torch.allclose(patched[name], clean[name], atol=1e-6), name

    # the context manager removed its hook
    assert torch.equal(model(tokens), model(tokens))
    torch.testing.assert_close(model(tokens), clean_logits, atol=1e-5, rtol=0)
    assert not any(hook.has_hooks() for hook in model.hook_dict.values())


# ------------------------------------------------------------------ 4. gradients per loop


def test_cached_gradients_line_up_with_their_loop(tiny_model):
    model = tiny_model()
    tokens = addition_tokens(model)

    # gradients through TransformerLens' backward caching hooks
    grad_cache, fwd_hooks, bwd_hooks = model.get_caching_hooks(incl_bwd=True)
    with model.hooks(fwd_hooks=fwd_hooks, bwd_hooks=bwd_hooks):
        next_token_loss(model(tokens), tokens).backward()
    model.zero_grad(set_to_none=True)

    # the same gradients from autograd on activations captured by forward hooks (hooks on
    # every point, so the same attention path runs). Each hook passes on a clone: a HookPoint
    # returns its input object, so e.g. loop 0's state_pre *is* hook_input's tensor, whose
    # gradient sums over every loop it is injected into; the clone is loop 0's alone.
    captured: dict[str, torch.Tensor] = {}

    def capture(activation, hook):
        captured[hook.name] = activation.clone()
        return captured[hook.name]

    with model.hooks(fwd_hooks=[(lambda name: True, capture)]):
        loss = next_token_loss(model(tokens), tokens)
    per_loop_points = [
        ("state_post", None),
        ("state_pre", None),
        ("resid_mid", 1),
        ("pattern", 0),
        ("mlp_post", 1),
    ]
    checked = [act_name(short, layer, loop=t) for t in range(3) for short, layer in per_loop_points]
    autograd_grads = torch.autograd.grad(loss, [captured[name] for name in checked])

    for name, expected in zip(checked, autograd_grads, strict=True):
        torch.testing.assert_close(grad_cache[f"{name}_grad"], expected, atol=1e-8, rtol=1e-5)
        assert expected.abs().max() > 0, name

    state_grads = [grad_cache[f"{act_name('state_post', loop=t)}_grad"] for t in range(3)]
    assert not torch.allclose(state_grads[0], state_grads[1])
    assert not torch.allclose(state_grads[1], state_grads[2])
    assert f"{act_name('state_post', loop=3)}_grad" not in grad_cache


# ------------------------------------------------------------------ 5. loop depth


def test_running_deeper_than_training_up_to_max_loops(tiny_model):
    model = tiny_model()
    tokens = addition_tokens(model)
    max_loops = model.cfg.max_loops
    logits, cache = model.run_with_cache(
        tokens, n_loops=max_loops, names_filter=lambda n: "state_post" in n
    )
    assert torch.isfinite(logits).all()
    assert len(cache) == max_loops
    torch.testing.assert_close(
        model.unembed(cache[act_name("state_post", loop=max_loops - 1)]), logits
    )
    # deeper runs extend the trained one: loops 0..2 are identical whatever R is
    _, shallow = model.run_with_cache(tokens, n_loops=3, names_filter=lambda n: "state_post" in n)
    for t in range(3):
        name = act_name("state_post", loop=t)
        torch.testing.assert_close(cache[name], shallow[name], atol=0, rtol=0)


def test_running_past_max_loops_says_the_limit(tiny_model):
    model = tiny_model()
    tokens = addition_tokens(model)
    with pytest.raises(ValueError, match="max_loops") as error:
        model(tokens, n_loops=model.cfg.max_loops + 1)
    assert str(model.cfg.max_loops) in str(error.value)
    with pytest.raises(ValueError, match="n_loops"):
        model(tokens, n_loops=0)


# ------------------------------------------------------------------ 6. attention backends


def same_weights_with_backend(model: LoopedTransformer, backend: str) -> LoopedTransformer:
    twin = LoopedTransformer(model.cfg.replace(attention_backend=backend)).eval()
    twin.load_state_dict(model.state_dict())
    return twin


def test_sdpa_and_explicit_attention_agree(tiny_model):
    fast = tiny_model(attention_backend="sdpa")
    explicit = same_weights_with_backend(fast, "explicit")

    tokens = random_tokens(fast, batch=6, length=20)
    torch.testing.assert_close(fast(tokens), explicit(tokens), atol=1e-5, rtol=0)
    torch.testing.assert_close(
        fast(tokens, n_loops=7), explicit(tokens, n_loops=7), atol=1e-5, rtol=0
    )

    padded, valid = left_padded_batch(fast)
    assert not valid.all()
    torch.testing.assert_close(
        fast(padded, valid=valid), explicit(padded, valid=valid), atol=1e-5, rtol=0
    )


def test_left_padding_is_invisible_to_real_tokens(tiny_model):
    for positional in ("abacus", "learned"):
        model = tiny_model(positional=positional)
        padded, valid = left_padded_batch(model)
        padded_logits = model(padded, valid=valid)
        for row in range(padded.shape[0]):
            real = padded[row][valid[row]][None]
            torch.testing.assert_close(
                padded_logits[row][valid[row]], model(real)[0], atol=1e-5, rtol=0
            )


def test_auto_backend_goes_explicit_only_when_the_pattern_is_hooked(tiny_model, monkeypatch):
    model = tiny_model(attention_backend="auto")
    explicit_calls = []
    original_explicit = Attention._explicit

    def counting_explicit(self, *args, **kwargs):
        explicit_calls.append(1)
        return original_explicit(self, *args, **kwargs)

    monkeypatch.setattr(Attention, "_explicit", counting_explicit)
    tokens = addition_tokens(model)

    plain_logits = model(tokens)
    model.run_with_hooks(tokens, fwd_hooks=[(act_name("attn_out", 0, 0), lambda act, hook: None)])
    assert explicit_calls == []

    pattern_name = act_name("pattern", 1, loop=2)
    logits, cache = model.run_with_cache(tokens, names_filter=pattern_name)
    assert len(explicit_calls) == 1  # just the hooked layer of the hooked loop
    torch.testing.assert_close(logits, plain_logits, atol=1e-5, rtol=0)

    pattern = cache[pattern_name]
    n = tokens.shape[1]
    torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))
    above_diagonal = torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)
    assert torch.all(pattern[..., above_diagonal] == 0)
    assert torch.all(pattern[..., ~above_diagonal] > 0)


def test_explicit_pattern_hides_left_padding(tiny_model):
    model = tiny_model()
    padded, valid = left_padded_batch(model)
    _, cache = model.run_with_cache(
        padded, valid=valid, names_filter=lambda n: n.endswith("hook_pattern")
    )
    pattern = cache[act_name("pattern", 0, loop=1)]  # [batch head query key]
    torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))
    real_query_pad_key = valid[:, None, :, None] & ~valid[:, None, None, :]
    assert torch.all(pattern[real_query_pad_key.expand_as(pattern)] == 0)


# ------------------------------------------------------------------ 7. Abacus positions


def digit_ids() -> torch.Tensor:
    return torch.tensor(ADDITION_VOCAB.digit_ids)


def test_abacus_indices_hand_example():
    tokens = torch.tensor([ADDITION_VOCAB.encode("321+654=975")])
    assert abacus_indices(tokens, digit_ids()).tolist() == [[1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]]
    assert abacus_indices(tokens, digit_ids(), offset=5).tolist() == [
        [6, 7, 8, 0, 6, 7, 8, 0, 6, 7, 8]
    ]


def test_abacus_indices_on_padded_ragged_batches(tiny_model):
    model = tiny_model()
    right_padded = model.to_tokens(["321+654=975", "1+22=32", "7"])
    assert abacus_indices(right_padded, digit_ids()).tolist() == [
        [1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3],
        [1, 0, 1, 2, 0, 1, 2, 0, 0, 0, 0],
        [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ]
    left_padded, _ = left_pad([ADDITION_VOCAB.encode(s) for s in ["12+3=", "4="]])
    assert abacus_indices(left_padded, digit_ids()).tolist() == [[1, 2, 0, 1, 0], [0, 0, 0, 1, 0]]


def test_abacus_indices_with_per_example_offsets(tiny_model):
    tokens = tiny_model().to_tokens(["12+3=", "45+67"])
    offsets = torch.tensor([0, 10])
    assert abacus_indices(tokens, digit_ids(), offsets).tolist() == [
        [1, 2, 0, 1, 0],
        [11, 12, 0, 11, 12],
    ]


def test_abacus_indices_equal_the_reference_loop():
    generator = torch.Generator().manual_seed(1)
    vocab_size = len(ADDITION_VOCAB)
    for batch, length, offset in [(1, 1, 0), (8, 30, 0), (32, 47, 3), (5, 64, 100)]:
        # ids 0..13: padding, EOS, digits, '+' and '=' anywhere, so runs of all lengths occur
        tokens = torch.randint(0, vocab_size, (batch, length), generator=generator)
        tokens[0, : length // 2] = 2 + torch.arange(length // 2) % 10  # one long run of digits
        expected = abacus_indices_reference(tokens.tolist(), set(ADDITION_VOCAB.digit_ids), offset)
        assert abacus_indices(tokens, digit_ids(), offset).tolist() == expected


def test_model_position_embedding_reads_the_abacus_index(tiny_model):
    model = tiny_model()
    tokens = model.to_tokens(["321+654=975", "1+2=3"])
    _, cache = model.run_with_cache(
        tokens, names_filter="hook_pos_embed", abacus_offset=torch.tensor([0, 7])
    )
    expected_index = abacus_indices(tokens, digit_ids(), torch.tensor([0, 7]))
    torch.testing.assert_close(cache["hook_pos_embed"], model.W_pos[expected_index])
    assert expected_index[1, :5].tolist() == [8, 0, 8, 0, 8]

    too_far = model.cfg.abacus_max_offset + model.cfg.max_seq_len
    with pytest.raises(ValueError, match="position index"):
        model(tokens, abacus_offset=too_far)


def test_learned_indices_skip_left_padding():
    valid = torch.tensor([[False, False, True, True], [True, True, True, True]])
    assert learned_indices(valid).tolist() == [[0, 0, 0, 1], [0, 1, 2, 3]]


def test_sample_offsets_ranges_and_modes():
    max_offset = 5
    per_batch = sample_offsets(64, max_offset, "batch", torch.Generator().manual_seed(0))
    per_example = sample_offsets(64, max_offset, "example", torch.Generator().manual_seed(0))
    assert per_batch.shape == per_example.shape == (64,)
    assert per_batch.unique().numel() == 1
    assert per_example.unique().numel() > 1
    for offsets in (per_batch, per_example):
        assert offsets.min() >= 0 and offsets.max() <= max_offset

    draws = torch.cat(
        [
            sample_offsets(64, max_offset, "example", torch.Generator().manual_seed(s))
            for s in range(4)
        ]
    )
    assert set(draws.tolist()) == set(range(max_offset + 1))  # both ends are reachable
    again = sample_offsets(64, max_offset, "example", torch.Generator().manual_seed(0))
    assert torch.equal(again, per_example)
    assert sample_offsets(8, 0, "example", None).tolist() == [0] * 8


# ------------------------------------------------------------------ 8. causality


@pytest.mark.parametrize("positional", ["abacus", "learned", "none"])
def test_a_later_token_never_changes_earlier_logits(tiny_model, positional):
    model = tiny_model(positional=positional)
    tokens = random_tokens(model, batch=4, length=20)
    logits = model(tokens)
    for changed_position in (5, 12, 19):
        edited = tokens.clone()
        # another non-special token: ids 2..13 shifted cyclically by 5
        edited[:, changed_position] = 2 + (edited[:, changed_position] - 2 + 5) % 12
        edited_logits = model(edited, n_loops=model.cfg.n_loops)
        torch.testing.assert_close(
            edited_logits[:, :changed_position], logits[:, :changed_position], atol=1e-6, rtol=0
        )
        assert not torch.allclose(
            edited_logits[:, changed_position], logits[:, changed_position], atol=1e-6
        )


# ------------------------------------------------------------------ 9. config


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"activation": "swish"}, "activation"),
        ({"norm": "post"}, "norm"),
        ({"positional": "rotary"}, "positional"),
        ({"attention_backend": "xformers"}, "attention_backend"),
        ({"d_model": 30, "n_heads": 4}, "divisible"),
        ({"n_layers": 0}, "n_layers"),
        ({"n_loops": 4, "max_loops": 2}, "max_loops"),
        ({"abacus_max_offset": -1}, "abacus_max_offset"),
    ],
)
def test_config_validation_errors(overrides, message):
    base = {"vocab": ADDITION_VOCAB, "d_model": 32, "n_heads": 4}
    with pytest.raises(ValueError, match=message):
        ModelConfig(**{**base, **overrides})


def test_config_resolves_defaults():
    cfg = ModelConfig(vocab=ADDITION_VOCAB, d_model=32, n_heads=4, n_loops=3)
    assert (cfg.d_head, cfg.d_mlp, cfg.max_loops, cfg.d_vocab) == (8, 128, 12, 14)
    assert ModelConfig(vocab=ADDITION_VOCAB, d_model=30, n_heads=4, d_head=6).d_head == 6


def test_config_round_trips_through_json(tiny_model):
    model = tiny_model(positional="learned", tie_unembed=True, activation="relu")
    serialised = json.dumps(model.cfg.to_dict())
    restored_cfg = ModelConfig.from_dict(json.loads(serialised))
    assert restored_cfg == model.cfg
    assert restored_cfg.vocab.tokens == model.cfg.vocab.tokens

    restored = LoopedTransformer(restored_cfg).eval()
    restored.load_state_dict(model.state_dict(), strict=True)
    tokens = addition_tokens(model)
    assert torch.equal(restored(tokens), model(tokens))

    with pytest.raises(ValueError, match="unknown ModelConfig fields"):
        ModelConfig.from_dict({**model.cfg.to_dict(), "n_experts": 2})


def test_config_replace_rederives_unset_fields():
    cfg = ModelConfig(vocab=ADDITION_VOCAB, d_model=32, n_heads=4, n_loops=3)
    assert cfg.replace(d_model=64) == ModelConfig(
        vocab=ADDITION_VOCAB, d_model=64, n_heads=4, n_loops=3
    )
    assert cfg.replace(n_loops=20).max_loops == 80


# ------------------------------------------------------------------ 10. parameter summary


@pytest.mark.parametrize("tie_unembed", [False, True])
@pytest.mark.parametrize("positional, norm", [("abacus", "pre"), ("learned", "none")])
def test_parameter_summary_counts_add_up(tiny_model, tie_unembed, positional, norm):
    model = tiny_model(tie_unembed=tie_unembed, positional=positional, norm=norm)
    cfg = model.cfg
    d, h, e, m, v = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp, cfg.d_vocab
    n_layers = cfg.n_layers
    summary = parameter_summary(model)
    counts = summary["parameters"]

    assert tuple(counts) == COMPONENTS
    assert (
        sum(counts.values())
        == summary["total_parameters"]
        == sum(p.numel() for p in model.parameters())
    )
    assert counts["token_embedding"] == v * d
    n_positions = cfg.n_abacus_positions if positional == "abacus" else cfg.max_seq_len
    assert counts["positions"] == n_positions * d
    assert counts["attention"] == n_layers * (4 * h * d * e + 3 * h * e + d)
    assert counts["mlp"] == n_layers * (2 * d * m + m + d)
    assert counts["norms"] == (0 if norm == "none" else (2 * n_layers + 1) * 2 * d)
    assert counts["unembedding"] == (v if tie_unembed else d * v + v)
    assert ("W_U" in dict(model.named_parameters())) is not tie_unembed

    block_norms = 0 if norm == "none" else 2 * n_layers * 2 * d
    assert summary["looped_block_parameters"] == counts["attention"] + counts["mlp"] + block_norms
    assert summary["effective_depth"] == n_layers * cfg.n_loops
    assert summary["unrolled_equivalent_parameters"] == (
        summary["total_parameters"] + summary["looped_block_parameters"] * (cfg.n_loops - 1)
    )


def test_parameter_summary_counts_the_state_norm_of_norm_add(tiny_model):
    plain, normed = tiny_model(input_injection="add"), tiny_model(input_injection="norm_add")
    extra = parameter_summary(normed)["parameters"]["norms"] - parameter_summary(plain)["parameters"]["norms"]
    assert extra == 2 * normed.cfg.d_model  # ln_state's weight and bias
    assert parameter_summary(normed)["total_parameters"] == sum(p.numel() for p in normed.parameters())


# ------------------------------------------------------------------ 11. jaxtyping signatures


def typechecked(function):
    return jaxtyped(typechecker=beartype.beartype)(function)


SHAPE_ERRORS = (TypeCheckError, beartype.roar.BeartypeCallHintViolation)


def test_abacus_indices_signature_is_checked():
    checked_abacus_indices = typechecked(abacus_indices)
    tokens = torch.tensor([ADDITION_VOCAB.encode("12+3="), ADDITION_VOCAB.encode("45+67")])
    assert checked_abacus_indices(tokens, digit_ids(), torch.tensor([0, 1])).shape == (2, 5)
    assert checked_abacus_indices(tokens, digit_ids(), 3).shape == (2, 5)

    with pytest.raises(SHAPE_ERRORS):
        checked_abacus_indices(tokens[0], digit_ids())  # rank 1 tokens
    with pytest.raises(SHAPE_ERRORS):
        checked_abacus_indices(tokens.float(), digit_ids())  # float tokens
    with pytest.raises(SHAPE_ERRORS):
        checked_abacus_indices(tokens, digit_ids(), torch.tensor([[0, 1]]))  # rank 2 offsets


def test_model_signatures_are_checked(tiny_model):
    model = tiny_model()
    tokens = addition_tokens(model)
    batch, pos = tokens.shape
    checked_forward = typechecked(LoopedTransformer.forward)
    checked_embed = typechecked(LoopedTransformer.embed)
    checked_unembed = typechecked(LoopedTransformer.unembed)

    logits = checked_forward(model, tokens)
    assert logits.shape == (batch, pos, model.cfg.d_vocab)
    inputs = checked_embed(model, tokens, tokens != PAD_ID)
    assert checked_unembed(model, inputs).shape == (batch, pos, model.cfg.d_vocab)

    with pytest.raises(SHAPE_ERRORS):
        checked_forward(model, tokens[0])  # rank 1 tokens
    with pytest.raises(SHAPE_ERRORS):
        longer_valid = torch.ones(batch, pos + 1, dtype=torch.bool)
        checked_embed(model, tokens, longer_valid)  # valid of another length than tokens
    with pytest.raises(SHAPE_ERRORS):
        checked_unembed(model, inputs[0])  # rank 2 state


def test_run_with_cache_incl_bwd_backpropagates_the_loss_per_loop(tiny_model):
    model = tiny_model()
    tokens = addition_tokens(model)
    loss, cache = model.run_with_cache(tokens, return_type="loss", incl_bwd=True)
    assert loss.dim() == 0
    grads = [cache[act_name("state_post", loop=t) + "_grad"] for t in range(model.cfg.n_loops)]
    assert all(g.abs().max() > 0 for g in grads)
    assert not torch.allclose(grads[0], grads[-1])
    # the loss is the mean next-token cross-entropy over real tokens
    from abacus_interp.core.scoring import next_token_loss as masked_loss

    real_next = torch.cat([(tokens != 0)[:, 1:], torch.zeros_like(tokens[:, :1], dtype=torch.bool)], dim=1)
    torch.testing.assert_close(loss, masked_loss(model(tokens), tokens, real_next))

"""Greedy decoding: the key/value-cached `model.generate` against `naive_generate` (a full
forward per token) and against a plain per-prompt greedy loop written here; EOS stopping,
`max_new_tokens` and left padding.
"""

from __future__ import annotations

import random

import pytest
import torch

from abacus_interp.core.decoding import naive_generate
from abacus_interp.core.tokens import EOS, EOS_ID, PAD, PAD_ID

# Larger initial weights than training uses, so greedy outputs depend on the prompt, and a
# small EOS bias, so some rows stop at once, some after a few tokens and some never.
INIT_STD = 0.5
EOS_BIAS = 0.5
# A random model may pick <pad> as its greedy token, which a trained one never does (and which
# the decoders do not mask, see test_generate_never_emits_padding); the bias rules it out.
NO_PAD_BIAS = -100.0


def decoding_model(
    tiny_model, eos_bias: float = EOS_BIAS, pad_bias: float = NO_PAD_BIAS, **overrides
):
    model = tiny_model(init_std=INIT_STD, **overrides)
    with torch.no_grad():
        model.b_U[EOS_ID] = eos_bias
        model.b_U[PAD_ID] = pad_bias
    return model


def addition_prompts(n: int, seed: int = 0) -> list[str]:
    """Model-order prompts (least significant digit first) of 1-6 digit operands: 4 to 14 tokens."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(n):
        a = str(rng.randrange(10 ** rng.randint(1, 6)))
        b = str(rng.randrange(10 ** rng.randint(1, 6)))
        prompts.append(f"{a[::-1]}+{b[::-1]}=")
    return prompts


@torch.no_grad()
def reference_greedy(model, prompt: str, n_loops: int | None, max_new_tokens: int) -> str:
    """One prompt, no padding, no cache: append the argmax token until EOS or the budget."""
    tokens = torch.tensor([model.cfg.vocab.encode(prompt)])
    new_ids = []
    for _ in range(max_new_tokens):
        next_id = int(model(tokens, n_loops)[0, -1].argmax())
        if next_id == EOS_ID:
            break
        new_ids.append(next_id)
        tokens = torch.cat([tokens, torch.tensor([[next_id]])], dim=1)
    return model.cfg.vocab.decode(new_ids)


PROMPTS = addition_prompts(16)

# Position schemes decoding must handle: a learned Abacus table, absolute positions, and
# rotary attention on the Abacus index with a window on it (no position table at all).
POSITION_SCHEMES = {
    "abacus": dict(positional="abacus"),
    "learned": dict(positional="learned"),
    "rotary-window": dict(positional="none", rotary="abacus", abacus_window=1),
    # "+" and "=" close a number: their rotation is the index past its last digit
    "rotary-closers": dict(positional="none", rotary="abacus_closers", abacus_window=1),
    # digits and closers see only the digits within +-1 of them, over the window of +-2 that
    # keeps a random model's completions varied past the trained loops
    "digit-window": dict(positional="none", rotary="abacus_closers", abacus_window=2, digit_window=1),
    # scores scaled by ln(keys seen): a left-padded row must count its real keys only (the window
    # keeps a random model's completions varied past the trained loops)
    "scalable-softmax": dict(positional="none", rotary="abacus", abacus_window=2, softmax_length_scale=0.3),
    # one more key per head, at a learned logit and with a zero value, on the cached and the
    # padded path alike (the window gives every pass a mask)
    "attention-sink": dict(positional="none", rotary="abacus", abacus_window=2, attention_sink=0.5),
}


def test_prompts_are_ragged():
    lengths = {len(p) for p in PROMPTS}
    assert len(lengths) >= 5 and min(lengths) <= 6 and max(lengths) >= 12


@pytest.mark.parametrize("scheme", POSITION_SCHEMES)
@pytest.mark.parametrize("n_loops", [1, None, 6], ids=["below-trained", "trained", "above-trained"])
@pytest.mark.parametrize("max_new_tokens", [None, 5])
def test_cached_generate_equals_naive_generate(tiny_model, scheme, n_loops, max_new_tokens):
    model = decoding_model(tiny_model, **POSITION_SCHEMES[scheme])
    cached = model.generate(PROMPTS, n_loops=n_loops, max_new_tokens=max_new_tokens)
    naive = naive_generate(model, PROMPTS, n_loops=n_loops, max_new_tokens=max_new_tokens)
    assert cached == naive
    assert len(cached) == len(PROMPTS)
    # the outputs depend on the prompt, so the comparison means something
    assert len(set(cached)) > 3
    for prompt, completion in zip(PROMPTS, cached, strict=True):
        budget = max_new_tokens or model.cfg.max_seq_len - len(prompt)
        assert len(completion) <= budget


@pytest.mark.parametrize("scheme", POSITION_SCHEMES)
@pytest.mark.parametrize("n_loops", [1, 5])
def test_generate_equals_a_plain_greedy_loop_per_prompt(tiny_model, scheme, n_loops):
    model = decoding_model(tiny_model, **POSITION_SCHEMES[scheme])
    max_new_tokens = 8
    batched = model.generate(PROMPTS, n_loops=n_loops, max_new_tokens=max_new_tokens)
    one_at_a_time = [
        model.generate([p], n_loops=n_loops, max_new_tokens=max_new_tokens)[0] for p in PROMPTS
    ]
    reference = [reference_greedy(model, p, n_loops, max_new_tokens) for p in PROMPTS]
    assert batched == one_at_a_time == reference


def test_batch_size_does_not_change_completions(tiny_model):
    model = decoding_model(tiny_model)
    whole = model.generate(PROMPTS, max_new_tokens=6)
    assert model.generate(PROMPTS, max_new_tokens=6, batch_size=5) == whole
    assert model.generate(PROMPTS, max_new_tokens=6, use_cache=False, batch_size=3) == whole


def test_eos_stops_each_row_and_is_stripped(tiny_model):
    model = decoding_model(tiny_model)
    budget = model.cfg.max_seq_len - max(len(p) for p in PROMPTS)
    completions = model.generate(PROMPTS)
    lengths = [len(c) for c in completions]
    # the EOS bias gives every kind of row: EOS first, EOS after a few tokens, no EOS at all
    assert 0 in lengths
    assert any(0 < n < budget for n in lengths)
    assert budget in lengths
    for prompt, completion in zip(PROMPTS, completions, strict=True):
        assert EOS not in completion and PAD not in completion
        assert set(completion) <= set(model.cfg.vocab.symbols)
        if len(completion) < budget:  # it stopped early, so the next greedy token is EOS
            logits = model(model.to_tokens(prompt + completion))
            assert int(logits[0, -1].argmax()) == EOS_ID


def test_strong_eos_bias_gives_empty_completions(tiny_model):
    model = decoding_model(tiny_model, eos_bias=100.0)
    assert model.generate(PROMPTS) == [""] * len(PROMPTS)
    assert naive_generate(model, PROMPTS) == [""] * len(PROMPTS)


def test_max_new_tokens_truncates(tiny_model):
    model = decoding_model(tiny_model, eos_bias=-100.0)  # never stops by itself
    for max_new_tokens in (1, 3, 7):
        completions = model.generate(PROMPTS, max_new_tokens=max_new_tokens)
        assert [len(c) for c in completions] == [max_new_tokens] * len(PROMPTS)
    longer = model.generate(PROMPTS, max_new_tokens=7)
    shorter = model.generate(PROMPTS, max_new_tokens=3)
    assert [c[:3] for c in longer] == shorter  # greedy: a longer budget only extends
    with pytest.raises(ValueError, match="max_new_tokens"):
        model.generate(PROMPTS, max_new_tokens=0)


def test_generate_argument_errors_and_mode(tiny_model):
    model = decoding_model(tiny_model)
    model.train()
    with pytest.raises(TypeError, match="list"):
        model.generate("321+654=")
    with pytest.raises(ValueError, match="max_loops"):
        model.generate(PROMPTS[:2], n_loops=model.cfg.max_loops + 1, max_new_tokens=2)
    model.generate(PROMPTS[:2], max_new_tokens=2)
    assert model.training  # generate restores the mode it found


def test_default_budget_does_not_depend_on_the_batch(tiny_model):
    model = decoding_model(tiny_model, eos_bias=-100.0)
    short_prompt, long_prompt = "1+2=", "123456+654321="
    alone = model.generate([short_prompt])[0]
    in_batch = model.generate([short_prompt, long_prompt])[0]
    assert in_batch == alone


def test_generate_never_emits_padding(tiny_model):
    model = decoding_model(tiny_model, eos_bias=-100.0, pad_bias=100.0)
    completions = model.generate(PROMPTS, max_new_tokens=3)
    assert [len(c) for c in completions] == [3] * len(PROMPTS)

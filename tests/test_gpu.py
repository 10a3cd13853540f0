"""CUDA checks (`pytest -m gpu`): skipped where no GPU is visible, as in CI."""

from __future__ import annotations

import pytest
import torch

from abacus_interp.core.decoding import naive_generate

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

PROMPTS = ["321+654=", "9+1=", "12345+678=", "5+5=", "77+3="]


def _pair(tiny_model, dtype):
    fast = tiny_model(attention_backend="sdpa", d_model=64).cuda().to(dtype)
    explicit = tiny_model(attention_backend="explicit", d_model=64).cuda().to(dtype)
    explicit.load_state_dict(fast.state_dict())
    return fast, explicit


@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_fast_and_explicit_attention_agree_on_cuda(tiny_model, dtype, atol):
    fast, explicit = _pair(tiny_model, dtype)
    tokens = fast.to_tokens(PROMPTS)
    with torch.no_grad():
        torch.testing.assert_close(fast(tokens).float(), explicit(tokens).float(), atol=atol, rtol=0)


def test_cached_decoding_equals_naive_decoding_on_cuda(tiny_model):
    model = tiny_model(init_std=0.5).cuda()
    assert model.generate(PROMPTS, max_new_tokens=6) == naive_generate(model, PROMPTS, max_new_tokens=6)

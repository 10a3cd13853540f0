"""The gated MLP (`activation="swiglu"`): silu(x W_gate + b_gate) * (x W_in + b_in) through W_out,
with TransformerLens' hook names per loop; cached decoding, a checkpoint round trip, the
parameter count and the FLOPs count it."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from abacus_interp import ModelConfig, act_name, load_model
from abacus_interp.checkpoints import save_checkpoint, write_json
from abacus_interp.core.decoding import naive_generate
from abacus_interp.core.flops import layer_flops_per_token
from abacus_interp.core.summary import parameter_summary
from abacus_interp.core.tokens import Vocab

GATED = dict(activation="swiglu", d_mlp=40, init_std=0.3)


def test_the_gated_mlp_multiplies_a_silu_gate_by_a_linear_reading(tiny_model):
    model = tiny_model(**GATED)
    tokens = model.to_tokens(["12+34=46", "5+7=12"])
    _, cache = model.run_with_cache(tokens, n_loops=2)
    mlp = model.blocks[0].mlp
    for loop in range(2):
        x = cache[act_name("resid_mid", 0, loop=loop)]
        normed = model.blocks[0].ln2(x)
        gate, linear = normed @ mlp.W_gate + mlp.b_gate, normed @ mlp.W_in + mlp.b_in
        torch.testing.assert_close(cache[act_name("mlp_pre", 0, loop=loop)], gate)
        torch.testing.assert_close(cache[act_name("pre_linear", 0, loop=loop)], linear)
        torch.testing.assert_close(cache[act_name("mlp_post", 0, loop=loop)], F.silu(gate) * linear)
        torch.testing.assert_close(cache[act_name("mlp_out", 0, loop=loop)],
                                   (F.silu(gate) * linear) @ mlp.W_out + mlp.b_out)
    # the state changes between loops, so the two loops' hooks hold different activations
    assert not torch.allclose(cache[act_name("mlp_pre_linear", 0, loop=0)], cache[act_name("mlp_pre_linear", 0, loop=1)])
    # a model without a gate has neither the hook nor the weight
    plain = tiny_model()
    assert not hasattr(plain.blocks[0].mlp, "W_gate")
    assert not any("pre_linear" in name for name in plain.hook_dict)


def test_cached_decoding_equals_naive_decoding_with_a_gated_mlp(tiny_model):
    model = tiny_model(**GATED)
    prompts = ["12+34=", "5+7=", "999+1="]
    assert model.generate(prompts, n_loops=3, max_new_tokens=5) == naive_generate(model, prompts, n_loops=3,
                                                                                max_new_tokens=5)


def test_a_gated_checkpoint_loads_to_the_same_logits(tiny_model, tmp_path):
    model = tiny_model(**GATED)
    write_json(tmp_path / "config.json", {"task": {"name": "addition", "max_digits": 3},
                                          "model": model.cfg.to_dict()})
    save_checkpoint(tmp_path, model, 7, {"metrics": {}})
    loaded = load_model(tmp_path)
    tokens = model.to_tokens(["12+34=46"])
    torch.testing.assert_close(loaded(tokens, 2), model.eval()(tokens, 2))
    assert ModelConfig.from_dict(model.cfg.to_dict()).activation == "swiglu"


def test_the_gate_counts_as_mlp_parameters_and_flops(tiny_model):
    gated, plain = tiny_model(**GATED), tiny_model(d_mlp=40, init_std=0.3)
    d, m, layers = gated.cfg.d_model, gated.cfg.d_mlp, gated.cfg.n_layers
    extra = parameter_summary(gated)["parameters"]["mlp"] - parameter_summary(plain)["parameters"]["mlp"]
    assert extra == layers * (d * m + m)  # W_gate and b_gate, in every layer of the block
    # one more d_model x d_mlp matrix per token, 2 FLOPs per multiply-add (the card, the
    # comparison and the benchmarks all count through core.flops: tests/test_flops.py)
    assert layer_flops_per_token(gated.cfg, 10) - layer_flops_per_token(plain.cfg, 10) == 2 * d * m
    loops = gated.cfg.n_loops
    card = parameter_summary(gated, seq_len=10)["forward_flops_per_token"] - \
        parameter_summary(plain, seq_len=10)["forward_flops_per_token"]
    assert card == loops * layers * 2 * d * m


def test_swiglu_is_a_choice_of_the_config():
    vocab = Vocab(tuple("0123456789+="))
    assert ModelConfig(vocab=vocab, activation="swiglu").mlp_matrices == 3
    assert ModelConfig(vocab=vocab).mlp_matrices == 2

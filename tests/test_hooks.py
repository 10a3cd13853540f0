"""One function builds hook names (abacus_interp.core.hooks), and every family shares the base
model by inheritance (abacus_interp.core.model_base)."""

from __future__ import annotations

import re

import pytest
import torch

from abacus_interp import ArithmeticModel, LoopedTransformer, ModelConfig, act_name, hook_name
from abacus_interp.core.families import (
    SinglePassModel,
    build_model,
    registered_families,
)
from abacus_interp.tasks import get_task

PER_LAYER = re.compile(r"^loops\.(\d+)\.blocks\.(\d+)\.(.+)$")
PER_LOOP = re.compile(r"^loops\.(\d+)\.(hook_.+)$")


def test_hook_name_builds_every_hook_point_of_the_looped_model(tiny_model):
    model = tiny_model()
    built = set()
    for name in model.hook_dict:
        if layer_match := PER_LAYER.match(name):
            loop, layer, component = layer_match.groups()
            built.add(hook_name(component, loop=int(loop), layer=int(layer)))
        elif loop_match := PER_LOOP.match(name):
            loop, component = loop_match.groups()
            built.add(hook_name(component, loop=int(loop)))
        else:
            built.add(hook_name(name))
    assert built == set(model.hook_dict)
    # a path inside the loop, as stack_activation takes it
    assert hook_name("blocks.1.hook_resid_post", loop=2) == hook_name("hook_resid_post", loop=2, layer=1)


def test_act_name_goes_through_hook_name(tiny_model):
    model = tiny_model()
    for short in ("q", "k", "v", "z", "attn_scores", "pattern", "mlp_pre", "mlp_post",
                  "resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out"):
        assert act_name(short, 1, loop=2) in model.hook_dict, short
    for short in ("state_pre", "state_post"):
        assert act_name(short, loop=2) == hook_name(f"hook_{short}", loop=2)
    assert act_name("ln_final") == hook_name("ln_final.hook_normalized") == "ln_final.hook_normalized"


def test_a_layer_needs_a_loop():
    with pytest.raises(ValueError, match="needs loop"):
        hook_name("hook_resid_pre", layer=0)


def _family_cfg(family: str) -> ModelConfig:
    task = get_task("expressions", max_depth=1, max_digits=2, max_prompt_len=12)
    return ModelConfig(vocab=task.vocab, family=family, d_model=16, n_heads=2, n_layers=1, n_loops=1,
                       max_seq_len=24, positional="none" if family == "lstm" else "abacus", abacus_max_offset=4)


@pytest.mark.parametrize("family", sorted(registered_families()))
def test_every_family_derives_from_the_shared_base(family):
    model = build_model(_family_cfg(family))
    assert isinstance(model, ArithmeticModel)
    assert model.is_looped == (family == "looped")
    assert isinstance(model, SinglePassModel) != model.is_looped
    # inherited, not copied: one function object for every family
    assert type(model).embed is ArithmeticModel.embed and type(model).forward is ArithmeticModel.forward
    assert model.checkpoint_path is None


def test_with_max_loops_keeps_weights_and_provenance(tiny_model):
    model = tiny_model()
    model.checkpoint_path = "somewhere/step_0000003.safetensors"
    deeper = model.with_max_loops(20).eval()
    assert type(deeper) is LoopedTransformer and deeper.cfg.max_loops == 20
    assert deeper.checkpoint_path == model.checkpoint_path
    tokens = model.to_tokens(["21+3="])
    assert torch.equal(deeper(tokens), model(tokens))
    assert deeper(tokens, n_loops=20).shape == model(tokens).shape

"""Hook names of the looped model, built in one place.

`LoopedTransformer` keeps its weights once (`blocks.{l}`) but its hook points once per loop,
because TransformerLens keeps only the last call of a reused HookPoint. A looped model's
hook points are therefore named

    hook_embed / hook_pos_embed / hook_input         the input, outside any loop
    loops.{t}.hook_state_pre / hook_state_post       the state entering / leaving loop t
    loops.{t}.blocks.{l}.hook_resid_pre ...          layer l of the block, in loop t
    loops.{t}.blocks.{l}.attn.hook_pattern ...       its attention (q, k, v, z, attn_scores)
    loops.{t}.blocks.{l}.mlp.hook_pre / hook_post    its MLP neurons (a gated MLP: also hook_pre_linear)
    ln_final.hook_normalized                         the final norm

`hook_name` turns (component, loop, layer) into such a name: it is the only code that builds
names in this layout (the cache's key parsing reads them back). `act_name` does the same from
TransformerLens-style short names ("pattern", "resid_post", ...) by calling it. The single-pass families have no loop, so their
names are the plain TransformerLens ones (`blocks.{l}.hook_resid_pre`, see families/).
"""

from __future__ import annotations


def hook_name(component: str, *, loop: int | None = None, layer: int | None = None) -> str:
    """The full name of a looped model's hook point. `component` is the hook's path inside
    the layer (with `layer`), inside the loop (with `loop` alone) or in the model (neither):

        hook_name("attn.hook_pattern", loop=3, layer=0) -> "loops.3.blocks.0.attn.hook_pattern"
        hook_name("hook_state_post", loop=2)             -> "loops.2.hook_state_post"
        hook_name("blocks.1.hook_resid_post", loop=2)    -> "loops.2.blocks.1.hook_resid_post"
        hook_name("hook_embed")                          -> "hook_embed"
    """
    if loop is None:
        if layer is not None:
            raise ValueError(f"hook_name({component!r}, layer={layer}) needs loop=...: every loop has its own hook set")
        return component
    if layer is None:
        return f"loops.{loop}.{component}"
    return f"loops.{loop}.blocks.{layer}.{component}"


# TransformerLens' spellings of the short names, and this package's own older ones
_ALIASES = {"attn": "pattern", "scores": "attn_scores", "pre_mlp": "mlp_pre", "post_mlp": "mlp_post",
            "pre_linear": "mlp_pre_linear",
            "normalized": "ln_final", "ln_final.hook_normalized": "ln_final"}
_ATTENTION = ("q", "k", "v", "z", "attn_scores", "pattern")
_MLP = ("mlp_pre", "mlp_pre_linear", "mlp_post")
_LAYER = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out")


def act_name(name: str, layer: int | None = None, loop: int | None = None) -> str:
    """Full hook name from a short one, like TransformerLens' `get_act_name`.

    act_name("pattern", 0, loop=3) -> "loops.3.blocks.0.attn.hook_pattern"
    act_name("resid_post", 1, 2)   -> "loops.2.blocks.1.hook_resid_post"
    act_name("state_post", loop=2) -> "loops.2.hook_state_post"
    act_name("embed")              -> "hook_embed"
    """
    short = name.removeprefix("hook_")
    short = _ALIASES.get(short, short)
    if short in ("embed", "pos_embed", "input"):
        return hook_name(f"hook_{short}")
    if short == "ln_final":
        return hook_name("ln_final.hook_normalized")
    if loop is None:
        raise ValueError(f"act_name({name!r}) needs loop=...: every loop has its own hook set")
    if short in ("state_pre", "state_post"):
        return hook_name(f"hook_{short}", loop=loop)
    if layer is None:
        raise ValueError(f"act_name({name!r}) needs layer=... (the layer inside the looped block)")
    if short in _ATTENTION:
        return hook_name(f"attn.hook_{short}", loop=loop, layer=layer)
    if short in _MLP:
        return hook_name(f"mlp.hook_{short.removeprefix('mlp_')}", loop=loop, layer=layer)
    if short in _LAYER:
        return hook_name(f"hook_{short}", loop=loop, layer=layer)
    raise ValueError(f"unknown activation name {name!r}")


# ------------------------------------------------------------------ names people read
# Hook names, cache arguments and result arrays index loops from 0 (`loops.0` is the first
# loop), as TransformerLens indexes layers. Everything a person reads (findings, figure
# labels, component labels, the CLI, notebooks) counts loops from 1, the way "the block ran
# 3 times" is said, so a digit that "locks in at loop 3" is right after three loops. Heads
# and layers keep TransformerLens' L{layer}H{head}; inside a loop the loop comes first.
def loop_label(loop: int) -> str:
    """"loop 1" for loop index 0 (`loops.0`)."""
    return f"loop {loop + 1}"


def layer_label(layer: int, loop: int | None = None) -> str:
    """"L0", or "loop 1 L0" for layer 0 in loop index 0."""
    return f"L{layer}" if loop is None else f"{loop_label(loop)} L{layer}"


def head_label(layer: int, head: int, loop: int | None = None) -> str:
    """"L0H1", or "loop 1 L0H1" for head 1 of layer 0 in loop index 0."""
    return f"L{layer}H{head}" if loop is None else f"{loop_label(loop)} L{layer}H{head}"


def neuron_label(layer: int, neuron: int, loop: int | None = None) -> str:
    """"L0N7", or "loop 1 L0N7" for neuron 7 of layer 0's MLP in loop index 0."""
    return f"L{layer}N{neuron}" if loop is None else f"{loop_label(loop)} L{layer}N{neuron}"

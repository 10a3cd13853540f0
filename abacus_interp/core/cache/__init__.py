"""A TransformerLens `ActivationCache` that understands loops.

`LoopedTransformer.run_with_cache` returns a `LoopActivationCache`: the plain TransformerLens
cache (`cache[name]`, `keys()`, `to(device)`, `remove_batch_dim()`, ...) plus versions of its
residual-stream methods that walk over (loop, layer) in execution order:

    accumulated_resid   the residual after every block of every loop: the per-loop logit lens
    logit_lens          accumulated_resid(apply_ln=True) projected to logits
    decompose_resid     injected input, every attention and MLP output (and the carried state)
    stack_head_results  every head's output z @ W_O, per loop and layer
    stack_neuron_results, get_full_resid_decomposition   heads, neurons, input and biases
    apply_ln_to_stack, logit_attrs                       direct logit attribution on any stack
    stack_activation    one per-loop activation stacked over loops: [loop, ...]

Points in the computation are named by (loop, layer), as everywhere in this package: `layer`
is the layer inside the looped block, and "the residual entering (loop, layer)" is
`loops.{loop}.blocks.{layer}.hook_resid_pre`; `layer = n_layers` (or None) means the state
leaving the loop, and `loop = None` the last loop that ran. Labels count loops from 1
(`core/hooks.py`): `loop 3 pre` (the state entering loop index 2, after injection),
`loop 3 L0 mid`, `loop 3 L0 post`, `loop 3 input` (what it injects), `loop 3 L0 attn_out`,
`loop 3 L0 mlp_out`, `loop 3 L0H3` (layer 0, head 3), `loop 3 L0N17` (neuron 17).

The class is built in layers, one concept per module, each using only the ones before it:

    index.py        keys (TransformerLens-style and unrolled), (loop, layer) arithmetic,
                    the residual at any point, stack_activation
    norms.py        apply_ln_to_stack and logit_attrs (how the cached LayerNorm scale is used)
    residual.py     accumulated_resid, logit_lens, decompose_resid (and what input_injection
                    means for which components add up)
    components.py   per-head and per-neuron stacks, get_full_resid_decomposition
    loop_cache.py   LoopActivationCache, the class run_with_cache returns
"""

from .loop_cache import LoopActivationCache

__all__ = ["LoopActivationCache"]

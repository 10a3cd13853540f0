"""The looped model's forward pass computed node by node over a `LoopGraph`, so that every
edge can be cut (its target reads the source's ablated output instead) and every node's
input can be differentiated on its own (each head gets its own three copies of the
residual, for its queries, keys and values, as TransformerLens' split q/k/v input).

`run_graph(model, tokens, graph)` with nothing cut equals `model(tokens, n_loops)` (the
tests check it on every configuration the looped family has: positions, rotary, windows,
multiplier heads, the scalable softmax, the three injections, norm or none). The head
computation repeats `Attention.forward` with per-head inputs: the same weights, rotation, scale
(`Attention.place`), mask (`AttentionContext`) and sink, through `attention.attend`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import einops
import torch
from torch import Tensor

from abacus_interp.core.attention import AttentionContext, attend

from .graph import LoopGraph


@dataclass
class GraphRun:
    logits: Tensor  # [batch pos d_vocab]
    outputs: list[Tensor | None]  # per node: what it writes into the residual [batch pos d_model]; None for logits
    inputs: dict[tuple[int, str], Tensor]  # per reader (node, channel): what it read


def context_of(model, tokens: Tensor) -> AttentionContext:
    n = tokens.shape[1]
    return AttentionContext.build(model.cfg, n, n, tokens.device, None, model.attention_index(tokens))


def _heads(block, x: dict[str, Tensor], context: AttentionContext) -> Tensor:
    """Every head of one attention layer, head h's queries reading x["q"][:, :, h] (keys and
    values likewise, each [batch pos head d_model]): [batch head pos d_model]."""
    attn = block.attn
    q, k, v = (einops.einsum(block.ln1(x[c]), w, "b p h d, h d e -> b p h e") + b
               for c, w, b in (("q", attn.W_Q, attn.b_Q), ("k", attn.W_K, attn.b_K), ("v", attn.W_V, attn.b_V)))
    q, k = attn.place(q, k, context)
    z = attend(q, k, v, context.mask, attn.sink)  # [b p h e]
    return einops.einsum(z, attn.W_O, "b p h e, h e d -> b h p d") + attn.b_O / attn.W_O.shape[0]


def run_graph(
    model,
    tokens: Tensor,
    graph: LoopGraph,
    *,
    keep: Sequence[bool] | Tensor | None = None,
    ablated: Sequence[Tensor | None] | None = None,
    forced: Sequence[Tensor | None] | None = None,
) -> GraphRun:
    """The forward pass over `graph` on `tokens` [batch pos] (right-padded batches need no
    mask under causal attention, as in `model.forward`).

    keep: [n_edges] True to keep an edge, False to cut it (the target then reads
        `ablated[source]`, which must be given: [batch or 1, pos, d_model]); None keeps
        every edge.
    forced: per node, a value its output takes in the forward pass while the gradient still
        flows through what it computed (straight-through; None entries are left alone):
        the interpolated runs of integrated gradients.
    """
    cfg = model.cfg
    model.check_loops(graph.n_loops)
    if keep is not None and ablated is None:
        raise ValueError("cutting edges needs `ablated`, the value each source's edge carries when cut")
    kept = None if keep is None else [bool(k) for k in keep]
    context = context_of(model, tokens)
    incoming = graph.incoming()
    outputs: list[Tensor | None] = [None] * len(graph.nodes)
    inputs: dict[tuple[int, str], Tensor] = {}
    shape = (tokens.shape[0], tokens.shape[1], cfg.d_model)

    def settle(i: int, out: Tensor) -> Tensor:
        if forced is not None and forced[i] is not None:
            out = out + (forced[i].to(out) - out).detach()
        outputs[i] = out
        return out

    def read(i: int, channel: str = "") -> Tensor:
        edges = incoming[(i, channel)]
        total = None
        for e in edges:
            s = graph.edges[e][0]
            value = outputs[s] if kept is None or kept[e] else ablated[s]
            total = value if total is None else total + value
        if len(edges) == 1 or total.shape != shape:  # its own tensor of the batch's shape, so that
            total = total.expand(shape).clone()  # its gradient is this reader's alone
        inputs[(i, channel)] = total
        return total

    logits = _walk(model, tokens, graph, context, settle, read)
    return GraphRun(logits=logits, outputs=outputs, inputs=inputs)


def _walk(model, tokens: Tensor, graph: LoopGraph, context: AttentionContext,
          settle: Callable[[int, Tensor], Tensor], read: Callable[..., Tensor]) -> Tensor:
    """Every node in the graph's order: the embedding, then per loop the state passed on
    (from the second loop), each layer's heads and its MLP; returns the logits of the last
    reader. `settle(i, out)` records node i's output, `read(i, channel)` sums its inputs."""
    cfg = model.cfg
    settle(0, model.embed(tokens))
    i = 1
    for t in range(graph.n_loops):
        if t > 0:
            x = read(i)
            settle(i, model.ln_state(x) if cfg.input_injection == "norm_add" else x)
            i += 1
        for layer, block in enumerate(model.blocks):
            first = i
            x = {c: torch.stack([read(first + h, c) for h in range(cfg.n_heads)], dim=2) for c in "qkv"}
            for h, out in enumerate(_heads(block, x, context).unbind(1)):
                settle(first + h, out)
            i += cfg.n_heads
            settle(i, block.mlp(block.ln2(read(i)), model.loops[t].blocks[layer].mlp))
            i += 1
    return model.unembed(read(i))

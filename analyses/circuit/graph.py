"""The computational graph of a looped model across its loops: nodes and the edges between them.

Nodes, in the order the forward pass computes them:

    input            the embedded input (token + position), re-injected at every loop
    state@t          for t >= 1, the state loop t starts from: the state leaving loop t - 1,
                     LayerNormed (input_injection="norm_add": state_pre[t] = ln_state(state_post[t-1])
                     + input) or as it is ("add", "none")
    L{l}H{h}@t       head h of layer l in loop t (its z times W_O, with 1/n_heads of b_O)
    MLP{l}@t         the MLP of layer l in loop t (b_out included)
    logits           the unembedding of the state leaving the last loop

An edge is what a node writes into the residual stream that a later node reads. Inside loop
t the residual is a sum: the input (when it is injected there), state@t, and every node
of loop t computed so far; each MLP reads it through its own LayerNorm, each head three
times (its query, key and value inputs, each its own edge, as in the EAP graphs of Syed et
al. 2023 and TransformerLens' split q/k/v input), state@(t+1) reads all of it at the
loop's end, and so do the logits after the last loop. So every edge
runs inside one loop, and a node's influence crosses a loop boundary through the state node
of the next loop: with norm_add that node is the LayerNorm the issue warns about, the one
nonlinearity between loops, so it cannot be folded into a linear sum over loops. With the
input injected at every loop, `input` feeds every loop directly.

Only the looped family has this graph (a single-pass model is the looped graph with one
loop when its family is "looped", as grok-mod113).
"""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.core.hooks import loop_label
from abacus_interp.errors import UserError

KINDS = ("input", "state", "head", "mlp", "logits")
CHANNELS = ("q", "k", "v")  # the three inputs of a head; every other node reads one input ("")


@dataclass(frozen=True)
class Node:
    kind: str  # one of KINDS
    loop: int | None = None  # 0-based, as in the hook names (loops.{t}); None for input and logits
    layer: int | None = None
    head: int | None = None

    @property
    def name(self) -> str:
        if self.kind in ("input", "logits"):
            return self.kind
        if self.kind == "state":
            return f"state@{self.loop}"
        if self.kind == "head":
            return f"L{self.layer}H{self.head}@{self.loop}"
        return f"MLP{self.layer}@{self.loop}"


def readable(name: str) -> str:
    """A node's name as findings print it, loops counted from 1 like every label a person reads
    (`core.hooks.loop_label`): "L0H1@2" -> "loop 3 L0H1", "state@1" -> "loop 2 state"."""
    if "@" not in name:
        return name
    component, loop = name.split("@")
    return f"{loop_label(int(loop))} {component}"


@dataclass(frozen=True)
class LoopGraph:
    """Nodes (in computing order) and edges (source index, target index, channel) of a looped
    model run for `n_loops` loops; the channel is "q", "k" or "v" for an edge into a head,
    else ""."""

    n_loops: int
    n_layers: int
    n_heads: int
    injection: str
    nodes: tuple[Node, ...]
    edges: tuple[tuple[int, int, str], ...]

    @classmethod
    def of(cls, model, n_loops: int | None = None) -> LoopGraph:
        cfg = model.cfg
        if not model.is_looped:
            raise UserError(f"the loop graph is the looped family's; family {cfg.family!r} has no looped block")
        n_loops = cfg.n_loops if n_loops is None else n_loops
        if n_loops < 1:
            raise UserError(f"n_loops must be >= 1, got {n_loops}")
        nodes: list[Node] = [Node("input")]
        edges: list[tuple[int, int, str]] = []

        def add(node: Node, reads: list[int]) -> int:
            nodes.append(node)
            channels = CHANNELS if node.kind == "head" else ("",)
            edges.extend((s, len(nodes) - 1, c) for c in channels for s in reads)
            return len(nodes) - 1

        live = [0]  # what the residual holds: loop 0 starts from the input alone
        for t in range(n_loops):
            if t > 0:
                state = add(Node("state", t), live)
                live = [state] if cfg.input_injection == "none" else [0, state]
            for layer in range(cfg.n_layers):
                heads = [add(Node("head", t, layer, h), list(live)) for h in range(cfg.n_heads)]
                live = live + heads
                live = live + [add(Node("mlp", t, layer), list(live))]
        add(Node("logits"), live)
        return cls(n_loops=n_loops, n_layers=cfg.n_layers, n_heads=cfg.n_heads, injection=cfg.input_injection,
                   nodes=tuple(nodes), edges=tuple(edges))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def edge_name(self, e: int) -> str:
        s, t, c = self.edges[e]
        return f"{self.nodes[s].name} -> {self.nodes[t].name}" + (f".{c}" if c else "")

    def index(self, name: str) -> int:
        return self.names.index(name)

    def edge_index(self, source: str, target: str, channel: str = "") -> int:
        return self.edges.index((self.index(source), self.index(target), channel))

    def readers(self) -> list[tuple[int, str]]:
        """Every (node, channel) that reads the residual, in computing order."""
        return list(dict.fromkeys((t, c) for _, t, c in self.edges))

    def incoming(self) -> dict[tuple[int, str], list[int]]:
        """(target node, channel) -> the indices of the edges it reads, in source order."""
        out: dict[tuple[int, str], list[int]] = {}
        for e, (_, t, c) in enumerate(self.edges):
            out.setdefault((t, c), []).append(e)
        return out

    def on_paths(self, keep: list[bool], from_input: bool = True) -> list[bool]:
        """`keep` without the edges whose target reaches no logit through kept edges (they
        change nothing) and, with `from_input`, without those whose source hears nothing of
        the input through kept edges: such a source computes from ablated values alone, and
        under resample ablation that is exactly its ablated value (under mean ablation it is
        not: f(mean) is no mean of f, so leave `from_input` off)."""
        reached = set(range(len(self.nodes))) if not from_input else {0}
        for e in sorted(range(len(self.edges)), key=lambda i: self.edges[i][1]):  # targets in computing order
            s, t, _ = self.edges[e]
            if keep[e] and s in reached:
                reached.add(t)
        reaches = {len(self.nodes) - 1}
        for e in sorted(range(len(self.edges)), key=lambda i: -self.edges[i][0]):  # sources, last first
            s, t, _ = self.edges[e]
            if keep[e] and t in reaches:
                reaches.add(s)
        return [bool(k and s in reached and t in reaches) for k, (s, t, _) in zip(keep, self.edges, strict=True)]

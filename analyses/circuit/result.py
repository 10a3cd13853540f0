"""The circuit analysis's result: frozen dataclasses, their JSON, figures and findings."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.jsonsafe import to_json


@dataclass(frozen=True)
class NodeCheck:
    """Attribution against real activation patching, node by node: every (loop, layer,
    residual | head output | MLP output, position) the patching measured, the same metric
    (noising: one activation of the corrupted run put into the clean run)."""

    sample: str  # the pairs (the first of the search pairs)
    sites: tuple[str, ...]  # per node: "resid_pre", "z" or "mlp_out"
    labels: tuple[str, ...]  # per node, e.g. "L0H1@3 pos 12"
    patching: tuple[float, ...]  # metric(patched) - metric(clean)
    attribution: tuple[float, ...]  # its estimate with `steps` integrated-gradient steps
    one_gradient: tuple[float, ...]  # its estimate from one gradient (plain attribution patching)
    steps: int
    pearson: float | None  # attribution against patching, over every node
    one_gradient_pearson: float | None
    pearson_by_site: tuple[tuple[str, float | None], ...]
    attribution_s: float  # seconds: the attribution of every node (steps passes)
    one_gradient_s: float
    patching_s: float  # seconds: one patched forward pass per node
    speedup: float | None  # patching_s / attribution_s


@dataclass(frozen=True)
class EdgeRecord:
    source: str  # node names, e.g. "state@3", "L0H1@3", "input"
    target: str
    channel: str  # "q", "k" or "v" into a head, else ""
    source_loop: int | None
    target_loop: int | None
    score: float  # attribution: the estimated change of the metric when this edge alone is cut
    effect: float | None  # the real change when it alone is cut (None when not measured)
    in_circuit: bool


@dataclass(frozen=True)
class RecoveryPoint:
    top_k: int  # edges taken in score order
    edges: int  # left after dropping those on no input-to-logits path
    recovered: float  # on the search pairs, by real ablation


@dataclass(frozen=True)
class CircuitResult:
    sample: str  # the search pairs, in words
    held_out_sample: str
    n_pairs: int  # search pairs
    n_held_out: int  # held-out pairs: no clean problem shared with the search's
    checkpoint: str | None
    n_loops: int
    n_layers: int
    n_heads: int
    injection: str  # the model's input_injection
    steps: int
    ablation: str  # "mean" or "resample"
    target: float
    # the metric on the search pairs: clean run, corrupted run, every edge cut
    metric_clean: float
    metric_corrupted: float
    metric_ablated: float
    nodes: NodeCheck
    attribution_vs_patching_pearson: float | None  # = nodes.pearson
    edge_score_vs_effect_pearson: float | None  # edge scores against cutting each edge alone
    total_edges: int
    circuit_edges: int
    circuit_share: float  # circuit_edges / total_edges
    circuit_recovered: float | None  # on the held-out pairs, by real ablation
    circuit_recovered_search: float  # on the search pairs
    circuit_recovered_worst_block: float  # on the worst of `folds` blocks of them (what the search held to target)
    folds: int
    held_out_metric: tuple[float, float, float]  # held-out: full model, every edge cut, circuit alone
    other_ablation: str
    other_ablation_recovered: float | None  # the same circuit, held out, under the other ablation
    curve: tuple[RecoveryPoint, ...]
    start_k: int  # the top-k circuit the pruning started from
    evaluations: int  # ablated forward passes the search spent
    edges: tuple[EdgeRecord, ...]  # every edge, in graph order

    def circuit(self) -> list[EdgeRecord]:
        return [e for e in self.edges if e.in_circuit]

    def to_dict(self) -> dict:
        return to_json(self)

    def figures(self):
        from .figures import circuit_figures

        return circuit_figures(self)

    def findings(self) -> list[str]:
        from .findings import circuit_findings

        return circuit_findings(self)

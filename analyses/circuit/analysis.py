"""Circuits across loops: attribution patching checked against activation patching, edge
attribution over the loop graph, and the smallest circuit that keeps the behaviour,
checked by real ablation on held-out pairs.

    from analyses import circuit
    result = circuit.run("checkpoints/extrap-add")       # a CircuitResult
    result.circuit(); result.figures(); result.findings()

Steps (each module's docstring has the details):
1. pairs.py: clean and corrupted problems (addition: the units column starts a carry chain
   or does not; modular addition: another first operand) and the logit-difference metric;
2. nodes.py: `core.attribution` at every (loop, layer, residual | head | MLP, position)
   against `core.attribution.activation_patch` over the same nodes, with their times;
3. graph.py, forward.py, edges.py: the loop graph (input, heads, MLPs, one state node per
   loop boundary, logits), its forward pass with cuttable edges, and the edge scores;
4. search.py: the smallest circuit keeping `target` of the behaviour on the search pairs,
   by real ablation, then its recovery on held-out pairs (under both ablations).
"""

from __future__ import annotations

import logging

import torch

from abacus_interp.errors import UserError
from abacus_interp.evaluation.common import section_rng
from analyses.common import resolve
from analyses.contract import configure

from .config import CircuitConfig
from .edges import ABLATIONS, Ablation, circuit_attribution, edge_attribution
from .graph import LoopGraph
from .nodes import node_check, pearson
from .pairs import make_pairs, pairs_reason
from .result import CircuitResult, EdgeRecord, RecoveryPoint
from .search import find_circuit, recovery_of

logger = logging.getLogger(__name__)


def circuit_reason(model, task) -> str | None:
    """Why the circuit analysis cannot run on `model` and `task` (None when it can)."""
    if not model.is_looped:
        return (f"the loop graph is the looped family's (heads, MLPs and the state between loops); family "
                f"{model.cfg.family!r} has none (core.attribution still attributes its nodes)")
    if model.cfg.list_items_settle_after is not None:
        return ("the loop graph updates every position every loop; with list_items_settle_after the list's tokens "
                "keep their state, which it does not model")
    return pairs_reason(task)


def run(model_or_run, task=None, *, config: CircuitConfig | None = None, **overrides) -> CircuitResult:
    """The circuit analysis of a looped model (a model, a run directory or a checkpoint;
    `task` defaults to the run's). config: every setting (`CircuitConfig`); overrides:
    fields of it by name, e.g. `n_pairs=16, ablation="resample"`."""
    cfg = configure(CircuitConfig, config, overrides, "circuit.run()")
    subject = resolve(model_or_run, task)
    model, task = subject.model, subject.task
    reason = circuit_reason(model, task)
    if reason:
        raise UserError(reason)
    n_loops = model.cfg.n_loops if cfg.n_loops is None else cfg.n_loops
    model.check_loops(n_loops)
    device = model.W_E.device
    vocab = model.cfg.vocab
    search = make_pairs(task, vocab, cfg.n_pairs, section_rng(cfg.seed, "circuit search"))
    held = make_pairs(task, vocab, cfg.n_held_out, section_rng(cfg.seed, "circuit held-out"),
                      exclude=frozenset(clean for clean, _ in search.problems))
    # the same stream: the node check's pairs are the first n_patch_pairs of the search's
    patched = make_pairs(task, vocab, min(cfg.n_patch_pairs, cfg.n_pairs), section_rng(cfg.seed, "circuit search"))
    search, held, patched = search.to(device), held.to(device), patched.to(device)

    nodes = node_check(model, patched, n_loops, cfg.steps)
    logger.info("circuit: node check r=%s over %d nodes", nodes.pearson, len(nodes.labels))
    graph = LoopGraph.of(model, n_loops)
    ablation = Ablation.of(model, graph, search, cfg.ablation)
    scores = edge_attribution(model, ablation, cfg.steps)
    effects = ablation.single_edge_effects() if cfg.edge_effects else None
    found = find_circuit(graph, scores, recovery_of(ablation, cfg.folds), cfg.target,
                         from_input=cfg.ablation == "resample", passes=cfg.passes,
                         rescore=lambda keep: circuit_attribution(model, ablation, keep))
    keep = list(found.keep)
    n_edges = len(graph.edges)
    held_ablation = Ablation.of(model, graph, held, cfg.ablation)
    held_metric = tuple(held_ablation.metric_with(k) for k in ([True] * n_edges, [False] * n_edges, keep))
    other = next(kind for kind in ABLATIONS if kind != cfg.ablation)
    with torch.no_grad():
        metric_clean = float(search.metric(model(search.clean, n_loops=n_loops)))
        metric_corrupted = float(search.metric(model(search.corrupted, n_loops=n_loops)))
    edges = tuple(
        EdgeRecord(source=graph.nodes[s].name, target=graph.nodes[t].name, channel=c,
                   source_loop=graph.nodes[s].loop, target_loop=graph.nodes[t].loop,
                   score=round(float(scores[e]), 5),
                   effect=None if effects is None else round(float(effects[e]), 5), in_circuit=keep[e])
        for e, (s, t, c) in enumerate(graph.edges))
    return CircuitResult(
        sample=search.label, held_out_sample=held.label, n_pairs=len(search), n_held_out=len(held),
        checkpoint=model.checkpoint_path, n_loops=n_loops, n_layers=model.cfg.n_layers, n_heads=model.cfg.n_heads,
        injection=model.cfg.input_injection,
        steps=cfg.steps, ablation=cfg.ablation, target=cfg.target, metric_clean=metric_clean,
        metric_corrupted=metric_corrupted, metric_ablated=ablation.metric_with([False] * n_edges),
        nodes=nodes, attribution_vs_patching_pearson=nodes.pearson,
        edge_score_vs_effect_pearson=None if effects is None else pearson(scores, effects),
        total_edges=n_edges, circuit_edges=sum(keep), circuit_share=sum(keep) / n_edges,
        circuit_recovered=_recovered(*held_metric), circuit_recovered_search=recovery_of(ablation)(keep),
        circuit_recovered_worst_block=found.recovered, folds=cfg.folds,
        held_out_metric=held_metric, other_ablation=other,
        other_ablation_recovered=_recovered_under(model, graph, held, other, keep),
        curve=tuple(RecoveryPoint(top_k=k, edges=kept, recovered=r) for k, kept, r in found.curve),
        start_k=found.start_k, evaluations=found.evaluations, edges=edges)


def _recovered(full: float, none: float, circuit: float) -> float | None:
    return None if abs(full - none) < 1e-6 else (circuit - none) / (full - none)


def _recovered_under(model, graph, pairs, kind: str, keep: list[bool]) -> float | None:
    ablation = Ablation.of(model, graph, pairs, kind)
    n = len(keep)
    return _recovered(ablation.metric_with([True] * n), ablation.metric_with([False] * n), ablation.metric_with(keep))

"""Attribution patching (core.attribution) and the circuit analysis (analyses/circuit): a
planted circuit in a hand-built looped model that the method must recover exactly,
attribution against real activation patching on tiny models of every family, the loop
graph's forward pass against the model's own, and the analysis on checkpoints/extrap-add."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig, Vocab
from abacus_interp.core import patching
from abacus_interp.core.attribution import (
    activation_patch,
    attribute_head,
    attribute_resid,
    attribution_patch,
    node_sites,
    site_name,
)
from abacus_interp.core.families import build_model
from abacus_interp.errors import UserError
from abacus_interp.tasks import get_task
from analyses import circuit
from analyses.circuit.edges import Ablation, edge_attribution
from analyses.circuit.forward import run_graph
from analyses.circuit.graph import LoopGraph
from analyses.circuit.nodes import pearson
from analyses.circuit.pairs import Pairs, make_pairs
from analyses.circuit.search import find_circuit, recovery_of
from analyses.registry import ANALYSES

ROOT = Path(__file__).resolve().parents[1]
EXTRAP = ROOT / "checkpoints" / "extrap-add"

# ------------------------------------------------------------------ the planted circuit
# d_model 8: dims A (the token's sign), B (what a head copied), P0..P3 (one-hot positions).
A, B, P = 0, 1, 2
PLANTED = {"input -> L0H0@0.v", "L0H0@0 -> MLP0@0", "MLP0@0 -> state@1", "state@1 -> L0H0@1.v",
           "L0H0@1 -> logits"}


def planted_model() -> LoopedTransformer:
    """Two loops of one layer, no norms, the input re-added, on "x c c" (x = a or b):

    head 0 is a previous-token head (queries and keys read only the positions) whose value
    copies A into B; head 1 is dead (all weights zero); the MLP adds B into A (exactly:
    relu(B) - relu(-B)); the logits read B at the last position (+B for a, -B for b).

    Loop 0 copies x's sign to position 1 (B), the MLP turns it into A there; loop 1's head
    copies that A from position 1 to position 2 (B), which the logits read. So the answer
    needs exactly the five edges of PLANTED; everything else the difference touches (B at
    position 1 in loop 1, A at position 0, the MLP of loop 1) reaches no logit, and the
    dead head and the positions' q/k carry no difference at all."""
    cfg = ModelConfig(vocab=Vocab(tuple("abc")), d_model=8, n_heads=2, d_head=4, d_mlp=2, n_layers=1, n_loops=2,
                      norm="none", input_injection="add", positional="learned", max_seq_len=4, activation="relu")
    model = LoopedTransformer(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        a, b = cfg.vocab.encode("ab")
        model.W_E[a, A], model.W_E[b, A] = 1.0, -1.0
        for p in range(4):
            model.W_pos[p, P + p] = 1.0
        attn, mlp = model.blocks[0].attn, model.blocks[0].mlp
        for p in range(4):
            attn.W_Q[0, P + p, p] = 40.0  # query at p: e_p
            if p < 3:
                attn.W_K[0, P + p, p + 1] = 1.0  # key at j: e_(j+1), so p attends to p - 1
        attn.W_V[0, A, 0] = 1.0
        attn.W_O[0, 0, B] = 1.0
        mlp.W_in[B, 0], mlp.W_in[B, 1] = 1.0, -1.0
        mlp.W_out[0, A], mlp.W_out[1, A] = 1.0, -1.0
        model.W_U[B, a], model.W_U[B, b] = 5.0, -5.0
    return model


def planted_pairs(model) -> Pairs:
    vocab = model.cfg.vocab
    clean = torch.tensor([vocab.encode("acc"), vocab.encode("bcc")])
    corrupted = torch.tensor([vocab.encode("bcc"), vocab.encode("acc")])
    a, b = vocab.encode("ab")
    return Pairs(label="planted: x c c against the other x", clean=clean, corrupted=corrupted,
                 rows=torch.tensor([0, 1]), cols=torch.tensor([2, 2]), clean_ids=torch.tensor([a, b]),
                 corrupted_ids=torch.tensor([b, a]), weights=torch.full((2,), 0.5),
                 problems=(("acc", "bcc"), ("bcc", "acc")))


def test_the_planted_model_answers_by_its_planted_path():
    model = planted_model()
    pairs = planted_pairs(model)
    with torch.no_grad():
        assert float(pairs.metric(model(pairs.clean))) == pytest.approx(10.0, abs=1e-4)
        assert float(pairs.metric(model(pairs.corrupted))) == pytest.approx(-10.0, abs=1e-4)
        # one loop is not enough: the answer needs both hops
        assert float(pairs.metric(model(pairs.clean, n_loops=1))) == pytest.approx(0.0, abs=1e-4)


@pytest.mark.parametrize("kind", ["resample", "mean"])
@pytest.mark.parametrize("steps", [1, 4])  # an odd count puts alpha = 1/2 where B = 0 and relu' is 0
def test_edge_attribution_and_real_ablation_recover_the_planted_circuit_exactly(kind, steps):
    model = planted_model()
    pairs = planted_pairs(model)
    graph = LoopGraph.of(model)
    assert len(graph.edges) == 34  # loop 0: 6 + 3 + 4; loop 1: 12 + 4 + 5
    ablation = Ablation.of(model, graph, pairs, kind)
    scores = edge_attribution(model, ablation, steps)
    names = [graph.edge_name(e) for e in range(len(graph.edges))]
    top = {names[e] for e in torch.argsort(-scores.abs())[:5].tolist()}
    assert top == PLANTED
    on_path = torch.tensor([n in PLANTED for n in names])
    # the path is linear, so every score is what cutting that edge alone does
    cut = -20.0 if kind == "resample" else -10.0
    assert torch.allclose(scores[on_path], torch.full((5,), cut), atol=1e-3)
    assert scores[~on_path].abs().max() < 1e-4
    assert torch.allclose(ablation.single_edge_effects(), scores, atol=1e-3)
    found = find_circuit(graph, scores, recovery_of(ablation), target=0.95, from_input=kind == "resample")
    assert {names[e] for e, k in enumerate(found.keep) if k} == PLANTED
    assert found.recovered == pytest.approx(1.0, abs=1e-4)


def test_the_search_checks_by_ablation_not_by_score():
    """Scores that put the planted path last: the top-k sweep and the pruning, which run the
    model with everything else cut, still end at the planted circuit, not the top scores."""
    model = planted_model()
    pairs = planted_pairs(model)
    graph = LoopGraph.of(model)
    ablation = Ablation.of(model, graph, pairs, "resample")
    names = [graph.edge_name(e) for e in range(len(graph.edges))]
    misleading = torch.tensor([0.0 if n in PLANTED else 1.0 + e for e, n in enumerate(names)])
    found = find_circuit(graph, misleading, recovery_of(ablation), target=0.95)
    assert {names[e] for e, k in enumerate(found.keep) if k} == PLANTED


def test_node_attribution_is_exact_on_the_planted_path():
    """Every activation of the planted model acts linearly on the metric, so attribution
    equals the real patch at every node: the same numbers, one forward pass against many."""
    model = planted_model()
    pairs = planted_pairs(model)
    real = activation_patch(model, pairs.clean, pairs.corrupted, pairs.metric)
    for steps in (1, 4):
        estimate = attribution_patch(model, pairs.clean, pairs.corrupted, pairs.metric, steps=steps)
        for site in node_sites(model):
            assert torch.allclose(estimate.values[site], real.values[site], atol=1e-3), (site, steps)
    # the head of loop 1 at the last position carries the whole answer; the dead head nothing
    z = real.values["z"]  # [loop layer head pos]
    assert z[1, 0, 0, 2] == pytest.approx(-20.0, abs=1e-3) and z[:, :, 1].abs().max() < 1e-6


# ------------------------------------------------------------------ attribution, every family
def _tiny_pairs(model, seed=0):
    """Two batches that differ in one token, and a logit-difference metric at the end."""
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(2, model.cfg.d_vocab, (6, 7), generator=g)
    corrupted = clean.clone()
    corrupted[:, 1] = (clean[:, 1] - 2 + 1) % (model.cfg.d_vocab - 2) + 2
    target, other = 3, 4

    def metric(logits):
        return (logits[:, -1, target] - logits[:, -1, other]).mean()

    return clean, corrupted, metric


@pytest.mark.parametrize("family", ["looped", "lstm", "retran"])
def test_attribution_agrees_with_activation_patching_on_every_family(family):
    """Random weights large enough (init_std 0.2) that one gradient misjudges some patches
    of the LSTM gates; the integrated estimate follows the real patches on every family."""
    torch.manual_seed(1)
    cfg = ModelConfig(vocab=Vocab(tuple("0123456789+=")), family=family, d_model=16, n_heads=2, n_layers=2,
                      n_loops=3 if family == "looped" else 1, max_seq_len=16, positional="learned", init_std=0.2)
    model = build_model(cfg).eval()
    clean, corrupted, metric = _tiny_pairs(model)
    sites = node_sites(model)
    assert sites == {"looped": ("resid_pre", "z", "mlp_out"), "lstm": ("resid_pre", "lstm_out"),
                     "retran": ("resid_pre", "z", "lstm_out")}[family]
    real = activation_patch(model, clean, corrupted, metric)
    integrated = attribution_patch(model, clean, corrupted, metric, steps=8)
    assert real.values["resid_pre"].shape == (cfg.n_loops, 2, 7)
    assert pearson(real.flat(), integrated.flat()) > 0.9
    assert integrated.metric_clean == pytest.approx(real.metric_clean, abs=1e-4)
    assert integrated.method == "attribution, 8 steps" and real.method == "patching"


def test_one_gradient_agrees_with_patching_on_a_near_linear_looped_model():
    torch.manual_seed(1)
    model = LoopedTransformer(ModelConfig(vocab=Vocab(tuple("0123456789+=")), d_model=16, n_heads=2, n_layers=2,
                                          n_loops=3, max_seq_len=16, positional="learned")).eval()
    clean, corrupted, metric = _tiny_pairs(model)
    real = activation_patch(model, clean, corrupted, metric)
    one = attribution_patch(model, clean, corrupted, metric)
    assert pearson(real.flat(), one.flat()) > 0.95
    assert one.metric_clean == pytest.approx(real.metric_clean, abs=1e-5)


def test_the_sweeps_match_core_patching_and_their_shapes():
    torch.manual_seed(2)
    model = LoopedTransformer(ModelConfig(vocab=Vocab(tuple("0123456789+=")), d_model=16, n_heads=2, n_layers=2,
                                          n_loops=3, max_seq_len=16)).eval()
    clean, corrupted, metric = _tiny_pairs(model)
    real = activation_patch(model, clean, corrupted, metric, ("resid_pre", "z"))
    _, corrupted_cache = model.run_with_cache(corrupted)
    with torch.no_grad():
        base = float(metric(model(clean)))
    expected = patching.patch_resid(model, clean, corrupted_cache, metric) - base  # noising, core.patching
    assert torch.allclose(real.values["resid_pre"], expected, atol=1e-5)
    heads = patching.patch_head(model, clean, corrupted_cache, metric, by_pos=True) - base
    assert torch.allclose(real.values["z"], heads, atol=1e-5)
    assert attribute_resid(model, clean, corrupted, metric).shape == (3, 2, 7)
    assert attribute_head(model, clean, corrupted, metric, by_pos=True).shape == (3, 2, 2, 7)
    by_head = attribute_head(model, clean, corrupted, metric)
    assert torch.allclose(by_head, attribute_head(model, clean, corrupted, metric, by_pos=True).sum(-1))
    assert attribute_resid(model, clean, corrupted, metric, loops=[-1]).shape == (1, 2, 7)


def test_attribution_is_exact_where_the_metric_is_linear():
    """Without norms the logits are linear in the last loop's MLP output, so the one-gradient
    estimate of patching it is the patch itself."""
    torch.manual_seed(3)
    model = LoopedTransformer(ModelConfig(vocab=Vocab(tuple("0123456789+=")), d_model=16, n_heads=2, n_loops=3,
                                          max_seq_len=16, norm="none")).eval()
    clean, corrupted, metric = _tiny_pairs(model)
    estimate = attribute_resid(model, clean, corrupted, metric, site="mlp_out", loops=[2])
    real = activation_patch(model, clean, corrupted, metric, ("mlp_out",), loops=[2]).values["mlp_out"]
    assert torch.allclose(estimate, real, atol=1e-4)


def test_site_names_and_their_errors():
    looped = LoopedTransformer(ModelConfig(vocab=Vocab(tuple("0123456789+=")), d_model=16, n_heads=2, n_loops=2))
    assert site_name(looped, "z", 0, 1) == "loops.1.blocks.0.attn.hook_z"
    lstm = build_model(ModelConfig(vocab=Vocab(tuple("0123456789+=")), family="lstm", d_model=16, n_loops=1))
    assert site_name(lstm, "resid_pre", 0) == "blocks.0.hook_in"
    with pytest.raises(ValueError, match="does not exist in family 'lstm'"):
        site_name(lstm, "z", 0)
    with pytest.raises(ValueError, match="same shape"):
        attribution_patch(looped, torch.ones(2, 3, dtype=torch.long), torch.ones(2, 4, dtype=torch.long), sum)


# ------------------------------------------------------------------ the loop graph
GRAPH_CONFIGS = [
    dict(positional="abacus", input_injection="add"),
    dict(positional="none", rotary="abacus", abacus_window=1, input_injection="norm_add", n_layers=2),
    dict(positional="learned", input_injection="none", norm="none", activation="relu"),
    dict(positional="none", rotary="abacus", multiplier_heads=1, input_injection="norm_add"),
    dict(positional="none", rotary="abacus", softmax_length_scale=0.3, input_injection="norm_add"),
    dict(positional="none", rotary="abacus", attention_sink=1.0, input_injection="norm_add"),
]


@pytest.mark.parametrize("overrides", GRAPH_CONFIGS)
def test_the_graph_forward_pass_is_the_models(overrides):
    torch.manual_seed(4)
    cfg = ModelConfig(**{**dict(vocab=Vocab(tuple("0123456789+=")), d_model=16, n_heads=2, n_loops=3,
                                max_seq_len=24, init_std=0.2), **overrides})
    model = LoopedTransformer(cfg).eval()
    tokens = torch.tensor([cfg.vocab.encode("123+45=579"), cfg.vocab.encode("908+17=925")])
    graph = LoopGraph.of(model)
    with torch.no_grad():
        assert torch.allclose(run_graph(model, tokens, graph).logits, model(tokens), atol=1e-4)
        outputs = run_graph(model, tokens, graph).outputs
        ablated = [None if o is None else torch.zeros(1, *o.shape[1:]) for o in outputs]
        kept = run_graph(model, tokens, graph, keep=[True] * len(graph.edges), ablated=ablated)
        assert torch.allclose(kept.logits, model(tokens), atol=1e-4)
        # cutting every edge that leaves the input (zero in its place) is the model on a zero input
        keep = [s != 0 for s, _, _ in graph.edges]
        cut = run_graph(model, tokens, graph, keep=keep, ablated=ablated).logits
        zero_input = model.unembed(model.run_loops(torch.zeros_like(outputs[0]), range(graph.n_loops),
                                                   index=model.attention_index(tokens)))
        assert torch.allclose(cut, zero_input, atol=1e-4)


def test_the_graph_counts_edges_across_loops():
    def graph(**kw):
        cfg = ModelConfig(**{**dict(vocab=Vocab(tuple("0123456789+=")), d_model=16, n_heads=4, n_loops=6), **kw})
        return LoopGraph.of(LoopedTransformer(cfg))

    g = graph(input_injection="norm_add")
    # loop 0: 4 heads x 3 inputs + MLP 5 + state 6; loops 1-5: 24 + 6 + 7 each
    assert len(g.edges) == 23 + 5 * 37 == 208
    assert "state@1 -> state@2" in {g.edge_name(e) for e in range(len(g.edges))}
    none = graph(input_injection="none")  # the input only starts loop 0
    assert {none.nodes[t].name for s, t, _ in none.edges if s == 0} == {
        "L0H0@0", "L0H1@0", "L0H2@0", "L0H3@0", "MLP0@0", "state@1"}
    assert none.edges.count((0, len(none.nodes) - 1, "")) == 0  # the input reaches the logits only through the loops
    # pruning: an edge whose source hears no input, or whose target reaches no logit, goes
    keep = [False] * len(g.edges)
    keep[g.edge_index("state@5", "logits")] = True
    assert not any(g.on_paths(keep)) and g.on_paths(keep, from_input=False) == keep
    with pytest.raises(UserError, match="looped family"):
        LoopGraph.of(build_model(ModelConfig(vocab=Vocab(tuple("0123456789+=")), family="lstm", d_model=16,
                                             n_loops=1)))


def test_pairs_differ_only_where_the_carry_starts():
    task = get_task("addition", max_digits=5, answer_format="slots")
    import random

    pairs = make_pairs(task, task.vocab, 8, random.Random(0))
    differ = (pairs.clean != pairs.corrupted).nonzero()[:, 1].unique().tolist()
    assert differ[:2] == [0, 6]  # the two units digits (model order: least significant first)
    assert all(p >= 12 for p in differ[2:])  # and the answers after "=" (teacher-forced targets)
    assert sorted(pairs.rows.tolist()) == [i for i in range(8) for _ in range(1 + i % 4)]  # chain c: digits 1..c
    held = make_pairs(task, task.vocab, 8, random.Random(0), exclude=frozenset(c for c, _ in pairs.problems))
    assert not {c for c, _ in held.problems} & {c for c, _ in pairs.problems}
    with pytest.raises(UserError, match="no counterfactual pairs"):
        make_pairs(get_task("sorting"), None, 2, random.Random(0))


# ------------------------------------------------------------------ the analysis
def test_the_analysis_on_a_tiny_model_and_its_report_entry():
    task = get_task("addition", max_digits=3, answer_format="slots")
    model = LoopedTransformer(ModelConfig(vocab=task.vocab, d_model=16, n_heads=2, n_loops=3, max_seq_len=24,
                                          answer_slots=True, positional="none", rotary="abacus", abacus_window=1,
                                          input_injection="norm_add")).eval()
    result = circuit.run(model, task, config=circuit.CircuitConfig.quick())
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    for key in ("attribution_vs_patching_pearson", "circuit_edges", "total_edges", "circuit_recovered"):
        assert key in data
    # loop 0: 2 heads x 3 inputs + MLP 3 + state 4; loops 1-2: 12 + 4 + 5
    assert data["total_edges"] == 13 + 2 * 21 and 0 < data["circuit_edges"] <= data["total_edges"]
    assert len(result.nodes.labels) == 3 * (1 + 2 + 1) * 12  # loops x (resid, 2 heads, MLP) x positions
    assert set(result.figures()) == {"circuit_graph", "attribution_vs_patching", "recovery", "edge_scores"}
    text = result.findings()
    assert 2 <= len(text) <= 6 and "carry pairs: 3-digit operands" in text[0]
    assert "circuit" in [a.key for a in ANALYSES]
    plugin = next(a for a in ANALYSES if a.key == "circuit")
    assert "looped family" in circuit.circuit_reason(build_model(ModelConfig(vocab=task.vocab, family="lstm",
                                                                             d_model=16, n_loops=1)), task)
    assert "no counterfactual pairs" in circuit.circuit_reason(model, get_task("sorting"))
    assert plugin.Config is circuit.CircuitConfig


@pytest.mark.slow
def test_the_shipped_extrapolator_keeps_its_carry_in_a_small_circuit():
    """checkpoints/extrap-add at the quick sizes: every node and edge measured, and the
    circuit found by real ablation keeps most of the carry on held-out pairs."""
    if not (EXTRAP / "config.json").exists():
        pytest.skip(f"{EXTRAP} is not present")
    result = circuit.run(EXTRAP, config=circuit.CircuitConfig.quick())
    assert result.total_edges == 208 and result.n_loops == 6
    assert len(result.nodes.labels) == 6 * 6 * 18  # loops x (resid, 4 heads, MLP) x positions
    assert result.attribution_vs_patching_pearson > 0.8
    assert result.nodes.speedup > 5
    assert result.circuit_edges < 0.5 * result.total_edges
    assert result.circuit_recovered_search >= 0.95 and result.circuit_recovered > 0.5
    # the carry crosses loops: the circuit writes into state nodes, and reads the input
    assert any(e.target.startswith("state") for e in result.circuit())
    assert any(e.source == "input" for e in result.circuit())
    assert np.isfinite(result.metric_clean) and result.metric_clean > 0 > result.metric_corrupted

"""analyses.fourier: the Fourier basis, key frequencies, restricted loss, Gini, neurons,
clock/pizza metrics, phase detection, the grokking diagnosis and `run` on tiny runs."""

from __future__ import annotations

import json
import math

import plotly.graph_objects as go
import pytest
import torch

from abacus_interp import LoopedTransformer
from abacus_interp import checkpoints as ckpt
from abacus_interp.jsonsafe import from_json
from abacus_interp.training import apply_overrides
from abacus_interp.training.presets import grok_mod113, grok_mod113_fast
from analyses import fourier
from analyses.fourier.circuit import grid_labels
from analyses.fourier.findings import findings as fourier_findings
from analyses.fourier.result import ModularSummary

PLANTED = [14, 35, 41]


def planted_embedding(p=113, d=64, freqs=PLANTED, noise=0.05, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.arange(p, dtype=torch.float64)[:, None]
    w = noise * torch.randn(p, d, generator=g, dtype=torch.float64)
    for k in freqs:
        a, b = torch.randn(2, 1, d, generator=g, dtype=torch.float64)
        w += a * torch.cos(2 * math.pi * k * x / p) + b * torch.sin(2 * math.pi * k * x / p)
    return w


def planted_logits(p, freqs, alphas, offset=None):
    a = torch.arange(p).repeat_interleave(p).double()[:, None]
    b = torch.arange(p).repeat(p).double()[:, None]
    c = torch.arange(p).double()[None, :]
    out = torch.zeros(p * p, p, dtype=torch.float64)
    for k, alpha in zip(freqs, alphas, strict=True):
        out += alpha * torch.cos(2 * math.pi * k / p * (a + b - c))
    return out + (0 if offset is None else offset[None, :])


@pytest.mark.parametrize("p", [113, 10])
def test_fourier_basis_is_orthonormal(p):
    basis, names = fourier.fourier_basis(p)
    assert basis.shape == (p, p) and len(names) == p and names[:3] == ["const", "cos 1", "sin 1"]
    assert torch.allclose(basis @ basis.T, torch.eye(p, dtype=torch.float64), atol=1e-10)


def test_planted_frequencies_are_exactly_the_key_frequencies():
    w = planted_embedding()
    assert fourier.key_frequencies(w) == PLANTED
    norms, _ = fourier.frequency_norms(w)
    assert fourier.frequency_shares(norms).sum().item() == pytest.approx(1.0)


def test_restricted_loss_equals_full_loss_for_key_frequency_logits():
    p, key = 23, [3, 7]
    offset = torch.linspace(-1, 1, p, dtype=torch.float64)
    logits = planted_logits(p, key, [4.0, 2.5], offset)
    train = torch.arange(0, p * p, 3)
    out = fourier.restricted_and_excluded(logits, p, key, train)
    assert out["restricted_loss"] == pytest.approx(out["full_loss_train"], abs=1e-9)
    assert out["restricted_loss_all"] == pytest.approx(out["full_loss"], abs=1e-9)
    # with the key components removed only the per-output offset is left: no better than chance
    assert out["excluded_accuracy"] < 0.2
    fit = fourier.logit_fit(logits - offset, p, key)
    assert fit["fraction_explained"] == pytest.approx(1.0, abs=1e-9)
    assert fourier.logit_fit(logits, p, key)["fraction_explained"] < 1  # the output offset is not a cos term
    assert fit["coefficients"][3] == pytest.approx(4.0) and fit["coefficients"][7] == pytest.approx(2.5)


def test_restricted_loss_of_pure_key_frequency_logits_is_zero_and_excluded_is_chance():
    """The metric definitions on a planted model whose logits are exactly the key-frequency
    terms: keeping them loses nothing (loss ~0), removing them leaves a constant (log p)."""
    p, key = 31, [4, 9, 13]
    logits = planted_logits(p, key, [80.0, 80.0, 80.0])
    train = torch.randperm(p * p, generator=torch.Generator().manual_seed(0))[: round(0.3 * p * p)]
    out = fourier.restricted_and_excluded(logits, p, key, train)
    assert out["restricted_loss"] < 1e-6 and out["restricted_accuracy"] == 1.0
    assert out["excluded_loss"] == pytest.approx(math.log(p), abs=1e-9)
    # a non-key frequency as "key" keeps nothing useful
    assert fourier.restricted_and_excluded(logits, p, [5], train)["restricted_loss"] == pytest.approx(math.log(p))


def test_frequency_ablation_finds_the_frequency_the_logits_need():
    """Planted logits: frequency 4 carries the answer strongly, 9 weakly. Removing 4 costs
    far more than removing 9, and 4 alone does almost as well as both."""
    p, key = 31, [4, 9]
    logits = planted_logits(p, key, [200.0, 5.0])
    train = torch.randperm(p * p, generator=torch.Generator().manual_seed(0))[: round(0.3 * p * p)]
    strong, weak = fourier.frequency_ablation(logits, p, key, train)
    assert (strong["frequency"], weak["frequency"]) == (4, 9)
    assert strong["loss_without"] > 10 * weak["loss_without"]
    assert strong["accuracy_alone"] == 1.0 and weak["accuracy_without"] == 1.0
    assert strong["loss_alone"] < weak["loss_alone"]


def test_restricted_and_excluded_loss_are_on_the_training_pairs():
    p, key = 23, [3, 7]
    g = torch.Generator().manual_seed(1)
    logits = planted_logits(p, key, [3.0, 2.0]) + torch.randn(p * p, p, generator=g, dtype=torch.float64)
    train = torch.arange(0, p * p, 4)
    out = fourier.restricted_and_excluded(logits, p, key, train)
    labels = grid_labels(p)
    comps = fourier.key_components(logits, p, key)
    restricted = logits.mean(0, keepdim=True) + comps
    ce = torch.nn.functional.cross_entropy
    assert out["restricted_loss"] == pytest.approx(float(ce(restricted[train], labels[train])))
    assert out["restricted_loss_all"] == pytest.approx(float(ce(restricted, labels)))
    assert out["excluded_loss"] == pytest.approx(float(ce((logits - comps)[train], labels[train])))
    assert out["full_loss_train"] == pytest.approx(float(ce(logits[train], labels[train])))
    assert out["restricted_loss"] != pytest.approx(out["restricted_loss_all"])


def test_planted_single_frequency_neurons_give_share_one():
    """Neurons built from one frequency each (linear and product terms, random phases) are
    all single-frequency; an even mix of two frequencies is not."""
    p, n = 29, 40
    g = torch.Generator().manual_seed(0)
    a = torch.arange(p).repeat_interleave(p).double()
    b = torch.arange(p).repeat(p).double()
    freqs = torch.randint(1, p // 2 + 1, (n,), generator=g)
    cols = []
    for k in freqs.tolist():
        w = 2 * math.pi * k / p
        ph = torch.rand(4, generator=g, dtype=torch.float64) * 2 * math.pi
        amp = torch.rand(3, generator=g, dtype=torch.float64) + 0.5
        cols.append(1.0 + amp[0] * torch.cos(w * a + ph[0]) * torch.cos(w * b + ph[1])
                    + amp[1] * torch.cos(w * a + ph[2]) + amp[2] * torch.sin(w * b + ph[3]))
    s = fourier.neuron_summary(torch.stack(cols, dim=1), p)
    assert s["share_single_frequency"] == 1.0 and s["n_single_frequency"] == n
    assert s["dominant_frequency"] == freqs.tolist()
    assert sum(s["cluster_sizes"].values()) == n
    w3, w5 = 2 * math.pi * 3 / p, 2 * math.pi * 5 / p
    mixed = torch.stack([torch.cos(w3 * a) + torch.cos(w5 * b), torch.cos(w3 * a) * torch.cos(w5 * b)], dim=1)
    assert fourier.neuron_summary(mixed, p)["share_single_frequency"] == 0.0


def _synthetic_fourier_data():
    return {
        "kind": "modular", "p": 113, "key_threshold": 0.05, "key_source": "both",
        "key_frequencies": [4, 32, 43], "embed_frequency_shares": [0.3 if k in (4, 32, 43) else 0.0005 for k in range(1, 57)],
        "neurons": {"n_single_frequency": 440, "n_neurons": 512, "share_single_frequency": 440 / 512,
                    "share_single_frequency_alive": 440 / 500, "threshold": 0.85, "cluster_sizes": {4: 200}},
        "logit_fit": {"fraction_explained": 0.9},
        "final_losses": {"restricted_loss": 2e-6, "excluded_loss": 9.5, "full_loss_train": 1e-6, "full_loss": 2e-6},
        "phases": {"memorisation_end": 1400, "circuit_formation_end": 9000, "cleanup_end": 12000,
                   "grokked": True, "plateau": 9500, "notes": [], "source": "metrics.jsonl"},
        "restricted_vs_test": {"restricted_half_fall_step": 8000, "test_half_fall_step": 10000,
                               "restricted_falls_first": True, "restricted_peak": 4.8, "restricted_peak_step": 2000,
                               "restricted_final": 1e-3, "final_step": 15000, "restricted_peak_over_final": 4800.0,
                               "excluded_at_peak": 2.7, "excluded_final": 12.6},
        "paper": fourier.PAPER,
    }


def test_findings_state_the_papers_numbers_and_the_fall_from_the_peak():
    data = _synthetic_fourier_data()
    d = from_json(ModularSummary, data, partial=True)
    text = " ".join(fourier_findings(d))
    assert "440/512 = 85.9%" in text and "433/512 = 84.6%" in text
    assert "14, 35, 41, 42, 52" in text
    assert "memorisation 0-1,400" in text and "circuit formation 0-1.4k" not in text and "1.4k-9.4k" in text
    assert "4,800x below its post-memorisation peak" in text and "halved" not in text
    assert "On the training pairs" in text and "log10 scale at step 8,000, before the test loss" in text
    assert 2 <= len(fourier_findings(d)) <= 4
    analysis_text = " ".join(fourier.summary.details(d))
    assert "433/512" in analysis_text and "4,800x lower" in analysis_text and "training pairs" in analysis_text
    # another modulus: no paper comparison
    data.update(p=11, paper=None)
    d = from_json(ModularSummary, data, partial=True)
    assert "433" not in " ".join(fourier_findings(d) + fourier.summary.details(d))


def test_gini_uniform_and_one_hot():
    assert fourier.gini(torch.ones(100)) == pytest.approx(0.0, abs=1e-12)
    one_hot = torch.zeros(100)
    one_hot[7] = 3.0
    assert fourier.gini(one_hot) >= 0.99


def test_neuron_frequency_fractions():
    p = 17
    a = torch.arange(p).repeat_interleave(p).double()
    b = torch.arange(p).repeat(p).double()
    w3, w5 = 2 * math.pi * 3 / p, 2 * math.pi * 5 / p
    acts = torch.stack([
        torch.cos(w3 * a) * torch.cos(w3 * b) + 0.5 * torch.sin(w3 * a),  # pure frequency 3
        torch.cos(w3 * a) + torch.cos(w5 * b),  # half 3, half 5
        torch.zeros_like(a),  # dead
    ], dim=1)
    s = fourier.neuron_summary(acts, p)
    assert s["dominant_frequency"][0] == 3 and s["fraction_explained"][0] == pytest.approx(1.0)
    assert s["fraction_explained"][1] == pytest.approx(0.5)
    assert s["single_frequency"] == [True, False, False] and s["n_dead"] == 1
    assert s["clusters"] == {3: [0]}


def test_neuron_summary_measures_the_variance_the_single_frequency_neurons_carry():
    """Two planted single-frequency neurons and two mixed ones, one of them always on (a
    positive offset): the variance share is the planted one, and the median firing share of
    the mixed neurons is that of the always-on one and the half-on one."""
    p = 17
    a = torch.arange(p).repeat_interleave(p).double()
    b = torch.arange(p).repeat(p).double()
    w3, w5 = 2 * math.pi * 3 / p, 2 * math.pi * 5 / p
    acts = torch.stack([
        3 * torch.cos(w3 * a) * torch.cos(w3 * b),  # single, variance 9/4
        torch.cos(w5 * a) + torch.sin(w5 * b),  # single, variance 1
        5 + 0.1 * (torch.cos(w3 * a) + torch.cos(w5 * b)),  # mixed, always on, variance 0.01
        0.1 * (torch.cos(w3 * a) + torch.cos(w5 * b)) + 0.0,  # mixed, on about half the pairs
    ], dim=1)
    s = fourier.neuron_summary(acts, p)
    assert s["single_frequency"] == [True, True, False, False]
    variance = acts.var(0)
    assert s["variance_share_single_frequency"] == pytest.approx(float(variance[:2].sum() / variance.sum()))
    assert s["variance_share_single_frequency"] == pytest.approx(3.25 / 3.27, abs=1e-3)
    half_on = float((acts[:, 3] > 0).double().mean())
    assert 0.3 < half_on < 0.7
    assert s["others_median_active_share"] == pytest.approx((1.0 + half_on) / 2)
    assert fourier.neuron_summary(acts[:, :2], p)["others_median_active_share"] is None


def test_distance_irrelevance_separates_clock_from_pizza():
    p = 31
    a = torch.arange(p).repeat_interleave(p).double()
    b = torch.arange(p).repeat(p).double()
    w = 2 * math.pi * 4 / p
    labels = grid_labels(p)
    for correct, expected in [(torch.cos(w * (a + b)), 1.0), (torch.cos(w * (a - b) / 2).abs(), 0.0)]:
        logits = torch.zeros(p * p, p, dtype=torch.float64)
        logits[torch.arange(p * p), labels] = correct
        q = fourier.distance_irrelevance(logits, p)["distance_irrelevance"]
        assert q == pytest.approx(expected, abs=1e-6)


def test_detect_phases_on_synthetic_curves():
    steps = list(range(0, 3001, 100))
    train_acc = [min(1.0, s / 300) for s in steps]
    test_acc = [0.0 if s < 1800 else min(1.0, (s - 1700) / 500) for s in steps]
    test_loss = [5.0 if s < 1500 else max(1e-3, 5.0 * 10 ** (-(s - 1500) / 250)) for s in steps]
    ph = fourier.detect_phases(steps, train_acc, test_acc, test_loss)
    assert ph["grokked"]
    assert ph["memorisation_end"] == 300
    assert ph["memorisation_end"] < ph["circuit_formation_end"] < ph["cleanup_end"]
    assert ph["circuit_formation_end"] == 1500 and ph["cleanup_end"] == 2400
    assert ph["notes"] == []
    # a run whose test loss falls as soon as it has memorised has no plateau, and says so
    steady = [max(1e-4, 5.0 * 10 ** (-max(0, s - 300) / 150)) for s in steps]
    ph = fourier.detect_phases(steps, train_acc, [min(1.0, max(0.0, (s - 300) / 1500)) for s in steps], steady)
    assert ph["circuit_formation_end"] == ph["memorisation_end"] == 300
    assert any("no plateau" in n for n in ph["notes"])


def _bad_config():
    cfg = apply_overrides(grok_mod113(), ["train.weight_decay=0", "train.batch_size=64", "train.loss_dtype=float32"])
    return cfg.to_dict()


def test_diagnose_names_the_differences(tmp_path):
    config = _bad_config()
    metrics = [{"step": s, "loss": 0.01, "train_exact_match": 1.0, "test_exact_match": 0.02, "test_loss": 9.0}
               for s in range(100, 2001, 100)]
    diag = fourier.diagnose(config=config, metrics=metrics)
    keys = {d["key"] for d in diag.differences}
    assert {"train.weight_decay", "train.batch_size", "train.loss_dtype"} <= keys
    text = " ".join(diag.sentences)
    assert "weight_decay" in text and "train.batch_size=null" in text and "memorised" in text
    assert diag.grokked is False
    # Nanda's exact recipe (grok-mod113: lr 1e-3, answer token only) stopped at 2,000 steps:
    # too short for its lr * weight decay
    short = fourier.diagnose(config=grok_mod113().to_dict(), metrics=metrics)
    assert short.differences == [] and any("raise train.steps" in s for s in short.sentences)
    # the known-good (fast) recipe itself has no differences
    assert fourier.diagnose(config=grok_mod113_fast().to_dict(), metrics=[]).differences == []
    # and it reads a run directory
    ckpt.write_json(tmp_path / "config.json", config)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    assert {d["key"] for d in fourier.diagnose(tmp_path).differences} == keys


def _tiny_run(path, extra=()):
    cfg = apply_overrides(grok_mod113(), ["task.p=11", "model.d_model=16", "model.d_head=4", "model.d_mlp=32",
                                          "model.max_seq_len=5", *extra])
    ckpt.write_json(path / "config.json", cfg.to_dict())
    model = LoopedTransformer(cfg.model)
    rows = []
    for step in (0, 10, 20, 40):
        with torch.no_grad():
            for prm in model.parameters():
                prm.mul_(0.9).add_(0.05 * torch.randn_like(prm))
        ckpt.save_checkpoint(path, model, step, {})
        rows.append({"step": step, "loss": 1 / (step + 1), "train_exact_match": min(1.0, step / 10),
                     "test_exact_match": 0.0, "test_loss": 5.0})
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return cfg


@pytest.mark.parametrize("loops", [1, 2])
def test_run_on_a_tiny_run(tmp_path, loops):
    extra = ["model.n_loops=2", "model.input_injection=add"] if loops == 2 else []
    _tiny_run(tmp_path, extra)
    res = fourier.run(tmp_path, progress=False, n_symmetricity=16)
    d = res.to_dict()
    json.dumps(d)  # JSON-safe
    assert d["kind"] == "modular" and d["p"] == 11
    assert len(d["progress"]["step"]) == 4 and d["progress"]["step"][0] == 0
    for name in ("restricted_loss", "excluded_loss", "gini_embed", "gini_neuron_logit", "sum_sq_weights",
                 "train_loss", "test_loss"):
        assert len(d["progress"][name]) == 4
    assert -1 <= d["clock_pizza"]["gradient_symmetricity"] <= 1
    assert d["phases"]["memorisation_end"] is None or d["phases"]["grokked"] is False
    assert len(d["neurons_per_loop"]) == (2 if loops == 2 else 0)
    assert res.findings() and all(isinstance(s, str) for s in res.findings())
    assert res.details and all(isinstance(s, str) for s in res.details)
    assert res.headline and all(isinstance(s, str) for s in res.headline)
    assert d["paper"] is None  # p = 11: the paper's numbers are no yardstick
    figs = res.figures()
    assert {"embed_fourier", "neurons", "logit_fit", "progress_losses", "progress_gini", "clock_pizza"} <= set(figs)
    assert all(isinstance(f, go.Figure) for f in figs.values())
    # the step-axis figures are shaded with the phases found, each named in the legend (labels
    # on the plot overlapped), or say under the title why there are none (this tiny run may
    # not memorise)
    losses = figs["progress_losses"]
    named = [t.name for t in losses.data if t.legendgroup == "phases"]
    assert (named and losses.layout.shapes) or "<sup>phases: " in losses.layout.title.text
    assert not losses.layout.annotations


def test_base10_view_of_an_addition_model(tiny_model):
    model = tiny_model()
    from abacus_interp.tasks import get_task

    res = fourier.run(model, task=get_task("addition", max_digits=3), progress=False)
    d = res.to_dict()
    assert d["kind"] == "base10"
    b = d["base10"]
    assert sum(b["shares"]) == pytest.approx(1.0) and set(b["period_shares"]) == {"10", "5", "2"}
    assert "base10" in res.figures()
    # a planted period-5 embedding is seen as period 5
    x = torch.arange(10, dtype=torch.float64)[:, None]
    planted = torch.cos(2 * math.pi * 2 * x / 10) * torch.randn(1, 8, dtype=torch.float64)
    assert fourier.base10_power(planted)["dominant_period"] == "5"

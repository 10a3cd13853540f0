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
from abacus_interp.training import apply_overrides
from abacus_interp.training.presets import grok_mod113
from analyses import fourier
from analyses.fourier.circuit import grid_labels

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
    assert out["restricted_loss"] == pytest.approx(out["full_loss"], abs=1e-9)
    # with the key components removed only the per-output offset is left: no better than chance
    assert out["excluded_accuracy"] < 0.2
    fit = fourier.logit_fit(logits - offset, p, key)
    assert fit["fraction_explained"] == pytest.approx(1.0, abs=1e-9)
    assert fourier.logit_fit(logits, p, key)["fraction_explained"] < 1  # the output offset is not a cos term
    assert fit["coefficients"][3] == pytest.approx(4.0) and fit["coefficients"][7] == pytest.approx(2.5)


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
    # Nanda's exact recipe (lr 1e-3) stopped at 2,000 steps: too short for its lr * weight decay
    nanda = apply_overrides(grok_mod113(), ["train.lr=1e-3", "task.train_fraction=0.3"]).to_dict()
    short = fourier.diagnose(config=nanda, metrics=metrics)
    assert short.differences == [] and any("raise train.steps" in s for s in short.sentences)
    # the known-good recipe itself has no differences
    assert fourier.diagnose(config=grok_mod113().to_dict(), metrics=[]).differences == []
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
def test_run_on_a_tiny_run(tmp_path, single_torch_thread, loops):
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
    assert res.findings and all(isinstance(s, str) for s in res.findings)
    figs = res.figures()
    assert {"embed_fourier", "neurons", "logit_fit", "progress_losses", "progress_gini", "clock_pizza"} <= set(figs)
    assert all(isinstance(f, go.Figure) for f in figs.values())
    # the step-axis figures are shaded with the phases found (here: memorisation only, from metrics)
    assert figs["progress_losses"].layout.annotations


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

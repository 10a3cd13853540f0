"""Embedding evolution: alignment across checkpoints, circularity, helix fit, and runs."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.checkpoints import list_checkpoints, save_checkpoint, write_json
from abacus_interp.tasks import get_task
from analyses import embedding_evolution
from analyses._alignment import align_frames, circularity, helix_fit, pca_frame, spearman_abs

D = 16


def ring(n: int = 10, d: int = D, radius: float = 1.0) -> np.ndarray:
    """n points on a circle in the first two coordinates of R^d, ordered by value."""
    a = np.arange(n)
    X = np.zeros((n, d))
    X[:, 0], X[:, 1] = radius * np.cos(2 * np.pi * a / n), radius * np.sin(2 * np.pi * a / n)
    return X


def orthogonal(d: int, seed: int, flip: bool) -> np.ndarray:
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    if flip != (np.linalg.det(Q) < 0):
        Q[:, 0] *= -1  # a reflection when flip, a proper rotation otherwise
    return Q


def write_run(path, steps, set_weights=None, task=("addition", {"max_digits": 3}), **model_kw):
    """A run directory with a tiny model; `set_weights(model, i)` edits it before checkpoint i."""
    name, kwargs = task
    t = get_task(name, **kwargs)
    cfg = ModelConfig(**{"vocab": t.vocab, "positional": t.positional, "d_model": D, "n_heads": 2, "n_layers": 1,
                         "n_loops": 2, "max_seq_len": 24, "abacus_max_offset": 4, **model_kw})
    model = LoopedTransformer(cfg)
    write_json(path / "config.json", {"task": {"name": name, **t.config()}, "model": cfg.to_dict()})
    for i, step in enumerate(steps):
        if set_weights is not None:
            with torch.no_grad():
                set_weights(model, i)
        save_checkpoint(path, model, step, {"metrics": {}})
    (path / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 2.0 / (1 + s)}) + "\n" for s in steps))
    return path


# --------------------------------------------------------------------------------- alignment
@pytest.mark.parametrize("mode", ["chain", "final"])
def test_rotated_or_flipped_ring_aligns_to_identical_coordinates(mode):
    X0 = ring()
    series = [X0 @ orthogonal(D, seed, flip=seed % 2 == 1) + seed for seed in range(6)]  # + a translation
    frames = [pca_frame(X, 3)[0] for X in series]
    aligned = align_frames(frames, mode)
    for frame in aligned:
        np.testing.assert_allclose(frame, aligned[-1], atol=1e-9)
    # the raw per-checkpoint PCA coordinates do differ between frames (that is the point)
    assert max(np.abs(f - frames[-1]).max() for f in frames) > 0.1


def test_run_aligns_a_rotating_digit_ring(tmp_path):
    X0 = ring(radius=0.5)

    def set_weights(model, i):
        ids = model.cfg.vocab.digit_ids
        model.W_E[ids] = torch.tensor(X0 @ orthogonal(D, i, flip=i in (1, 2)), dtype=torch.float32)

    run_dir = write_run(tmp_path / "run", [0, 1, 5, 20, 100], set_weights)
    result = embedding_evolution.run(run_dir, progress=False)
    coords = result.tokens.coords
    assert coords.shape == (5, 10, 4)
    for frame in coords:
        np.testing.assert_allclose(frame, coords[-1], atol=1e-5)
    np.testing.assert_allclose(result.tokens.circularity, 1.0, atol=1e-6)
    np.testing.assert_allclose(result.tokens.helix_r2["T=10"], 1.0, atol=1e-6)
    np.testing.assert_allclose(result.tokens.explained_variance_ratio[:, :2], 0.5, atol=1e-6)
    assert result.positions.values == list(range(1, 21)) and result.positions.coords.shape == (5, 20, 4)


# ------------------------------------------------------------------------------- circularity
def test_perfect_ring_has_circularity_one_and_random_much_less():
    coords, _ = pca_frame(ring() @ orthogonal(D, 0, flip=False), 4)
    for j in range(2):
        c, k = circularity(coords[:, j])
        assert c == pytest.approx(1.0, abs=1e-9) and k == 1
    rng = np.random.default_rng(0)
    random_c = []
    for _ in range(50):
        coords, _ = pca_frame(rng.normal(size=(10, 64)), 4)
        random_c.append(np.mean([circularity(coords[:, j])[0] for j in range(2)]))
    assert np.mean(random_c) < 0.6 and max(random_c) < 0.9


def test_circularity_formula_edge_cases():
    j = np.arange(10)
    assert circularity(np.cos(2 * np.pi * 3 * j / 10)) == (pytest.approx(1.0), 3)  # a ring visited 3 times
    assert circularity((-1.0) ** j)[0] == pytest.approx(0.0, abs=1e-12)  # parity (Nyquist) is not a circle
    assert np.isnan(circularity(np.ones(10))[0])
    # shares over frequencies add up to 1 (Parseval): no value can exceed 1
    v = np.random.default_rng(1).normal(size=11)
    assert 0 < circularity(v)[0] <= 1


def test_helix_fit_and_spearman():
    a = np.arange(10)
    Q = orthogonal(D, 3, flip=False)
    helix = np.zeros((10, D))
    helix[:, 0], helix[:, 1], helix[:, 2] = a, np.cos(2 * np.pi * a / 10), np.sin(2 * np.pi * a / 10)
    fit = helix_fit(helix @ Q, a)
    assert fit["T=10"] == pytest.approx(1.0) and fit["joint"] == pytest.approx(1.0)
    assert fit["T=5"] < 0.999
    line = np.outer(a, np.ones(D)) + 0.01 * np.random.default_rng(0).normal(size=(10, D))
    assert spearman_abs(pca_frame(line, 2)[0][:, 0], a) == pytest.approx(1.0)


# ------------------------------------------------------------------------------------- runs
def test_result_is_json_and_figures_animate(tmp_path):
    steps = [0, 2, 10, 50]

    def set_weights(model, i):
        model.W_E.add_(0.05 * torch.randn_like(model.W_E))

    run_dir = write_run(tmp_path / "run", steps, set_weights)
    series = list_checkpoints(run_dir)
    result = embedding_evolution.run(series[1:], progress=False, align="project", n_positions=6, mark_steps=[10])
    d = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert d["steps"] == [2, 10, 50] and d["tokens"]["labels"] == [str(i) for i in range(10)]
    assert len(d["tokens"]["circularity"]) == 3 and set(d["tokens"]["helix_r2"]) >= {"T=2", "T=5", "T=10"}
    figs = result.figures()
    assert {"tokens_pca", "positions_pca", "explained_variance", "structure", "norms"} <= set(figs)
    assert all(isinstance(f, go.Figure) for f in figs.values())
    anim = figs["tokens_pca"]
    assert [f.name for f in anim.frames] == ["2", "10", "50"]
    assert [s.label for s in anim.layout.sliders[0].steps] == ["2", "10", "50"]
    assert list(anim.frames[0].data[0].text) == [str(i) for i in range(10)]
    sub = embedding_evolution.run(run_dir, progress=False, max_checkpoints=2)
    assert sub.steps == [0, 50]


def test_modular_addition_uses_residues_and_learned_positions(tmp_path):
    run_dir = write_run(tmp_path / "grok", [0, 10], task=("modular_addition", {"p": 13}), max_seq_len=4,
                        norm="none", input_injection="none", n_loops=1)
    result = embedding_evolution.run(run_dir, progress=False)
    assert result.tokens.values == list(range(13)) and result.tokens.coords.shape == (2, 13, 4)
    assert result.positions.values == [0, 1, 2, 3]
    assert any("learned" in n for n in result.notes)
    json.dumps(result.to_dict(), allow_nan=False)
    assert "tokens_pca" in result.figures()


def test_no_positions_is_skipped_with_a_reason(tmp_path):
    run_dir = write_run(tmp_path / "nopos", [0, 1], positional="none")
    result = embedding_evolution.run(run_dir, progress=False)
    assert result.positions is None and any("positional='none'" in n for n in result.notes)
    assert "positions_pca" not in result.figures()


def test_bad_arguments_say_what_to_do(tmp_path):
    with pytest.raises(ValueError, match="align must be one of"):
        embedding_evolution.run(tmp_path, align="spin")
    with pytest.raises(Exception, match="does not exist"):
        embedding_evolution.run(tmp_path / "missing")

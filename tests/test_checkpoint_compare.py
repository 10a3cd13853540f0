"""Checkpoint comparison: CKA properties, change points, parameter moves, and whole runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.checkpoints import list_checkpoints, save_checkpoint, write_json
from abacus_interp.tasks import get_task
from analyses import checkpoint_compare
from analyses._cka import (
    change_points,
    cka_matrix,
    compress,
    linear_cka,
    moved_parameters,
    param_group,
)


def write_run(path, steps, set_weights=None, task=("addition", {"max_digits": 3}), seed=0, **model_kw):
    """A run directory with a tiny model; `set_weights(model, i)` edits it before checkpoint i."""
    name, kwargs = task
    t = get_task(name, **kwargs)
    cfg = ModelConfig(**{"vocab": t.vocab, "positional": t.positional, "d_model": 16, "n_heads": 2, "n_layers": 1,
                         "n_loops": 2, "max_seq_len": 24, "abacus_max_offset": 4, **model_kw})
    torch.manual_seed(seed)
    model = LoopedTransformer(cfg)
    write_json(path / "config.json", {"task": {"name": name, **t.config()}, "model": cfg.to_dict()})
    rows = []
    for i, step in enumerate(steps):
        if set_weights is not None:
            with torch.no_grad():
                set_weights(model, i)
        save_checkpoint(path, model, step, {"metrics": {}})
        rows.append(json.dumps({"step": step, "loss": 2.0 / (1 + step), "in_distribution_exact_match": i / len(steps)}))
    (path / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    return path


def random_orthogonal(d, seed):
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    return Q


# --------------------------------------------------------------------------------------- CKA
def test_cka_with_itself_is_one_and_invariant_to_orthogonal_maps_and_scaling():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 24)) @ rng.normal(size=(24, 24))  # anisotropic
    Y = rng.normal(size=(200, 24))
    assert linear_cka(X, X) == pytest.approx(1.0, abs=1e-12)
    Q = random_orthogonal(24, 1)
    assert linear_cka(X @ Q, X) == pytest.approx(1.0, abs=1e-10)
    assert linear_cka(3.7 * X @ Q + 5.0, X) == pytest.approx(1.0, abs=1e-10)  # scaling and translation
    base = linear_cka(X, Y)
    assert base < 0.5
    assert linear_cka(0.2 * X @ Q, Y @ random_orthogonal(24, 2) * 9.0) == pytest.approx(base, abs=1e-10)
    # a non-isotropic scaling does change it
    assert linear_cka(X * np.linspace(0.1, 3, 24), X) < 0.999


def test_cka_matrix_matches_pairwise_and_compression_is_exact():
    rng = np.random.default_rng(0)
    reps = [torch.tensor(rng.normal(size=(40, 64)), dtype=torch.float64) for _ in range(4)]  # wider than samples
    compressed = torch.stack([compress(r) for r in reps])
    assert compressed.shape == (4, 40, 40)
    M = cka_matrix(compressed)
    for i in range(4):
        for j in range(4):
            assert M[i, j] == pytest.approx(linear_cka(reps[i], reps[j]), abs=1e-9)
    np.testing.assert_allclose(np.diag(M), 1.0, atol=1e-9)
    cross = cka_matrix(compressed[:2], compressed[1:])
    np.testing.assert_allclose(cross, M[:2, 1:], atol=1e-12)


def test_change_points_name_the_fastest_intervals():
    steps = [0, 10, 20, 40, 80, 100, 200]
    speed = [1.0, 5.0, 1.0, 0.5, 3.0, 0.2]
    found = change_points(steps, speed, top=2)
    assert [c["step"] for c in found] == [20, 100]
    assert found[0]["from_step"] == 10 and found[0]["speed"] == 5.0
    assert [c["step"] for c in change_points([0, 1, 2], [2.0, 1.0])] == [1]  # an edge can be a peak
    with pytest.raises(ValueError, match="one per interval"):
        change_points(steps, speed[:-1])


def test_moved_parameters_ranks_and_splits_heads():
    a = {"W_E": torch.ones(4, 8), "blocks.0.attn.W_Q": torch.ones(2, 8, 4), "blocks.0.ln1.w": torch.ones(8)}
    b = {k: v.clone() for k, v in a.items()}
    b["blocks.0.attn.W_Q"][1] += 1.0
    moved = moved_parameters(a, b, top_k=5, rank_by="rms_change")
    assert moved["parameters"][0]["name"] == "blocks.0.attn.W_Q"
    assert moved["heads"][0]["name"] == "blocks.0.attn.W_Q[head 1]" and moved["heads"][1]["abs_change"] == 0
    assert moved["groups"][0]["group"] == "blocks.0.attn"
    assert [param_group(n) for n in ("W_pos", "b_U", "blocks.3.mlp.W_in", "ln_final.w")] == [
        "pos_embed", "unembed", "blocks.3.mlp", "layernorm"]


# -------------------------------------------------------------------------------------- runs
def test_run_finds_the_jump_and_what_moved(tmp_path):
    steps = [0, 1, 2, 5, 10, 20]

    def set_weights(model, i):
        for p in model.parameters():
            p.add_(0.002 * torch.randn_like(p))
        if i == 4:  # a sudden change of the MLP between steps 5 and 10
            model.blocks[0].mlp.W_in.add_(0.5 * torch.randn_like(model.blocks[0].mlp.W_in))

    run_dir = write_run(tmp_path / "run", steps, set_weights)
    cmp = checkpoint_compare.run(run_dir, steps=(5, 10), n_problems=12, progress=False, n_change_points=2)
    C, L = len(steps), 2
    assert cmp.a.steps == steps and cmp.a.cka.shape == (L, C, C)
    np.testing.assert_allclose(np.diagonal(cmp.a.cka, axis1=1, axis2=2), 1.0, atol=1e-5)
    np.testing.assert_allclose(cmp.a.cka, cmp.a.cka.transpose(0, 2, 1), atol=1e-12)
    assert cmp.moved.parameters[0].name == "blocks.0.mlp.W_in"
    # the sentence names what the "moved most" chart ranks first, by the chart's own measure
    moved = next(f for f in cmp.findings() if "moved most" in f)
    assert f"moved most by {cmp.moved.rank_by.replace('_', ' ')} is blocks.0.mlp.W_in" in moved
    assert cmp.figures()["moved_most"].data[0].y[-1] == "blocks.0.mlp.W_in"
    assert cmp.a.change_points["parameters"][0].step == 10
    assert cmp.a.change_points["representation"][0].step == 10
    assert set(cmp.a.group_norms) >= {"embed", "pos_embed", "unembed", "blocks.0.attn", "blocks.0.mlp", "layernorm", "total"}
    assert cmp.a.problem_loss.shape == (C,) and np.all((cmp.a.problem_exact_match >= 0) & (cmp.a.problem_exact_match <= 1))
    d = json.loads(json.dumps(cmp.to_dict(), allow_nan=False))
    assert d["change_steps"] == cmp.change_steps and len(d["a"]["cka_vs_final"][0]) == C
    assert [row["step"] for row in d["a"]["metrics"]] == steps
    figs = cmp.figures()
    assert {"training_curves", "weight_norms", "change_speed", "cka_steps", "cka_vs_final", "moved_most"} <= set(figs)
    assert all(isinstance(f, go.Figure) for f in figs.values())
    assert len(figs["cka_steps"].data) == L and figs["cka_steps"].layout.updatemenus


def test_two_runs_and_a_run_against_itself(tmp_path):
    def noise(model, i):
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))

    run_a = write_run(tmp_path / "a", [0, 10, 30], noise, seed=0)
    run_b = write_run(tmp_path / "b", [0, 15], noise, seed=1, n_loops=3)
    problems = ["12+34", "999+1", ("21+43=", "55")]
    cmp = checkpoint_compare.run(run_a, run_b, problems=problems, positions="answer", progress=False)
    assert cmp.cross_cka.shape == (2, 3, 2) and cmp.matched_steps_b == [0, 15, 15]
    assert any("loops" in n for n in cmp.notes)
    assert "cka_runs" in cmp.figures()
    same = checkpoint_compare.run(list_checkpoints(run_a), run_a, n_problems=8, progress=False)
    np.testing.assert_allclose(np.diagonal(same.cross_cka, axis1=1, axis2=2), 1.0, atol=1e-5)


def test_modular_addition_run(tmp_path):
    run_dir = write_run(tmp_path / "grok", [0, 5], task=("modular_addition", {"p": 11}), max_seq_len=4,
                        norm="none", input_injection="none", n_loops=1)
    cmp = checkpoint_compare.run(run_dir, n_problems=16, progress=False)
    assert cmp.a.cka.shape == (1, 2, 2) and cmp.problems.n_problems == 16
    assert any("without EOS" in n for n in cmp.notes)  # "a b = c" fills max_seq_len=4
    json.dumps(cmp.to_dict(), allow_nan=False)
    cmp.figures()


GROK = Path(__file__).resolve().parents[1] / "checkpoints" / "grok-mod113"


@pytest.mark.skipif(not (GROK / "config.json").exists(), reason="checkpoints/grok-mod113 is not here")
def test_shipped_grok_run_is_scored_on_the_answer_token_it_was_trained_on():
    """grok-mod113 was trained on the residue alone, over the 113 residues: its untrained EOS
    once kept the problem set at 0% exact match and loss 10.5 at 100% test accuracy."""
    cmp = checkpoint_compare.run(GROK, config=checkpoint_compare.CheckpointCompareConfig.quick(), progress=False)
    assert cmp.a.steps[-1] == 20_000
    assert cmp.a.problem_exact_match[-1] == 1.0 and cmp.a.problem_loss[-1] < 1e-3
    assert cmp.a.problem_exact_match[0] < 0.2  # at initialisation: chance over 113 residues
    assert cmp.a.problem_loss[0] == pytest.approx(np.log(113), abs=0.5)


def test_bad_arguments_say_what_to_do(tmp_path):
    run_dir = write_run(tmp_path / "run", [0, 4])
    with pytest.raises(ValueError, match=r"not among \[0, 4\]"):
        checkpoint_compare.run(run_dir, steps=(0, 3), progress=False)
    with pytest.raises(ValueError, match="signal must be one of"):
        checkpoint_compare.run(run_dir, signal="vibes", progress=False)
    other = write_run(tmp_path / "grok", [0], task=("modular_addition", {"p": 11}), max_seq_len=4)
    with pytest.raises(ValueError, match="different vocabularies"):
        checkpoint_compare.run(run_dir, other, n_problems=4, progress=False)

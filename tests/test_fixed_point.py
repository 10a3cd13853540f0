"""analyses.fixed_point: spectrum and step decay on maps with known answers, the model's
loop map against a dense Jacobian, logit lens against generation, lock-in and halting
bookkeeping, batching invariance, and the result's JSON and figures.

Models are tiny (d_model 32) and problems short, so the file runs in seconds on CPU.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from conftest import make_tiny_model

from abacus_interp.core.scoring import next_token_loss, score_examples
from abacus_interp.core.tokens import encode_batch
from abacus_interp.tasks import get_task
from abacus_interp.tasks.carries import longest_cascade
from analyses import fixed_point
from analyses.fixed_point.collect import (
    Collected,
    _force_explicit_attention,
    loop_map,
    model_spectrum,
)
from analyses.fixed_point.dynamics import first_below, quantiles
from analyses.fixed_point.summary import halting_section, lock_in_loops, lock_in_section


# ------------------------------------------------------------- maps with known answers
def nonnormal_contraction(n: int = 8, seed: int = 1) -> torch.Tensor:
    """A = Q T Q^T, T upper triangular with eigenvalues 0.5 (largest), -0.4, ... and large
    off-diagonal entries, so ||A||_2 >> 1 while the spectral radius is 0.5."""
    g = torch.Generator().manual_seed(seed)
    t = torch.triu(torch.randn(n, n, generator=g, dtype=torch.float64), 1) * 1.5
    t += torch.diag(torch.tensor([0.5, -0.4, 0.35, 0.3, -0.2, 0.1, 0.0, -0.1], dtype=torch.float64)[:n])
    q = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))[0]
    return q @ t @ q.T


def test_spectrum_of_nonnormal_linear_contraction():
    a = nonnormal_contraction()
    b = torch.linspace(-1, 1, a.shape[0], dtype=torch.float64)
    assert torch.linalg.eigvals(a).abs().max() == pytest.approx(0.5, abs=1e-9)
    norm = torch.linalg.matrix_norm(a, 2).item()
    assert norm > 3  # radius and norm are far apart: the test tells them apart
    state = torch.randn(3, a.shape[0], dtype=torch.float64)  # any state: the map is affine
    est = fixed_point.spectrum(lambda s: s @ a.T + b, state, n_iter=200)
    np.testing.assert_allclose(est.spectral_radius, 0.5, atol=0.01)
    np.testing.assert_allclose(est.rayleigh, 0.5, atol=0.01)  # the dominant eigenvalue is real, +0.5
    np.testing.assert_allclose(est.sigma_max, norm, rtol=1e-3)
    assert est.converged and est.radius_iterations <= 200


def test_spectrum_of_complex_dominant_pair():
    """A rotation by 0.7 rad scaled by 0.5 dominates: single norm ratios would be exact here,
    but the Rayleigh quotient is not the radius (the eigenvalue is complex)."""
    n, theta = 6, 0.7
    block = torch.zeros(n, n, dtype=torch.float64)
    block[:2, :2] = 0.5 * torch.tensor([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    block[2:, 2:] = torch.diag(torch.tensor([0.3, -0.25, 0.1, 0.0], dtype=torch.float64))
    q = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64))[0]
    a = q @ block @ q.T
    est = fixed_point.spectrum(lambda s: s @ a.T, torch.zeros(2, n, dtype=torch.float64))
    np.testing.assert_allclose(est.spectral_radius, 0.5, atol=0.01)
    assert (np.abs(est.rayleigh) < 0.5 - 0.05).all()


def test_geometric_step_decay():
    a = nonnormal_contraction()
    b = torch.linspace(-1, 1, a.shape[0], dtype=torch.float64)
    out = fixed_point.iterate(lambda s: s @ a.T + b, torch.zeros(2, a.shape[0], dtype=torch.float64), 40)
    tail = out["relative_step"][:, 15:]
    np.testing.assert_allclose(fixed_point.decay_rate(tail), 0.5, atol=0.01)
    np.testing.assert_allclose(tail[:, 1:] / tail[:, :-1], 0.5, atol=0.02)  # every step halves


def _trajectory(f, s0, n):
    states = [s0]
    for _ in range(n):
        states.append(f(states[-1]))
    s = np.stack(states[1:])  # [n, d]
    step = np.linalg.norm(np.diff(np.concatenate([s0[None], s]), axis=0), axis=1)
    last = np.linalg.norm(s[-1])
    return step[None] / last, (np.linalg.norm(s - s[-1], axis=1) / last)[None]


def test_classify_cycling_and_drifting():
    c = np.array([1.0, -2.0, 0.5])
    assert fixed_point.classify(*_trajectory(lambda s: -s + c, np.array([3.0, 1.0, 0.0]), 12))[0] == "cycling"
    assert fixed_point.classify(*_trajectory(lambda s: s + c, np.ones(3), 12))[0] == "drifting"
    assert fixed_point.classify(*_trajectory(lambda s: 0.5 * s + c, np.ones(3), 12))[0] == "converging"


def test_first_below_and_quantiles():
    assert first_below(np.array([1.0, 0.5, 0.02, 0.5]), 0.03) == 3
    assert first_below(np.array([1.0, np.nan]), 0.03) is None
    q = quantiles(np.array([[1.0, np.nan], [3.0, np.nan]]))
    assert q["median"][0] == 2 and np.isnan(q["median"][1])


# ------------------------------------------------------------------- the model map
def test_model_spectrum_matches_dense_jacobian():
    """Power iteration through the real loop map (padding masked, two lengths in one batch)
    against eigenvalues and the 2-norm of the dense Jacobian of each example alone."""
    torch.manual_seed(3)
    model = make_tiny_model(n_layers=1, n_loops=2, max_loops=4)
    task = get_task("addition", max_digits=3)
    examples = [task.make(987, 65), task.make(4, 5)]
    est = model_spectrum(model, examples, [2], n_iter=200, tol=1e-7)[2]
    for i, e in enumerate(examples):
        batch = encode_batch(model.cfg.vocab, [e.prompt], [e.target])
        inputs = model.embed(batch.tokens)
        with torch.no_grad():
            state = model.run_loops(inputs, range(2))
        with _force_explicit_attention(model, 2):
            f = loop_map(model, inputs, 2)
            shape = state.shape
            jac = torch.autograd.functional.jacobian(lambda v, f=f, shape=shape: f(v.view(shape)).flatten(),
                                                     state.flatten())
        eig = torch.linalg.eigvals(jac.double()).abs()
        assert est.spectral_radius[i] == pytest.approx(eig.max().item(), rel=0.02)
        assert est.sigma_max[i] == pytest.approx(torch.linalg.matrix_norm(jac.double(), 2).item(), rel=1e-3)


@pytest.fixture(scope="module")
def trained_tiny():
    """A tiny model trained briefly on 1-digit addition: right on some problems, wrong on
    others, so agreement with generation is not trivial."""
    torch.manual_seed(0)
    model = make_tiny_model(n_layers=1, n_loops=2, max_loops=5).train()
    task = get_task("addition", max_digits=1)
    examples = [task.make(a, b) for a in range(10) for b in range(10)]
    batch = encode_batch(model.cfg.vocab, [e.prompt for e in examples], [e.target for e in examples])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(60):
        loss = next_token_loss(model(batch.tokens), batch.tokens, batch.loss_mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval(), task, examples


def test_logit_lens_last_loop_matches_generate(trained_tiny):
    model, task, examples = trained_tiny
    res = fixed_point.run(model, examples, task=task, horizon=4, n_jacobian=0, n_trajectories=2, progress=False)
    exact = res.exact_match_per_example  # [N, H]
    assert 0 < exact[:, model.cfg.n_loops - 1].mean() < 1  # partly trained
    for n in (model.cfg.n_loops, 4):  # the trained depth (the "last loop" of the model) and past it
        completions = model.generate([e.prompt for e in examples], n_loops=n, max_new_tokens=4)
        generated = np.array([task.check(e, c) for e, c in zip(examples, completions, strict=True)])
        np.testing.assert_array_equal(exact[:, n - 1], generated)
        assert res.to_dict()["logit_lens"]["exact_match"][n - 1] == pytest.approx(generated.mean())
        assert score_examples(model, examples, n_loops=n).per_example_correct == exact[:, n - 1].tolist()
        # greedy decoding follows the target until the lens' first wrong token, then emits it
        argmax = res.collected.predicted[:, n - 1]
        for e, c, row in zip(examples, completions, argmax, strict=True):
            target = model.cfg.vocab.encode(e.target) + [1]
            wrong = [k for k, tok in enumerate(row[: len(target)]) if tok != target[k]]
            if wrong:
                k = wrong[0]
                got = model.cfg.vocab.encode(c)[: k + 1] + ([1] if len(c) == k else [])
                assert got[:k] == target[:k] and got[k] == row[k]


# ----------------------------------------------------------------- bookkeeping
def _collected(correct: np.ndarray, answer_mask: np.ndarray) -> Collected:
    n, h, _ = correct.shape
    z = np.ones((n, h, len(fixed_point.CLASSES)))
    return Collected(z, z, z, correct, np.zeros(correct.shape, int), answer_mask, np.zeros((n, h)), {}, {}, 1)


def test_lock_in_by_hand():
    # one example, 2 answer digits + EOS, 4 loops
    correct = np.array([[[0, 1, 1], [1, 0, 1], [1, 1, 1], [1, 1, 0]]], dtype=bool)  # [N=1, H=4, L=3]
    lock = lock_in_loops(_collected(correct, np.ones((1, 3), dtype=bool)))
    # digit 0 correct from loop 2 on; digit 1 wrong at loop 2, so locks at 3; EOS wrong at the horizon
    np.testing.assert_array_equal(lock[0, :2], [2, 3])
    assert np.isnan(lock[0, 2])
    section = lock_in_section(_collected(correct, np.ones((1, 3), dtype=bool)), [[0, 1]], trained=2)
    assert [(r["chain"], r["median"]) for r in section["by_chain"]] == [(0, 2.0), (1, 3.0)]
    # through the trained depth (2 loops): digit 1 is wrong at loop 2, EOS locks in at loop 1
    within = section["trained_depth"]
    assert [r["locked_fraction"] for r in within["by_chain"]] == [1.0, 0.0]
    assert within["eos"]["median"] == 1.0


def test_halting_rule_by_hand():
    # relative step = step / norm: example 0 settles at loop 2, example 1 never
    n, h = 2, 4
    step = np.ones((n, h, len(fixed_point.CLASSES)))
    step[0, 1:, :] = 0.01
    c = _collected(np.ones((n, h, 1), dtype=bool), np.ones((n, 1), dtype=bool))
    c.step = step
    exact = np.array([[0, 1, 1, 1], [0, 0, 0, 1]], dtype=bool)
    out = halting_section(c, [0.03], exact, 0.03)
    assert out["default"]["mean_loops"] == (2 + 4) / 2
    assert out["default"]["exact_match"] == 1.0 and out["default"]["halted_fraction"] == 0.5


def test_balanced_problems_cover_chains():
    task = get_task("addition", max_digits=6)
    examples = fixed_point.balanced_problems(task, 70, seed=1)
    lengths = {longest_cascade(*e.operands) for e in examples}
    assert set(range(6)) <= lengths
    assert all(len(str(a)) <= 6 and len(str(b)) <= 6 for a, b in (e.operands for e in examples))
    assert examples == fixed_point.balanced_problems(task, 70, seed=1)


# ------------------------------------------------------------------ end to end
def test_run_result_batching_json_and_figures():
    torch.manual_seed(0)
    model = make_tiny_model(n_layers=1, n_loops=2, max_loops=4)
    task = get_task("addition", max_digits=3)
    kw = dict(task=task, n_problems=24, n_jacobian=2, jacobian_iters=20, n_trajectories=3, progress=False)
    res = fixed_point.run(model, horizon=6, **kw)  # past max_loops: rebuilt with more hook sets
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["horizon"] == 6 and d["loops"] == list(range(1, 7))
    assert len(d["steps"]["relative_step"]["operand"]["median"]) == 6
    assert d["steps"]["relative_step"]["all"]["median"][0] == pytest.approx(1.0)  # from the zero state
    assert set(d["behaviour"]["fractions"]) == set(fixed_point.BEHAVIOURS)
    assert set(d["contraction"]["at"]) == {"2", "6"}
    assert len(d["per_example"]["prompt"]) == 24 and len(d["trajectories"]["examples"]) >= 2
    assert np.array(d["per_example"]["relative_step"]["readout"]).shape == (24, 6)
    figs = res.figures()
    assert {"step_sizes", "logit_lens", "lock_in", "exact_match", "halting", "orbit", "contraction"} <= set(figs)
    assert all(isinstance(f, go.Figure) for f in figs.values())

    # a tiny state budget forces batches of one example: the numbers must not change
    small = fixed_point.run(model, horizon=6, state_budget_mb=1e-6, **{**kw, "n_jacobian": 0})
    assert small.summary.settings.batch_size == 1
    np.testing.assert_allclose(small.relative_step, res.relative_step, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(small.distance_to_last, res.distance_to_last, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(small.exact_match_per_example, res.exact_match_per_example)


def test_run_takes_its_config_with_keyword_overrides():
    model = make_tiny_model(n_layers=1, n_loops=2, max_loops=4)
    task = get_task("addition", max_digits=2)
    quick = fixed_point.FixedPointConfig.quick()  # 16 problems, 5 power iterations, 2 trajectories
    res = fixed_point.run(model, task=task, horizon=3, config=quick, n_jacobian=0, progress=False)
    assert len(res.to_dict()["per_example"]["prompt"]) == quick.n_problems
    assert res.summary.settings.jacobian_iters == quick.jacobian_iters
    assert res.summary.contraction is None  # the keyword override (n_jacobian=0) won over the config
    with pytest.raises(TypeError, match="n_problems, n_jacobian"):
        fixed_point.run(model, task=task, config=quick, n_problem=8)


def test_run_rejects_bad_arguments():
    model = make_tiny_model(n_layers=1, n_loops=2, max_loops=4)
    task = get_task("addition", max_digits=2)
    with pytest.raises(ValueError, match="horizon"):
        fixed_point.run(model, task=task, horizon=0, progress=False)
    with pytest.raises(ValueError, match="halt_on"):
        fixed_point.run(model, task=task, halt_on="everything", progress=False)
    with pytest.raises(ValueError, match="problems"):
        fixed_point.run(model, [], task=task, progress=False)


# ------------------------------------------------------------- when the report runs it
EXPR_CELLS = Path(__file__).resolve().parents[1] / "checkpoints" / "expr-compare" / "cells"


@pytest.mark.skipif(not (EXPR_CELLS / "gpt-s" / "config.json").exists(), reason="checkpoints/expr-compare is not here")
def test_the_report_omits_the_section_for_a_single_loop_and_says_why():
    from abacus_interp.checkpoints import load_model, load_task
    from analyses.contract import RunContext
    from analyses.fixed_point.plugin import ANALYSIS
    from analyses.report.sections import Context, Omitted, ReportSizes, analysis_section

    def context(cell: str) -> Context:
        run = EXPR_CELLS / cell
        return Context(run=RunContext(run_dir=run, model=load_model(run, device="cpu"), task=load_task(run),
                                      run_config={}), sizes=ReportSizes.quick())

    gpt = context("gpt-s")  # 3 layers x 1 loop, input injection on, max_loops 1
    assert gpt.run.model.cfg.n_loops == gpt.run.model.cfg.max_loops == 1 and gpt.run.has_loop_dynamics
    reason = ANALYSIS.skip_reason(gpt.run)
    assert reason is not None and "single loop" in reason and "no fixed point" in reason
    with pytest.raises(Omitted, match="single loop"):
        analysis_section(ANALYSIS).build(gpt)
    looped = RunContext(run_dir=EXPR_CELLS / "looped-s", model=load_model(EXPR_CELLS / "looped-s", device="cpu"),
                        task=load_task(EXPR_CELLS / "looped-s"))
    assert ANALYSIS.skip_reason(looped) is None  # 1 layer x 3 loops: the section runs

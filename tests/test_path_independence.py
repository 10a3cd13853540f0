"""analyses.fixed_point.path_independence: planted maps with a known answer (a contraction
forgets its start; a bistable map does not), and the model-level summary on a loop that
provably remembers its start (blocks that output zero: s_t = s_0 + t * input)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import make_tiny_model

from abacus_interp.tasks import get_task
from analyses.fixed_point.path_independence import (
    masked_cosine,
    path_independence,
    trajectories_agree,
)
from analyses.fixed_point.result import PathIndependence, StartAgreement


def test_contractive_map_forgets_its_start():
    g = torch.Generator().manual_seed(0)
    a = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))[0] * 0.5  # ||A|| = 0.5
    b = torch.randn(8, dtype=torch.float64, generator=g)

    def step(s, t):
        return (torch.zeros(3, 2, 8, dtype=torch.float64) if s is None else s) @ a.T + b

    mask = torch.ones(3, 2, dtype=torch.bool)
    starts = {"far": torch.randn(3, 2, 8, generator=g, dtype=torch.float64) * 100}
    ref, ends, cos = trajectories_agree(step, None, starts, horizon=40, mask=mask)
    assert cos["far"].shape == (3, 40)
    assert cos["far"][:, 0].min() < 0.99  # it did start elsewhere
    assert torch.allclose(ends["far"], ref, atol=1e-6)
    assert cos["far"][:, -1].min() > 1 - 1e-9


def test_bistable_map_remembers_which_basin_it_started_in():
    def step(s, t):
        return torch.tanh(3 * s)  # fixed points near +-0.995 per coordinate, 0 unstable

    mask = torch.ones(2, 1, dtype=torch.bool)
    reference = torch.full((2, 1, 4), 0.1, dtype=torch.float64)
    starts = {"same_basin": torch.full((2, 1, 4), 0.7, dtype=torch.float64),
              "other_basin": torch.full((2, 1, 4), -0.1, dtype=torch.float64)}
    _, _, cos = trajectories_agree(step, reference, starts, horizon=30, mask=mask)
    assert cos["same_basin"][:, -1].min() > 1 - 1e-9
    assert cos["other_basin"][:, -1].max() < -1 + 1e-9


def test_masked_cosine_ignores_masked_positions():
    a = torch.tensor([[[1.0, 0.0], [5.0, 5.0]]])
    b = torch.tensor([[[2.0, 0.0], [-5.0, 3.0]]])
    assert masked_cosine(a, b, torch.tensor([[True, False]])).item() == pytest.approx(1.0)
    assert masked_cosine(a, b, torch.tensor([[True, True]])).item() < 0.5


def test_identity_loop_never_forgets_noise_and_summary_is_json():
    model = make_tiny_model(n_layers=1, n_loops=2, max_loops=4)
    with torch.no_grad():  # blocks add nothing: s_t = s_0 + t * input
        model.blocks[0].attn.W_O.zero_()
        model.blocks[0].attn.b_O.zero_()
        model.blocks[0].mlp.W_out.zero_()
        model.blocks[0].mlp.b_out.zero_()
    task = get_task("addition", max_digits=3)
    examples = task.sample(9, __import__("random").Random(0))
    out = path_independence(model, examples, horizon=4, seed=0, batch_size=4)  # chunks 4, 5
    json.dumps(out, allow_nan=False)
    noise = out["starts"]["noise"]
    assert noise["same_state_fraction"] == 0.0
    # noise with the end state's norm: cos(T x + n, T x) ~ 1/sqrt(2) in d_model 32
    assert 0.4 < noise["end_cosine_median"] < 0.95
    assert len(noise["cosine_median_by_loop"]) == 4
    assert out["starts"]["noise_x4"]["end_cosine_median"] < noise["end_cosine_median"]
    assert "Path independence after 4 loops" in out["headline"]
    with pytest.raises(ValueError, match="at least 2"):
        path_independence(model, examples[:1], horizon=2)


def test_an_untrained_loop_gets_every_answer_wrong_so_its_wrong_answers_are_all_its_answers():
    model = make_tiny_model(n_layers=1, n_loops=2, max_loops=4)
    task = get_task("addition", max_digits=3)
    examples = task.sample(9, __import__("random").Random(1))
    out = path_independence(model, examples, horizon=4, seed=0, batch_size=4)
    assert out["reference_exact_match"] == 0.0 and out["reference_wrong"] == 9
    for start in out["starts"].values():
        assert start["same_wrong_answer_fraction"] == start["same_answer_fraction"]


def test_the_wrong_answers_share_counts_only_the_problems_the_reference_gets_wrong():
    from analyses.fixed_point.path_independence import _start_summary

    # the reference gets problems 0 and 1 wrong and this start answers both the same way: 100%, where
    # every problem (3 of 4) or the right ones alone (1 of 2) would read otherwise
    parts = {"cos": [np.ones((4, 2))], "same_state": [np.array([True, True, False, True])],
             "same_answer": [np.array([True, True, False, True])], "correct": [np.array([False, False, False, True])]}
    summary = _start_summary(parts, np.array([False, False, True, True]))
    assert summary["same_answer_fraction"] == 0.75
    assert summary["same_wrong_answer_fraction"] == 1.0
    assert _start_summary(parts, np.ones(4, dtype=bool))["same_wrong_answer_fraction"] is None


def _path(kept: dict[str, float | None], wrong: int | None) -> PathIndependence:
    def agree(share):
        return StartAgreement(same_state_fraction=1.0, same_answer_fraction=0.9, exact_match=0.8, end_cosine_median=1.0,
                              cosine_median_by_loop=(1.0,), cosine_q25_by_loop=(1.0,), same_wrong_answer_fraction=share)
    return PathIndependence(horizon=128, threshold=0.99, n_problems=62, reference_exact_match=0.5,
                            starts={name: agree(share) for name, share in kept.items()}, headline="",
                            reference_wrong=wrong)


def test_the_finding_says_whether_the_wrong_answers_are_fixed_points_of_the_map():
    from analyses.fixed_point.findings import _path as sentence

    assert sentence(_path({"noise": 1.0, "other": 1.0}, 31)).endswith(
        "of the 31 it answers wrong from its own start, the share each other start answers the same wrong way: "
        "noise 100%, other 100%; the loop's map, not its start, makes them.")
    # as printed: 99.6% reads 100% and gets the reading, 49.6% reads 50% and does not get the other
    assert sentence(_path({"noise": 0.996}, 250)).endswith("noise 100%; the loop's map, not its start, makes them.")
    assert sentence(_path({"noise": 0.2, "other": 0.4}, 31)).endswith("other 40%; most depend on where the loop began.")
    assert sentence(_path({"noise": 0.496, "other": 0.2}, 250)).endswith("noise 50%, other 20%.")
    assert sentence(_path({"noise": 1.0, "other": 0.7}, 31)).endswith("noise 100%, other 70%.")  # no reading
    for old in (_path({"noise": None}, None), _path({"noise": None}, 0)):  # a report before the split; none wrong
        assert "answers wrong" not in sentence(old) and sentence(old).endswith("same answer.")


def test_a_report_written_before_the_split_reads_back_without_it():
    from abacus_interp.jsonsafe import from_json

    old = {"horizon": 4, "threshold": 0.99, "n_problems": 2, "reference_exact_match": 1.0, "headline": "",
           "starts": {"noise": {"same_state_fraction": 1.0, "same_answer_fraction": 1.0, "exact_match": 1.0,
                                "end_cosine_median": 1.0, "cosine_median_by_loop": [1.0], "cosine_q25_by_loop": [1.0]}}}
    path = from_json(PathIndependence, old)
    assert path.reference_wrong is None and path.starts["noise"].same_wrong_answer_fraction is None

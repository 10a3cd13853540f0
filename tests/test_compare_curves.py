"""Learning curves of a comparison: training FLOPs of a planted metrics.jsonl, the equal-compute
ranking and its standard errors on synthetic curves, the still-rising rule, the curves figure
and the findings over two seeds."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest

from abacus_interp import checkpoints as ckpt
from abacus_interp.training import apply_overrides, get_preset
from abacus_interp.training.compute import CurvePoint, expected_depth
from abacus_lab.experiments.compare import get_spec
from abacus_lab.experiments.compare_eval import cell_curve
from analyses.report.architectures.curves import (
    equal_compute_sentences,
    interpolate,
    learning_curves_figure,
    rising_sentences,
    still_rising,
)
from analyses.report.architectures.seeds import seed_sentences


def planted_run(tmp_path, cell: str):
    """A cell directory with the addition spec's config and three logged evaluations at
    15 real tokens per sequence (64 sequences a step)."""
    spec = get_spec("addition")
    contender = next(c for c in spec.contenders if c.cell == cell)
    cfg = apply_overrides(get_preset(spec.preset), [*spec.base, *contender.edits])
    run = tmp_path / cell
    run.mkdir()
    ckpt.write_json(run / "config.json", cfg.to_dict())
    rows = [{"step": s, "loss": 1.0, "tokens": 64 * 15 * s, "elapsed_s": s / 10} for s in (1, 10, 100, 200)]
    for row, em in zip(rows[::2] + rows[-1:], (0.0, 0.5, 0.75), strict=True):
        row.update(in_distribution_exact_match=em, in_distribution_loss=2 - em)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run, cfg


def test_training_flops_of_a_planted_metrics_file_count_what_a_step_runs(tmp_path):
    run, cfg = planted_run(tmp_path, "looped-s")
    compute, curve = cell_curve(run, params=14_991)
    assert compute.n_ctx == 15.0
    # one layer of width 32 (4 heads of 8, MLP 128) at 15 keys per query: projections 2*4*32*32,
    # scores and mixing 2*2*15*32, MLP 2*2*32*128
    layer = 8192 + 1920 + 16384
    readout = 2 * 32 * 15  # 15 tokens in the answer-slot addition vocabulary
    assert compute.forward_flops_per_token == 4 * layer + readout
    # mix over depths 2..16 at n_loops 4: E[max(4, r)] = (3 * 4 + 5 + ... + 16) / 15 = 9.2 loops,
    # and a second readout unless r == 4 (14 of 15 depths)
    assert compute.layer_applications_per_step == pytest.approx(9.2)
    assert compute.readouts_per_step == pytest.approx(1 + 14 / 15)
    assert compute.train_flops_per_token == pytest.approx(3 * (9.2 * layer + (1 + 14 / 15) * readout))
    assert [p.step for p in curve] == [1, 100, 200] and [p.exact_match for p in curve] == [0.0, 0.5, 0.75]
    assert curve[1].train_flops == pytest.approx(64 * 15 * 100 * compute.train_flops_per_token)
    assert curve[1].loss == 1.5 and curve[1].n == 256 and curve[1].elapsed_s == 10.0

    # a GPT runs its 4 layers once per step with one readout, whatever the looped recipe was
    run, _ = planted_run(tmp_path, "gpt-s")
    gpt, _ = cell_curve(run, params=53_039)
    assert gpt.layer_applications_per_step == 4 and gpt.train_flops_per_token == pytest.approx(3 * (4 * layer + readout))


def test_expected_depth_of_each_progressive_mode():
    assert expected_depth({"progressive": "none"}, 6) == (6, 1)
    # mcleish at 2 loops: n_prefix 0 -> 1..2 extra loops (mean 1.5), n_prefix 1 -> 1: 2 + 1.25
    loops, readouts = expected_depth({"progressive": "mcleish"}, 2)
    assert float(loops) == 3.25 and readouts == 2
    # mix with its depths at n_loops only: every step is the plain one
    assert expected_depth({"progressive": "mix", "mix_depths": [4, 4]}, 4) == (4, 1)


def curve(flops, ems, n=256, losses=None):
    losses = losses or [2 - e for e in ems]
    return [asdict(CurvePoint(step=100 * (i + 1), tokens=1000 * (i + 1), train_flops=f, elapsed_s=float(i),
                              exact_match=e, loss=loss, n=n)) for i, (f, e, loss) in enumerate(zip(flops, ems, losses, strict=True))]


def cell(family, size, points, em=0.5, seed=0):
    return {"family": family, "size": size, "cell": f"{family}-{size.lower()}" + (f"-seed{seed}" if seed else ""),
            "params": 10_000, "exact_match": em, "loss": 1.0, "n_test": 1000, "seed": seed, "curve": points}


def test_equal_compute_ranking_interpolates_at_the_smallest_final_budget():
    cells = [cell("gpt", "S", curve([1e9, 1e10], [0.05, 0.3])),
             cell("looped", "S", curve([1e9, 1e10, 1e11], [0.1, 0.5, 0.9])),
             cell("lstm", "S", curve([1e9, 1e12], [0.0, 0.6]))]
    from analyses.report.architectures.curves import curve_of

    # halfway in log FLOPs between 1e9 and 1e10: halfway in exact match
    assert interpolate(curve_of(cells[1]), 10**9.5)[0] == pytest.approx(0.3)
    assert interpolate(curve_of(cells[0]), 1e11) is None  # GPT never reached that budget
    lines = equal_compute_sentences(cells)
    # budget 1e10 (GPT's last evaluation): looped 50%, GPT 30%, LSTM a third of the way in log FLOPs: 20%
    assert lines[0].startswith("At equal training compute (1e+10 FLOPs")
    assert "Looped-S 50% (loss 1.50), GPT-S 30% (loss 1.70), LSTM-S 20% (loss 1.80)." in lines[0]
    # 0.2 / sqrt((0.25 + 0.21) / 256) = 4.72 and 0.3 / sqrt((0.25 + 0.16) / 256) = 7.50 standard errors
    assert lines[1] == "At that budget Looped-S is ahead of GPT-S by 4.7, LSTM-S by 7.5 standard errors."
    assert f"{0.2 / math.sqrt((0.5 * 0.5 + 0.3 * 0.7) / 256):.1f}" == "4.7"

    # a gap under 2 standard errors is called a tie
    close = [cells[1], cell("gpt", "S", curve([1e9, 1e10], [0.05, 0.45]))]
    assert equal_compute_sentences(close)[1] == "At that budget Looped-S leads GPT-S by less than 2 standard errors (a tie)."


def test_compute_to_reach_a_target_interpolates_the_first_crossing():
    from analyses.report.architectures.curves import compute_to_reach, curve_of, reach_sentences

    # looped crosses 90% exactly at its third evaluation; GPT halfway between 80% (1e10) and
    # 100% (1e12), so at 1e11 in log FLOPs and 1.5 s; LSTM never gets there
    looped = cell("looped", "S", curve([1e9, 1e10, 1e11], [0.1, 0.5, 0.9]))
    gpt = cell("gpt", "S", curve([1e9, 1e10, 1e12], [0.3, 0.8, 1.0]))
    lstm = cell("lstm", "S", curve([1e9, 1e12], [0.0, 0.6]))
    assert compute_to_reach(curve_of(looped), 0.9) == (pytest.approx(1e11), 2.0)
    assert compute_to_reach(curve_of(gpt), 0.9) == (pytest.approx(1e11), pytest.approx(1.5))
    assert compute_to_reach(curve_of(lstm), 0.9) is None
    assert compute_to_reach(curve_of(gpt), 0.2) == (1e9, 0.0)  # already there at the first evaluation
    # 90% is 8/9 of the way from 50% to 95%: 10^(9 + 8/9) = 7.7e9 FLOPs
    fast = cell("gpt", "M", curve([1e9, 1e10], [0.5, 0.95]))
    line = reach_sentences([looped, fast, lstm])[0]
    assert "GPT-M 7.7e+09 FLOPs (1 s), Looped-S 1e+11 FLOPs (2 s); GPT-M needs 12.9x less than the next" in line
    assert line.endswith("never within its budget: LSTM-S.")
    assert reach_sentences([lstm]) == ["No cell reached 90% held-out exact match in its training budget."]


def test_a_curve_is_rising_by_its_last_two_points_or_its_last_quarter_loss():
    from analyses.report.architectures.curves import curve_of

    flat = cell("gpt", "S", curve([1, 2, 3, 4], [0.5, 0.6, 0.7, 0.71], losses=[1.0, 0.9, 0.8, 0.79]))
    jump = cell("looped", "S", curve([1, 2, 3, 4], [0.1, 0.2, 0.3, 0.6]))
    # exact match flat at 0 but loss down 10% since step 300 (the last point at 3/4 of 400)
    loss = cell("lstm", "S", curve([1, 2, 3, 4], [0.0] * 4, losses=[2.0, 1.5, 1.0, 0.9]))
    assert still_rising(curve_of(flat)) is None
    # 0.3 / sqrt((0.6 * 0.4 + 0.3 * 0.7) / 256) = 7.2 standard errors
    assert still_rising(curve_of(jump)) == "exact match +30 points, 7.2 SE"
    assert still_rising(curve_of(loss)) == "loss -10% since step 300"
    assert rising_sentences([flat, jump, loss])[0].endswith(
        "Looped-S (exact match +30 points, 7.2 SE), LSTM-S (loss -10% since step 300); flat: GPT-S.")


def test_the_curves_figure_has_one_trace_per_cell_per_panel():
    data = {"cells": [cell("looped", "S", curve([1e9, 1e10], [0.1, 0.5])),
                      cell("gpt", "M", curve([1e9, 1e10], [0.2, 0.4]))],
            "seeds": [cell("gpt", "M", curve([1e9, 1e10], [0.1, 0.6]), seed=1)]}
    fig = learning_curves_figure(data)
    assert len(fig.data) == 6
    left = [t for t in fig.data if t.xaxis == "x"]
    right = [t for t in fig.data if t.xaxis == "x2"]
    assert [t.name for t in left] == [t.name for t in right] == ["Looped-S", "GPT-M", "GPT-M seed 1"]
    assert list(left[2].y) == [0.1, 0.6] and list(right[2].y) == [1.9, 1.4]
    assert left[0].marker.symbol == "circle" and left[1].marker.symbol == "square"
    assert left[1].line.color == left[2].line.color != left[0].line.color
    assert fig.layout.xaxis.type == fig.layout.xaxis2.type == "log"


def test_seed_findings_use_both_seeds_and_say_whether_an_order_holds():
    data = {"cells": [cell("looped", "M", None, em=0.9), cell("gpt", "M", None, em=0.8), cell("lstm", "M", None, em=0.3)],
            "seeds": [cell("looped", "M", None, em=0.7, seed=1), cell("gpt", "M", None, em=0.85, seed=1),
                      cell("lstm", "M", None, em=0.1, seed=1)]}
    lines = seed_sentences(data)
    assert lines[0] == ("Looped-M over seeds 0, 1: exact match 90.0%, 70.0% (mean 80.0%, spread 20.0 points); "
                        "loss 1.000, 1.000.")
    # gaps in standard errors of two proportions over 1,000 problems each, e.g. seed 0 of
    # Looped-M vs GPT-M: 0.1 / sqrt((0.9 * 0.1 + 0.8 * 0.2) / 1000) = 6.3
    assert ("The order of Looped-M and GPT-M does not hold across seeds (seed 0: 90.0% vs 80.0%, 6.3 SE; "
            "seed 1: 70.0% vs 85.0%, -8.2 SE).") in lines
    assert ("Looped-M is ahead of LSTM-M on every seed, by more than 2 standard errors on each "
            "(seed 0: 90.0% vs 30.0%, 34.6 SE; seed 1: 70.0% vs 10.0%, 34.6 SE).") in lines
    assert ("GPT-M is ahead of LSTM-M on every seed, by more than 2 standard errors on each "
            "(seed 0: 80.0% vs 30.0%, 26.0 SE; seed 1: 85.0% vs 10.0%, 50.9 SE).") in lines
    # the leader is named first with its numbers first, even when it is the second cell listed;
    # a gap within 2 standard errors on one seed is no clear order
    close = {"cells": [cell("looped", "S", None, em=0.5), cell("gpt", "S", None, em=0.9)],
             "seeds": [cell("looped", "S", None, em=0.60, seed=1), cell("gpt", "S", None, em=0.61, seed=1)]}
    assert seed_sentences(close)[-1] == (
        "GPT-S is ahead of Looped-S on every seed, but by less than 2 standard errors on seed 1: not a clear "
        "order (seed 0: 90.0% vs 50.0%, 21.7 SE; seed 1: 61.0% vs 60.0%, 0.5 SE).")
    # a cell with one seed is not summarised over seeds
    assert seed_sentences({"cells": data["cells"], "seeds": []}) == []

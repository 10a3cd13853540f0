"""What the report's figures and tables show a reader, checked on the figure objects: colour
scales, tick formats, legend entries, row counts, the order problems are written in, and
that a wide table scrolls in its own box instead of widening the page.

The numbers are those of the shipped runs (checkpoints/grok-mod113, checkpoints/extrap-add,
checkpoints/expr-compare): each test either computes them from the checkpoint or quotes the
values the report of that run printed.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import plotly.graph_objects as go
import pytest

from abacus_interp.evaluation.figures import grid_figure
from abacus_interp.evaluation.result import Grid
from abacus_interp.jsonsafe import from_json
from abacus_interp.tasks.base import lsd_text_to_human
from analyses._axes import integer_ticks, log_ticks, percent_ticks
from analyses.carry_attention.figures import patching_figure, pattern_figure
from analyses.carry_attention.result import ExamplePattern, Patching
from analyses.carry_wave.figures import accuracy_by_length
from analyses.fixed_point.figures import lock_in, orbit
from analyses.fixed_point.result import FixedPointSummary
from analyses.fourier.figures import mark_phases, neuron_fourier_figure
from analyses.fourier.progress import curves_for_phases, phases_from
from analyses.fourier.result import Phases
from analyses.report import html as H
from analyses.report.grids import build_architectures

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints"


# --------------------------------------------------------------------------- grokking


def test_neuron_fourier_scale_leaves_out_the_constant_term_of_the_shipped_grokked_model():
    from abacus_interp.checkpoints import load_model, load_task
    from analyses.fourier.analysis import _hook_names
    from analyses.fourier.circuit import grid_forward, neuron_summary

    run = SHIPPED / "grok-mod113"
    model, task = load_model(run), load_task(run)
    hooks = _hook_names(model)
    _, acts = grid_forward(model, task.vocab, task.p, [name for *_, name in hooks])
    coef = neuron_summary(acts[hooks[-1][2]], task.p)["mean_abs_coefficients"].numpy()
    constant, rest = coef[0, 0], np.delete(coef.reshape(-1), 0)
    assert constant > 5 * rest.max()  # 90.6 against 12.2: the constant swamps a full scale

    heatmap = neuron_fourier_figure(coef, task.p).data[0]
    assert heatmap.zmin == 0 and heatmap.zmax == pytest.approx(rest.max())
    assert np.asarray(heatmap.z)[0, 0] == pytest.approx(constant)  # the true value stays (hover)
    # the key-frequency cells now get colours: on a scale up to the constant no other cell
    # reaches a quarter of it; on the capped scale dozens do
    assert (rest >= 0.25 * constant).sum() == 0 and (rest >= 0.25 * heatmap.zmax).sum() >= 20
    title = neuron_fourier_figure(coef, task.p).layout.title.text
    assert "constant term" in title and f"{constant:.3g}" in title and f"{rest.max():.3g}" in title


def test_a_heatmap_without_a_dominant_constant_keeps_its_full_scale():
    coef = np.array([[1.0, 2.0], [3.0, 0.5]])
    heatmap = neuron_fourier_figure(coef, 2).data[0]
    assert heatmap.zmax is None and "constant term" not in neuron_fourier_figure(coef, 2).layout.title.text


def test_phase_names_go_to_the_legend_not_onto_the_plot():
    phases = phases_from(curves_for_phases(SHIPPED / "grok-mod113", None))
    assert (phases["memorisation_end"], phases["circuit_formation_end"]) == (200, 10_000)  # 200 of 20,000 steps
    fig = mark_phases(go.Figure(go.Scatter(x=[0, 20000], y=[1, 2], name="loss")), from_json(Phases, phases),
                      on_steps=True)
    texts = [a.text for a in fig.layout.annotations]
    assert not any(t and ("memorisation" in t or "circuit" in t) for t in texts)  # nothing to overlap
    legend = [t.name for t in fig.data if t.legendgroup == "phases"]
    assert legend == ["memorisation (0-200)", "circuit formation (200-10,000)", "cleanup (10,000-11,800)"]
    assert [s.type for s in fig.layout.shapes].count("rect") == 3  # the shaded spans stay


# --------------------------------------------------------------------------- accuracy grid


def test_grid_cells_and_colour_bar_are_both_in_percent():
    grid = {"exact_match": [[1.0, 0.875], [0.5, None]], "digits_a": [1, 2], "digits_b": [1, 2],
            "trained_digits": [1, 1], "in_distribution_exact_match": 1.0, "out_of_distribution_exact_match": 0.6875}
    heatmap = grid_figure(from_json(Grid, grid, partial=True)).data[0]
    assert heatmap.zmax == 100 and heatmap.zmin == 0 and heatmap.colorbar.ticksuffix == "%"
    assert heatmap.z[0][1] == pytest.approx(87.5) and heatmap.text[0][1] == "88" and heatmap.text[1][1] == ""
    # the printed number is the colour bar's value of the cell
    assert all(t == "" or abs(float(t) - z) <= 0.5 for zr, tr in zip(heatmap.z, heatmap.text, strict=True)
               for z, t in zip(zr, tr, strict=True) if z is not None)


# --------------------------------------------------------------------------- tick formats

# the lock-in table of checkpoints/extrap-add's report (trained depth 6): every digit locks in
# by loop 2 or 3 and all of them lock (fraction 1.0)
EXTRAP_LOCK_IN = [{"chain": c, "n": n, "locked_fraction": 1.0, "median": 2.0, "q25": 2.0, "q75": q75}
                  for c, n, q75 in ((0, 178, 3.0), (1, 112, 2.0), (2, 57, 2.0), (3, 41, 2.0), (4, 27, 2.0), (5, 13, 2.0))]


def test_lock_in_axes_count_loops_in_whole_numbers_and_the_share_locked_in_percent():
    part = {"by_chain": EXTRAP_LOCK_IN, "by_digit": []}
    fig = lock_in(from_json(FixedPointSummary, {"trained_loops": 6, "lock_in": {"by_chain": EXTRAP_LOCK_IN, "horizon": part,
                                                                            "trained_depth": part}}, partial=True))
    left, right = fig.layout.yaxis, fig.layout.yaxis2
    # the right axis places its own ticks (plotly.js would otherwise sync them to the left
    # axis's and print 0.067, 0.295, ...): 0%, 25%, ..., 100%
    assert (right.tickmode, right.tick0, right.dtick, right.tickformat) == ("linear", 0, 0.25, ".0%")
    assert right.range == (0, 1.05) and right.showgrid is False
    assert (left.tickmode, left.dtick, left.tickformat) == ("linear", 1, "d")
    assert left.range[0] == 0 and left.range[1] > 6  # the trained-depth line (6) is on the axis


def test_integer_ticks_stay_whole_and_few():
    for values, step in (([2, 3], 1), ([6], 1), ([11, 14], 2), ([0, 128], 20), ([30, 45], 10)):
        ticks = integer_ticks(values)
        assert ticks["dtick"] == step and ticks["tickformat"] == "d"
        assert (ticks["range"][1] - ticks["range"][0]) / ticks["dtick"] <= 9
    assert integer_ticks([None, float("nan"), 7.5])["range"][1] > 7.5
    assert integer_ticks([0, 3])["range"][0] < 0 and integer_ticks([1, 3])["range"][0] == 0  # room for a 0 marker only
    assert percent_ticks(grid=False)["showgrid"] is False


def test_carry_wave_axes_loops_in_whole_numbers_and_the_trained_length_label_on_the_log_axis():
    # checkpoints/extrap-add: exact match 100% at 5-100 digits, 11-13 loops used (median)
    rows = [SimpleNamespace(sample="uniform", chain=None, digits=d, exact_match=1.0, loops_median=m, n=48)
            for d, m in ((5, 11.0), (10, 12.0), (20, 12.0), (50, 12.0), (100, 13.0))]
    fig = accuracy_by_length(SimpleNamespace(accuracy=SimpleNamespace(rows=rows, trained_digits=5)))
    right = fig.layout.yaxis2
    assert (right.tickmode, right.tickformat, right.dtick) == ("linear", "d", 2) and right.range[1] > 13
    assert right.range[0] == 0 == fig.layout.yaxis.range[0]  # 0 loops level with 0%
    assert fig.layout.yaxis.tickformat == ".0%" and fig.layout.yaxis.tickmode == "linear"
    label = next(a for a in fig.layout.annotations if a.text == "trained length")
    assert label.x == pytest.approx(math.log10(5))  # log10 on a log axis, not 5 (= 100,000 digits)
    # ticks at the lengths measured, each written out: plotly's own read "10, 2, 5, 100"
    assert list(fig.layout.xaxis.ticktext) == ["5", "10", "20", "50", "100"]


def test_a_log_loss_axis_ticks_at_one_two_five_written_out():
    axis = log_ticks([0.004, 0.9, 2.3])
    assert axis["ticktext"] == ["0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2"]
    assert axis["tickvals"] == pytest.approx([float(t) for t in axis["ticktext"]])


def test_legends_name_metrics_in_words_not_by_their_column_names():
    """The model card's legends read "2x_length_loss"; each column of metrics.jsonl of the
    shipped runs gets a name without underscores."""
    from analyses.prose import metric_label

    assert metric_label("2x_length_loss") == "loss, held-out, 2x the trained length"
    assert metric_label("in_distribution_exact_match") == "exact match, held-out, in distribution"
    assert metric_label("test_exact_match") == "exact match, held-out test split"
    for run in ("extrap-add", "grok-mod113", "small-add", "loop-add"):
        metrics = SHIPPED / run / "metrics.jsonl"
        if metrics.exists():
            keys = set(json.loads(metrics.read_text().splitlines()[-1]))
            assert not [metric_label(k) for k in keys - {"step"} if "_" in metric_label(k)]


# --------------------------------------------------------------------------- patching

# checkpoints/extrap-add's report: 6 loops, 1 layer, 4 heads, 7 positions, head patching off
POSITIONS = ["a_i", "b_i", "a_prev", "b_prev", "changed", "prev_answer", "pred"]


def _patching(heads: np.ndarray) -> Patching:
    rng = np.random.default_rng(0)
    group = {"n_pairs": 16, "input": rng.uniform(0, 1, 7).tolist(), "resid": rng.uniform(0, 1, (6, 1, 7)).tolist(),
             "heads": heads.tolist()}
    return from_json(Patching, {"positions": POSITIONS, "groups": {"all": group}}, partial=True)


def test_patching_without_head_patching_shows_no_empty_head_rows():
    fig = patching_figure(_patching(np.full((6, 1, 4, 7), np.nan)))
    assert list(fig.data[0].y) == ["input"] + [f"resid loop {t + 1} L0" for t in range(6)]  # 7 rows, not 31
    assert not np.isnan(np.asarray(fig.data[0].z, dtype=float)).all(axis=1).any()
    assert "heads were not patched" in fig.layout.title.text and "patch_heads=True" in fig.layout.title.text


def test_patching_with_head_patching_keeps_one_row_per_loop_and_head():
    fig = patching_figure(_patching(np.full((6, 1, 4, 7), 0.25)))
    assert len(fig.data[0].y) == 1 + 6 + 24 and fig.data[0].y[-1] == "z loop 6 L0H3"
    assert "not patched" not in fig.layout.title.text


# --------------------------------------------------------------------------- problem order


def test_lsd_text_reads_in_the_usual_order():
    assert lsd_text_to_human("3303+6224=9527") == "3033+4226=7259"  # 3033 + 4226 = 7259
    assert lsd_text_to_human("49508+44494=830031") == "80594+49444=130038"
    assert lsd_text_to_human("a:321,b:54=ba") == "a:123,b:45=ba"
    assert lsd_text_to_human("-21*(-3)=36") == "-12*(-3)=63"


def _orbit_data(task: dict, prompt: str, target: str) -> FixedPointSummary:
    coords = [[0.0, 0.0], [1.0, 0.5], [1.5, 0.7]]
    return from_json(FixedPointSummary, {"task": task, "trajectories": {"explained_variance_ratio": [0.6, 0.3],
                                           "examples": [{"prompt": prompt, "target": target, "longest_chain": 0,
                                                         "coords": coords}]}}, partial=True)


def test_trajectory_legend_shows_problems_in_the_usual_order():
    # the first trajectory of checkpoints/extrap-add's report
    fig = orbit(_orbit_data({"name": "addition", "max_digits": 5, "answer_format": "slots"}, "3303+6224=", "9527"))
    assert fig.data[0].name == "3033+4226=7259 (chain 0)" and "usual order" in fig.layout.title.text
    # modular addition's tokens are whole residues: nothing to reverse
    mod = orbit(_orbit_data({"name": "modular_addition", "p": 113}, "12 45 =", "57"))
    assert mod.data[0].name.startswith("12 45 =57") and "as the model reads them" in mod.layout.title.text


def test_attention_pattern_title_is_in_the_usual_order_and_the_axes_say_theirs():
    tokens = list("49508+44494=830031") + ["<eos>"]
    example = from_json(ExamplePattern, {"problem": "49508+44494=830031", "tokens": tokens,
                                         "pattern": np.full((1, 1, 2, len(tokens), len(tokens)), 1 / len(tokens)).tolist()})
    title = pattern_figure(example).layout.title.text
    assert "80594+49444=130038" in title and "least-significant digit first" in title


# --------------------------------------------------------------------------- wide tables


def test_the_architectures_table_is_compact_and_scrolls_in_its_own_box():
    built = build_architectures(SimpleNamespace(architectures_dir=SHIPPED / "expr-compare"))
    header = re.search(r"<tr>(.*?)</tr>", built.tables).group(1)
    assert header.count("<th>") == 6 + 33  # model ... exact, then lengths 8..40
    assert built.tables.startswith('<div class="table-scroll"><table class="compact">')
    assert built.tables.endswith("</table></div>")
    css = H.PAGE_CSS
    assert re.search(r"\.table-scroll \{[^}]*overflow-x: auto", css) and re.search(r"\.table-scroll \{[^}]*max-width: 100%", css)
    # a narrow table keeps the normal size, still in its box
    assert H.grid_table(["a", "b"], [[1, 2]]).startswith('<div class="table-scroll"><table>')
    assert H.kv_table([("a", 1)]).startswith('<div class="table-scroll"><table>')


def test_the_subtask_ablation_heatmap_labels_every_head_row():
    """Issue 37: plotly labelled every other row, so the darkest row, L0H1, read as L0H2."""
    from analyses.carry_attention.figures import ablation_subtask_figure

    subtasks = {"no_carry": 0.1, "carry": 0.2}
    rows = tuple(SimpleNamespace(kind="zero", loop=t, layer=0, head=h, delta_loss_by_subtask={"no_carry": 0.01 * h,
                                                                                               "carry": 0.5 * (h == 1)})
                 for t in range(6) for h in range(4))
    ablation = SimpleNamespace(table=rows, baseline=SimpleNamespace(loss_by_subtask=subtasks))
    fig = ablation_subtask_figure(ablation)
    labels = [f"zero loop {r.loop + 1} L0H{r.head}" for r in rows]
    assert list(fig.layout.yaxis.tickvals) == labels and list(fig.layout.yaxis.ticktext) == labels
    assert list(fig.layout.xaxis.tickvals) == list(subtasks)


def test_every_row_is_labelled_in_each_panel_and_a_residue_axis_keeps_plotly_spacing():
    from plotly.subplots import make_subplots

    from analyses._axes import label_every_row

    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Heatmap(z=[[1, 2, 3]] * 24, x=["a", "b", "c"], y=list(range(1, 25))), row=1, col=1)
    fig.add_trace(go.Heatmap(z=[[0] * 113] * 2), row=1, col=2)
    label_every_row(fig)
    assert list(fig.layout.yaxis.tickvals) == list(range(1, 25)) and list(fig.layout.xaxis.tickvals) == ["a", "b", "c"]
    assert list(fig.layout.yaxis2.tickvals) == [0, 1]  # rows of the second panel, counted from 0
    assert fig.layout.xaxis2.tickvals is None  # 113 residues: every label would overlap

"""Learning curves of a comparison against training compute: families at equal FLOPs, which
curves still rise, and the figure (comparison.json -> sentences and a plotly figure).

A curve is a cell's `curve` (abacus_interp.training.compute.CurvePoint rows):
held-out exact match and loss per answer token of every in-run evaluation, against training FLOPs.
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from abacus_interp.training.compute import CurvePoint

from .common import SIGNIFICANCE, family_color, label

SIZE_SYMBOLS = {"S": "circle", "M": "square", "L": "diamond"}
LOSS_DROP = 0.05  # a held-out loss still falling by more than 5% over the last quarter of the steps is rising
# the accuracy whose cost `reach_sentences` compares: high enough to mean "solves the task",
# low enough that several families get there on a CPU budget
REACH_TARGET = 0.9


def curve_of(cell: dict[str, Any]) -> tuple[CurvePoint, ...]:
    return tuple(CurvePoint(**p) for p in cell["curve"] or ())


def standard_error(p: float, n: int) -> float:
    """SE of a proportion over n problems, with p kept 1/(2n) inside (0, 1): at 0% or 100% the
    plain formula says 0, and a gap between two perfect scores would be infinitely many SEs."""
    p = min(max(p, 0.5 / n), 1 - 0.5 / n)
    return math.sqrt(p * (1 - p) / n)


def gap_in_se(pa: float, na: int, pb: float, nb: int) -> float:
    """(pa - pb) in standard errors of the difference of two independent proportions."""
    return (pa - pb) / math.hypot(standard_error(pa, na), standard_error(pb, nb))


def interpolate(curve: tuple[CurvePoint, ...], flops: float) -> tuple[float, float, int] | None:
    """(exact match, loss, n) at `flops`, linear in log FLOPs between the two evaluations around
    it; None when the curve does not reach that budget or starts after it."""
    points = sorted((p for p in curve if p.train_flops > 0), key=lambda p: p.train_flops)
    if not points or not points[0].train_flops <= flops <= points[-1].train_flops:
        return None
    for a, b in zip(points, points[1:], strict=False):
        if a.train_flops <= flops <= b.train_flops:
            w = 0.0 if b.train_flops == a.train_flops else \
                math.log(flops / a.train_flops) / math.log(b.train_flops / a.train_flops)
            return a.exact_match + w * (b.exact_match - a.exact_match), a.loss + w * (b.loss - a.loss), b.n
    return points[0].exact_match, points[0].loss, points[0].n  # a single point at exactly `flops`


def _flops(x: float) -> str:
    return f"{x:.2g} FLOPs"


def equal_compute_sentences(cells: list[dict[str, Any]]) -> list[str]:
    """The cells at the smallest final training budget among them (every curve reaches it):
    their ranking, and how many standard errors the leader is ahead of each other cell."""
    curves = {c["cell"]: curve_of(c) for c in cells}
    with_curve = [c for c in cells if curves[c["cell"]]]
    if len(with_curve) < 2:
        return []
    budget = min(max(p.train_flops for p in curves[c["cell"]]) for c in with_curve)
    at = {c["cell"]: interpolate(curves[c["cell"]], budget) for c in with_curve}
    ranked = sorted((c for c in with_curve if at[c["cell"]] is not None),
                    key=lambda c: (-at[c["cell"]][0], at[c["cell"]][1]))
    if len(ranked) < 2:
        return []
    n = at[ranked[0]["cell"]][2]
    out = [f"At equal training compute ({_flops(budget)}, the smallest final budget among the cells; held-out "
           f"exact match of the in-run evaluations on {n} problems, interpolated in log FLOPs): "
           + ", ".join(f"{label(c)} {100 * at[c['cell']][0]:.0f}% (loss {at[c['cell']][1]:.2f})" for c in ranked)
           + "."]
    lead = ranked[0]
    em, _, n_lead = at[lead["cell"]]
    gaps = [(c, gap_in_se(em, n_lead, at[c["cell"]][0], at[c["cell"]][2])) for c in ranked[1:]]
    ahead = [f"{label(c)} by {g:.1f}" for c, g in gaps if g > SIGNIFICANCE]
    tied = [label(c) for c, g in gaps if g <= SIGNIFICANCE]
    parts = [f"is ahead of {', '.join(ahead)} standard errors"] if ahead else []
    if tied:
        parts.append(f"leads {', '.join(tied)} by less than {SIGNIFICANCE:g} standard errors (a tie)")
    text = f"At that budget {label(lead)} " + "; it ".join(parts)
    out.append(text + ".")
    return out


def compute_to_reach(curve: tuple[CurvePoint, ...], target: float) -> tuple[float, float] | None:
    """(training FLOPs, wall seconds) at which the curve first reaches `target` exact match,
    interpolated between the evaluations around the crossing (FLOPs in log space, seconds
    linearly); None when it never does."""
    points = sorted((p for p in curve if p.train_flops > 0), key=lambda p: p.train_flops)
    for before, at in zip([None, *points], points, strict=False):
        if at.exact_match < target:
            continue
        if before is None or at.exact_match == before.exact_match:
            return at.train_flops, at.elapsed_s
        w = (target - before.exact_match) / (at.exact_match - before.exact_match)
        flops = math.exp(math.log(before.train_flops) + w * math.log(at.train_flops / before.train_flops))
        return flops, before.elapsed_s + w * (at.elapsed_s - before.elapsed_s)
    return None


def reach_sentences(cells: list[dict[str, Any]], target: float = REACH_TARGET) -> list[str]:
    """The compute each cell spent before its held-out exact match first reached `target`:
    equal accuracy, unequal cost, the other reading of "at equal compute"."""
    curves = [(c, curve_of(c)) for c in cells if curve_of(c)]
    if not curves:
        return []
    reach = [(c, compute_to_reach(curve, target)) for c, curve in curves]
    reached = sorted(((c, r) for c, r in reach if r is not None), key=lambda cr: cr[1][0])
    never = [label(c) for c, r in reach if r is None]
    n = curves[0][1][-1].n
    if not reached:
        return [f"No cell reached {100 * target:.0f}% held-out exact match in its training budget."]
    text = (f"Training compute to first reach {100 * target:.0f}% held-out exact match (in-run evaluations on {n} "
            "problems, the crossing interpolated between evaluations): "
            + ", ".join(f"{label(c)} {flops:.2g} FLOPs ({seconds:.0f} s)" for c, (flops, seconds) in reached))
    if len(reached) > 1:
        text += f"; {label(reached[0][0])} needs {reached[1][1][0] / reached[0][1][0]:.1f}x less than the next"
    return [text + (f"; never within its budget: {', '.join(never)}." if never else ".")]


def still_rising(curve: tuple[CurvePoint, ...]) -> str | None:
    """Why the curve still rises at its end (None if it does not): exact match up by more than
    SIGNIFICANCE standard errors between its last two evaluations, or held-out loss down by
    more than LOSS_DROP from the last evaluation at or before three quarters of its final step."""
    points = sorted(curve, key=lambda p: p.step)
    if len(points) < 2:
        return None
    before, last = points[-2], points[-1]
    gap = gap_in_se(last.exact_match, last.n, before.exact_match, before.n)
    if gap > SIGNIFICANCE:
        return f"exact match +{100 * (last.exact_match - before.exact_match):.0f} points, {gap:.1f} SE"
    quarter = [p for p in points if p.step <= 0.75 * last.step]
    if quarter and quarter[-1].loss > 0 and (quarter[-1].loss - last.loss) / quarter[-1].loss > LOSS_DROP:
        return f"loss {100 * (last.loss - quarter[-1].loss) / quarter[-1].loss:.0f}% since step {quarter[-1].step}"
    return None


def rising_sentences(cells: list[dict[str, Any]]) -> list[str]:
    curves = [(c, curve_of(c)) for c in cells if curve_of(c)]
    if not curves:
        return []
    why = [(c, still_rising(curve)) for c, curve in curves]
    rising = [(c, reason) for c, reason in why if reason is not None]
    flat = [label(c) for c, reason in why if reason is None]
    rule = (f"exact match up by more than {SIGNIFICANCE:g} standard errors between the last two evaluations, or "
            f"held-out loss down by more than {100 * LOSS_DROP:.0f}% over the last quarter of the steps")
    if not rising:
        return [f"No curve is still rising at the end of training ({rule}): more steps would not change the ranking."]
    text = f"Still rising at the end of training ({rule}): " + ", ".join(f"{label(c)} ({why})" for c, why in rising)
    return [text + (f"; flat: {', '.join(flat)}." if flat else ".")]


def learning_curves_figure(data: dict[str, Any]) -> go.Figure:
    """Held-out exact match (left) and loss per answer token (right) against training FLOPs
    (log x), one trace per cell per panel: colour by family, marker by size, dotted for a
    second seed."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("held-out exact match", "held-out loss per answer token"))
    for cell in [*data["cells"], *data["seeds"]]:
        curve = curve_of(cell)
        name = label(cell) + (f" seed {cell['seed']}" if cell["seed"] else "")
        style = {"color": family_color(cell["family"]), "dash": "dot" if cell["seed"] else "solid"}
        marker = {"symbol": SIZE_SYMBOLS.get(cell["size"], "circle"), "size": 7}
        x = [p.train_flops for p in curve]
        for col, y in ((1, [p.exact_match for p in curve]), (2, [p.loss for p in curve])):
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=name, legendgroup=name,
                                     showlegend=col == 1, line=style, marker=marker), row=1, col=col)
    fig.update_xaxes(type="log", title_text="training FLOPs (forward + backward)")
    fig.update_yaxes(range=[-0.02, 1.05], row=1, col=1)
    fig.update_layout(title="Learning curves against training compute", height=440)
    return fig


"""Compare the checkpoints of a run, and two runs, over training.

For every checkpoint (one pass, each file read once, one batched forward pass each):
  - loss and greedy exact match on a fixed problem set (plus the run's metrics.jsonl curves);
  - weight norm per parameter group (embed, pos_embed, unembed, blocks.{l}.attn,
    blocks.{l}.mlp, layernorm) and the per-step parameter speed ||theta_{k+1} - theta_k|| / gap;
  - the state after every loop (`loops.{t}.hook_state_post`) on the problem set's tokens,
    compared by linear CKA between all pairs of checkpoints (step x step per loop), against
    the final checkpoint, and (with `run_b`) between the checkpoints of two runs.
Then: which parameters (and attention heads) moved most between two chosen checkpoints, and
change points: the steps where the model changed fastest, from three speeds per step (or
per unit of ln(1 + step), `per="log_step"`): "representation", the mean over loops of
(1 - CKA(k, k+1)) / gap; "parameters", ||theta_{k+1} - theta_k|| / gap; "loss",
|delta problem-set loss| / gap. The peaks of the chosen signal are marked on the figures.

    >>> cmp = run("checkpoints/small-add", steps=(250, 4000))
    >>> cmp.to_dict()["change_points"]
    >>> cmp.figures()["cka_steps"]
"""

from __future__ import annotations

import logging
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from tqdm.auto import tqdm

from abacus_interp.checkpoints import CheckpointError, load_tensors, read_metrics, read_run_config
from abacus_interp.config import ModelConfig
from abacus_interp.jsonsafe import json_safe
from abacus_interp.model import LoopedTransformer
from abacus_interp.prose import finite, first_step_at, limit, num, pct
from abacus_interp.scoring import next_token_loss
from abacus_interp.tasks import task_from_config
from abacus_interp.tokens import encode_batch
from analyses.contract import RunContext

from ._alignment import checkpoint_series
from ._cka import change_points, cka_matrix, compress, moved_parameters, param_group, rates

logger = logging.getLogger(__name__)

SIGNALS = ("representation", "parameters", "loss")
RANK_BY = ("rms_change", "relative_change", "abs_change")
METRIC_KEY = re.compile(r"(^step$|^loss$|_loss$|exact_match$|accuracy$)")


@dataclass
class RunScan:
    """Everything measured on one run's checkpoints (C of them, L loops)."""

    run_dir: str
    steps: list[int]
    n_loops: int
    metrics: list[dict]  # rows of metrics.jsonl: step, losses, exact-match / accuracy columns
    problem_loss: np.ndarray  # [C]
    problem_exact_match: np.ndarray  # [C]
    group_norms: dict[str, np.ndarray]  # group (and "total") -> [C]
    group_speed: dict[str, np.ndarray]  # group (and "total") -> [C-1], per step
    distance_from_first: np.ndarray  # [C]  ||theta_k - theta_0||
    cka: np.ndarray  # [L, C, C]
    speeds: dict[str, np.ndarray]  # signal -> [C-1], per step (or per log step)
    change_points: dict[str, list[dict]]  # signal -> top peaks

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["cka_vs_final"] = self.cka[:, :, -1]
        d["cka_to_previous"] = np.stack([np.diagonal(c, 1) for c in self.cka])
        return json_safe(d)


@dataclass
class CheckpointComparison:
    a: RunScan
    b: RunScan | None
    cross_cka: np.ndarray | None  # [L, C_a, C_b] loop t of run a vs loop t of run b
    matched_cka: np.ndarray | None  # [L, C_a] vs run b's checkpoint nearest in step
    matched_steps_b: list[int] | None
    moved: dict  # steps, parameters (whole tensors), heads, groups
    signal: str
    per: str
    problems: dict
    notes: list[str] = field(default_factory=list)
    compare_skipped: str | None = None  # why a second run given was not compared

    @property
    def change_steps(self) -> list[int]:
        """The change-point steps of run a under the chosen signal."""
        return [c["step"] for c in self.a.change_points.get(self.signal, [])]

    def to_dict(self) -> dict:
        return json_safe({
            "signal": self.signal, "per": self.per, "change_points": self.a.change_points, "change_steps": self.change_steps,
            "a": self.a.to_dict(), "b": self.b.to_dict() if self.b else None,
            "cross_cka": self.cross_cka, "matched_cka": self.matched_cka, "matched_steps_b": self.matched_steps_b,
            "moved": self.moved, "problems": self.problems, "notes": self.notes,
            **({"compare_skipped": self.compare_skipped} if self.compare_skipped else {}),
        })

    def figures(self) -> dict:
        return _figures(self)

    def findings(self) -> list[str]:
        return findings(self.to_dict())


def run(
    run_a,
    run_b=None,
    *,
    steps: tuple[int, int] | None = None,
    problems=None,
    n_problems: int = 32,
    max_samples: int = 1024,
    positions: str = "all",
    signal: str = "representation",
    n_change_points: int = 3,
    per: str = "step",
    max_checkpoints: int | None = None,
    top_k: int = 20,
    rank_by: str = "rms_change",
    seed: int = 0,
    batch_size: int = 256,
    progress: bool = True,
) -> CheckpointComparison:
    """Compare the checkpoints of `run_a` (a run directory or a list of (step, path)), and
    with `run_b` (same vocabulary) the two runs.

    steps: the two checkpoints for "which parameters moved most" (default: first and last).
    problems: Examples (or (prompt, target) pairs in model order, or human strings such as
        "123+456"); default: `n_problems` drawn from the run's task with `seed` (the test
        split for modular addition). The same problems feed every checkpoint and both runs.
    max_samples: token positions used for CKA (a fixed seeded subset when there are more).
    positions: "all" real tokens or "answer" (the positions that predict answer tokens).
    signal: the change-point signal marked on the figures: one of SIGNALS.
    per: speeds per "step" (default) or per "log_step" (change per unit of ln(1 + step));
        per step favours the first steps of a run, per log step the phases seen on a log axis.
    """
    if signal not in SIGNALS:
        raise ValueError(f"signal must be one of {SIGNALS}, got {signal!r}")
    if rank_by not in RANK_BY:
        raise ValueError(f"rank_by must be one of {RANK_BY}, got {rank_by!r}")
    if per not in ("step", "log_step"):
        raise ValueError(f"per must be 'step' or 'log_step', got {per!r}")
    if positions not in ("all", "answer"):
        raise ValueError(f"positions must be 'all' or 'answer', got {positions!r}")
    dir_a, series_a = checkpoint_series(run_a, max_checkpoints)
    config_a = read_run_config(dir_a)
    cfg_a = ModelConfig.from_dict(config_a["model"])
    examples = _problems(problems, config_a["task"], n_problems, seed)
    notes: list[str] = []
    prompts, targets = [e[0] for e in examples], [e[1] for e in examples]
    try:
        batch = encode_batch(cfg_a.vocab, prompts, targets, max_len=cfg_a.max_seq_len)
    except ValueError:  # e.g. grok-mod113: "a b = c" fills max_seq_len=4, EOS does not fit
        batch = encode_batch(cfg_a.vocab, prompts, targets, append_eos=False, max_len=cfg_a.max_seq_len)
        notes.append(f"problems encoded without EOS: with it they exceed max_seq_len={cfg_a.max_seq_len}")
    mask = batch.valid if positions == "all" else batch.loss_mask
    n_tokens = int(mask.sum())
    select = torch.arange(n_tokens)
    if n_tokens > max_samples:
        gen = torch.Generator().manual_seed(seed)
        select = torch.randperm(n_tokens, generator=gen)[:max_samples].sort().values

    available = [s for s, _ in series_a]
    moved_steps = tuple(steps) if steps is not None else (available[0], available[-1])
    missing = [s for s in moved_steps if s not in available]
    if len(moved_steps) != 2 or missing:
        raise ValueError(f"steps must be two checkpoint steps of run a; {missing or moved_steps} not among {available}")

    scan_a, kept, reps_a = _scan(dir_a, series_a, batch, mask, select, set(moved_steps), n_change_points, per, batch_size, progress)
    moved = moved_parameters(kept[moved_steps[0]], kept[moved_steps[1]], top_k, rank_by)
    moved["steps"] = list(moved_steps)
    scan_b = cross = matched = matched_steps = None
    if run_b is not None:
        dir_b, series_b = checkpoint_series(run_b, max_checkpoints)
        cfg_b = ModelConfig.from_dict(read_run_config(dir_b)["model"])
        if cfg_b.vocab != cfg_a.vocab:
            raise ValueError(f"{dir_a} and {dir_b} use different vocabularies; CKA needs the same inputs on both runs")
        scan_b, _, reps_b = _scan(dir_b, series_b, batch, mask, select, set(), n_change_points, per, batch_size, progress)
        n_common = min(scan_a.n_loops, scan_b.n_loops)
        if scan_a.n_loops != scan_b.n_loops:
            notes.append(f"runs have {scan_a.n_loops} and {scan_b.n_loops} loops; compared loops 0..{n_common - 1}")
        cross = np.stack([cka_matrix(reps_a[t], reps_b[t]) for t in range(n_common)])
        nearest = [int(np.argmin(np.abs(np.array(scan_b.steps) - s))) for s in scan_a.steps]
        matched = cross[:, np.arange(len(scan_a.steps)), nearest]
        matched_steps = [scan_b.steps[j] for j in nearest]
    problem_info = {"n_problems": len(examples), "n_samples": len(select), "positions": positions,
                    "examples": [list(e) for e in examples[:5]]}
    return CheckpointComparison(a=scan_a, b=scan_b, cross_cka=cross, matched_cka=matched,
                                matched_steps_b=matched_steps, moved=moved, signal=signal, per=per,
                                problems=problem_info, notes=notes)


def _problems(problems, task_cfg: dict, n: int, seed: int) -> list[tuple[str, str]]:
    task = task_from_config(task_cfg)
    if problems is None:
        rng = random.Random(seed)
        held_out = task.has_fixed_split and len(task.full_split("test")) > 0
        problems = task.sample(n, rng, split="test") if held_out else task.sample(n, rng)
    out = []
    for p in problems:
        if isinstance(p, str):
            p = task.from_human(p)
        if hasattr(p, "prompt"):
            out.append((p.prompt, p.target))
        elif isinstance(p, (tuple, list)) and len(p) == 2:
            out.append((str(p[0]), str(p[1])))
        else:
            raise ValueError(f"a problem must be an Example, a (prompt, target) pair or a human string, got {p!r}")
    if not out:
        raise ValueError("the problem set is empty")
    return out


@torch.no_grad()
def _forward(model, batch, mask, select, batch_size):
    """States after every loop at the selected token positions, loss and exact match."""
    L = model.cfg.n_loops
    states: list[list[torch.Tensor]] = [[] for _ in range(L)]
    logits = []
    for start in range(0, len(batch.tokens), batch_size):
        tokens = batch.tokens[start : start + batch_size]
        inputs = model.embed(tokens)
        state = None
        for t in range(L):
            state = model.run_loops(inputs, range(t, t + 1), state)
            states[t].append(state[mask[start : start + batch_size]])
        logits.append(model.unembed(state))
    logits = torch.cat(logits)
    loss = float(next_token_loss(logits, batch.tokens, batch.loss_mask))
    scored = batch.loss_mask[:, :-1]
    right = (logits[:, :-1].argmax(-1) == batch.tokens[:, 1:]) | ~scored
    return [torch.cat(s)[select] for s in states], loss, float(right.all(-1).float().mean())


def _scan(run_dir, series, batch, mask, select, keep, n_change_points, per, batch_size, progress):
    cfg = ModelConfig.from_dict(read_run_config(run_dir)["model"])
    model = LoopedTransformer(cfg.replace(max_loops=cfg.n_loops)).eval()
    L, C = cfg.n_loops, len(series)
    reps: list[list[torch.Tensor]] = [[] for _ in range(L)]
    norms: dict[str, list[float]] = {}
    moves: dict[str, list[float]] = {}
    losses, exact, dist = [], [], []
    first = prev = None
    kept = {}
    for k, (step, path) in enumerate(tqdm(series, desc=f"checkpoints {run_dir.name}", disable=not progress, leave=False)):
        state = {name: t.float() for name, t in load_tensors(path).items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise CheckpointError(f"{path} does not match {run_dir}/config.json: missing {missing}, unexpected {unexpected}")
        sq_norm: dict[str, float] = {}
        sq_move: dict[str, float] = {}
        sq_dist = 0.0
        for name, t in state.items():
            g = param_group(name)
            sq_norm[g] = sq_norm.get(g, 0.0) + float(t.double().square().sum())
            if prev is not None:
                sq_move[g] = sq_move.get(g, 0.0) + float((t - prev[name]).double().square().sum())
                sq_dist += float((t - first[name]).double().square().sum())
        sq_norm["total"] = sum(sq_norm.values())
        for g, v in sq_norm.items():
            norms.setdefault(g, [math.nan] * k).append(math.sqrt(v))
        if prev is not None:
            sq_move["total"] = sum(sq_move.values())
            for g, v in sq_move.items():
                moves.setdefault(g, []).append(math.sqrt(v))
        dist.append(math.sqrt(sq_dist))
        first = state if first is None else first
        prev = state
        if step in keep:
            kept[step] = state
        states, loss, em = _forward(model, batch, mask, select, batch_size)
        losses.append(loss)
        exact.append(em)
        for t in range(L):
            reps[t].append(compress(states[t]))
    steps = [s for s, _ in series]
    width = max(r.shape[1] for rr in reps for r in rr)
    reps_t = [torch.stack([torch.nn.functional.pad(r, (0, width - r.shape[1])) for r in rr]) for rr in reps]
    cka = np.stack([cka_matrix(r) for r in reps_t])  # [L, C, C]
    speeds = {
        "representation": rates(steps, np.mean([1.0 - np.diagonal(c, 1) for c in cka], axis=0), per) if C > 1 else np.zeros(0),
        "parameters": rates(steps, moves.get("total", []), per) if C > 1 else np.zeros(0),
        "loss": rates(steps, np.abs(np.diff(losses)), per),
    }
    found = {name: change_points(steps, v, n_change_points) for name, v in speeds.items()} if C > 1 else {}
    metrics = [{k: v for k, v in row.items() if METRIC_KEY.search(k)} for row in read_metrics(run_dir)]
    scan = RunScan(
        run_dir=str(run_dir), steps=steps, n_loops=L, metrics=metrics, problem_loss=np.array(losses),
        problem_exact_match=np.array(exact), group_norms={g: np.array(v) for g, v in norms.items()},
        group_speed={g: rates(steps, v, per) for g, v in moves.items()}, distance_from_first=np.array(dist),
        cka=cka, speeds=speeds, change_points=found,
    )
    return scan, kept, reps_t


# ---------------------------------------------------------------------------------- figures
def _figures(c: CheckpointComparison) -> dict[str, go.Figure]:
    runs = [("A", c.a)] + ([("B", c.b)] if c.b else [])
    marks = c.change_steps

    def mark(fig):
        for st in marks:
            fig.add_vline(x=st, line_dash="dot", line_color="red", opacity=0.6)
        return fig

    curves = make_subplots(rows=1, cols=2, subplot_titles=["loss", "exact match / accuracy"])
    for tag, r in runs:
        keys = sorted({k for row in r.metrics for k in row} - {"step"})
        for k in keys:
            pts = [(row["step"], row[k]) for row in r.metrics if row.get(k) is not None]
            if pts:
                col = 1 if k.endswith("loss") else 2
                curves.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], name=f"{tag} {k}",
                                            mode="lines", opacity=0.8), row=1, col=col)
        curves.add_trace(go.Scatter(x=r.steps, y=r.problem_loss, name=f"{tag} problem-set loss", mode="markers"), row=1, col=1)
        curves.add_trace(go.Scatter(x=r.steps, y=r.problem_exact_match, name=f"{tag} problem-set exact match",
                                    mode="markers"), row=1, col=2)
    curves.update_yaxes(type="log", row=1, col=1)
    curves.update_xaxes(title_text="step")

    norms = go.Figure()
    for tag, r in runs:
        for g, ys in r.group_norms.items():
            norms.add_trace(go.Scatter(x=r.steps, y=ys, name=f"{tag} {g}", mode="lines+markers",
                                       line_dash="solid" if tag == "A" else "dash"))
    norms.update_layout(title="weight norm per parameter group", xaxis_title="step", yaxis_title="Frobenius norm")

    speed = make_subplots(rows=len(SIGNALS), cols=1, shared_xaxes=True,
                          subplot_titles=[f"{s} change per {c.per.replace('_', ' ')}" for s in SIGNALS])
    for i, name in enumerate(SIGNALS, 1):
        for tag, r in runs:
            if len(r.steps) < 2:
                continue
            speed.add_trace(go.Scatter(x=r.steps[1:], y=r.speeds[name], name=f"{tag} {name}", mode="lines+markers"), row=i, col=1)
            cps = r.change_points.get(name, [])
            speed.add_trace(go.Scatter(x=[p["step"] for p in cps], y=[p["speed"] for p in cps], mode="markers",
                                       marker=dict(symbol="star", size=14, color="red"), name=f"{tag} {name} change points"),
                            row=i, col=1)
        speed.update_yaxes(type="log", row=i, col=1)
    speed.update_xaxes(title_text="step (end of interval)", row=len(SIGNALS), col=1)

    vs_final = go.Figure()
    for t in range(c.a.n_loops):
        vs_final.add_trace(go.Scatter(x=c.a.steps, y=c.a.cka[t, :, -1], name=f"loop {t} vs final", mode="lines+markers"))
        vs_final.add_trace(go.Scatter(x=c.a.steps[1:], y=np.diagonal(c.a.cka[t], 1), name=f"loop {t} vs previous",
                                      mode="lines", line_dash="dot"))
    vs_final.update_layout(title=f"linear CKA of the state after each loop (final = step {c.a.steps[-1]})",
                           xaxis_title="step", yaxis_title="CKA", yaxis_range=[0, 1.05])

    figs = {"training_curves": mark(curves), "weight_norms": mark(norms), "change_speed": mark(speed),
            "cka_vs_final": mark(vs_final),
            "cka_steps": _heatmaps(c.a.cka, c.a.steps, c.a.steps, "CKA between checkpoints", "step", "step"),
            "moved_most": _moved_bar(c.moved)}
    if c.b is not None:
        figs["cka_runs"] = _heatmaps(c.cross_cka, c.a.steps, c.b.steps, "CKA between runs", "run A step", "run B step")
        matched = go.Figure([go.Scatter(x=c.a.steps, y=c.matched_cka[t], name=f"loop {t}", mode="lines+markers")
                             for t in range(len(c.matched_cka))])
        matched.update_layout(title="CKA of run A vs run B at the nearest step", xaxis_title="step",
                              yaxis_title="CKA", yaxis_range=[0, 1.05])
        figs["cka_runs_matched"] = mark(matched)
    return figs


def _heatmaps(mats, y_steps, x_steps, title, y_title, x_title) -> go.Figure:
    """One heatmap per loop (steps as categories, since checkpoints are unevenly spaced),
    switched by a dropdown; the last loop is shown first."""
    labels_y, labels_x = [str(s) for s in y_steps], [str(s) for s in x_steps]
    last = len(mats) - 1
    fig = go.Figure([go.Heatmap(z=m, x=labels_x, y=labels_y, zmin=0, zmax=1, colorscale="Viridis", visible=t == last,
                                colorbar_title="CKA", hovertemplate="x %{x}<br>y %{y}<br>CKA %{z:.3f}<extra></extra>")
                     for t, m in enumerate(mats)])
    buttons = [dict(label=f"loop {t}", method="update",
                    args=[{"visible": [i == t for i in range(len(mats))]}, {"title": f"{title}, loop {t}"}])
               for t in range(len(mats))]
    fig.update_layout(title=f"{title}, loop {last}", xaxis_title=x_title, yaxis_title=y_title,
                      xaxis_type="category", yaxis_type="category",
                      updatemenus=[dict(buttons=buttons, active=last, x=1.0, y=1.15, xanchor="right")])
    return fig


def _moved_bar(moved: dict) -> go.Figure:
    rank_by = moved["rank_by"]
    rows = moved["parameters"][::-1]
    fig = go.Figure(go.Bar(x=[r[rank_by] for r in rows], y=[r["name"] for r in rows], orientation="h",
                           customdata=[[r["abs_change"], r["norm_a"], r["norm_b"]] for r in rows],
                           hovertemplate="%{y}: %{x:.3g}<br>abs %{customdata[0]:.3g}, norm %{customdata[1]:.3g}"
                                         " -> %{customdata[2]:.3g}<extra></extra>"))
    a, b = moved["steps"]
    fig.update_layout(title=f"parameters that moved most, step {a} -> {b} ({rank_by})", xaxis_title=rank_by,
                      height=max(300, 24 * len(rows) + 120))
    return fig


# --------------------------------------------------------------------------- findings


def findings(d: dict[str, Any]) -> list[str]:
    """Up to four sentences from the numbers of `to_dict()`, written once here."""
    out: list[str | None] = []
    a = d.get("a") or {}
    steps = a.get("steps") or []
    signal = d.get("signal", "representation")
    cps = (d.get("change_points") or {}).get(signal) or []
    if cps:
        first = cps[0]
        others = ", ".join(f"{c['from_step']:,}-{c['step']:,}" for c in cps[1:3])
        out.append(
            f"The {signal} changed fastest between steps {first['from_step']:,} and {first['step']:,}"
            + (f" (next: {others})" if others else "") + "."
        )
    vs_final = a.get("cka_vs_final") or []
    if vs_final and steps:
        last_loop = vs_final[-1]
        s90 = first_step_at(steps, last_loop, 0.9)
        out.append(
            f"The last loop's state at step {steps[0]:,} has linear CKA {num(last_loop[0], 2)} with the final checkpoint's"
            + (f"; it passes 0.9 at step {s90:,}" if s90 is not None and s90 != steps[-1] else "") + "."
        )
    em = finite(a.get("problem_exact_match"))
    if em and steps:
        s50 = first_step_at(steps, a.get("problem_exact_match"), 0.5)
        out.append(
            f"On the fixed problem set exact match goes from {pct(em[0])} to {pct(em[-1])} over {len(steps)} checkpoints"
            + (f", first reaching 50% at step {s50:,}" if s50 is not None else "") + "."
        )
    moved = d.get("moved") or {}
    groups = moved.get("groups") or []
    if groups and moved.get("steps"):
        g = groups[0]
        rel = g.get("relative_change")
        out.append(
            f"Between steps {moved['steps'][0]:,} and {moved['steps'][1]:,} the {g['group']} weights moved most"
            + (f" (relative change {num(rel, 2)})" if rel is not None else "") + "."
        )
    matched = d.get("matched_cka")
    b = d.get("b") or {}
    if matched and b:
        final = matched[-1][-1] if matched[-1] else None
        out.insert(1, f"Against the comparison run {b.get('run_dir')}, the last loop's states at the final checkpoints have CKA {num(final, 2)}.")
    return limit(out)


# --------------------------------------------------------------------------- as the report runs it


@dataclass(frozen=True)
class CheckpointCompareConfig:
    n_problems: int = 24
    max_samples: int = 512
    max_checkpoints: int = 16

    @classmethod
    def quick(cls) -> CheckpointCompareConfig:
        return cls(n_problems=8, max_samples=128, max_checkpoints=5)


class CheckpointCompareAnalysis:
    key = "checkpoint_compare"
    title = "Checkpoint comparison"
    Config = CheckpointCompareConfig

    def skip_reason(self, ctx: RunContext) -> str | None:
        if ctx.n_checkpoints < 2 and ctx.compare_dir is None:
            return "the run has a single checkpoint; comparison needs at least two"
        return None

    def run(self, ctx: RunContext, config: CheckpointCompareConfig) -> CheckpointComparison:
        run_b, skipped = ctx.compare_dir, None
        if run_b is not None:
            other = read_run_config(run_b)
            if (other.get("model") or {}).get("vocab") != read_run_config(ctx.run_dir)["model"].get("vocab"):
                skipped = (f"{run_b} uses a different vocabulary (task {(other.get('task') or {}).get('name')}), so "
                           "its states cannot be compared on the same inputs; only this run's checkpoints are compared")
                run_b = None
        result = run(ctx.run_dir, str(run_b) if run_b is not None else None, n_problems=config.n_problems,
                     max_samples=config.max_samples, max_checkpoints=config.max_checkpoints, seed=ctx.seed,
                     progress=False)
        if skipped:
            result.compare_skipped = skipped
            result.notes.append(skipped)
        ctx.change_steps = list(result.change_steps)
        return result


ANALYSIS = CheckpointCompareAnalysis()

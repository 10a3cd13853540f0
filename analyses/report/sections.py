"""The report's sections: what each computes, with which (reduced) sizes, and when it applies.

A section function takes the `Context` and returns a `Built` (JSON-safe data, figures,
findings, optional extra HTML tables), or raises `Omitted(reason)` when it does not apply
to the run. `build_report` times each, catches failures and turns them into "section failed".
The model card, the evaluation and the ablation are the report's own; every other section is
an analysis from `analyses.registry.ANALYSES`, run with its typed config from `ReportSizes`.

Sizes are chosen so the whole report of `checkpoints/small-add` takes well under three
minutes on two CPU cores; `ReportSizes.quick()` is smaller still, for tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from abacus_interp.core.model_base import ArithmeticModel
from abacus_interp.errors import MissingPathError
from abacus_interp.jsonsafe import from_json, json_safe, to_json
from analyses.contract import Analysis, RunContext
from analyses.registry import ANALYSES

from . import findings as F
from . import html as H
from .result import Curve, Evaluation, ModelCard


class Omitted(Exception):
    """Raised by a section that does not apply to this run; the message is the reason."""


@dataclass
class ReportSizes:
    """Problem counts and loop ranges: keyword arguments of `evaluate`, and one typed config
    per registered analysis (its `Config()`, the report's default sizes)."""

    evaluation: dict[str, Any] = field(default_factory=lambda: {"n_per_cell": 10, "n_per_set": 64})
    # the largest loop count in accuracy-vs-loops (None: the model's max_loops)
    max_eval_loops: int | None = None
    analyses: dict[str, Any] = field(default_factory=lambda: {a.key: a.Config() for a in ANALYSES})

    @classmethod
    def quick(cls) -> ReportSizes:
        """Tiny sizes for tests: every section runs, in seconds, on a tiny model."""
        return cls(
            evaluation={"n_per_cell": 3, "n_per_set": 16, "grid": (1, 4)},
            max_eval_loops=8,
            analyses={a.key: a.Config.quick() for a in ANALYSES},
        )

    def to_dict(self) -> dict[str, Any]:
        return {"evaluation": dict(self.evaluation), "max_eval_loops": self.max_eval_loops,
                **{key: dataclasses.asdict(config) for key, config in self.analyses.items()}}


@dataclass
class Context:
    run_dir: Path
    config: dict[str, Any]
    model: ArithmeticModel
    task: Any
    compare_dir: Path | None
    sizes: ReportSizes
    seed: int = 0
    ablation_dir: Path | None = None  # written by `abacus-interp ablate`
    architectures_dir: Path | None = None  # written by `abacus-interp compare`
    run: RunContext = field(init=False)  # what the analyses see of the run

    def __post_init__(self) -> None:
        self.run = RunContext(run_dir=self.run_dir, model=self.model, task=self.task,
                              compare_dir=self.compare_dir, seed=self.seed)

    @property
    def is_modular(self) -> bool:
        return self.task.modulus is not None


@dataclass
class Built:
    data: dict[str, Any]  # JSON-safe
    findings: list[str]
    figures: dict[str, go.Figure] = field(default_factory=dict)
    tables: str = ""  # extra HTML, already escaped


@dataclass
class SectionSpec:
    key: str
    title: str
    build: Callable[[Context], Built]


def _notes_html(notes: list[str]) -> str:
    return "".join(f'<p class="note">{H.esc(n)}</p>' for n in notes)


# --------------------------------------------------------------------------- model card


def _series(rows: list[dict], key: str) -> tuple[list[int], list[float | None]]:
    steps, values = [], []
    for r in rows:
        if key in r and "step" in r:
            steps.append(r["step"])
            values.append(r[key])
    return steps, values


def build_model_card(ctx: Context) -> Built:
    from abacus_interp.checkpoints import list_checkpoints, read_metrics, read_run_config
    from abacus_interp.core.summary import parameter_summary
    from analyses.prose import first_step_at

    cfg = ctx.config
    steps = [s for s, _ in list_checkpoints(ctx.run_dir)]
    rows = read_metrics(ctx.run_dir)
    train_rows = [r for r in rows if "loss" in r]
    curves: dict[str, list] = {"step": [r["step"] for r in train_rows]}
    for key in ("loss", "train_exact_match", "lr", "grad_norm"):
        if any(key in r for r in train_rows):
            curves[key] = [r.get(key) for r in train_rows]  # metrics.jsonl rows: a column may skip a step
    eval_keys = sorted({k for r in rows for k in r
                        if (k.endswith("_exact_match") or k.endswith("_accuracy") or k.endswith("_loss"))
                        and k not in ("train_exact_match", "full_depth_loss")})
    eval_curves = {}
    for key in eval_keys:
        s, v = _series(rows, key)
        if s:
            eval_curves[key] = {"step": s, "value": v}
    model_cfg = cfg["model"]  # config.json: the model section is always written
    data: dict[str, Any] = {
        "run_dir": str(ctx.run_dir),
        "preset": cfg.get("preset"),
        "config": {
            "task": cfg.get("task"),
            "model": {k: v for k, v in model_cfg.items() if k != "vocab"},
            "vocab": model_cfg.get("vocab"),
            "train": cfg.get("train"),
        },
        "parameters": parameter_summary(ctx.model),
        "checkpoint_steps": steps,
        "checkpoint": ctx.model.checkpoint_path,
        "training_curves": curves,
        "eval_curves": {k: v for k, v in eval_curves.items() if not k.endswith("_loss")},
        "eval_loss_curves": {k: v for k, v in eval_curves.items() if k.endswith("_loss")},
    }
    # grokking: memorisation (train) vs generalisation (held-out) times
    acc_keys = [k for k in eval_curves if not k.endswith("_loss")]
    test_key = next((k for k in acc_keys if k.startswith("test") or "val" in k), None)
    if ctx.is_modular and test_key and "train_exact_match" in curves:
        # full batch: train_exact_match of every step is the accuracy on the whole training split
        thr = 0.99
        data["grokking"] = {
            "threshold": thr, "train_metric": "train_exact_match", "test_metric": test_key,
            "train_step": first_step_at(curves["step"], curves["train_exact_match"], thr),
            "test_step": first_step_at(eval_curves[test_key]["step"], eval_curves[test_key]["value"], thr),
        }
    if ctx.compare_dir is not None:
        other = read_run_config(ctx.compare_dir)
        data["compare"] = {"run_dir": str(ctx.compare_dir), "config_differences": _config_diff(cfg, other)}
    # typed once: a renamed key fails here instead of dropping a sentence or a table row
    card = from_json(ModelCard, json_safe(data))
    return Built(data=to_json(card), findings=F.model_card(card), figures=_card_figures(card),
                 tables=_card_tables(card))


def _card_figures(card: ModelCard) -> dict[str, go.Figure]:
    figures: dict[str, go.Figure] = {}
    curves = card.training_curves
    if curves["step"]:
        fig = go.Figure()
        if "loss" in curves:
            fig.add_trace(go.Scatter(x=curves["step"], y=curves["loss"], mode="lines", name="training loss"))
        for key, c in card.eval_loss_curves.items():
            fig.add_trace(go.Scatter(x=c.step, y=c.value, mode="lines+markers", name=key))
        fig.update_layout(title="Loss during training", xaxis_title="step", yaxis={"title": "loss", "type": "log"},
                          height=420)
        figures["loss"] = fig
    acc = {**({"train_exact_match": Curve(step=curves["step"], value=curves["train_exact_match"])}
              if "train_exact_match" in curves and "train_exact_match" not in card.eval_curves else {}),
           **card.eval_curves}
    if acc:
        fig = go.Figure()
        for key, c in acc.items():
            fig.add_trace(go.Scatter(x=c.step, y=c.value, mode="lines" if len(c.step) > 60 else "lines+markers",
                                     name=key))
        fig.update_layout(title="Exact match during training", xaxis_title="step",
                          yaxis={"title": "exact match", "range": [-0.02, 1.02]}, height=420)
        figures["exact_match"] = fig
    return figures


def _card_tables(card: ModelCard) -> str:
    params, config, steps = card.parameters, card.config, card.checkpoint_steps
    model_rows = list(config.model.items())
    symbols = (config.vocab or {}).get("symbols")  # config.json's vocabulary, when it lists symbols
    if symbols is not None:
        shown = " ".join(map(str, symbols[:24])) + (" ..." if len(symbols) > 24 else "")
        model_rows.append(("vocab", f"{len(symbols)} symbols: {shown}"))
    total = params.total_parameters
    param_rows = [[name, n, f"{100 * n / max(total, 1):.1f}%"] for name, n in params.parameters.items()]
    param_rows.append(["total", total, "100%"])
    tables = ['<div class="tables">']
    tables.append(H.kv_table([("run", card.run_dir), ("preset", card.preset), ("checkpoint", card.checkpoint),
                              ("task", ", ".join(f"{k}={v}" for k, v in (config.task or {}).items())),
                              ("checkpoints", f"{len(steps)} (steps {', '.join(map(str, steps))})")],
                             caption="Run"))
    tables.append(H.grid_table(["component", "parameters", "share"], param_rows, caption="Parameters by component"))
    tables.append(H.kv_table([
        ("looped block parameters", params.looped_block_parameters),
        ("effective depth (layers)", params.effective_depth),
        ("unrolled-equivalent parameters", params.unrolled_equivalent_parameters),
        (f"forward FLOPs per token (length {params.flops_seq_len})", params.forward_flops_per_token),
    ], caption="Looping"))
    tables.append("</div><div class=\"tables\">")
    tables.append(H.kv_table(model_rows, caption="Model config"))
    tables.append(H.kv_table(list((config.train or {}).items()), caption="Training config"))
    tables.append("</div>")
    if card.compare is not None:
        diff = card.compare.config_differences
        rows_ = [[k, a, b] for k, (a, b) in diff.items()] or [["(none)", "", ""]]
        tables.append(H.grid_table(["setting", "this run", card.compare.run_dir], rows_,
                                   caption="Config differences with the comparison run"))
    return "".join(tables)


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: d}


def _config_diff(a: dict, b: dict) -> dict[str, list]:
    fa, fb = _flatten(a), _flatten(b)
    return {k: [fa.get(k), fb.get(k)] for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)}


# --------------------------------------------------------------------------- evaluation


def report_loops(cfg, cap: int | None = None) -> list[int]:
    """Loop counts for accuracy vs loops: every R up to twice the trained depth, then 3x, 4x
    and max_loops (deep loops cost the most, and the curve is smooth there)."""
    n = cfg.n_loops
    if n == 1 and cfg.input_injection == "none":
        return [1]  # not a looped model: extra passes of the block mean nothing
    top = cfg.max_loops if cap is None else min(cfg.max_loops, cap)
    loops = {*range(1, 2 * n + 1), 3 * n, 4 * n, top}
    return sorted(r for r in loops if 1 <= r <= top)


def build_evaluation(ctx: Context) -> Built:
    from abacus_interp.core.scoring import run_readout
    from abacus_interp.evaluation.suite import evaluate

    cfg = ctx.model.cfg
    kwargs = dict(ctx.sizes.evaluation)
    kwargs.setdefault("loops", report_loops(cfg, ctx.sizes.max_eval_loops))
    digit_range = ctx.task.digit_range
    if digit_range is not None and "max_length" not in kwargs:
        kwargs["max_length"] = 3 * digit_range[1]  # equal-length operands up to 3x the trained length
    if not ctx.task.has_digit_grid:  # score the run the way it was trained (its readout)
        kwargs.update(run_readout(ctx.config.get("train", {}), ctx.task))
    report = evaluate(ctx.model, ctx.task, seed=ctx.seed, progress=False, **kwargs)
    typed = from_json(Evaluation, report.to_dict())  # typed once: a renamed key fails here
    figs = report.figures()
    # the order: the grid and accuracy vs loops first
    order = ["grid", "loops", "splits", "lengths", "carry", "perplexity", "edge_cases"]
    figures = {k: figs[k] for k in order if k in figs}
    figures.update({k: v for k, v in figs.items() if k not in figures})
    tables = ""
    if typed.skipped:
        tables = H.grid_table(["part", "skipped because"], [[k, v] for k, v in typed.skipped.items()],
                              caption="Parts of the evaluation that do not apply")
    tables += _notes_html(list(typed.notes))
    return Built(data=to_json(typed), findings=F.evaluation(typed), figures=figures, tables=tables)


# --------------------------------------------------------------------------- analyses


def analysis_section(analysis: Analysis) -> SectionSpec:
    """The section of a registered analysis: omitted with its reason where it does not
    apply, else its numbers, figures and findings, and its notes (caveats) under them."""

    def build(ctx: Context) -> Built:
        reason = analysis.skip_reason(ctx.run)
        if reason is not None:
            raise Omitted(reason)
        result = analysis.run(ctx.run, ctx.sizes.analyses[analysis.key])
        data = json_safe(result.to_dict())
        # caveats, for the results that carry them (checkpoint_compare, embedding_evolution)
        notes = [n for n in getattr(result, "notes", ()) if isinstance(n, str)]
        return Built(data=data, findings=result.findings(), figures=dict(result.figures()), tables=_notes_html(notes))

    return SectionSpec(analysis.key, analysis.title, build)


def _grid_json(directory: Path | None, name: str, command: str, option: str) -> dict[str, Any]:
    """The `name` JSON that `abacus-interp {command}` wrote into the directory passed as
    `--{option}`; the section is omitted when none was passed."""
    import json

    if directory is None:
        raise Omitted(f"no --{option} given: run `abacus-interp {command} --out DIR` and pass `--{option} DIR`")
    path = directory / name
    if not path.exists():
        raise MissingPathError(f"{path} does not exist; run `abacus-interp {command} --out {directory}` first")
    return json.loads(path.read_text())


def build_ablation(ctx: Context) -> Built:
    from .ablation import ablation_figure

    data = _grid_json(ctx.ablation_dir, "ablation.json", "ablate", "ablation")
    rows = [[c["factor"], c["label"], c.get("params"), c.get("train_seconds"),
             *("-" if e is None else f"{100 * e:.0f}%" for e in c["exact_match"])] for c in data["cells"]]
    table = H.grid_table(["factor", "value", "params", "train s", *map(str, data["cells"][0]["lengths"])], rows,
                         caption=f"Exact match by operand length ({data['spec']['description']})")
    return Built(data=data, figures={"ablation": ablation_figure(data)}, tables=table,
                 findings=list(data["findings"]))


def build_architectures(ctx: Context) -> Built:
    from .architectures.curves import learning_curves_figure
    from .architectures.summary import (
        accuracy_vs_length_figure,
        accuracy_vs_params_figure,
        label,
    )

    data = _grid_json(ctx.architectures_dir, "comparison.json", "compare", "architectures")
    lengths = data["cells"][0]["lengths"]
    cells = [*data["cells"], *data["seeds"]]

    def name(cell: dict[str, Any]) -> str:
        return label(cell) + (f" seed {cell['seed']}" if cell["seed"] else "")

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    rows = [[name(c), f"{c['params']:,}", c["steps"], c["train_seconds"], f"{c['loss']:.3f}", pct(c["exact_match"]),
             *("-" if e is None else f"{100 * e:.0f}" for e in c["exact_match_by_length"])] for c in cells]
    accuracy = H.grid_table(["model", "params", "steps", "train s", "loss", "exact", *map(str, lengths)], rows,
                            caption=f"Held-out exact match overall and by problem length ({data['spec']['length_unit']}), "
                                    f"% ({data['spec']['description']})")
    # a table of its own: beside the one column per length the accuracy table would not fit the page
    compute_rows = [[name(c), f"{c['params']:,}",
                     "-" if c["compute"] is None else f"{c['compute']['layer_applications_per_step']:.1f}",
                     "-" if c["compute"] is None else f"{c['compute']['train_flops_per_token']:.3g}",
                     f"{c['curve'][-1]['train_flops']:.2g}" if c["curve"] else "-",
                     pct(c["exact_match"]), pct(c["exact_match_carry_balanced"])] for c in cells]
    compute = H.grid_table(["model", "params", "layer applications per step", "train FLOPs/token", "train FLOPs",
                            "exact (uniform)", "exact (carry-balanced)"], compute_rows,
                           caption="Training compute (forward and backward, 3x the forward matmul FLOPs) and held-out "
                                   "exact match on the task's own sampler and on carry-balanced problems "
                                   "('-' where the task has no carries)")
    table = accuracy + compute
    figures = {"accuracy_vs_params": accuracy_vs_params_figure(data), "accuracy_vs_length": accuracy_vs_length_figure(data),
               "learning_curves": learning_curves_figure(data)}
    return Built(data=data, figures=figures, tables=table, findings=list(data["findings"]))


SECTIONS: list[SectionSpec] = [
    SectionSpec("model_card", "Model card", build_model_card),
    SectionSpec("evaluation", "Accuracy: grid and loops", build_evaluation),
    *(analysis_section(a) for a in ANALYSES),
    SectionSpec("ablation", "Ablation: what makes it extrapolate", build_ablation),
    SectionSpec("architectures", "Architectures: looped vs GPT vs LSTM vs ReTran", build_architectures),
]

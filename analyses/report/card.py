"""The model card as a registered analysis of the report: the run's config, parameters,
checkpoints and training curves, and (with a comparison run) how the two configs differ."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

# the sibling modules themselves, not `from . import`: the package's __init__ imports this one
import analyses.report.findings as F
import analyses.report.html as H
from abacus_interp.jsonsafe import from_json, json_safe, to_json
from analyses._axes import log_ticks
from analyses.contract import Result, RunContext
from analyses.prose import metric_label

from .result import Built, Curve, ModelCard, NoSizes


def _series(rows: list[dict], key: str) -> tuple[list[int], list[float | None]]:
    steps, values = [], []
    for r in rows:
        if key in r and "step" in r:
            steps.append(r["step"])
            values.append(r[key])
    return steps, values


def build_model_card(ctx: RunContext) -> Built:
    from abacus_interp.checkpoints import list_checkpoints, read_metrics, read_run_config
    from abacus_interp.core.summary import parameter_summary
    from analyses.prose import first_step_at

    cfg = ctx.run_config
    if cfg is None:
        raise ValueError("the model card reads the run's config.json: build the RunContext with run_config")
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
        "warm_start": (cfg.get("train") or {}).get("init_from"),  # config.json of any age or writer
        "averaged_from": (cfg.get("train") or {}).get("average_from"),
    }
    # grokking: memorisation (train) vs generalisation (held-out) times
    acc_keys = [k for k in eval_curves if not k.endswith("_loss")]
    test_key = next((k for k in acc_keys if k.startswith("test") or "val" in k), None)
    if ctx.task.modulus is not None and test_key and "train_exact_match" in curves:
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
    return Built(data=to_json(card), sentences=F.model_card(card), plots=_card_figures(card),
                 tables=_card_tables(card))


def _card_figures(card: ModelCard) -> dict[str, go.Figure]:
    figures: dict[str, go.Figure] = {}
    curves = card.training_curves
    if curves["step"]:
        fig = go.Figure()
        if "loss" in curves:
            fig.add_trace(go.Scatter(x=curves["step"], y=curves["loss"], mode="lines", name="training loss"))
        for key, c in card.eval_loss_curves.items():
            fig.add_trace(go.Scatter(x=c.step, y=c.value, mode="lines+markers", name=metric_label(key)))
        losses = [*(curves.get("loss") or []), *(v for c in card.eval_loss_curves.values() for v in c.value)]
        fig.update_layout(title="Loss during training", xaxis_title="step", height=420)
        fig.update_yaxes(title_text="loss", **log_ticks(losses))
        figures["loss"] = fig
    acc = {**({"train_exact_match": Curve(step=curves["step"], value=curves["train_exact_match"])}
              if "train_exact_match" in curves and "train_exact_match" not in card.eval_curves else {}),
           **card.eval_curves}
    if acc:
        fig = go.Figure()
        for key, c in acc.items():
            fig.add_trace(go.Scatter(x=c.step, y=c.value, mode="lines" if len(c.step) > 60 else "lines+markers",
                                     name=metric_label(key)))
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



class ModelCardAnalysis:
    key = "model_card"
    title = "Model card"
    Config = NoSizes
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        return None  # every run has one

    def run(self, run: RunContext, config: NoSizes, needs: Mapping[str, Result]) -> Built:
        return build_model_card(run)


ANALYSIS = ModelCardAnalysis()

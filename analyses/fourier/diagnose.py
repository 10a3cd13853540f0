"""Why did a modular-addition run not grok? Compare its config and curves with the
known-good recipe (the `grok-mod113-fast` preset, which groks in minutes on two CPU cores,
a minimal change of Nanda et al.'s setup that `grok-mod113` reproduces) and say what differs
and what to change.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from abacus_interp.checkpoints import read_metrics, read_run_config
from abacus_interp.errors import UserError

from .progress import MetricRow, detect_phases, metric_rows, or_nan

if TYPE_CHECKING:
    from abacus_interp.training import RunConfig

# What each ingredient does, in one clause, for the sentences.
WHY = {
    "weight_decay": "weight decay is what makes the memorising solution costly and drives the switch to the "
                    "Fourier circuit",
    "batch_size": "full-batch AdamW gives the smooth, noise-free descent of the known-good recipe "
                  "(minibatch noise changes the timescale and can hide the phases)",
    "train_fraction": "with too little data memorisation is cheap and grokking takes far longer (or never comes); "
                      "with too much there is no memorisation plateau to see",
    "loss_positions": "the loss must be on the answer token only, or the easy prompt tokens dominate the gradient",
    "loss_dtype": "in float32 the tiny late-training losses underflow and training stalls or spikes "
                  "(Nanda et al. compute the loss in float64)",
    "lr": "the learning rate sets how fast weight decay acts (decay per step is lr * weight_decay)",
    "betas": "beta2 = 0.98 keeps Adam's step size responsive to the shrinking gradients late in training",
    "norm": "the known-good model has no LayerNorm; normalisation changes how weight decay acts",
    "activation": "the Fourier circuit of Nanda et al. is built from ReLU neurons",
    "grad_clip": "clipping caps the updates the recipe relies on",
    "schedule": "a decaying learning rate also decays the effective weight decay (lr * wd) and can stop grokking "
                "half-way",
}


# Steps the known-good recipe needed to reach 100% test accuracy (checkpoints/grok-mod113-fast).
KNOWN_GOOD_STEPS = 1100

# How the sentences print a null that means something.
NULL_MEANS = {"train.batch_size": "null (full batch)", "train.grad_clip": "null (no clipping)"}


@dataclass(frozen=True)
class RunRecipe:
    """The settings of a run that the diagnosis compares, read from its config.json (or a
    dict of the same shape) by `recipe_of`, the one place that reads those keys.

    Each default is what the diagnosis takes an absent key to mean, stated once here: no
    schedule key, a constant learning rate; no norm or activation, none and ReLU; no weight
    decay, none (a null too); no loss_positions or loss_dtype, "answer" and float32; no
    grad_clip, no clipping. These are not TrainConfig's defaults (cosine, 0.01, clipping at 1.0),
    so `RunConfig.from_dict`, which fills today's defaults, needs every section and rejects
    fields it does not know, would misread configs written before a field existed and refuse
    partial ones. None where the config does not say (no finding is made from it): lr,
    train_fraction, betas, steps."""

    weight_decay: float = 0.0
    # batch_size as written (None also when absent); full_batch only when the config says null:
    # a config that does not say trained on minibatches, the known-good recipe on full batches.
    batch_size: int | None = None
    full_batch: bool = False
    train_fraction: float | None = None
    loss_positions: str = "answer"
    loss_dtype: str = "float32"
    lr: float | None = None
    schedule: str = "constant"
    grad_clip: float | None = None
    betas: tuple[float, float] | None = None
    norm: str = "none"
    activation: str = "relu"
    steps: int | None = None


_TRAIN_KEYS = ("weight_decay", "batch_size", "loss_positions", "loss_dtype", "lr", "schedule", "grad_clip",
               "betas", "steps")


def recipe_of(config: dict[str, Any]) -> RunRecipe:
    """A run config dict (config.json's shape: task, model, train sections, any of them
    missing) as the typed `RunRecipe`; absent keys take its defaults."""
    sections = {s: config[s] if s in config else {} for s in ("train", "task", "model")}
    given = {k: sections["train"][k] for k in _TRAIN_KEYS if k in sections["train"]}
    given |= {k: sections["model"][k] for k in ("norm", "activation") if k in sections["model"]}
    if "train_fraction" in sections["task"]:
        given["train_fraction"] = sections["task"]["train_fraction"]
    if "betas" in given:
        given["betas"] = tuple(given["betas"])
    if "weight_decay" in given:
        given["weight_decay"] = given["weight_decay"] or 0.0  # a null weight decay is none
    given["full_batch"] = "batch_size" in given and given["batch_size"] is None
    return RunRecipe(**given)


def _good_rate() -> float:
    t = known_good().train
    return t.lr * t.weight_decay


def expected_steps(recipe: RunRecipe) -> float | None:
    """Grokking is driven by weight decay, whose per-step shrink factor is lr * weight_decay:
    scale the known-good recipe's step count by the ratio of rates (a rough guide)."""
    rate = (recipe.lr or 0) * recipe.weight_decay
    return None if rate <= 0 else KNOWN_GOOD_STEPS * _good_rate() / rate


@dataclass
class Diagnosis:
    differences: list[dict[str, Any]] = field(default_factory=list)
    curve_findings: list[str] = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    grokked: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"differences": self.differences, "curve_findings": self.curve_findings,
                "sentences": self.sentences, "grokked": self.grokked}


def known_good() -> RunConfig:
    from abacus_interp.training.presets import grok_mod113_fast

    return grok_mod113_fast()


def _fmt(v, key: str = "") -> str:
    if v is None:
        return NULL_MEANS[key] if key in NULL_MEANS else "null"
    return json.dumps(list(v), separators=(",", ":")) if isinstance(v, (tuple, list)) else str(v)


def compare_config(config: dict[str, Any], good: RunConfig | None = None) -> list[dict[str, Any]]:
    """Config entries that differ from the known-good recipe in a way that matters."""
    good = good or known_good()
    r, gtr = recipe_of(config), good.train
    diffs = []

    def add(section, name, value, target, severity):
        diffs.append({"key": f"{section}.{name}", "value": value, "known_good": target, "severity": severity,
                      "why": WHY[name], "set": f"{section}.{name}={'null' if target is None else _fmt(target)}"})

    if r.weight_decay < 0.5 * gtr.weight_decay:
        add("train", "weight_decay", r.weight_decay, gtr.weight_decay, "critical" if r.weight_decay == 0 else "major")
    if not r.full_batch:
        add("train", "batch_size", r.batch_size, None, "major")
    frac = r.train_fraction
    if frac is not None and not (0.25 <= frac <= 0.7):
        add("task", "train_fraction", frac, good.task_kwargs["train_fraction"], "major" if frac < 0.25 else "minor")
    if r.loss_positions not in ("answer", "answer_tokens"):
        add("train", "loss_positions", r.loss_positions, "answer", "major")
    if r.loss_dtype != "float64":
        add("train", "loss_dtype", r.loss_dtype, "float64", "minor")
    if r.lr is not None and not (gtr.lr / 5 <= r.lr <= gtr.lr * 3):
        add("train", "lr", r.lr, gtr.lr, "major" if r.lr < gtr.lr / 5 else "minor")
    if r.schedule != "constant":
        add("train", "schedule", r.schedule, "constant", "minor")
    if r.grad_clip is not None:
        add("train", "grad_clip", r.grad_clip, None, "minor")
    if r.betas is not None and abs(r.betas[1] - gtr.betas[1]) > 0.015:
        add("train", "betas", list(r.betas), list(gtr.betas), "minor")
    if r.norm != "none":
        add("model", "norm", r.norm, "none", "minor")
    if r.activation != "relu":
        add("model", "activation", r.activation, "relu", "minor")
    return diffs


def curve_findings(rows: list[MetricRow], recipe: RunRecipe) -> tuple[list[str], bool | None]:
    """Sentences about the logged curves: did it memorise, generalise, diverge, run long enough."""
    out: list[str] = []
    evals = [r for r in rows if r.test_exact_match is not None]
    if not rows:
        return ["The run has no metrics.jsonl rows; nothing to say about its curves."], None
    if any(r.loss is None or not math.isfinite(r.loss) for r in rows):
        out.append("The training loss became non-finite; use train.loss_dtype=float64 and a lower train.lr.")
    last = rows[-1]
    steps = last.step if recipe.steps is None else recipe.steps
    if not evals:
        out.append("No held-out evaluation was logged, so grokking cannot be judged; lower train.eval_every.")
        return out, None
    ph = detect_phases([r.step for r in evals], [or_nan(r.train_exact_match) for r in evals],
                       [r.test_exact_match for r in evals], [or_nan(r.test_loss) for r in evals])
    final_train = or_nan(evals[-1].train_exact_match)
    final_test = evals[-1].test_exact_match
    if ph["memorisation_end"] is None:
        out.append(f"The model never memorised its training set (final train accuracy {final_train:.1%} after "
                   f"{last.step:,} steps): the run is too short, the learning rate too low, or training is unstable.")
    elif not ph["grokked"]:
        out.append(f"The model memorised by step {ph['memorisation_end']:,} but test accuracy is still "
                   f"{final_test:.1%} at step {last.step:,}: it is stuck in (or still in) the memorisation phase.")
        if last.step < steps:
            out.append(f"The run stopped at step {last.step:,} of {steps:,}; let it finish before judging.")
    else:
        out.append(f"The run did grok: memorised by step {ph['memorisation_end']:,}, test accuracy >= 99% "
                   f"after a plateau of {ph['plateau']:,} steps.")
    return out, ph["grokked"]


def diagnose(run_dir: str | Path | None = None, config: dict[str, Any] | None = None,
             metrics: list[dict[str, Any]] | None = None) -> Diagnosis:
    """Compare a run (its config.json and metrics.jsonl, or the dicts themselves) with the
    known-good recipe; `Diagnosis.sentences` say what differs and what to change."""
    if run_dir is not None:
        config = config or read_run_config(run_dir)
        metrics = metrics if metrics is not None else read_metrics(run_dir)
    if config is None:
        raise UserError("diagnose needs a run directory or a config dict")
    diffs = compare_config(config)
    recipe = recipe_of(config)
    rows = metric_rows(metrics or [])
    curves, grokked = curve_findings(rows, recipe)
    sentences = list(curves)
    rank = {"critical": 0, "major": 1, "minor": 2}
    for d in sorted(diffs, key=lambda d: rank[d["severity"]]):
        sentences.append(f"{d['key']} is {_fmt(d['value'], d['key'])} where the known-good recipe uses "
                         f"{_fmt(d['known_good'], d['key'])} ({d['severity']}): {d['why']}. Change: --set {d['set']}.")
    budget = expected_steps(recipe)
    ran = max((r.step for r in rows), default=0)
    if grokked is False and budget is not None and ran < budget:
        # a budget means lr * weight_decay > 0, so the config gives lr
        sentences.append(f"At lr * weight_decay = {recipe.lr * recipe.weight_decay:.2g} "
                         f"expect grokking after roughly {budget:,.0f} steps (the known-good recipe needs "
                         f"~{KNOWN_GOOD_STEPS:,} at {_good_rate():.2g}); this run has {ran:,}: raise train.steps.")
    if not diffs and grokked is False:
        sentences.append("The config matches the known-good recipe; train longer (raise train.steps), or try "
                         "another seed, since grokking time varies between seeds.")
    if not diffs and grokked:
        sentences.append("The config matches the known-good recipe.")
    return Diagnosis(differences=diffs, curve_findings=curves, sentences=sentences, grokked=grokked)

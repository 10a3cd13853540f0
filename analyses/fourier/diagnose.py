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
from typing import Any

from abacus_interp.checkpoints import read_metrics, read_run_config
from abacus_interp.errors import UserError

from .progress import detect_phases

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


def _good_rate() -> float:
    t = known_good()["train"]
    return t["lr"] * t["weight_decay"]


def expected_steps(config: dict[str, Any]) -> float | None:
    """Grokking is driven by weight decay, whose per-step shrink factor is lr * weight_decay:
    scale the known-good recipe's step count by the ratio of rates (a rough guide)."""
    t = config.get("train", {})
    rate = (t.get("lr") or 0) * (t.get("weight_decay") or 0)
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


def known_good() -> dict[str, Any]:
    from abacus_interp.training.presets import grok_mod113_fast

    return grok_mod113_fast().to_dict()


def _fmt(v, key: str = "") -> str:
    if v is None:
        return {"train.batch_size": "null (full batch)", "train.grad_clip": "null (no clipping)"}.get(key, "null")
    return json.dumps(list(v), separators=(",", ":")) if isinstance(v, (tuple, list)) else str(v)


def compare_config(config: dict[str, Any], good: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Config entries that differ from the known-good recipe in a way that matters."""
    good = good or known_good()
    tr, gtr = config.get("train", {}), good["train"]
    task, gtask = config.get("task", {}), good["task"]
    model = config.get("model", {})
    diffs = []

    def add(section, name, value, target, severity):
        diffs.append({"key": f"{section}.{name}", "value": value, "known_good": target, "severity": severity,
                      "why": WHY.get(name, ""), "set": f"{section}.{name}={'null' if target is None else _fmt(target)}"})

    wd = tr.get("weight_decay", 0.0) or 0.0
    if wd < 0.5 * gtr["weight_decay"]:
        add("train", "weight_decay", wd, gtr["weight_decay"], "critical" if wd == 0 else "major")
    if tr.get("batch_size", "missing") is not None:
        add("train", "batch_size", tr.get("batch_size"), None, "major")
    frac = task.get("train_fraction")
    if frac is not None and not (0.25 <= frac <= 0.7):
        add("task", "train_fraction", frac, gtask["train_fraction"], "major" if frac < 0.25 else "minor")
    if tr.get("loss_positions", "answer") not in ("answer", "answer_tokens"):
        add("train", "loss_positions", tr.get("loss_positions"), "answer", "major")
    if tr.get("loss_dtype", "float32") != "float64":
        add("train", "loss_dtype", tr.get("loss_dtype", "float32"), "float64", "minor")
    lr = tr.get("lr")
    if lr is not None and not (gtr["lr"] / 5 <= lr <= gtr["lr"] * 3):
        add("train", "lr", lr, gtr["lr"], "major" if lr < gtr["lr"] / 5 else "minor")
    if tr.get("schedule", "constant") != "constant":
        add("train", "schedule", tr.get("schedule"), "constant", "minor")
    if tr.get("grad_clip") is not None:
        add("train", "grad_clip", tr.get("grad_clip"), None, "minor")
    betas = tuple(tr.get("betas", gtr["betas"]))
    if abs(betas[1] - gtr["betas"][1]) > 0.015:
        add("train", "betas", list(betas), list(gtr["betas"]), "minor")
    if model.get("norm", "none") != "none":
        add("model", "norm", model.get("norm"), "none", "minor")
    if model.get("activation", "relu") != "relu":
        add("model", "activation", model.get("activation"), "relu", "minor")
    return diffs


def curve_findings(rows: list[dict[str, Any]], config: dict[str, Any]) -> tuple[list[str], bool | None]:
    """Sentences about the logged curves: did it memorise, generalise, diverge, run long enough."""
    out: list[str] = []
    evals = [r for r in rows if r.get("test_exact_match") is not None]
    if not rows:
        return ["The run has no metrics.jsonl rows; nothing to say about its curves."], None
    losses = [r.get("loss") for r in rows]
    if any(v is None or not math.isfinite(v) for v in losses):
        out.append("The training loss became non-finite; use train.loss_dtype=float64 and a lower train.lr.")
    last = rows[-1]
    steps = config.get("train", {}).get("steps", last["step"])
    if not evals:
        out.append("No held-out evaluation was logged, so grokking cannot be judged; lower train.eval_every.")
        return out, None
    ph = detect_phases([r["step"] for r in evals], [r.get("train_exact_match", math.nan) for r in evals],
                       [r["test_exact_match"] for r in evals], [r.get("test_loss", math.nan) for r in evals])
    final_train = evals[-1].get("train_exact_match", math.nan)
    final_test = evals[-1]["test_exact_match"]
    if ph["memorisation_end"] is None:
        out.append(f"The model never memorised its training set (final train accuracy {final_train:.1%} after "
                   f"{last['step']:,} steps): the run is too short, the learning rate too low, or training is unstable.")
    elif not ph["grokked"]:
        out.append(f"The model memorised by step {ph['memorisation_end']:,} but test accuracy is still "
                   f"{final_test:.1%} at step {last['step']:,}: it is stuck in (or still in) the memorisation phase.")
        if last["step"] < steps:
            out.append(f"The run stopped at step {last['step']:,} of {steps:,}; let it finish before judging.")
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
    curves, grokked = curve_findings(metrics or [], config)
    sentences = list(curves)
    rank = {"critical": 0, "major": 1, "minor": 2}
    for d in sorted(diffs, key=lambda d: rank[d["severity"]]):
        sentences.append(f"{d['key']} is {_fmt(d['value'], d['key'])} where the known-good recipe uses "
                         f"{_fmt(d['known_good'], d['key'])} ({d['severity']}): {d['why']}. Change: --set {d['set']}.")
    budget = expected_steps(config)
    ran = max((r["step"] for r in metrics or []), default=0)
    if grokked is False and budget is not None and ran < budget:
        sentences.append(f"At lr * weight_decay = {config['train']['lr'] * config['train']['weight_decay']:.2g} "
                         f"expect grokking after roughly {budget:,.0f} steps (the known-good recipe needs "
                         f"~{KNOWN_GOOD_STEPS:,} at {_good_rate():.2g}); this run has {ran:,}: raise train.steps.")
    if not diffs and grokked is False:
        sentences.append("The config matches the known-good recipe; train longer (raise train.steps), or try "
                         "another seed, since grokking time varies between seeds.")
    if not diffs and grokked:
        sentences.append("The config matches the known-good recipe.")
    return Diagnosis(differences=diffs, curve_findings=curves, sentences=sentences, grokked=grokked)

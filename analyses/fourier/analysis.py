"""`run(model_or_run, ...)`: the Fourier analysis of a modular-addition model (and its run),
or the base-10 view of an addition model's digit embeddings."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from abacus_interp.checkpoints import list_checkpoints, load_tensors, subsample_evenly
from abacus_interp.core.hooks import hook_name
from abacus_interp.errors import UserError
from abacus_interp.jsonsafe import from_json

from ..common import resolve
from ..contract import configure
from .basis import (
    base10_power,
    component_norms,
    frequency_norms,
    frequency_shares,
    key_frequencies,
)
from .circuit import (
    distance_irrelevance,
    frequency_ablation,
    gradient_symmetricity,
    grid_forward,
    logit_fit,
    neuron_summary,
    pair_index,
    restricted_and_excluded,
)
from .config import FourierConfig
from .diagnose import diagnose
from .paper import PAPER, applies
from .progress import (
    curves_for_phases,
    embed_residues,
    half_fall_step,
    neuron_logit_map,
    phases_from,
    progress_measures,
)
from .result import Base10Summary, FourierResult, ModularSummary
from .summary import details

ZHONG_SYMMETRICITY, ZHONG_IRRELEVANCE = 0.98, 0.6  # the dividing lines of Zhong et al.'s Fig. 6


def _hook_names(model) -> list[tuple[int, int, str]]:
    cfg = model.cfg
    return [(t, layer, hook_name("mlp.hook_post", loop=t, layer=layer)) for t in range(cfg.n_loops)
            for layer in range(cfg.n_layers)]


def _embedding_section(model, task, threshold: float, key_source: str) -> dict:
    p = task.modulus
    w_e = embed_residues(model, task.vocab, p)
    norms, const = frequency_norms(w_e)
    w_l = neuron_logit_map(model, task.vocab, p)
    l_norms, _ = frequency_norms(w_l)
    from_embed = key_frequencies(norms, threshold, is_norms=True)
    from_logit = key_frequencies(l_norms, threshold, is_norms=True)
    if key_source == "embed":
        key = from_embed
    elif key_source == "neuron_logit":
        key = from_logit
    else:  # sparse in both W_E and W_out W_U (Nanda et al.); W_E alone if they share none
        key = [k for k in from_embed if k in from_logit] or from_embed
    return {
        "p": p,
        "key_threshold": threshold,
        "key_source": key_source,
        "key_frequencies": key,
        "embed_key_frequencies": from_embed,
        "embed_component_norms": component_norms(w_e).tolist(),
        "embed_frequency_norms": norms.tolist(),
        "embed_frequency_shares": frequency_shares(norms).tolist(),
        "embed_constant_norm": const,
        "neuron_logit_frequency_norms": l_norms.tolist(),
        "neuron_logit_frequency_shares": frequency_shares(l_norms).tolist(),
        "neuron_logit_key_frequencies": from_logit,
    }


def _fall_by(series: dict, start: int | None, end: int | None) -> dict:
    """How far restricted and test loss fell over circuit formation (checkpoints nearest the
    phase boundaries): the restricted loss should fall while the test loss stays high."""
    if start is None or end is None:
        return {}
    steps = series["step"]
    i0 = min(range(len(steps)), key=lambda i: abs(steps[i] - start))
    i1 = min(range(len(steps)), key=lambda i: abs(steps[i] - end))
    if i1 <= i0:
        return {}
    ratio = {k: series[k][i0] / max(series[k][i1], 1e-300) for k in ("restricted_loss", "test_loss")}
    return {"circuit_formation_steps": [steps[i0], steps[i1]], "restricted_fall_factor": ratio["restricted_loss"],
            "test_fall_factor": ratio["test_loss"]}


def _loss_course(series: dict, start: int | None) -> dict:
    """Where the restricted loss peaked after memorisation (`start`) and how far below that
    peak it ended, on a linear scale (peak / final); the excluded loss at the same two
    checkpoints. Both on the training pairs."""
    steps = series["step"]
    idx = [i for i, s in enumerate(steps) if start is None or s >= start]
    if len(idx) < 2:
        return {}
    r, e = series["restricted_loss"], series["excluded_loss"]
    i_peak = max(idx, key=lambda i: r[i])
    i_min = min((i for i in idx if i >= i_peak), key=lambda i: r[i])
    return {
        "restricted_peak": r[i_peak], "restricted_peak_step": steps[i_peak],
        "restricted_min": r[i_min], "restricted_min_step": steps[i_min],
        "restricted_final": r[-1], "final_step": steps[-1],
        "restricted_peak_over_final": r[i_peak] / max(r[-1], 1e-300),
        "excluded_at_peak": e[i_peak], "excluded_final": e[-1],
    }


def _typed(cls: type, data: dict[str, Any], arrays: dict[str, Any]) -> FourierResult:
    """Type the sections once (from_json refuses unknown and missing keys), then write the
    details from the typed summary."""
    summary = from_json(cls, data)
    return FourierResult(summary=dataclasses.replace(summary, details=tuple(details(summary))), arrays=arrays)


def _modular(subject, cfg: FourierConfig, progress: bool) -> FourierResult:
    model, task, run_dir = subject.model, subject.task, subject.run_dir
    p = task.p
    data: dict[str, Any] = {"kind": "modular", "task": {"name": task.name, "p": p,
                                                         "train_fraction": task.train_fraction}}
    data.update(_embedding_section(model, task, cfg.key_threshold, cfg.key_source))
    key = data["key_frequencies"]
    hooks = _hook_names(model)
    logits, acts = grid_forward(model, task.vocab, p, [name for *_, name in hooks])
    arrays: dict[str, Any] = {}
    per_loop = []
    for t, layer, name in hooks:
        summary = neuron_summary(acts[name], p, cfg.neuron_threshold)
        arrays[f"neuron_coefficients/{t}/{layer}"] = summary.pop("mean_abs_coefficients")
        per_loop.append({"loop": t, "layer": layer, "hook": name, **summary})
    data["neurons"] = per_loop[-1]
    data["neurons_per_loop"] = [
        {k: v for k, v in s.items() if k in ("loop", "layer", "hook", "n_single_frequency", "share_single_frequency",
                                              "cluster_sizes", "n_dead")} for s in per_loop
    ] if len(per_loop) > 1 else []
    data["logit_fit"] = logit_fit(logits, p, key)
    train_pairs, _ = task.split()
    data["final_losses"] = restricted_and_excluded(logits, p, key, pair_index(train_pairs, p))
    data["frequency_ablation"] = frequency_ablation(logits, p, key, pair_index(train_pairs, p))
    irrelevance = distance_irrelevance(logits, p)
    arrays["correct_logit_table"] = irrelevance.pop("correct_logit_table")
    sym = gradient_symmetricity(model, task.vocab, p, cfg.n_symmetricity, cfg.seed)
    q = irrelevance["distance_irrelevance"]
    kind = ("pizza" if sym >= ZHONG_SYMMETRICITY and q < ZHONG_IRRELEVANCE else
            "clock" if sym < ZHONG_SYMMETRICITY and q >= ZHONG_IRRELEVANCE else "mixed")
    data["clock_pizza"] = {"gradient_symmetricity": sym, "distance_irrelevance": q, "n_samples": cfg.n_symmetricity,
                           "verdict": kind, "thresholds": {"symmetricity": ZHONG_SYMMETRICITY,
                                                           "irrelevance": ZHONG_IRRELEVANCE}}
    data["progress"] = None
    data["phases"] = None
    if run_dir is not None and cfg.over_checkpoints:
        n_ckpt = len(list_checkpoints(run_dir))
        series = (progress_measures(run_dir, task, key, cfg.max_checkpoints, cfg.key_threshold, progress)
                  if n_ckpt >= 2 else None)
        data["progress"] = series
        data["phases"] = phases_from(curves_for_phases(run_dir, series))
        if series is not None:
            start = data["phases"]["memorisation_end"]
            r_half = half_fall_step(series["step"], series["restricted_loss"], start)
            t_half = half_fall_step(series["step"], series["test_loss"], start)
            data["restricted_vs_test"] = {
                "restricted_half_fall_step": r_half, "test_half_fall_step": t_half,
                "restricted_falls_first": None if r_half is None or t_half is None else r_half < t_half,
                **_fall_by(series, start, data["phases"]["circuit_formation_end"]),
                **_loss_course(series, start),
            }
        data["diagnosis"] = diagnose(run_dir).to_dict()
    data["paper"] = PAPER if applies(p) else None
    return _typed(ModularSummary, data, arrays)


def _base10(subject, max_checkpoints: int | None) -> FourierResult:
    model, task, run_dir = subject.model, subject.task, subject.run_dir
    digit_ids = torch.tensor(task.vocab.digit_ids, dtype=torch.long)
    if len(digit_ids) != 10:
        raise UserError(f"the base-10 view needs the digit tokens 0..9; task {task.name!r} has {len(digit_ids)}")
    data: dict[str, Any] = {"kind": "base10", "task": {"name": task.name}}
    data["base10"] = base10_power(model.W_E.detach()[digit_ids.to(model.W_E.device)].double().cpu())
    series = None
    if run_dir is not None:
        rows = []
        for step, path in subsample_evenly(list_checkpoints(run_dir), max_checkpoints):
            w_e = load_tensors(path)["W_E"][digit_ids].double()
            view = base10_power(w_e)
            rows.append({"step": step, **view["period_shares"], "share_10_5_2": view["share_10_5_2"]})
        if rows:
            series = {k: [r[k] for r in rows] for k in rows[0]}
    data["base10_series"] = series
    data["phases"] = None
    return _typed(Base10Summary, data, {})


def run(model_or_run, task=None, *, config: FourierConfig | None = None, progress: bool = True,
        **overrides) -> FourierResult:
    """Fourier analysis of a model or run directory: its latest checkpoint, plus the progress
    measures over `max_checkpoints` evenly spaced checkpoints (`progress` is the tqdm bar).

    Modular addition: W_E Fourier norms and key frequencies (a frequency is key when it holds
    >= `key_threshold` of the non-constant squared Fourier norm of W_E and of the neuron-logit
    map W_out W_U, or of one, `key_source`), neurons at '=' in the 2D Fourier basis (per
    loop), the logit fit to cos(w_k(a+b-c)), restricted / excluded loss (training pairs), Gini
    coefficients, weight norm, phases, clock-vs-pizza metrics and a grokking diagnosis. Digit
    tasks (addition): the base-10 Fourier view (periods 10, 5, 2) of the digit embeddings, over
    the checkpoints too.

    config: every setting (`FourierConfig`, whose field comments say what each does); default
        `FourierConfig()`, the report's, so this computes its numbers.
    overrides: fields of the config by name, e.g. `max_checkpoints=None` for every checkpoint.
    """
    cfg = configure(FourierConfig, config, overrides, "fourier.run()")
    subject = resolve(model_or_run, task)
    if subject.task.modulus is not None:
        return _modular(subject, cfg, progress)
    return _base10(subject, cfg.max_checkpoints)

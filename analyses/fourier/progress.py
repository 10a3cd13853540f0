"""Progress measures over a run's checkpoint series (Nanda et al. 2023) and the three phases
of grokking detected from them.

Per checkpoint: train / test answer loss and accuracy, restricted loss (key-frequency
components of the logits plus their mean) and excluded loss (key components removed), both
on the training pairs as in the paper, the Gini coefficient of the Fourier-component norms of W_E and of the
neuron-logit map W_out @ W_U, the total sum of squared weights and the share of the last
layer's MLP neurons that are single-frequency. The key frequencies are those of the *final*
checkpoint, as in the paper. `cleanup_check` reads the last two of those as the end of cleanup.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from abacus_interp.checkpoints import (
    list_checkpoints,
    load_tensors,
    read_metrics,
    read_run_config,
    subsample_evenly,
)
from abacus_interp.core.config import ModelConfig
from abacus_interp.core.families import build_model
from abacus_interp.core.hooks import hook_name
from abacus_interp.errors import UserError

from .basis import KEY_THRESHOLD, component_norms, gini, key_frequencies
from .circuit import (
    accuracy,
    answer_loss,
    grid_forward,
    grid_labels,
    neuron_summary,
    pair_index,
    residue_ids,
    restricted_and_excluded,
)

PHASES = ("memorisation", "circuit_formation", "cleanup")


def embed_residues(model, vocab, p: int) -> torch.Tensor:
    """W_E rows of the residue tokens, [p d_model]."""
    return model.W_E.detach()[residue_ids(vocab, p).to(model.W_E.device)].double().cpu()


def neuron_logit_map(model, vocab, p: int) -> torch.Tensor:
    """W_L = W_out @ W_U restricted to the residue outputs, transposed to [p d_mlp] (last layer)."""
    w_out = model.blocks[-1].mlp.W_out.detach().double()  # [d_mlp d_model]
    w_u = model.W_U_effective.detach().double()[:, residue_ids(vocab, p).to(w_out.device)]  # [d_model p]
    return (w_out @ w_u).T.cpu()


def checkpoint_measures(model, vocab, p: int, key: list[int], train_index: torch.Tensor, test_index: torch.Tensor) -> dict:
    cfg = model.cfg
    mlp = hook_name("mlp.hook_post", loop=cfg.n_loops - 1, layer=cfg.n_layers - 1)  # the last layer's neurons
    logits, acts = grid_forward(model, vocab, p, [mlp])
    labels = grid_labels(p)
    row = restricted_and_excluded(logits, p, key, train_index)
    row.update(
        train_loss=answer_loss(logits[train_index], labels[train_index]),
        test_loss=answer_loss(logits[test_index], labels[test_index]) if len(test_index) else math.nan,
        train_accuracy=accuracy(logits[train_index], labels[train_index]),
        test_accuracy=accuracy(logits[test_index], labels[test_index]) if len(test_index) else math.nan,
        gini_embed=gini(component_norms(embed_residues(model, vocab, p))),
        gini_neuron_logit=gini(component_norms(neuron_logit_map(model, vocab, p))),
        sum_sq_weights=float(sum(param.detach().double().pow(2).sum() for param in model.parameters())),
        single_frequency_share=neuron_summary(acts[mlp], p)["share_single_frequency"],
    )
    return row


@dataclass(frozen=True)
class CleanupCheck:
    """Whether cleanup is over at the last checkpoint: the single-frequency share and the sum
    of squared weights both flat (changed by less than SHARE_FLAT points and WEIGHTS_FLAT
    relative) over the last CLEANUP_WINDOW steps. Weight decay keeps shrinking the weights
    the generalising circuit does not need until cleanup ends, so both still move during it."""

    from_step: int
    to_step: int
    share_from: float
    share_to: float
    weights_from: float
    weights_to: float

    @property
    def over(self) -> bool:
        return (abs(self.share_to - self.share_from) < SHARE_FLAT
                and abs(self.weights_to - self.weights_from) < WEIGHTS_FLAT * self.weights_from)


CLEANUP_WINDOW = 2000  # steps
SHARE_FLAT = 0.01  # one percentage point of the neurons
WEIGHTS_FLAT = 0.01  # 1% of the sum of squared weights


def cleanup_check(series) -> CleanupCheck | None:
    """The last checkpoint against the last one at least CLEANUP_WINDOW steps before it (None
    when the series is shorter than that or has no single-frequency share)."""
    steps, share = list(series.step), list(series.single_frequency_share)
    if len(share) != len(steps) or not steps:
        return None
    earlier = [i for i, step in enumerate(steps) if step <= steps[-1] - CLEANUP_WINDOW]
    if not earlier:
        return None
    i = earlier[-1]
    return CleanupCheck(steps[i], steps[-1], share[i], share[-1], series.sum_sq_weights[i], series.sum_sq_weights[-1])


def progress_measures(
    run_dir: str | Path,
    task,
    key: list[int] | None = None,
    max_checkpoints: int | None = None,
    threshold: float = KEY_THRESHOLD,
    progress: bool = True,
) -> dict:
    """The measures at every (or `max_checkpoints` evenly spaced) checkpoint, as lists."""
    run_dir = Path(run_dir)
    cfg = ModelConfig.from_dict(read_run_config(run_dir)["model"])
    model = build_model(cfg).eval()
    ckpts = subsample_evenly(list_checkpoints(run_dir), max_checkpoints)
    if not ckpts:
        raise UserError(f"{run_dir} has no checkpoints; train it first")
    p, vocab = task.p, task.vocab
    train_pairs, test_pairs = task.split()
    train_index, test_index = pair_index(train_pairs, p), pair_index(test_pairs, p)
    if key is None:
        model.load_state_dict(load_tensors(ckpts[-1][1]), strict=False)
        key = key_frequencies(embed_residues(model, vocab, p), threshold)
    rows = []
    for step, path in tqdm(ckpts, desc="progress measures", disable=not progress):
        model.load_state_dict(load_tensors(path), strict=False)
        rows.append({"step": step, **checkpoint_measures(model, vocab, p, key, train_index, test_index)})
    series = {name: [r[name] for r in rows] for name in rows[0]}
    series["key_frequencies"] = list(key)
    return series


# --------------------------------------------------------------------------- phases


def _log(values) -> np.ndarray:
    v = np.asarray([np.nan if x is None else x for x in values], dtype=float)
    return np.log10(np.clip(v, 1e-12, None))


def _first(mask: np.ndarray, start: int = 0) -> int | None:
    idx = np.nonzero(mask[start:])[0]
    return None if len(idx) == 0 else int(idx[0]) + start


def detect_phases(steps, train_acc, test_acc, test_loss, acc_level: float = 0.99, band: float = 0.1) -> dict:
    """Phase boundaries from the curves (rules stated so they can be checked by eye):

    - memorisation ends at the first step with train accuracy >= `acc_level`;
    - circuit formation ends (cleanup starts) at the last step before test accuracy reaches
      `acc_level` at which log10(test loss) is still within `band` of its post-memorisation
      peak (measured as a fraction of the fall from that peak to the final minimum);
    - cleanup ends at the first step after test accuracy reaches `acc_level` at which
      log10(test loss) is within `band` of that minimum.
    """
    steps = np.asarray(steps)
    tr, te = np.asarray(train_acc, dtype=float), np.asarray(test_acc, dtype=float)
    ell = _log(test_loss)
    out: dict = {"memorisation_end": None, "circuit_formation_end": None, "cleanup_end": None,
                 "grokked": False, "plateau": None, "notes": []}
    i_mem = _first(tr >= acc_level)
    if i_mem is None:
        out["notes"].append(f"train accuracy never reached {acc_level:.0%}: the model did not memorise")
        return out
    out["memorisation_end"] = int(steps[i_mem])
    i_gen = _first(te >= acc_level, i_mem)
    if i_gen is None:
        out["notes"].append(f"test accuracy never reached {acc_level:.0%}: no grokking within {int(steps[-1]):,} steps")
        return out
    out["grokked"] = True
    hi = np.nanmax(ell[i_mem : i_gen + 1])
    lo = np.nanmin(ell[i_mem:])
    span = max(hi - lo, 1e-9)
    near_peak = np.nonzero(ell[i_mem : i_gen + 1] >= hi - band * span)[0]
    i_clean = i_mem + int(near_peak[-1])
    i_end = _first(ell <= lo + band * span, i_gen)
    out["circuit_formation_end"] = int(steps[i_clean])
    out["cleanup_end"] = int(steps[i_end if i_end is not None else -1])
    out["plateau"] = int(steps[i_gen] - steps[i_mem])
    tail = steps >= steps[-1] - 0.1 * (steps[-1] - steps[0])
    if np.count_nonzero(tail) >= 2 and ell[tail][0] - ell[-1] > 0.3:
        out["notes"].append("test loss was still falling over the last 10% of the run (more than 2x): "
                            "cleanup may not be complete")
    if i_clean == i_mem:
        out["notes"].append("test loss began to fall right after memorisation: no plateau in test loss, so "
                            "circuit formation and cleanup overlap")
    if te[i_mem] >= 0.5:
        out["notes"].append("test accuracy was already >= 50% when memorisation finished: no visible plateau")
    return out


def half_fall_step(steps, values, start_step: int | None = None) -> int | None:
    """First step (>= start_step) at which log10(values) has fallen halfway from its peak
    after start_step to its final minimum: when a curve 'falls'."""
    steps = np.asarray(steps)
    ell = _log(values)
    i0 = 0 if start_step is None else int(np.searchsorted(steps, start_step))
    if i0 >= len(ell) - 1:
        return None
    i_peak = i0 + int(np.nanargmax(ell[i0:]))
    lo = np.nanmin(ell[i_peak:])
    if ell[i_peak] - lo < 0.3:  # less than a factor of 2: no real fall
        return None
    i = _first(ell <= (ell[i_peak] + lo) / 2, i_peak)
    return None if i is None else int(steps[i])


@dataclass(frozen=True)
class MetricRow:
    """The columns of a metrics.jsonl row that the phase and diagnosis code reads. A column
    is None where the row lacks it: only rows of evaluation steps carry the test columns, and
    rows from older or hand-written logs may lack any but the step."""

    step: int
    loss: float | None = None
    train_exact_match: float | None = None
    test_exact_match: float | None = None
    test_loss: float | None = None


def metric_rows(rows: list[dict]) -> list[MetricRow]:
    """metrics.jsonl rows (as `read_metrics` returns them) as typed rows: the one place that
    reads their keys, ignoring the columns no reader here uses (lr, grad_norm, ...)."""
    names = [f.name for f in fields(MetricRow)]
    return [MetricRow(**{k: r[k] for k in names if k in r}) for r in rows]


def or_nan(v: float | None) -> float:
    """A column the row lacks, as the NaN the curves use for a missing point."""
    return math.nan if v is None else v


def curves_for_phases(run_dir: str | Path | None, series: dict | None) -> dict:
    """The finest curves available: the logged evaluation rows of metrics.jsonl when they
    hold test accuracy (every eval_every steps), else the checkpoint series."""
    rows = metric_rows(read_metrics(run_dir)) if run_dir is not None else []
    rows = [r for r in rows if r.test_exact_match is not None and r.test_loss is not None]
    if len(rows) >= 5:
        return {
            "source": "metrics.jsonl",
            "steps": [r.step for r in rows],
            "train_accuracy": [or_nan(r.train_exact_match) for r in rows],
            "test_accuracy": [r.test_exact_match for r in rows],
            "test_loss": [r.test_loss for r in rows],
            "train_loss": [or_nan(r.loss) for r in rows],
        }
    if series is None:
        return {}
    return {"source": "checkpoints", "steps": series["step"],
            **{k: series[k] for k in ("train_accuracy", "test_accuracy", "test_loss", "train_loss")}}


def phases_from(curves: dict) -> dict:
    if not curves:
        return {"memorisation_end": None, "circuit_formation_end": None, "cleanup_end": None,
                "grokked": False, "plateau": None, "notes": ["no curves to detect phases from"]}
    out = detect_phases(curves["steps"], curves["train_accuracy"], curves["test_accuracy"], curves["test_loss"])
    out["source"] = curves["source"]
    return out


def phase_spans(phases) -> list[tuple[str, int, int]]:
    """(name, start, end) of each detected phase, for shading figures. `phases` is the result's
    `Phases` (result.py, which imports diagnose, which imports this module)."""
    bounds = [0, phases.memorisation_end, phases.circuit_formation_end, phases.cleanup_end]
    spans = []
    for name, start, end in zip(PHASES, bounds[:-1], bounds[1:], strict=True):
        if start is None or end is None:
            break
        spans.append((name, int(start), int(end)))
    if phases.memorisation_end is not None and not spans[1:]:
        spans = [("memorisation", 0, int(phases.memorisation_end))]
    return spans

"""From per-example arrays (`Collected`) to the sections of the result: step sizes, logit
lens, lock-in, behaviour past the trained depth, adaptive halting, trajectories."""

from __future__ import annotations

from typing import Any

import numpy as np

from analyses.prose import SIGNIFICANCE, LinearFit, spearman

from .collect import Collected
from .dynamics import BEHAVIOURS, classify, decay_rate, first_below, quantiles
from .problems import CLASSES

ALL, READOUT = CLASSES.index("all"), CLASSES.index("readout")


def _safe_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1), np.nan)


def relative_steps(c: Collected) -> np.ndarray:
    """[N, H, C] ||s_n - s_{n-1}|| / ||s_n||."""
    return _safe_div(c.step, c.norm)


def relative_distance(c: Collected) -> np.ndarray:
    """[N, H, C] ||s_n - s_H|| / ||s_H||."""
    return _safe_div(c.distance, c.norm[:, -1:, :])


def steps_section(c: Collected, tolerances) -> dict[str, Any]:
    rel, dist = relative_steps(c), relative_distance(c)
    out = {"classes": list(CLASSES), "relative_step": {}, "distance_to_last": {}, "first_loop_below": {}}
    for j, name in enumerate(CLASSES):
        q = quantiles(rel[:, :, j])
        out["relative_step"][name] = q
        out["distance_to_last"][name] = quantiles(dist[:, :, j])
        out["first_loop_below"][name] = {str(tol): first_below(q["median"], tol) for tol in tolerances}
    return out


def logit_lens_section(c: Collected, chains: list[list[int]] | None) -> dict[str, Any]:
    n, h, width = c.correct.shape
    ans_len = c.answer_mask.sum(1)
    exact = (c.correct | ~c.answer_mask[:, None, :]).all(-1)  # [N, H]
    k = np.arange(width)
    digit_slots = k[None, :] < (ans_len - 1)[:, None]  # [N, L] answer digits (EOS excluded)
    digit_acc = []
    for j in range(width - 1):
        rows = digit_slots[:, j]
        digit_acc.append(c.correct[rows, :, j].mean(0) if rows.any() else np.full(h, np.nan))
    eos = c.correct[np.arange(n), :, ans_len - 1]  # [N, H]
    out = {
        "exact_match": exact.mean(0),
        "token_accuracy": c.correct.sum((0, 2)) / c.answer_mask.sum(),
        "digit_accuracy": {"digit": list(range(width - 1)), "accuracy": np.stack(digit_acc, 1) if digit_acc else []},
        "eos_accuracy": eos.mean(0),
        "kl": quantiles(c.kl),
    }
    if chains is not None:
        flat = _chain_array(chains, width)
        values = sorted(int(v) for v in np.unique(flat[flat >= 0]))
        out["accuracy_by_chain"] = {
            "chain": values,
            "accuracy": np.stack([_mean_where(c.correct, flat == v) for v in values], 1),
        }
    return out


def _mean_where(correct: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Mean over the (example, slot) pairs in `where` [N, L] of correct [N, H, L], per loop."""
    picked = correct.transpose(1, 0, 2)[:, where]  # [H, count]
    return picked.mean(1) if picked.shape[1] else np.full(correct.shape[1], np.nan)


def _chain_array(chains: list[list[int]], width: int) -> np.ndarray:
    """[N, L] carry-chain length per answer digit, -1 for EOS and padding."""
    out = np.full((len(chains), width), -1)
    for i, row in enumerate(chains):
        out[i, : len(row)] = row
    return out


def lock_in_loops(c: Collected, through: int | None = None) -> np.ndarray:
    """[N, L] the first loop (1-based) from which the token's teacher-forced prediction stays
    correct through loop `through` (default: the horizon); NaN when it is wrong there or
    the slot is not an answer token."""
    correct = c.correct if through is None else c.correct[:, :through]
    h = correct.shape[1]
    trailing = np.flip(np.cumprod(np.flip(correct, 1), 1), 1).sum(1)  # [N, L] correct loops at the end
    lock = np.where(trailing > 0, h - trailing + 1, np.nan).astype(float)
    return np.where(c.answer_mask, lock, np.nan)


def _lock_table(lock, correct_at_trained, where_sets, trained) -> list[dict[str, Any]]:
    rows = []
    for key, where in where_sets:
        vals = lock[where]
        locked = vals[~np.isnan(vals)]
        q = quantiles(locked) if locked.size else dict.fromkeys(("median", "q25", "q75", "mean"), np.nan)
        rows.append({
            **key,
            "n": int(where.sum()),
            "locked_fraction": float((~np.isnan(vals)).mean()) if vals.size else np.nan,
            "correct_at_trained_depth": float(correct_at_trained[where].mean()) if vals.size else np.nan,
            "after_trained_depth_fraction": float((locked > trained).mean()) if locked.size else np.nan,
            **{k: float(v) for k, v in q.items()},
        })
    return rows


def lock_in_section(c: Collected, chains: list[list[int]] | None, trained: int) -> dict[str, Any]:
    """Lock-in loop per answer digit, through the horizon (the definition) and, for models
    that fall apart past their trained depth, through the trained depth; tables by digit
    index and by the carry-chain length reaching the digit."""
    n, _, width = c.correct.shape
    ans_len = c.answer_mask.sum(1)
    slot = np.arange(width)[None, :]
    digit = slot < (ans_len - 1)[:, None]
    eos = slot == (ans_len - 1)[:, None]
    at_trained = c.correct[:, trained - 1, :]
    flat = _chain_array(chains, width) if chains is not None else None
    out: dict[str, Any] = {}
    for name, through in (("horizon", None), ("trained_depth", trained)):
        lock = lock_in_loops(c, through)
        part: dict[str, Any] = {
            "by_digit": _lock_table(lock, at_trained, [({"digit": k}, digit & (slot == k))
                                                       for k in range(width - 1) if digit[:, k].any()], trained),
            "eos": _lock_table(lock, at_trained, [({}, eos)], trained)[0],
            "by_chain": None,
        }
        if flat is not None:
            values = sorted(int(v) for v in np.unique(flat[digit & (flat >= 0)]))
            part["by_chain"] = _lock_table(lock, at_trained, [({"chain": v}, digit & (flat == v)) for v in values],
                                           trained)
            part.update(_lock_in_trend(lock, flat, digit, part["by_chain"]))
        out[name] = part
    # the definition (through the horizon) at the top level, the trained-depth variant beside it
    out.update({k: v for k, v in out["horizon"].items()})
    out["headline"] = _lock_in_headline(out, trained) if flat is not None else None
    return out


def _lock_in_trend(lock, flat, digit, table) -> dict[str, Any]:
    """Least-squares slope of lock-in loop vs chain length (locked digits only), the p-value
    of a zero slope, and Spearman's rho."""
    where = digit & (flat >= 0) & ~np.isnan(lock)
    x, y = flat[where].astype(float), lock[where]
    fit = LinearFit.of(x, y)
    rho = spearman(x, y)
    return {"slope_loops_per_link": np.nan if fit.slope is None else fit.slope,
            "slope_pvalue": np.nan if fit.pvalue is None else fit.pvalue, "spearman": np.nan if rho is None else rho}


def _describe(part: dict[str, Any]) -> str | None:
    rows = [r for r in part["by_chain"] if r["n"] >= 5 and np.isfinite(r["median"])]
    if not rows:
        return None
    lo, hi = rows[0], rows[-1]
    slope, pvalue = part["slope_loops_per_link"], part["slope_pvalue"]
    if not np.isfinite(slope):
        trend = "cannot be related to"
    elif not (np.isfinite(pvalue) and pvalue < SIGNIFICANCE):
        trend = "shows no dependence distinguishable from noise on"
    else:
        trend = "grows with" if slope > 0 else "falls with"
    return (f"{trend} the carry chain: median {lo['median']:.0f} loops at chain {lo['chain']} vs "
            f"{hi['median']:.0f} at chain {hi['chain']} ({slope:+.2f} loops per link, p = {pvalue:.2g}, Spearman "
            f"{part['spearman']:.2f}); {100 * lo['locked_fraction']:.0f}% vs {100 * hi['locked_fraction']:.0f}% "
            "of those digits lock in")


def _lock_in_headline(out: dict[str, Any], trained: int) -> str | None:
    horizon, within = _describe(out["horizon"]), _describe(out["trained_depth"])
    parts = []
    if horizon:
        parts.append(f"Lock-in through the horizon {horizon}")
    if within:
        parts.append(f"through the trained depth ({trained} loops) it {within}")
    return ("; ".join(parts) + ".") if parts else None


def behaviour_section(c: Collected, trained: int, exact_match: np.ndarray, **thresholds) -> dict[str, Any]:
    """Converging / cycling / drifting past the trained depth (see `dynamics.classify`),
    with the step trends and norm growth it is read from."""
    h = c.step.shape[1]
    start = trained if h - trained >= 3 else max(0, h - 3)
    final_norm = c.norm[:, -1:, ALL]
    step_by_last = _safe_div(c.step[:, :, ALL], final_norm)
    dist = _safe_div(c.distance[:, :, ALL], final_norm)
    out: dict[str, Any] = {
        "tail_loops": [start + 1, h],
        "exact_match": exact_match,
        "exact_match_at_trained": float(exact_match[trained - 1]),
        "exact_match_at_horizon": float(exact_match[-1]),
        "best_loops": int(np.argmax(exact_match) + 1),
        "best_exact_match": float(np.max(exact_match)),
    }
    if h - start < 3:
        out.update(labels=None, fractions=None, overall=None,
                   note="horizon too short to classify (need 3 loops past training)")
        return out
    labels = classify(step_by_last[:, start:], dist[:, start:], **thresholds)
    fractions = {b: float((labels == b).mean()) for b in BEHAVIOURS}
    rel = relative_steps(c)[:, start:, ALL]
    out.update(
        labels=labels.tolist(),
        fractions=fractions,
        overall=max(fractions, key=fractions.get),
        # per-loop geometric rate of ||s_t - s_{t-1}|| / ||s_H|| (what `classify` reads) ...
        absolute_step_decay_rate=quantiles(decay_rate(step_by_last[:, start:])),
        # ... and of the relative step, which also shrinks when the norm merely grows
        relative_step_decay_rate=quantiles(decay_rate(rel)),
        median_curve_decay_rate=float(decay_rate(np.nanmedian(rel, 0))[0]),
        # ||s_H|| / ||s_trained||: linear growth with a constant step is drift, not convergence
        norm_growth=quantiles(_safe_div(c.norm[:, -1, ALL], c.norm[:, trained - 1, ALL])),
    )
    return out


def halting_section(c: Collected, tolerances, exact: np.ndarray, default_tol: float, on: str = "readout") -> dict[str, Any]:
    """Each example stops at the first loop whose relative step (over the `on` positions)
    is below tol (or at the horizon); its answer is the logit lens at that loop."""
    rel = relative_steps(c)[:, :, CLASSES.index(on)]
    n, h = rel.shape
    fixed = exact.mean(0)
    rows = []
    for tol in sorted(set(tolerances) | {default_tol}, reverse=True):
        below = np.nan_to_num(rel, nan=np.inf) < tol
        halted = below.any(1)
        stop = np.where(halted, below.argmax(1) + 1, h)  # 1-based loops used
        em = float(exact[np.arange(n), stop - 1].mean())
        mean_loops = float(stop.mean())
        rows.append({"tol": tol, "mean_loops": mean_loops, "median_loops": float(np.median(stop)),
                     "exact_match": em, "halted_fraction": float(halted.mean()),
                     "fixed_depth_exact_match": float(np.interp(mean_loops, np.arange(1, h + 1), fixed))})
    default = next(r for r in rows if r["tol"] == default_tol)
    return {"on": on, "table": rows, "default": default, "fixed_depth": {"loops": list(range(1, h + 1)), "exact_match": fixed}}


def trajectories_section(c: Collected, examples, chains, n_components: int = 3) -> dict[str, Any] | None:
    if not c.trajectories:
        return None
    from sklearn.decomposition import PCA

    ids = sorted(c.trajectories)
    stacked = np.concatenate([c.trajectories[i] for i in ids])  # [k*H, d]
    k = min(n_components, *stacked.shape)
    pca = PCA(n_components=k).fit(stacked)
    items = []
    for i in ids:
        pos = c.trajectory_positions[i]
        items.append({"example": i, "prompt": examples[i].prompt, "target": examples[i].target,
                      "position": pos, "longest_chain": max(chains[i]) if chains else None,
                      "coords": pca.transform(c.trajectories[i])})
    return {"explained_variance_ratio": pca.explained_variance_ratio_, "examples": items}

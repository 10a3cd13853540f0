"""The grokking analysis in sentences, read from its typed summary: phases, key frequencies,
single-frequency neurons, the logit fit and the restricted/excluded losses, beside Nanda et
al.'s numbers when the summary carries them (`paper`, p = 113). A part that could not be
measured gets a sentence saying so instead of silently dropping out.

`d` is a `ModularSummary` or a `Base10Summary` (told apart by `kind`) and `paper` its `Paper`,
read and not imported: result.py imports this module when `findings()` is called."""

from __future__ import annotations

from analyses.prose import limit, num, pct, times

from .progress import CLEANUP_WINDOW, SHARE_FLAT, WEIGHTS_FLAT, cleanup_check
from .summary import half_fall_clause, training_pairs_clause


def _k(step: int) -> str:
    return f"{step / 1000:g}k" if step else "0"


def _phases(d, paper, src: str) -> str:
    ph = d.phases
    if ph is None:
        return "The grokking phases were not detected: there is no series of checkpoints to read them from."
    if ph.grokked:
        bounds = [0, ph.memorisation_end, ph.circuit_formation_end, ph.cleanup_end]
        names = ("memorisation", "circuit formation", "cleanup")
        known = [f"{name} {a:,}-{b:,}" for name, a, b in zip(names, bounds[:-1], bounds[1:], strict=True)
                 if a is not None and b is not None]
        sentence = "The model grokked; phases (steps): " + (", ".join(known) if known else "not resolved")
        if paper is not None and paper.phases:
            sentence += f" ({src}: " + ", ".join(
                f"{name.replace('_', ' ')} {_k(a)}-{_k(b)}" for name, (a, b) in paper.phases.items()) + ")"
        return sentence + "."
    why = list(d.diagnosis.sentences) if d.diagnosis is not None and d.diagnosis.sentences else list(ph.notes or ())
    return f"The model did not grok: {why[0][0].lower() + why[0][1:]}" if why else "The model did not grok."


def _keys(d, paper, src: str) -> str | None:
    keys, shares = list(d.key_frequencies or ()), d.embed_frequency_shares or ()
    if not keys:
        return (f"No key frequencies: no frequency holds {pct(d.key_threshold)} of the residue embeddings' "
                "non-constant Fourier energy.")
    if not shares:
        return None
    held = sum(shares[k - 1] for k in keys if 0 < k <= len(shares) and shares[k - 1] is not None)
    sentence = (f"The residue embeddings concentrate on {len(keys)} key frequenc{'y' if len(keys) == 1 else 'ies'} "
                f"{', '.join(map(str, keys))}, holding {pct(held)} of their non-constant Fourier energy")
    if paper is not None and paper.key_frequencies:
        pk = paper.key_frequencies
        sentence += f" ({src}: {len(pk)}, namely {', '.join(map(str, pk))}; which ones depends on the seed)"
    if d.frequency_ablation:
        full = d.final_losses.full_loss_train if d.final_losses is not None else None
        sentence += (". Removed one at a time from the logits, each costs the training pairs: " + ", ".join(
            f"k={a.frequency} loss {num(a.loss_without)} (accuracy {pct(a.accuracy_without)})"
            for a in d.frequency_ablation) + f"; the full logits' loss is {num(full)}")
    return sentence + "."


def _neurons_and_fit(d, paper, src: str) -> str | None:
    parts = []
    n = d.neurons
    if n is not None and n.share_single_frequency is not None and n.n_neurons:
        part = (f"{n.n_single_frequency}/{n.n_neurons} = {pct(n.share_single_frequency, 1)} "
                f"of the MLP neurons are single-frequency (>= {pct(n.threshold)} of their variance "
                f"from one frequency)")
        if paper is not None and paper.n_single_frequency:
            part += (f" against {paper.n_single_frequency}/{paper.n_neurons} = "
                     f"{pct(paper.share_single_frequency, 1)} in {src}")
        n_others = n.n_neurons - (n.n_dead or 0) - (n.n_single_frequency or 0)
        if n.variance_share_single_frequency is not None and n_others > 0:
            part += (f"; the other {n_others} live neurons hold {pct(1 - n.variance_share_single_frequency, 1)} "
                     "of the layer's activation variance")
            if n.others_median_active_share is not None:
                part += f" and fire on {pct(n.others_median_active_share, 1)} of the pairs (median)"
        parts.append(part)
    if d.logit_fit is not None and d.logit_fit.fraction_explained is not None:
        parts.append(f"cos(w_k(a+b-c)) over the key frequencies explains {pct(d.logit_fit.fraction_explained)} "
                     "of the logit variance")
    if not parts:
        return None
    sentence = "; ".join(parts)
    return sentence[0].upper() + sentence[1:] + "."


def _cleanup(d) -> str | None:
    """Whether the run trained until cleanup was over (CleanupCheck's criterion)."""
    check = cleanup_check(d.progress) if d.progress is not None else None
    if check is None:
        return None
    moved = (f"from step {check.from_step:,} to {check.to_step:,} the single-frequency share went "
             f"{pct(check.share_from, 1)} -> {pct(check.share_to, 1)} and the sum of squared weights "
             f"{check.weights_from:.4g} -> {check.weights_to:.4g}")
    if check.over:
        return (f"Cleanup is over: {moved}, both flat (under {100 * SHARE_FLAT:g} point and "
                f"{100 * WEIGHTS_FLAT:g}% over the last {CLEANUP_WINDOW:,} steps).")
    return f"Cleanup is not over at the last checkpoint: {moved}; train longer to see where it ends."


def _losses(d) -> str | None:
    fl = d.final_losses
    if fl is None or fl.restricted_loss is None or fl.excluded_loss is None:
        return None
    rv = d.restricted_vs_test
    sentence = training_pairs_clause(fl)
    if rv is not None and rv.restricted_peak is not None and rv.restricted_peak_over_final is not None:
        sentence += (f"; the restricted loss ended {times(rv.restricted_peak_over_final)} below its "
                     f"post-memorisation peak ({num(rv.restricted_peak)} at step {rv.restricted_peak_step:,}, "
                     f"{num(rv.restricted_final)} at step {rv.final_step:,}) while the excluded loss went "
                     f"from {num(rv.excluded_at_peak)} to {num(rv.excluded_final)}")
    half = half_fall_clause(rv)
    if half:
        sentence += f"; {half}"
    return sentence + "."


def findings(d) -> list[str]:
    """Grokking phases, key frequencies, single-frequency neurons and the logit fit, and the
    restricted/excluded loss on the training pairs, each beside Nanda et al.'s value when the
    summary carries it (`paper`, p = 113). A digit model's base-10 view is its details."""
    if d.kind == "base10":  # a Base10Summary
        return limit(list(d.details))
    paper = d.paper
    src = paper.source if paper is not None else "the paper"
    out = [_phases(d, paper, src), _keys(d, paper, src), _neurons_and_fit(d, paper, src), _cleanup(d), _losses(d)]
    # five: the cleanup criterion is the fifth measure the paper's replication is judged by
    return limit(out, most=5) or limit(list(d.details))

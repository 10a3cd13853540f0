"""The grokking analysis in sentences: phases, key frequencies, single-frequency neurons, the
logit fit and the restricted/excluded losses, beside Nanda et al.'s numbers when `d["paper"]` has them."""

from __future__ import annotations

from typing import Any

from abacus_interp.prose import limit, num, pct, times

from .summary import half_fall_clause, training_pairs_clause


def _k(step: int) -> str:
    return f"{step / 1000:g}k" if step else "0"


def findings(d: dict[str, Any]) -> list[str]:
    """Grokking phases, key frequencies, single-frequency neurons and the logit fit, and the
    restricted/excluded loss on the training pairs, each beside Nanda et al.'s value when the
    analysis carries it (`d["paper"]`, p = 113)."""
    out: list[str | None] = []
    paper = d.get("paper") or {}
    src = paper.get("source", "the paper")
    ph = d.get("phases") or {}
    if ph.get("grokked"):
        bounds = [0, ph.get("memorisation_end"), ph.get("circuit_formation_end"), ph.get("cleanup_end")]
        names = ("memorisation", "circuit formation", "cleanup")
        known = [f"{name} {a:,}-{b:,}" for name, a, b in zip(names, bounds[:-1], bounds[1:], strict=True)
                 if a is not None and b is not None]
        sentence = "The model grokked; phases (steps): " + (", ".join(known) if known else "not resolved")
        if paper.get("phases"):
            sentence += f" ({src}: " + ", ".join(
                f"{name.replace('_', ' ')} {_k(a)}-{_k(b)}" for name, (a, b) in paper["phases"].items()) + ")"
        out.append(sentence + ".")
    elif ph:
        diag = (d.get("diagnosis") or {}).get("sentences") or ph.get("notes") or []
        out.append(f"The model did not grok: {diag[0][0].lower() + diag[0][1:]}" if diag else "The model did not grok.")
    keys = d.get("key_frequencies") or []
    shares = d.get("embed_frequency_shares") or []
    if keys and shares:
        held = sum(shares[k - 1] for k in keys if 0 < k <= len(shares) and shares[k - 1] is not None)
        sentence = (f"The residue embeddings concentrate on {len(keys)} key frequenc{'y' if len(keys) == 1 else 'ies'} "
                    f"{', '.join(map(str, keys))}, holding {pct(held)} of their non-constant Fourier energy")
        if paper.get("key_frequencies"):
            pk = paper["key_frequencies"]
            sentence += f" ({src}: {len(pk)}, namely {', '.join(map(str, pk))}; which ones depends on the seed)"
        ablation = d.get("frequency_ablation") or []
        if ablation:
            sentence += (". Removed one at a time from the logits, each costs the training pairs: " + ", ".join(
                f"k={a['frequency']} loss {num(a['loss_without'])} (accuracy {pct(a['accuracy_without'])})"
                for a in ablation) + f"; the full logits' loss is {num((d.get('final_losses') or {}).get('full_loss_train'))}")
        out.append(sentence + ".")
    neurons = d.get("neurons") or {}
    fit = d.get("logit_fit") or {}
    parts = []
    if neurons.get("share_single_frequency") is not None and neurons.get("n_neurons"):
        part = (f"{neurons['n_single_frequency']}/{neurons['n_neurons']} = {pct(neurons['share_single_frequency'], 1)} "
                f"of the MLP neurons are single-frequency (>= {pct(neurons.get('threshold'))} of their variance "
                f"from one frequency)")
        if paper.get("n_single_frequency"):
            part += (f" against {paper['n_single_frequency']}/{paper['n_neurons']} = "
                     f"{pct(paper['share_single_frequency'], 1)} in {src}")
        parts.append(part)
    if fit.get("fraction_explained") is not None:
        parts.append(f"cos(w_k(a+b-c)) over the key frequencies explains {pct(fit['fraction_explained'])} of the logit variance")
    if parts:
        sentence = "; ".join(parts)
        out.append(sentence[0].upper() + sentence[1:] + ".")
    fl = d.get("final_losses") or {}
    if fl.get("restricted_loss") is not None and fl.get("excluded_loss") is not None:
        rv = d.get("restricted_vs_test") or {}
        sentence = training_pairs_clause(fl)
        if rv.get("restricted_peak") is not None and rv.get("restricted_peak_over_final") is not None:
            sentence += (f"; the restricted loss ended {times(rv['restricted_peak_over_final'])} below its "
                         f"post-memorisation peak ({num(rv['restricted_peak'])} at step {rv['restricted_peak_step']:,}, "
                         f"{num(rv['restricted_final'])} at step {rv['final_step']:,}) while the excluded loss went "
                         f"from {num(rv.get('excluded_at_peak'))} to {num(rv.get('excluded_final'))}")
        half = half_fall_clause(rv)
        if half:
            sentence += f"; {half}"
        out.append(sentence + ".")
    if not out:
        lines = d.get("details")
        if isinstance(lines, list):
            out = [x for x in lines if isinstance(x, str)]
    return limit(out)

"""Plain-language findings from a Fourier result's data (what the report shows first)."""

from __future__ import annotations

from typing import Any


def _steps(v) -> str:
    return "-" if v is None else f"{v:,}"


def phase_sentence(ph: dict[str, Any] | None) -> str | None:
    if not ph:
        return None
    m, c, e = ph.get("memorisation_end"), ph.get("circuit_formation_end"), ph.get("cleanup_end")
    if m is None:
        return "No phases: " + "; ".join(ph.get("notes") or ["the model did not memorise"]) + "."
    if c is None:
        return f"Memorisation ended at step {m:,}; " + "; ".join(ph.get("notes") or ["no grokking"]) + "."
    text = (f"Phases (from {ph.get('source', 'the curves')}): memorisation 0-{m:,}, circuit formation "
            f"{m:,}-{c:,}, cleanup {c:,}-{_steps(e)}")
    if ph.get("plateau") is not None:
        text += f"; test accuracy reached 99% {ph['plateau']:,} steps after memorisation"
    if ph.get("notes"):
        text += "; " + "; ".join(ph["notes"])
    return text + "."


def findings(d: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if d.get("kind") == "base10":
        b = d["base10"]
        ps = b["period_shares"]
        out.append(f"Digit embeddings: {b['share_10_5_2']:.0%} of their non-constant energy lies at periods 10, 5 "
                   f"and 2 ({ps['10']:.0%}, {ps['5']:.0%}, {ps['2']:.0%}); 56% would be a random embedding's "
                   f"expected share (k = 1, 2, 5 hold 2 + 2 + 1 of 9 dimensions).")
        series = d.get("base10_series")
        if series and len(series["step"]) > 1:
            out.append(f"Over training the share at periods 10/5/2 went from {series['share_10_5_2'][0]:.0%} "
                       f"(step {series['step'][0]:,}) to {series['share_10_5_2'][-1]:.0%} "
                       f"(step {series['step'][-1]:,}).")
        return out
    key = d.get("key_frequencies") or []
    shares = d.get("embed_frequency_shares") or []
    held = sum(shares[k - 1] for k in key) if shares else 0.0
    out.append(f"Key frequencies {key} (each >= {d.get('key_threshold', 0):.0%} of the non-constant Fourier "
               f"energy of W_E{' and of W_out W_U' if d.get('key_source') == 'both' else ''}) hold {held:.0%} "
               f"of W_E's." if key else
               "No key frequencies: W_E's Fourier energy is spread out (no frequency holds "
               f">= {d.get('key_threshold', 0):.0%}).")
    n = d.get("neurons") or {}
    if n:
        sizes = ", ".join(f"{k}: {v}" for k, v in (n.get("cluster_sizes") or {}).items())
        out.append(f"{n['share_single_frequency']:.0%} of the {n['n_neurons']} MLP neurons are single-frequency "
                   f"(>= {n['threshold']:.0%} of variance from one frequency at '='); clusters {{{sizes}}}.")
    for s in d.get("neurons_per_loop") or []:
        out.append(f"Loop {s['loop']} layer {s['layer']}: {s['share_single_frequency']:.0%} single-frequency neurons.")
    fit = d.get("logit_fit")
    if fit:
        out.append(f"cos(w_k(a+b-c)) over the key frequencies explains {fit['fraction_explained']:.0%} of the "
                   f"logit variance.")
    fl = d.get("final_losses")
    if fl:
        out.append(f"Final losses: full {fl['full_loss']:.3g}, restricted {fl['restricted_loss']:.3g}, "
                   f"excluded (train) {fl['excluded_loss']:.3g}.")
    sent = phase_sentence(d.get("phases"))
    if sent:
        out.append(sent)
    rv = d.get("restricted_vs_test")
    if rv and rv.get("restricted_falls_first") is not None:
        r_step, t_step = rv["restricted_half_fall_step"], rv["test_half_fall_step"]
        when = "before" if r_step < t_step else "after" if r_step > t_step else "at the same checkpoint as"
        text = (f"Restricted loss fell {when} test loss "
                f"(halfway down, on a log scale, at step {rv['restricted_half_fall_step']:,} vs "
                f"{rv['test_half_fall_step']:,})")
        if rv.get("restricted_fall_factor") is not None:
            a, b = rv["circuit_formation_steps"]
            text += (f"; over circuit formation (steps {a:,}-{b:,}) restricted loss fell "
                     f"{rv['restricted_fall_factor']:.3g}x, test loss {rv['test_fall_factor']:.3g}x")
        out.append(text + ".")
    cp = d.get("clock_pizza")
    if cp:
        out.append(f"Clock vs pizza: gradient symmetricity {cp['gradient_symmetricity']:.2f}, distance irrelevance "
                   f"{cp['distance_irrelevance']:.2f} -> {cp['verdict']}.")
    diag = d.get("diagnosis")
    if diag and diag.get("grokked") is False:
        out.extend(diag["sentences"][:4])
    return out

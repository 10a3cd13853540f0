"""The long account of a Fourier result in sentences (`FourierResult.details`), read from its
typed summary; the short one the report shows is `findings.py`.

The summary's types are read, not imported (the findings, which result.py imports on use,
read this module): `d` is a `ModularSummary` or a `Base10Summary` (told apart by `kind`), and
`ph`, `n`, `fl` and `rv` its phases, neurons, final losses and restricted-vs-test parts."""

from __future__ import annotations

from abacus_interp.core.hooks import layer_label
from analyses.prose import num, times

from .paper import PAPER, applies, phase_ranges_text


def _steps(v) -> str:
    return "-" if v is None else f"{v:,}"


def phase_sentence(ph) -> str | None:
    if ph is None:
        return None
    m, c, e = ph.memorisation_end, ph.circuit_formation_end, ph.cleanup_end
    if m is None:
        return "No phases: " + "; ".join(ph.notes or ["the model did not memorise"]) + "."
    if c is None:
        return f"Memorisation ended at step {m:,}; " + "; ".join(ph.notes or ["no grokking"]) + "."
    text = (f"Phases (from {ph.source or 'the curves'}): memorisation 0-{m:,}, circuit formation "
            f"{m:,}-{c:,}, cleanup {c:,}-{_steps(e)}")
    if ph.plateau is not None:
        text += f"; test accuracy reached 99% {ph.plateau:,} steps after memorisation"
    if ph.notes:
        text += "; " + "; ".join(ph.notes)
    return text + "."


def paper_phases() -> str:
    return f"{PAPER['source']}: {phase_ranges_text()}"


def single_frequency_sentence(n, with_paper: bool) -> str:
    """The single-frequency neuron count over all neurons (the paper's denominator)."""
    text = (f"{n.n_single_frequency}/{n.n_neurons} = {n.share_single_frequency:.1%} of the MLP neurons "
            f"are single-frequency (>= {n.threshold:.0%} of their variance at '=' from one frequency)")
    if with_paper:
        text += (f"; {PAPER['source']}: {PAPER['n_single_frequency']}/{PAPER['n_neurons']} = "
                 f"{PAPER['share_single_frequency']:.1%}")
    return text


def training_pairs_clause(fl) -> str:
    """Restricted and excluded loss on the training pairs, beside the unablated loss."""
    return (f"On the training pairs, keeping only the key frequencies gives loss {num(fl.restricted_loss)} "
            f"(unablated {num(fl.full_loss_train)}) and removing them {num(fl.excluded_loss)}")


def half_fall_clause(rv) -> str | None:
    """When the restricted loss was halfway from its peak to its minimum (log10 scale),
    against the same point of the test loss; None when either is unknown."""
    if rv is None or rv.restricted_half_fall_step is None or rv.test_half_fall_step is None:
        return None
    r_step, t_step = rv.restricted_half_fall_step, rv.test_half_fall_step
    when = "before" if r_step < t_step else "after" if r_step > t_step else "at the same checkpoint as"
    return f"it was halfway from peak to minimum on a log10 scale at step {r_step:,}, {when} the test loss (step {t_step:,})"


def restricted_sentence(fl, rv) -> str:
    """Restricted and excluded loss on the training pairs, and how far the restricted loss
    fell from its post-memorisation peak (a linear ratio), with its log-scale half point."""
    text = training_pairs_clause(fl)
    if rv is not None and rv.restricted_peak is not None:
        text += (f"; the restricted loss fell from its post-memorisation peak {rv.restricted_peak:.3g} "
                 f"(step {rv.restricted_peak_step:,}) to {rv.restricted_final:.3g} at step {rv.final_step:,}, "
                 f"{times(rv.restricted_peak_over_final)} lower, while the excluded loss went from "
                 f"{rv.excluded_at_peak:.3g} to {rv.excluded_final:.3g}")
    half = half_fall_clause(rv)
    return text + (f"; {half}" if half else "")


def _base10_details(d) -> list[str]:
    b, ps = d.base10, d.base10.period_shares
    out = [f"Digit embeddings: {b.share_10_5_2:.0%} of their non-constant energy lies at periods 10, 5 "
           f"and 2 ({ps['10']:.0%}, {ps['5']:.0%}, {ps['2']:.0%}); 56% would be a random embedding's "
           f"expected share (k = 1, 2, 5 hold 2 + 2 + 1 of 9 dimensions)."]
    series = d.base10_series
    if series is not None and len(series["step"]) > 1:
        out.append(f"Over training the share at periods 10/5/2 went from {series['share_10_5_2'][0]:.0%} "
                   f"(step {series['step'][0]:,}) to {series['share_10_5_2'][-1]:.0%} "
                   f"(step {series['step'][-1]:,}).")
    return out


def details(d) -> list[str]:
    """Every measure of the result in a sentence (the long account; `findings` is the short one).
    A part that was not measured (None) has no sentence here; the findings say what is missing."""
    if d.kind == "base10":  # a Base10Summary
        return _base10_details(d)
    out: list[str] = []
    key, shares = list(d.key_frequencies or ()), d.embed_frequency_shares or ()
    held = sum(shares[k - 1] for k in key) if shares else 0.0
    with_paper = applies(d.p)
    paper_key = (f" ({PAPER['source']}: {len(PAPER['key_frequencies'])} key frequencies, "
                 f"{PAPER['key_frequencies']}; which ones is seed-dependent)") if with_paper else ""
    threshold = d.key_threshold or 0
    out.append(f"Key frequencies {key} (each >= {threshold:.0%} of the non-constant Fourier "
               f"energy of W_E{' and of W_out W_U' if d.key_source == 'both' else ''}) hold {held:.0%} "
               f"of W_E's{paper_key}." if key else
               "No key frequencies: W_E's Fourier energy is spread out (no frequency holds "
               f">= {threshold:.0%}).")
    n = d.neurons
    if n is not None:
        sizes = ", ".join(f"{k}: {v}" for k, v in (n.cluster_sizes or {}).items())
        out.append(f"{single_frequency_sentence(n, with_paper)}; clusters {{{sizes}}}.")
    for s in d.neurons_per_loop or ():
        out.append(f"{layer_label(s.layer, s.loop).capitalize()}: {s.share_single_frequency:.0%} single-frequency neurons.")
    if d.logit_fit is not None:
        out.append(f"cos(w_k(a+b-c)) over the key frequencies explains {d.logit_fit.fraction_explained:.0%} of the "
                   f"logit variance.")
    if d.final_losses is not None:
        out.append(restricted_sentence(d.final_losses, d.restricted_vs_test) + ".")
    rv = d.restricted_vs_test
    if rv is not None and rv.restricted_fall_factor is not None:
        a, b = rv.circuit_formation_steps
        out.append(f"Over circuit formation (steps {a:,}-{b:,}) the restricted loss fell "
                   f"{times(rv.restricted_fall_factor)} and the test loss {times(rv.test_fall_factor)}.")
    sent = phase_sentence(d.phases)
    if sent:
        grokked = d.phases is not None and d.phases.grokked
        out.append(sent[:-1] + (f" ({paper_phases()})." if with_paper and grokked else "."))
    cp = d.clock_pizza
    if cp is not None:
        out.append(f"Clock vs pizza: gradient symmetricity {cp.gradient_symmetricity:.2f}, distance irrelevance "
                   f"{cp.distance_irrelevance:.2f} -> {cp.verdict}.")
    if d.diagnosis is not None and d.diagnosis.grokked is False:
        out.extend(d.diagnosis.sentences[:4])
    return out

"""The carry analysis in sentences, read from its typed result: the top alignment and
carry-source heads, the most harmful ablation and where the carry-in becomes decodable. A part
that was not run or found nothing gets a sentence saying so, so it never silently disappears.

`r` is a `CarryAttentionResult` and `h` one of its `HeadScore` or `Harmful` rows, read and not
imported: result.py imports this module when `findings()` is called."""

from __future__ import annotations

from abacus_interp.core.hooks import head_label, layer_label
from analyses.prose import finite, limit, pct


def _head(h) -> str:
    return head_label(h.layer, h.head, h.loop)


def _attention(r) -> list[str]:
    if r.attention is None:
        return ["Attention statistics were not computed (the attention section was not run)."]
    out = []
    top = r.attention.top_heads
    if top.alignment:
        h = top.alignment[0]
        out.append(f"Head {_head(h)} puts {pct(h.score)} of its attention on the aligned operand digits a_i, b_i "
                   f"when predicting answer digit i (chance {pct(h.chance)}).")
    else:
        out.append("No answer digit of the problem set has an aligned operand digit, so no head's alignment "
                   "could be measured.")
    if top.carry_source:
        h = top.carry_source[0]
        weak = h.score <= 1.2 * h.chance
        out.append(f"The strongest carry-source head, {_head(h)}, puts {pct(h.score)} on the previous digits "
                   f"a_(i-1), b_(i-1) (chance {pct(h.chance)})"
                   + ("; no head attends to the carry source clearly above chance." if weak else "."))
    return out


def _ablation(r) -> str | None:
    ab = r.ablation
    if ab is None:
        return "No head was ablated (the ablation section was not run)."
    # most_harmful has one non-empty list per kind run; mean ablation is the gentler one
    kind = next((k for k in ("mean", "zero") if k in ab.most_harmful), None)
    if kind is None:
        return "No head was ablated (no ablation kind was run)."
    h, base = ab.most_harmful[kind][0], ab.baseline.exact_match
    return (f"{kind.capitalize()}-ablating {_head(h)} moves exact match from {pct(base)} to "
            f"{pct(base + h.delta_exact_match)} ({100 * h.delta_exact_match:+.0f} points), the largest effect of "
            "any single head.")


def _probes(r) -> str | None:
    probes = r.probes
    if probes is None:
        return "The carry-in was not probed (the probes section was not run)."
    fd = probes.first_decodable
    if fd is not None:
        sentence = (f"The carry-in is linearly decodable (probe accuracy >= {pct(probes.threshold)}) "
                    f"from {layer_label(fd.layer, fd.loop)} on ({pct(fd.accuracy)}; chance {pct(probes.chance)})")
        patch = r.patching.first_loop_carry_present if r.patching is not None else None
        if patch is not None:
            sentence += f"; patching finds it present from {layer_label(patch.layer, patch.loop)}"
        return sentence + "."
    best = max(finite(probes.accuracy.ravel().tolist()), default=None)
    return f"No loop carries a linearly decodable carry-in above threshold (best probe accuracy {pct(best)})."


def findings(r) -> list[str]:
    return limit([*_attention(r), _ablation(r), _probes(r)])

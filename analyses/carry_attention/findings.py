"""The carry analysis in sentences: the top alignment and carry-source heads, the most harmful
ablation and where the carry-in becomes decodable, from `CarryAttentionResult.to_dict()`."""

from __future__ import annotations

from typing import Any

from abacus_interp.prose import finite, limit, pct


def _head(h: dict[str, Any]) -> str:
    return f"loop {h['loop']} L{h['layer']}H{h['head']}"


def findings(d: dict[str, Any]) -> list[str]:
    out: list[str | None] = []
    att = d.get("attention") or {}
    top = att.get("top_heads") or {}
    if top.get("alignment"):
        h = top["alignment"][0]
        out.append(
            f"Head {_head(h)} puts {pct(h['score'])} of its attention on the aligned operand digits a_i, b_i "
            f"when predicting answer digit i (chance {pct(h.get('chance'))})."
        )
    if top.get("carry_source"):
        h = top["carry_source"][0]
        chance = h.get("chance")
        weak = chance is not None and h["score"] <= 1.2 * chance
        out.append(
            f"The strongest carry-source head, {_head(h)}, puts {pct(h['score'])} on the previous digits "
            f"a_(i-1), b_(i-1) (chance {pct(chance)})"
            + ("; no head attends to the carry source clearly above chance." if weak else ".")
        )
    ab = d.get("ablation") or {}
    base = (ab.get("baseline") or {}).get("exact_match")
    harmful = (ab.get("most_harmful") or {})
    kind = "mean" if harmful.get("mean") else ("zero" if harmful.get("zero") else None)
    if kind and base is not None:
        h = harmful[kind][0]
        delta = h.get("delta_exact_match")
        if delta is not None:
            out.append(
                f"{kind.capitalize()}-ablating {_head(h)} moves exact match from {pct(base)} to {pct(base + delta)} "
                f"({100 * delta:+.0f} points), the largest effect of any single head."
            )
    probes = d.get("probes") or {}
    fd = probes.get("first_decodable")
    patch = (d.get("patching") or {}).get("first_loop_carry_present")
    if fd and fd.get("accuracy") is not None:
        sentence = (f"The carry-in is linearly decodable (probe accuracy >= {pct(probes.get('threshold'))}) "
                    f"from loop {fd['loop']} layer {fd['layer']} on ({pct(fd['accuracy'])}; chance {pct(probes.get('chance'))})")
        if patch:
            sentence += f"; patching finds it present from loop {patch['loop']} layer {patch['layer']}"
        out.append(sentence + ".")
    elif probes.get("accuracy"):
        best = max(finite([v for row in probes["accuracy"] for v in row]), default=None)
        out.append(f"No loop carries a linearly decodable carry-in above threshold (best probe accuracy {pct(best)}).")
    return limit(out)

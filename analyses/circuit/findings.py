"""The circuit findings: sentences that state the measured numbers and name their samples."""

from __future__ import annotations

from abacus_interp.core.hooks import loop_label
from analyses.prose import pct, times

from .graph import readable


def _r(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def circuit_findings(result) -> list[str]:
    n = result.nodes
    steps = f"{n.steps}-step integrated" if n.steps > 1 else "one-gradient"
    one = "" if n.steps == 1 else f" (one gradient alone: r = {_r(n.one_gradient_pearson)})"
    by_site = ", ".join(f"{site} {_r(r)}" for site, r in n.pearson_by_site)
    out = [
        f"Attribution patching ({steps}) against real activation patching on {n.sample}: Pearson r = "
        f"{_r(n.pearson)} over {len(n.labels)} nodes (residual, head and MLP outputs at every loop of "
        f"{result.n_loops} and every position, same metric, noising){one}; by site {by_site}. Attribution took "
        f"{n.attribution_s:.2f} s, patching every node {n.patching_s:.1f} s ({times(n.speedup)} faster)."
    ]
    held = "n/a" if result.circuit_recovered is None else pct(result.circuit_recovered)
    other = ("" if result.other_ablation_recovered is None else
             f"; under {result.other_ablation} ablation the same circuit keeps {pct(result.other_ablation_recovered)}")
    blocks = "" if result.folds == 1 else (f"{pct(result.circuit_recovered_worst_block)} on the "
                                           f"{'worse' if result.folds == 2 else 'worst'} of {result.folds} blocks, ")
    out.append(
        f"The circuit: {result.circuit_edges} of {result.total_edges} edges ({pct(result.circuit_share)}) keep {held} "
        f"of the behaviour on {result.n_held_out} held-out pairs of the same kind (no clean problem shared with the "
        f"{result.n_pairs} search pairs), every other edge {result.ablation}-ablated and the model run so; "
        f"{pct(result.circuit_recovered_search)} on the search pairs ({blocks}target {pct(result.target)}; the "
        f"pruning started from the top {result.start_k} edges by score and spent {result.evaluations} ablated "
        f"runs){other}.")
    story = circuit_story(result)
    if story:
        out.append(story)
    if result.edge_score_vs_effect_pearson is not None:
        strongest = min(result.edges, key=lambda e: e.effect if e.effect is not None else 0.0)
        out.append(
            f"Edge scores against cutting each edge alone ({result.ablation} ablation): r = "
            f"{_r(result.edge_score_vs_effect_pearson)} over {result.total_edges} edges; the edge whose cut alone "
            f"costs most is {_edge(strongest)} ({strongest.effect:+.2f} of a clean-minus-corrupted metric of "
            f"{result.metric_clean - result.metric_corrupted:.1f}). The search uses the scores for its order only: "
            "every circuit above is measured by real ablation.")
    return out


def _edge(e) -> str:
    return f"{readable(e.source)} -> {readable(e.target)}" + (f" ({e.channel})" if e.channel else "")


def circuit_story(result) -> str | None:
    """Which heads and MLPs the circuit uses in each loop, and how it crosses loop boundaries."""
    circuit = result.circuit()
    if not circuit:
        return None
    by_loop: dict[int, set[str]] = {}
    for e in circuit:
        for name, loop in ((e.source, e.source_loop), (e.target, e.target_loop)):
            if loop is not None and not name.startswith("state"):
                by_loop.setdefault(loop, set()).add(name.split("@")[0])
    parts = [f"{loop_label(t)}: {', '.join(sorted(names))}" for t, names in sorted(by_loop.items())]
    crossing = [e for e in circuit if e.target.startswith("state")]
    carried = [readable(s) for s in sorted({e.target for e in crossing}, key=lambda s: int(s.split("@")[1]))]
    from_input = sum(e.source == "input" for e in circuit)
    logits = ", ".join(readable(s) for s in sorted(e.source for e in circuit if e.target == "logits")) or "nothing"
    text = "Components in the circuit by loop: " + ("; ".join(parts) if parts else "none") + ". "
    reads = head_reads(circuit)
    if reads:
        text += "What its heads read: " + "; ".join(reads) + ". "
    if carried:
        text += (f"It crosses loop boundaries through {len(carried)} state node{'s' if len(carried) > 1 else ''} "
                 f"({', '.join(carried)}; {len(crossing)} edges write into them"
                 + (", the state LayerNormed before the input is re-added" if result.injection == "norm_add" else "")
                 + "), reads")
    elif result.n_loops == 1:
        text += "With one loop no edge crosses a loop boundary; it reads"
    else:
        text += "No circuit edge crosses a loop boundary; it reads"
    return text + f" the input through {from_input} edges, and the logits read {logits}."


def head_reads(circuit) -> list[str]:
    """"L0H1 reads the input (k, v) in loops 1, 2" for every head and kind of source in the circuit."""
    found: dict[tuple[str, str], tuple[set[int], set[str]]] = {}
    for e in circuit:
        if e.channel:
            source = e.source.split("@")[0]
            named = f"the {source}" if source in ("state", "input") else source
            loops, channels = found.setdefault((e.target.split("@")[0], named), (set(), set()))
            loops.add(e.target_loop)
            channels.add(e.channel)
    return [f"{head} reads {source} ({', '.join(sorted(channels, key='qkv'.index))}) in loop{'s' if len(loops) > 1 else ''} "
            f"{', '.join(str(t + 1) for t in sorted(loops))}" for (head, source), (loops, channels) in sorted(found.items())]

"""Findings of the report's own sections (model card, evaluation): 2-4 plain sentences each,
generated from the section's typed numbers (`result.py`) alone. Each analysis writes its own
sentences in its result's `findings()`, beside its numbers.
"""

from __future__ import annotations

from analyses.prose import finite, first_step_at, limit, num, pct, slope

from .result import Carry, EdgeCases, EvalReport, Grid, Lengths, Loops, ModelCard, SetScores

# --------------------------------------------------------------------------- model card


def model_card(d: ModelCard) -> list[str]:
    out: list[str | None] = []
    p = d.parameters
    total, block = p.total_parameters, p.looped_block_parameters
    if total:
        # the loop multiplies the block's compute; the effective depth is layers x loops
        n_loops = p.loop_compute_multiplier
        if n_loops == 1:
            out.append(f"The block of {p.effective_depth} layer(s) runs once (no looping) and holds "
                       f"{block:,} of the model's {total:,} parameters ({pct(block / total)}).")
        else:
            out.append(
                f"The looped block holds {block:,} of the model's {total:,} parameters "
                f"({pct(block / total)}) and runs {n_loops} times: an effective depth of "
                f"{p.effective_depth} layers with the compute of a "
                f"{p.unrolled_equivalent_parameters:,}-parameter unrolled model."
            )
    out += _which_weights(d)
    # the logged columns; one the run never logged is absent from the curves
    curves = d.training_curves
    steps = list(curves["step"]) if "step" in curves else []
    loss = finite(list(curves["loss"])) if "loss" in curves else []
    if steps and loss:
        k = max(1, len(loss) // 20)
        out.append(
            f"Training ran {steps[-1]:,} steps; the training loss fell from {num(loss[0])} to "
            f"{num(sum(loss[-k:]) / k)} ({f'mean of the last {k} logged values' if k > 1 else 'last logged value'})."
        )
    evals = d.eval_curves
    for name in sorted(evals, key=lambda n: (0 if ("in_distribution" in n or "test" in n) else 1, n)):
        c = evals[name]
        values = list(c.value)
        fv = finite(values)
        if not fv:
            continue
        best = max(fv)
        s50, s90 = first_step_at(list(c.step), values, 0.5), first_step_at(list(c.step), values, 0.9)
        label = name.replace("_exact_match", "").replace("in_distribution", "in-distribution").replace("_", " ")
        reached = f"{label} exact match reached {pct(best)} (last logged: {pct(fv[-1])})"
        if s90 is not None:
            reached += f"; it first passed 90% at step {s90:,}"
        elif s50 is not None:
            reached += f"; it first passed 50% at step {s50:,}"
        out.append(reached[0].upper() + reached[1:] + ".")
        if len(out) >= 3:
            break
    grok = d.grokking
    if grok is not None and grok.train_step is not None and grok.test_step is not None:
        out.append(
            f"Train accuracy passed {pct(grok.threshold)} at step {grok.train_step:,} and test accuracy "
            f"at step {grok.test_step:,}: generalisation came {grok.test_step - grok.train_step:,} steps "
            "after memorisation."
        )
    elif grok is not None:
        reached = "train" if grok.train_step is not None else None
        out.append(f"{'Test' if reached else 'Train'} accuracy never passed {pct(grok.threshold)}, so no "
                   "grokking time could be measured.")
    return limit(out)


def _which_weights(d: ModelCard) -> list[str]:
    """Where the run's weights started (train.init_from) and whether its checkpoints hold their
    mean (train.average_from): both change what the curves after them mean."""
    out = []
    if d.warm_start is not None:  # its step 0 is trained: "first passed 50% at step 1" means no learning
        out.append(f"The run started at the weights of {d.warm_start} (train.init_from), not at a fresh "
                   "initialisation: its step 0 is that checkpoint, and its curves continue that run's.")
    if d.averaged_from is not None:  # the held-out curves change what they score at that step
        out.append(f"From step {d.averaged_from:,} on, the checkpoints hold the mean of the weights after every "
                   "step since (train.average_from), and the held-out curves score that mean; the training loss "
                   "is of the weights the optimizer steps.")
    return out


# --------------------------------------------------------------------------- evaluation


def decoding_label(d: EvalReport) -> str:
    """How the evaluation read its answers ("6 loops", "adaptive loops ..., at most 128"):
    every sentence of the section says it, so no two sections are compared at different loops.
    (A hand-written fragment may lack the settings or their decoding.)"""
    if d.settings is not None and d.settings.decoding is not None and d.settings.decoding.label is not None:
        return d.settings.decoding.label
    n_loops = d.settings.n_loops if d.settings is not None else None
    return f"{n_loops} loops" if n_loops is not None else "the model's loops"


def edge_case_outcome(edge: EdgeCases | None, how: str) -> str | None:
    """The hand-picked problems greedy decoding gets wrong, in distribution named first (a mean
    exact match near 100% can hide a whole family of them: small-add's 99999999+99999999),
    with the pass counts in and out of distribution apart."""
    if edge is None or not edge.cases:
        return None
    inside = [c for c in edge.cases if c.in_distribution]
    outside = [c for c in edge.cases if not c.in_distribution]
    failed_inside = [c for c in inside if not c.passed]
    failed_outside = [c for c in outside if not c.passed]
    beyond = (f"; beyond the trained lengths {len(outside) - len(failed_outside)} of {len(outside)} pass"
              if outside else "")
    if not failed_inside:
        return f"All {len(inside)} in-distribution edge cases pass under greedy decoding ({how}){beyond}."
    named = "; ".join(f"{c.name} gives {' / '.join(c.answers)}, not {' / '.join(c.expected)}"
                      for c in failed_inside[:3])
    return (f"{len(failed_inside)} of {len(inside)} in-distribution edge cases fail under greedy decoding "
            f"({how}): {named}{beyond}.")


def evaluation(d: EvalReport) -> list[str]:
    out: list[str | None] = []
    grid, lengths, loops, carry, splits = d.grid, d.lengths, d.loops, d.carry, d.splits
    how = decoding_label(d)
    if grid is not None:
        out.append(_grid_sentence(grid, how))
    edge_outcome = edge_case_outcome(d.edge_cases, how)
    if edge_outcome is not None:
        out.append(edge_outcome)
    if lengths is not None and lengths.lengths:
        out.append(_lengths_sentence(lengths, how))
    if splits:
        out.extend(_splits_sentences(splits, how))
    if loops is not None and loops.sets and len(loops.loops) > 1:
        sentence = _loops_sentence(loops)
        if sentence is not None:
            out.append(sentence)
    if carry is not None and carry.buckets:
        sentence = _carry_sentence(carry, how)
        if sentence is not None:
            out.append(sentence)
    if not out and d.perplexity:
        # a task with no digit grid or fixed split, run by a model with one depth: the plain
        # held-out scores are all there is
        for name, p in d.perplexity.items():
            out.append(f"On {p.n} held-out {name.replace('_', '-')} problems, exact match is "
                       f"{pct(p.exact_match)} and the answer's cross-entropy {num(p.loss)} per token ({how}).")
    if not out and d.settings:
        out.append("No accuracy numbers were produced for this task.")
    return limit(out)


def _grid_sentence(grid: Grid, how: str) -> str:
    """Exact match in and beyond the trained operand lengths of the digit grid."""
    lo, hi = grid.trained_digits
    ind, ood = grid.in_distribution_exact_match, grid.out_of_distribution_exact_match
    top = max(grid.digits_a)
    sentence = f"Exact match is {pct(ind)} on operands of {lo}-{hi} digits (the trained range)"
    if ood is not None:
        sentence += f" and {pct(ood)} beyond it, up to {top} digits ({top / hi:.1f}x the trained length)"
    sample = [f"n={grid.n_per_cell} per digit-count cell"] if grid.n_per_cell is not None else []
    return sentence + f" ({', '.join([*sample, grid.decoding or how])})."


def _lengths_sentence(lengths: Lengths, how: str) -> str:
    """Where exact match on equal-length operands first drops below 50%, against the trained length."""
    ls, em = lengths.lengths, lengths.exact_match
    trained = lengths.trained_max
    sample = ", ".join([*([f"n={lengths.n_per_length} per length"] if lengths.n_per_length is not None else []),
                        lengths.decoding or how])
    below = next((n for n, v in zip(ls, em, strict=False) if v is not None and v < 0.5), None)
    if below is None:
        return (f"With equal-length operands, exact match stays at or above 50% up to {ls[-1]} digits "
                f"(trained up to {trained}; {pct(em[-1])} at {ls[-1]}; {sample}).")
    if trained and below > trained:
        return (f"With equal-length operands, exact match first drops below 50% at {below} digits: the model "
                f"extrapolates to {below - 1} digits, {(below - 1) / trained:.1f}x the trained {trained} "
                f"({sample}).")
    return (f"With equal-length operands, exact match already drops below 50% at {below} digit"
            f"{'s' if below != 1 else ''}, inside the trained range (up to {trained}; {sample}).")


def _splits_sentences(splits: dict[str, SetScores], how: str) -> list[str]:
    """Accuracy on every full split and, with two losses, how the answer's cross-entropy compares."""
    parts = [f"{name} {pct(s.exact_match, 1)}" for name, s in splits.items()]
    out = ["Accuracy on the full splits: " + ", ".join(parts) + f" (every problem of each split, {how})."]
    losses = [(name, s.loss) for name, s in splits.items() if s.loss is not None]
    if len(losses) >= 2:
        (n1, l1), (n2, l2) = losses[0], losses[1]
        ratio = f", {l2 / l1:.3g}x the {n1} loss" if l1 and l1 > 0 else ""
        out.append(f"The answer's cross-entropy is {num(l1)} on the {n1} split and {num(l2)} on the {n2} split{ratio}.")
    return out


def _loops_sentence(loops: Loops) -> str | None:
    """Accuracy against the loop count: its peak, at the trained depth, past training, and
    under the run's own adaptive loops; None when no loop count was scored."""
    r = loops.loops
    trained = loops.trained_loops
    name = "in_distribution" if "in_distribution" in loops.sets else ("test" if "test" in loops.sets else next(iter(loops.sets)))
    em = loops.sets[name].exact_match
    pairs = [(x, v) for x, v in zip(r, em, strict=False) if v is not None]
    if not pairs:
        return None
    best_r, best = max(pairs, key=lambda p: (p[1], -p[0]))
    at_trained = next((v for x, v in pairs if x == trained), None)
    deepest_r, deepest = pairs[-1]
    n = f"n={loops.sets[name].n}, " if loops.sets[name].n is not None else ""
    sentence = (f"On the {name.replace('_', '-')} set ({n}teacher-forced at fixed loop counts), accuracy "
                f"peaks at {best_r} loop{'s' if best_r != 1 else ''} ({pct(best)})")
    if at_trained is not None and trained != best_r:
        sentence += f"; at the trained depth of {trained} it is {pct(at_trained)}"
    elif trained == best_r:
        sentence += ", the trained depth"
    if deepest_r > (trained or 0):
        ref = at_trained if at_trained is not None else best
        change = ("holds" if abs(deepest - ref) < max(0.02, 0.1 * ref)
                  else ("falls" if deepest < ref else "rises"))
        sentence += f"; running {deepest_r} loops gives {pct(deepest)} (accuracy {change} past training)"
    adaptive = loops.adaptive
    if adaptive is not None and adaptive.sets:
        parts = [f"{pct(a.exact_match)} on the {n.replace('_', '-')} set (n={a.n}, median {a.median_loops} "
                 f"loops)" for n, a in adaptive.sets.items()]
        sentence += f"; the run's own adaptive loops (at most {adaptive.cap}) give " + " and ".join(parts)
    return sentence + "."


def _carry_sentence(carry: Carry, how: str) -> str | None:
    """What each extra carry in the longest cascade costs in exact match; None without a slope."""
    b = [r for r in carry.buckets if r.exact_match is not None]
    xs = [5 if r.bucket == "5+" else int(r.bucket) for r in b]
    ys = [r.exact_match for r in b]
    s = slope(xs, ys)
    if s is None or not b:
        return None
    ends = "; ".join([f"{b[0].bucket} carries: {pct(b[0].exact_match)}, {b[-1].bucket}: {pct(b[-1].exact_match)}",
                      *([f"n={carry.n_per_bucket} per bucket"] if carry.n_per_bucket is not None else []),
                      carry.decoding or how])
    if abs(100 * s) < 1:
        return f"Exact match barely depends on the longest carry cascade ({ends})."
    return (f"Each extra carry in the longest cascade {'costs' if s < 0 else 'adds'} about "
            f"{abs(100 * s):.1f} points of exact match ({ends}).")

"""The comparisons findings: sentences that state the measured numbers and their samples."""

from __future__ import annotations

from analyses.prose import limit, pct

from .choice import BLINDS
from .summary import TEST_FRACTION


def comparisons_findings(result) -> list[str]:
    rows = [r for r in result.rows if r.exact_match is not None]
    inside = next(r for r in rows if r.in_distribution)
    beyond = [r for r in rows if not r.in_distribution]
    # each row below 95% says where it fails (each answer token given the right ones before it)
    out = [f"Held-out lists ({result.n_loops} loops): {pct(inside.exact_match)} in distribution (n={inside.n}); "
           + "; ".join(f"{r.label} {pct(r.exact_match)} (n={r.n}{_where_it_fails(r)})" for r in beyond) + "."]
    out[0] += _what_more_numbers_get_wrong(inside, beyond, result.trained_numbers[1])
    out.append(_how_the_choice_is_made(result.choice, result.trained_numbers[1]))
    d = result.deciding
    per_depth = ", ".join(f"depth {r.depth}: {pct(r.exact_match)}" for r in d.rows)
    group, loop, share = d.strongest_patch() if d.n_told_apart else (None, None, None)
    sentence = (f"On {d.label} (n={d.rows[0].n} per depth), the first label is right at {per_depth}; it locks in "
                f"against the depth of the deciding digit with {d.fit.describe('loops per place')}.")
    if d.n_told_apart:
        sentence += (f" Copying the clean pair's state into the swapped pair flips the answer most from {group} "
                     f"entering loop {loop} ({pct(share)} of the {d.n_told_apart} pairs it tells apart).")
    reliable = 0  # the deepest depth down to which every deciding digit is read >= 95% of the time
    for r in sorted(d.rows, key=lambda r: r.depth):
        if r.exact_match < 0.95:
            break
        reliable = r.depth
    if reliable < d.digits:
        sentence += (f" It tells two {d.digits}-digit numbers apart reliably (>= 95%) only when they differ within "
                     f"their top {reliable} digit{'s' if reliable != 1 else ''}: it compares leading digits, not "
                     "every digit, which is why lists of close numbers fail.")
    out.append(sentence)
    out.append(_what_the_summary_holds(result.summary))
    a, g = result.answer_reading, result.digit_reading
    loop, head, mass = a.top_reader("the answer's label")
    d_loop, d_head, d_mass = g.top_reader("same index, earlier numbers")
    pointer = "The answer is a pointer"
    if result.pairwise is not None and result.pairwise.alone:
        pointer = "The labels are the pairwise comparison's alone, so no head picks them; the answer queries read as before"
    heads = (f"{pointer}: {head} in loop {loop} puts {pct(mass)} of each answer query's attention on "
             f"the label it writes; digits are compared where {d_head} in loop {d_loop} puts {pct(d_mass)} of a "
             f"digit's attention on the same index in earlier numbers ({a.label}, n={a.n_problems}).")
    k = result.knockout
    if k.baseline >= 0.5:
        cases = [f"{group} from {k.worst(group)[0]}: {pct(k.worst(group)[1])}" for group in k.groups]
        heads += (f" Forbidding one head one key group at every answer query and loop ({k.label}, n={k.n_problems}, "
                  f"none forbidden {pct(k.baseline)}), the head whose loss hurts most: " + "; ".join(cases) + ".")
    out.append(heads)
    if result.pairwise is not None:
        out.insert(1, _how_pairs_compare(result.pairwise))
    # the rows, (the pairwise answer,) the choice, the deciding digit, the summary, the heads
    return limit(out, most=6)


def _how_pairs_compare(p) -> str:
    """The pairwise answer's pairs ordered right at each length, deciding place by place, and the
    deepest place every length orders >= 95% of the time."""
    lengths, places = p.lengths, p.places
    right = {k: [p.cell(d, k).right[-1] for d in lengths if k < d] for k in places}  # place -> per length
    by_place = "; ".join(("the leading digit" if k == 0 else f"{k} below it") + " " + " / ".join(map(pct, right[k]))
                         for k in places)
    sentence = (f"The pairwise answer, pair by pair ({p.label}; after {p.n_loops} loops, at "
                f"{' / '.join(str(d) for d in lengths)} digits): decided by {by_place} ordered right")
    sure = 0  # how many leading places every length orders >= 95% of the time
    while sure < len(places) and min(right[places[sure]]) >= 0.95:
        sure += 1
    if 0 < sure < len(places):
        top = "their leading digit" if sure == 1 else f"their top {sure} digits"
        sentence += f": at every length it orders pairs decided within {top} and no deeper, so lists of close numbers fail"
    return sentence + "."


def _what_more_numbers_get_wrong(inside, beyond, trained_max: int) -> str:
    """A sentence on the first row of more numbers than trained, of the trained lengths: what its
    wrong labels name, and how often a step is wrong where the two smallest numbers left differ in
    length, there and in distribution."""
    # every row here has lists that fit (the caller keeps those), so each has its wrong picks
    more = next((r for r in beyond if r.numbers[0] > trained_max and r.digits == inside.digits
                 and r.wrong_picks.wrong), None)
    if more is None:
        return ""
    picks = more.wrong_picks
    sentence = (f" With {more.label}, {pct((picks.runner_up + picks.later) / picks.wrong)} of the wrong labels "
                f"(n={picks.wrong}) name a number not yet written ({pct(picks.runner_up / picks.wrong)} the "
                f"runner-up), {pct(picks.written / picks.wrong)} one already written")
    far = picks.closeness_of("length")
    near = inside.wrong_picks.closeness_of("length")
    if far is not None and near is not None:
        sentence += (f"; where the two smallest left differ in length a step is wrong {pct(far.wrong_rate)} of the "
                     f"time (n={far.steps}), against {pct(near.wrong_rate)} in distribution (n={near.steps})")
        # a comparison it makes in distribution and misses among more numbers: the choice fails
        if near.wrong_rate <= 0.05 and far.wrong_rate >= 2 * near.wrong_rate + 0.1:
            sentence += ": more candidates break the choice, not the comparison"
    return sentence + "."


def _how_the_choice_is_made(c, trained_max: int) -> str | None:
    """The margin at equal numbers left in lists of the trained count and of more, and what the
    blinds do to the trained count's labels, with the reading each supports."""
    far = max(c.counts, default=trained_max)
    near_cell, far_cell = c.cell(trained_max, trained_max), c.cell(far, trained_max)
    if far == trained_max or near_cell is None or far_cell is None:
        return None
    sentence = (f"How sure each label is ({c.label}, n={c.n_lists} lists per count; the median of the right "
                f"label's logit minus the best other label's): with {trained_max} numbers left, "
                f"{near_cell.median_margin:.1f} in lists of {trained_max} and {far_cell.median_margin:.1f} in lists of "
                f"{far} ({pct(near_cell.accuracy)} and {pct(far_cell.accuracy)} right)")
    if 0 < near_cell.median_margin and far_cell.median_margin < near_cell.median_margin / 2:
        sentence += ": the numbers beyond those left weigh on the choice"
    seen, unwritten, two = (c.blind(hidden, trained_max) for hidden in BLINDS)
    written_share = unwritten.picks.written / max(unwritten.picks.wrong, 1)
    sentence += (f". Hiding from every head at each answer query the numbers already written takes the labels of "
                 f"lists of {trained_max} from {pct(seen.accuracy)} to {pct(unwritten.accuracy)} "
                 f"({pct(written_share)} of its wrong labels then name a number already written)")
    if unwritten.accuracy < seen.accuracy - 0.3 and written_share >= 0.3:
        sentence += ": it leaves a written number out by reading it"
    sentence += f"; hiding as well all numbers left but the smallest and the runner-up, to {pct(two.accuracy)}"
    if two.accuracy < unwritten.accuracy - 0.1:
        sentence += (": fewer candidates make the choice harder, where a pick by attention among the numbers "
                     "left would find it easier")
    return sentence + "."


def _what_the_summary_holds(s) -> str:
    """The digit probes, the order readout and the pair probes at each item's closing separator
    after the last loop, and what they say together about the pairs that share two leading digits."""
    places = s.digit_accuracy[s.last]
    named = ("its leading digit", "the next", "the one after")[: len(places)]
    digits = ", ".join(f"{name} {pct(a)}" for name, a in zip(named, places, strict=False))
    kinds = ("that differ in the leading digit", "that share it", "that share two")
    ordered, paired = s.ordered[s.last], s.pair_probe[s.last]
    readout = ", ".join(f"{pct(o)} of those {kind} (n={n})"
                        for o, n, kind in zip(ordered, s.n_pairs, kinds, strict=True) if o is not None)
    fitted = ", ".join(f"{pct(p)} of those {kind}" for p, kind in zip(paired, kinds, strict=True) if p is not None)
    sentence = (f"What each item's closing separator holds ({s.label}, n={s.n_lists} lists; linear readouts fitted "
                f"on {pct(1 - TEST_FRACTION)} of them, scored on the rest): after the last loop a class probe reads "
                f"{digits} (chance 10%); one ridge readout of its value puts the held-out pairs of a list in order: "
                f"{readout}; a comparator fitted to each kind of pair alone: {fitted} (chance 50%)")
    two, two_fitted = ordered[-1], paired[-1]
    if two is not None and two_fitted is not None and two_fitted >= 0.8 and two < two_fitted - 0.15:
        sentence += (": the summary holds the order two places below the leading digit, but along a direction of "
                     "its own, which the one value readout that orders the other pairs misses")
    elif two_fitted is not None and two_fitted < 0.7:
        sentence += ": no linear readout of the summary orders numbers that share two leading digits"
    return sentence + "."


def _where_it_fails(row) -> str:
    """", labels 63%-78% right, the stop 19%" for a row below 95%, else nothing."""
    if row.exact_match >= 0.95:
        return ""
    labels = f"{pct(min(row.label_accuracy))}-{pct(max(row.label_accuracy))}"
    return f", labels {labels} right given the ones before, the stop after the last {pct(row.stop_accuracy)}"

"""The multiplication findings: sentences that state the measured numbers and their samples."""

from __future__ import annotations

from abacus_interp.tasks.multiplication import MultiplicationTask
from abacus_interp.tasks.product_carries import ONE_DIGIT_MAX_CARRY
from analyses._running_sum import running_sum_sentence
from analyses.prose import LinearFit, limit

# where the run finding counts a run of large carries as long (a bin of result.RUN_BINS starts here)
LONG_RUN = 4


def multiplication_findings(result) -> list[str]:
    acc, n = result.accuracy, result.trained_digits
    out = []
    parts = []
    for k in result.multiplier_digits:
        rows = [r for r in acc.rows if r.multiplier_digits == k]
        cells = ", ".join(f"{r.exact_match:.0%} at {r.digits} ({r.digits / n:g}x, median {r.loops_median:g} loops)"
                          for r in rows)
        parts.append(f"x {k} digits: {cells}")
    if parts:
        out.append(f"Uniform N x k products (n={acc.rows[0].n} per row), trained on multiplicands of up to {n} "
                   f"digits, adaptive loops: " + "; ".join(parts) + ".")
    if out:  # where the inside below is read, said once after the accuracy it is chosen from
        out[-1] += f" ({result.inside[0].upper()}{result.inside[1:]}.)"
    if result.by_digit and out:  # where the accuracy above is lost, in the same finding
        out[-1] += " " + _by_digit_sentence(result.by_digit)
        if any(d.by_carry_in for d in result.by_digit):
            out[-1] += " " + _carry_in_sentence(result.by_digit)
        if far_sentence := _carry_in_far_sentence(result.by_digit, result.by_digit_far):
            out[-1] += " " + far_sentence
        if run_sentence := _carry_run_far_sentence(result.by_digit, result.by_digit_far):
            out[-1] += " " + run_sentence
        if wrong_sentence := _wrong_digits_sentence(result.by_digit + result.by_digit_far):
            out[-1] += " " + wrong_sentence
        if sources_sentence := _error_sources_sentence(result.error_sources):
            out[-1] += " " + sources_sentence
        if product_sentence := _partial_product_sentence(result.by_digit):
            out[-1] += " " + product_sentence
    if result.by_multiplier and out:
        out[-1] += " " + _by_multiplier_sentence(result.by_multiplier)
    if result.running_sum:
        out.append(running_sum_sentence(result.running_sum))
    if result.heads_far is not None and result.knockout is not None:
        out.append(_heads_sentence(result))
    fits = []
    for fit in result.lock_in:
        fits.append(f"{fit.label} (n={fit.n_problems}): {_slope_sentence(fit.reach, fit.lock_in)}")
    h = result.halting
    out.append("Lock-in loop against carry reach: " + "; ".join(fits) + ". Adaptive halting against a problem's "
               f"longest reach ({h.label}): {_slope_sentence(h.longest_reach, h.loops_used)}; "
               f"{sum(h.converged)}/{len(h.converged)} converged before the cap.")
    d = result.delayed
    lags = ", ".join(f"{lag:g} after a switch at {s}" for s, lag in d.lag_after_switch() if lag is not None and s)
    wave = d.wave_fit()
    clean = (f"in the clean run digit d locks in at {wave.slope:.2f} d + {wave.intercept:.1f} loops"
             if wave.slope is not None else "the clean run has one differing digit only")
    # in the carry wave's finding: a fifth finding would pass MAX_FINDINGS and be dropped
    out[-1] += (f" Delayed carry ({d.patch.corrupted} for s loops, then {d.patch.clean}; the products differ in "
                f"{len(d.digits)} digits): {clean}; median lock-in after the switch {lags or 'n/a'} loops.")
    if result.carry_guess is not None and (slopes := result.carry_guess.median_slopes()) is not None:
        out[-1] += " " + _carry_guess_sentence(result.carry_guess, slopes)
    return limit(out)


def _by_digit_sentence(by_digit) -> str:
    parts = []
    for d in by_digit:
        digits = " ".join(f"{r:.0%}" for r in d.right)
        first = d.first_below()
        where = ("every digit >= 99%" if first is None else
                 f"first below 99% at digit {first}, whose column sums {d.products[first]} product"
                 f"{'s' if d.products[first] != 1 else ''} and a carry")
        parts.append(f"x {d.multiplier_digits}: {digits} ({where})")
    d0 = by_digit[0]
    return (f"Each answer digit right, units first (uniform products of {d0.digits}-digit "
            f"multiplicands, n={d0.n_problems} each, logit lens after {d0.loops} loops): " + "; ".join(parts) + ".")


def _carry_in_sentence(by_digit) -> str:
    """The same answer digits by the carry into their column, per multiplier length, and the
    carries a one-digit multiplier never makes (above 8) against the others."""
    parts = [f"x {d.multiplier_digits}: " + ", ".join(f"{b.span} {b.right:.0%} (n={b.n})" for b in d.by_carry_in)
             for d in by_digit if d.by_carry_in]
    sentence = ("By the carry into the digit's column (n = answer digits, several per problem): "
                + "; ".join(parts) + ".")
    split = []
    for d in by_digit:
        small, large = _pooled(d.by_carry_in, above=ONE_DIGIT_MAX_CARRY)
        if large is not None and small is not None:
            split.append(f"x {d.multiplier_digits} {large:.0%} against {small:.0%} at carries up to 8")
    if split:
        sentence += " Carries above 8, which a one-digit multiplier never makes: " + ", ".join(split) + "."
    return sentence


def _carry_in_far_sentence(by_digit, by_digit_far) -> str:
    """Per multiplier length: each carry bin's accuracy at the trained length beside the far
    length's (n = answer digits in each), and the share of answer digits whose carry passes
    ONE_DIGIT_MAX_CARRY at each. Equal accuracy per bin says the loop carries as well far as
    near: a long product is then lost because it has more columns to slip in."""
    parts = []
    for trained, far in _trained_beside_far(by_digit, by_digit_far):
        if not far.by_carry_in:
            continue
        bins = _trained_and_far(trained.by_carry_in, far.by_carry_in)
        parts.append(f"x {far.multiplier_digits} ({trained.digits} / {far.digits} digits: {bins}; carries above "
                     f"{ONE_DIGIT_MAX_CARRY} into {_share_above(trained.by_carry_in):.0%} / "
                     f"{_share_above(far.by_carry_in):.0%} of the answer digits)")
    if not parts:
        return ""
    return (f"Answer digits right by the carry into their column, trained / far length "
            f"(n={by_digit_far[0].n_problems} problems each, n = answer digits): " + "; ".join(parts) + ".")


def _carry_run_far_sentence(by_digit, by_digit_far) -> str:
    """Per multiplier length: the answer digits right by the run of large carries ending at
    their column, at the trained length beside the far one, and the share of the digits at the
    end of a run of LONG_RUN or more at each. A far length loses accuracy there when its runs
    are longer than any the trained length held often."""
    parts = []
    for trained, far in _trained_beside_far(by_digit, by_digit_far):
        if not (far.by_carry_run and trained.by_carry_run):
            continue
        parts.append(f"x {far.multiplier_digits} ({trained.digits} / {far.digits} digits: "
                     f"{_trained_and_far(trained.by_carry_run, far.by_carry_run, decimals=1)}; runs of {LONG_RUN} or "
                     f"more end at "
                     f"{_share_from(trained.by_carry_run, LONG_RUN):.1%} / {_share_from(far.by_carry_run, LONG_RUN):.1%} "
                     f"of the answer digits)")
    if not parts:
        return ""
    return (f"By the run of columns in a row, ending at the digit's, that take a carry of "
            f"{MultiplicationTask.LARGE_CARRY} or more, trained / far length: " + "; ".join(parts) + ".")


def _trained_beside_far(by_digit, by_digit_far):
    """(trained, far) `DigitAccuracy` pairs of the same multiplier length, in by_digit_far's order."""
    near = {d.multiplier_digits: d for d in by_digit}
    return [(near[far.multiplier_digits], far) for far in by_digit_far if far.multiplier_digits in near]


def _trained_and_far(trained_bins, far_bins, decimals: int = 0) -> str:
    """"0 100% (n=90) / 99% (n=400), ...": each bin's accuracy at both lengths, "-" where empty;
    `decimals` where the shares sit near 100% and a tenth of a point is the difference."""
    at_trained, at_far = ({b.span: b for b in bins} for bins in (trained_bins, far_bins))
    spans = [span for _, span in sorted({(b.lo, b.span) for b in trained_bins + far_bins})]
    return ", ".join(f"{span} {_right(at_trained.get(span), decimals)} / {_right(at_far.get(span), decimals)}"
                     for span in spans)


def _share_from(bins, lo: int) -> float:
    """The share of the answer digits in the bins from `lo` up."""
    total = sum(b.n for b in bins)
    return sum(b.n for b in bins if b.lo >= lo) / total if total else 0.0


def _wrong_digits_sentence(rows) -> str:
    """The share of the wrong answer digits off by one, per multiplier and length: a carry
    misjudged by one, where it is most of them; a wrong column sum, where it is near chance."""
    rows = sorted((d for d in rows if d.wrong is not None and d.wrong.n), key=lambda d: (d.multiplier_digits, d.digits))
    parts = [f"x {d.multiplier_digits} at {d.digits} digits {d.wrong.share(-1, 1):.0%} (n={d.wrong.n})" for d in rows]
    if not parts:
        return ""
    symbols = sum(d.wrong.not_a_digit for d in rows)
    return ("Share of the wrong answer digits off by one (what a carry misjudged by one gives; 2 in 9 if wrong digits "
            "were random; n = wrong digits): " + ", ".join(parts) + "."
            + (f" {symbols} more answer positions read a symbol that is no digit." if symbols else ""))


def _error_sources_sentence(sources) -> str:
    """Per multiplier length, how many of the far length's wrong digits had every product of their
    column read right by the partial-product readout: those went wrong in the adding."""
    parts = [f"x {s.multiplier_digits} at {s.digits} digits {s.wrong_in_adding} of {s.wrong}" for s in sources if s.wrong]
    if not parts:
        return ""
    return ("Of those wrong digits, the ones whose column's partial products the trained readout read all right, "
            "so that the adding went wrong and not the multiplying: " + ", ".join(parts) + ".")


def _partial_product_sentence(by_digit) -> str:
    """Per multiplier length of 2 digits or more, the answer digits of the columns that add
    every partial product, right by the size of each product (and, in brackets, among those
    with a small carry in): a product whose size costs accuracy is one the model adds badly."""
    rows = [d for d in by_digit if d.by_partial_product]
    if not rows:
        return ""
    small = rows[0].by_partial_product[0].SMALL_CARRY

    def shares(bins):
        return " / ".join(f"{b.span} {b.right:.0%}" for b in bins)
    parts = [f"x {d.multiplier_digits} ({d.digits} digits, n={sum(b.n for b in d.by_partial_product[0].bins)} "
             "answer digits): " + "; ".join(f"{s.product} {shares(s.bins)} ({shares(s.small_carry_bins)})"
                                           for s in d.by_partial_product)
             for d in rows]
    return (f"In the columns that add all of the multiplier's partial products, the answer digits right by the size of each product "
            f"(in brackets: those whose carry in is at most {small}): " + "; ".join(parts) + ".")


def _right(carry_bin, decimals: int = 0) -> str:
    return "-" if carry_bin is None else f"{carry_bin.right:.{decimals}%} (n={carry_bin.n})"


def _share_above(bins) -> float:
    """The share of the answer digits whose carry in passes ONE_DIGIT_MAX_CARRY."""
    return _share_from(bins, ONE_DIGIT_MAX_CARRY + 1)


def _by_multiplier_sentence(rows) -> str:
    """Exact match per row split by the multiplier's digit sum (n = problems per bin)."""
    parts = [f"{row.digits} x {row.multiplier_digits} " + ", ".join(f"{b.span} {b.exact_match:.0%} (n={b.n})"
                                                                    for b in row.bins)
             for row in rows]
    sentence = ("By the sum of the multiplier's digits (up to 9 no column carries more than 8, as with one digit; "
                "the accuracy table's problems): " + "; ".join(parts) + ".")
    if digit_parts := [_digit_split_text(row) for row in rows if row.by_multiplier_digit]:
        large = next(row.by_multiplier_digit[0].LARGE_DIGIT for row in rows if row.by_multiplier_digit)
        # the leading digit is never 0: its small side is 1-4
        sentence += (f" By each multiplier digit b_j (units first), below {large} against {large} and above: "
                     + "; ".join(digit_parts) + ".")
    return sentence


def _digit_split_text(row) -> str:
    def share(value):
        return "n/a" if value is None else f"{value:.0%}"
    return f"{row.digits} x {row.multiplier_digits} " + ", ".join(
        f"b_{d.j} {share(d.small_exact_match)} (n={d.small_n}) / {share(d.large_exact_match)} (n={d.large_n})"
        for d in row.by_multiplier_digit)


def _pooled(bins, above: int) -> tuple[float | None, float | None]:
    """(right among the digits whose carry is at most `above`, right among the others); None
    where a side has no digit."""
    def share(group):
        n = sum(b.n for b in group)
        return sum(b.right * b.n for b in group) / n if n else None
    return share([b for b in bins if b.lo <= above]), share([b for b in bins if b.lo > above])


def _slope_sentence(x, y) -> str:
    return LinearFit.of(x, y).describe("loops per column of reach")


def _heads_sentence(result) -> str:
    reading, knocked = result.heads_far, result.knockout
    reads = []
    for head in reading.multiplier_heads:
        group, mass = reading.main_group(head)
        reads.append(f"{head} {group} ({mass:.0%})")
    sentence = f"Multiplier heads ({reading.label}, settled loops): " + ", ".join(reads) + "."
    offset = [h for h, kind in zip(reading.heads, reading.kinds, strict=True) if kind.startswith("offset")]
    if offset:
        sentence += " Offset heads: " + ", ".join(
            f"{reading.labelled(h)} {group} ({mass:.0%})" for h in offset for group, mass in [reading.main_group(h)]) + "."
    if knocked.baseline < 0.5:  # a knockout cannot show what a head is needed for when little is right
        return sentence + (f" Knockouts not read: only {knocked.baseline:.0%} of {knocked.label} are right "
                           f"after {knocked.n_loops} loops without one.")
    worst = []
    for group in knocked.groups:
        head, left = knocked.worst(group)
        worst.append(f"{group} from {head}: {left:.0%}")
    return sentence + (f" Forbidding one head one key group in every loop ({knocked.label}, n={knocked.n_problems}, "
                       f"{knocked.baseline:.0%} right without), the most harmful: " + "; ".join(worst) + ".")


def _carry_guess_sentence(guess, slopes: tuple[float, float]) -> str:
    zeros, nines = guess.waits()
    return (f"Such pairs read without a switch ({guess.label}, {len(guess.fitted())} of {len(guess.pairs)} right "
            f"throughout by loop {guess.horizon}): in {guess.at_once()} of them one product locks its run in at once "
            f"(under {guess.AT_ONCE:g} loops per column), in the others both wait; the steeper product of each pair "
            f"waits for the carry at a median {slopes[0]:.2f} loops per column, its twin at {slopes[1]:.2f}; the "
            f"steeper is the 9s in {nines} pairs, the 0s in {zeros}.")

"""Multiplication by looping: accuracy of N x k products far past the trained length, which
head reads which multiplier digit, and the carry wave of products.

Every answer digit i of a * b has a carry reach (`tasks.product_carries.carry_reach`): how
many columns below it decide the carry it receives, carries being 0..(sum of b's digits),
not 0/1. Its lock-in loop is the first loop from which the logit lens reads the right digit
at every later loop up to the horizon. A loop that moves carries a fixed number of columns
per iteration locks a digit in at a loop that grows linearly with its reach.

Samples (named in every label, because they give different numbers):
* uniform: a multiplicand of exactly D digits times a multiplier of exactly k digits, digits
  uniform (most reaches short);
* near a power of ten: a = (c * 10^D + 10^D - 1) // b for a random 2-digit c, so the
  product is c followed by a run of 9s and a few digits: the carry decisions reach far down.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from abacus_interp.core.halting import generate_adaptive
from abacus_interp.core.tokens import DIGITS
from abacus_interp.errors import UserError
from abacus_interp.evaluation.common import section_rng
from abacus_interp.evaluation.extrapolation import length_extrapolation
from abacus_interp.tasks.base import random_with_digits
from abacus_interp.tasks.multiplication import MultiplicationTask
from abacus_interp.tasks.product_carries import carries_in, carry_reach, large_carry_runs
from analyses._running_sum import RunningSumReading, running_sum_reading
from analyses.carry_wave.analysis import lens_answers, lock_in_loops, per_loop_correct
from analyses.carry_wave.patching import delayed_carry
from analyses.common import resolve
from analyses.contract import configure
from analyses.prose import LinearFit

from .config import MultiplicationConfig
from .errors import ErrorSources, count_error_sources, read_answers_and_products
from .heads import head_reading, knockout
from .multipliers import accuracy_by_factor_pair, accuracy_by_partial_product, by_multiplier
from .result import (
    CARRY_BINS,
    RUN_BINS,
    CarryBin,
    CarryRunBin,
    DelayedProduct,
    DigitAccuracy,
    HaltingFit,
    MultiplicationResult,
    ReachFit,
    WrongDigits,
)
from .waves import carry_guess, delayed_pair


def run(model_or_run, task=None, *, config: MultiplicationConfig | None = None, **overrides) -> MultiplicationResult:
    """Multiplication by looping on an answer-slot N x k multiplier (a LoopedTransformer, a run
    directory or a .safetensors checkpoint; `task` defaults to the run's).

    config: every setting (`MultiplicationConfig`); default the report's.
    overrides: fields of the config by name, e.g. `n_problems=16, horizon=32`.
    """
    cfg = configure(MultiplicationConfig, config, overrides, "multiplication.run()")
    subject = resolve(model_or_run, task, max_loops=None)
    model, task = subject.model, subject.task
    reason = skip_reason(model, task)
    if reason:
        raise UserError(reason)
    if cfg.horizon > model.cfg.max_loops:
        raise UserError(f"horizon={cfg.horizon} exceeds the model's max_loops={model.cfg.max_loops}; "
                        f"load it with load_model(path, max_loops={cfg.horizon})")
    n_trained, far, seed = task.max_digits, task.max_digits * cfg.far_multiple, cfg.seed
    k_lo, k_most = task.multiplier_range
    ks = tuple(range(k_lo, k_most + 1))
    lengths = sorted({max(1, round(m * n_trained)) for m in cfg.length_multiples})
    accuracy = length_extrapolation(model, task, lengths, multipliers=ks, n=cfg.n_problems, seed=seed)
    # the inside is read where the model is right: the longest multiplier it gets right at
    # least half the time in distribution (a knockout of a model that is always wrong says nothing)
    k_hi = max((k for k in ks if accuracy.row(n_trained, None, k).exact_match >= 0.5), default=ks[0])

    groups = {
        ("uniform", n_trained): _uniform(task, n_trained, k_hi, cfg.n_problems, seed),
        ("near a power of ten", n_trained): _near_power_of_ten(task, n_trained, k_hi, cfg.n_problems, seed),
        ("uniform", far): _uniform(task, far, k_hi, cfg.n_problems, seed),
        ("near a power of ten", far): _near_power_of_ten(task, far, k_hi, cfg.n_problems, seed),
    }
    fits = [_reach_fit(f"{sample}, {d} x {k_hi} digits", sample, d, k_hi, examples,
                       per_loop_correct(model, examples, cfg.horizon)[1])
            for (sample, d), examples in groups.items()]

    hard = groups[("near a power of ten", n_trained)] + groups[("near a power of ten", far)]
    decoded = generate_adaptive(model, [e.prompt for e in hard], max_new_tokens=far + k_hi + 2)
    longest = [max(carry_reach(*e.operands)) for e in hard]
    halting = HaltingFit(label=f"near a power of ten, {n_trained} and {far} x {k_hi} digits",
                         longest_reach=tuple(longest), loops_used=tuple(decoded.loops_used),
                         converged=tuple(decoded.converged), fit=LinearFit.of(longest, decoded.loops_used))

    delayed = _delayed(model, task, far, k_hi, [s for s in cfg.switch_loops if s < cfg.horizon], cfg.horizon,
                       section_rng(seed, "multiplication delayed carry", far))
    guess = carry_guess(model, task, far, k_hi, cfg.n_problems, seed)  # such pairs without a switch
    heads_trained = heads_far = knocked = None
    if model.cfg.multiplier_heads:
        head_loops = min(cfg.head_loops, cfg.horizon)
        heads_trained, heads_far = (
            head_reading(model, groups[("uniform", d)], head_loops, f"uniform, {d} x {k_hi} digits")
            for d in (n_trained, far))
        knocked = knockout(model, groups[("uniform", far)], cfg.horizon, f"uniform, {far} x {k_hi} digits",
                           [f"b_{j}" for j in range(k_hi)] + ["a_i", "a_(i-1)", "answer slot below"])
    inside = (f"the inside is read on {k_hi}-digit multipliers, the longest the model gets right at least half the "
              f"time in distribution" if k_hi < k_most else f"the inside is read on {k_hi}-digit multipliers")
    return MultiplicationResult(trained_digits=n_trained, multiplier_digits=ks, horizon=cfg.horizon,
                                inside_multiplier_digits=k_hi, inside=inside,
                                accuracy=accuracy, lock_in=tuple(fits), halting=halting, delayed=delayed,
                                heads_trained=heads_trained, heads_far=heads_far, knockout=knocked, carry_guess=guess,
                                **_per_multiplier_length(model, task, ks, far, cfg))


def skip_reason(model, task) -> str | None:
    """Why the analysis cannot run on (model, task); None when it can."""
    if task.name != "multiplication":
        return f"task {task.name!r} is not multiplication"
    if not (model.is_looped and model.cfg.answer_slots):
        return ("the product's carry wave is read off an answer-slot model's loops (answer_format='slots'); "
                "this model writes its answer token by token (the product-columns section reads it)")
    if task.max_multiplier_digits is None:
        return ("this run multiplies two numbers of the same range (N x N); the analysis follows an N x k "
                "run's multiplier digits and long multiplicands (task max_multiplier_digits)")
    if model.cfg.positional != "none":
        return ("the analysis runs multiplicands 4x the trained length, past this model's position table "
                f"(positional={model.cfg.positional!r}): it was not built to extrapolate in length")
    return None


def digit_accuracy(model, examples, digits: int, k: int, loops: int,
                   answers_read: Sequence[Sequence[int]] | None = None) -> DigitAccuracy:
    """Each answer digit's accuracy on `examples` (products of a `digits`-digit multiplicand
    and a k-digit multiplier), read by the logit lens after `loops` loops; `answers_read`: those
    readings already made (per problem, the token at each answer position), else read here."""
    vocab = model.cfg.vocab
    if answers_read is None:
        answers_read = [tokens.tolist() for tokens in lens_answers(model, examples, loops)]
    # per problem, one symbol per answer digit (the EOS after the answer is not read)
    read = [[vocab.tokens[i] for i in tokens] for tokens in answers_read]
    wanted = [[vocab.tokens[i] for i in vocab.encode(e.target)] for e in examples]
    correct = [[got == want for got, want in zip(r, w, strict=True)] for r, w in zip(read, wanted, strict=True)]
    n_answer = max(len(c) for c in correct)
    right = []
    for i in range(n_answer):
        at_i = [c[i] for c in correct if len(c) > i]  # products one digit shorter have no top digit
        right.append(round(sum(at_i) / len(at_i), 4))
    # column i of a D-digit times a k-digit number sums a_(i-j) * b_j over 0 <= j < k, 0 <= i - j < D
    products = tuple(max(0, min(i, k - 1) - max(0, i - digits + 1) + 1) for i in range(n_answer))
    return DigitAccuracy(label=f"uniform, {digits} x {k} digits", digits=digits, multiplier_digits=k,
                         n_problems=len(examples), loops=loops, right=tuple(right), products=products,
                         by_carry_in=accuracy_by_carry_in(examples, correct),
                         by_carry_run=accuracy_by_carry_run(examples, correct),
                         wrong=wrong_digits(read, wanted),
                         by_partial_product=accuracy_by_partial_product(examples, correct, k),
                         by_factor_pair=accuracy_by_factor_pair(examples, correct, k))


def wrong_digits(read: list[list[str]], wanted: list[list[str]]) -> WrongDigits:
    """How far each wrong answer digit is from the right one (`WrongDigits`): `read` and
    `wanted` hold, per problem, the symbol read and the right one at each answer position."""
    counts, not_a_digit = [0] * len(WrongDigits.OFFSETS), 0
    for answer, right in zip(read, wanted, strict=True):
        for got, want in zip(answer, right, strict=True):
            if got == want:
                continue
            if got not in DIGITS or want not in DIGITS:
                not_a_digit += 1
                continue
            offset = (int(got) - int(want) + 5) % 10 - 5  # in -5..4
            counts[WrongDigits.OFFSETS.index(offset)] += 1
    return WrongDigits(counts=tuple(counts), not_a_digit=not_a_digit)


def accuracy_by_carry_in(examples, right) -> tuple[CarryBin, ...]:
    """How often the answer digits are right, grouped by the carry into their column
    (`CARRY_BINS`; bins no digit falls in are left out). `right`: per example, whether each
    answer digit (units first, one per digit of the product) is right."""
    return _binned([carries_in(*e.operands) for e in examples], right, CARRY_BINS, CarryBin)


def accuracy_by_carry_run(examples, right) -> tuple[CarryRunBin, ...]:
    """How often the answer digits are right, grouped by the run of large carries (the task's
    LARGE_CARRY or more) ending at their column (`RUN_BINS`; empty bins left out). `right` as
    for `accuracy_by_carry_in`."""
    runs = [large_carry_runs(*e.operands, MultiplicationTask.LARGE_CARRY) for e in examples]
    return _binned(runs, right, RUN_BINS, CarryRunBin)


def _binned(values, right, bins, bin_type):
    """`bin_type`s of `bins`: per bin, how many answer digits have a value in it and the share
    right; `values` and `right` hold one entry per answer digit of each example."""
    counts = {bounds: [0, 0] for bounds in bins}
    for row_values, row in zip(values, right, strict=True):
        for value, ok in zip(row_values, row, strict=True):
            tally = counts[next((lo, hi) for lo, hi in bins if value >= lo and (hi is None or value <= hi))]
            tally[0] += bool(ok)
            tally[1] += 1
    return tuple(bin_type(lo=lo, hi=hi, n=n, right=round(hits / n, 4)) for (lo, hi), (hits, n) in counts.items() if n)


def _per_multiplier_length(model, task, ks, far: int, cfg: MultiplicationConfig) -> dict:
    """Each answer digit's accuracy and each column's running-sum reading, on the same uniform
    problems of the trained multiplicand length, one per multiplier length; and for multipliers
    of 2 digits or more, each answer digit's accuracy at `far` too (whether large carries are
    added as well there), and exact match by the multiplier's digit sum at both lengths (the
    accuracy table's problems where `far` is one of its lengths, as the report's are); where the
    model has the partial-product readout, whether the far digits went wrong in the multiplying or
    in the adding (the same problems as by_digit_far)."""
    n = task.max_digits
    far_readings = [_far_reading(model, task, far, k, cfg) for k in ks if k > 1 and far > n]
    return {"by_multiplier": tuple(by_multiplier(model, task, d, k, cfg.n_problems, cfg.seed)
                                   for k in ks if k > 1 for d in sorted({n, far})),
            "by_digit": tuple(digit_accuracy(model, _uniform(task, n, k, cfg.n_problems, cfg.seed), n, k, cfg.horizon)
                              for k in ks),
            "by_digit_far": tuple(accuracy for accuracy, _ in far_readings),
            "error_sources": tuple(sources for _, sources in far_readings if sources is not None),
            "running_sum": tuple(r for k in ks if (r := _running_sum(model, task, n, k, cfg)) is not None)}


def _far_reading(model, task, far: int, k: int, cfg: MultiplicationConfig) -> tuple[DigitAccuracy, ErrorSources | None]:
    """Each answer digit's accuracy on uniform far x k products, and where the model has the
    partial-product readout, where their wrong digits come from: one pass serves both."""
    examples = _uniform(task, far, k, cfg.n_problems, cfg.seed)
    if model.cfg.partial_product_probe is None:
        return digit_accuracy(model, examples, far, k, cfg.horizon), None
    readings = read_answers_and_products(model, task, examples, cfg.horizon)
    accuracy = digit_accuracy(model, examples, far, k, cfg.horizon, [r.answer_read for r in readings])
    return accuracy, count_error_sources(model, examples, readings, far, k, cfg.horizon, f"uniform, {far} x {k} digits")


def _running_sum(model, task, digits: int, k: int, cfg: MultiplicationConfig) -> RunningSumReading | None:
    """The running-sum reading of by_digit's problems; the fitted readouts learn on 4x as many others."""
    fit = task.sample_cell(4 * cfg.n_problems, section_rng(cfg.seed, "multiplication running-sum fit", digits, k),
                           digits, k)
    return running_sum_reading(model, _uniform(task, digits, k, cfg.n_problems, cfg.seed), fit, cfg.horizon,
                               f"uniform {digits} x {k} digits", products_of=k)


def _uniform(task, digits: int, k: int, n: int, seed: int):
    return task.sample_cell(n, section_rng(seed, "multiplication uniform", digits, k), digits, k)


def _near_power_of_ten(task, digits: int, k: int, n: int, seed: int):
    """`n` products of a `digits`-digit multiplicand and a k-digit multiplier that read c,
    then a run of 9s, then a few digits (a = (c * 10^D + 10^D - 1) // b, c of 2 digits)."""
    rng = section_rng(seed, "multiplication near a power of ten", digits, k)
    out = []
    while len(out) < n:
        b = random_with_digits(rng, k)
        if b == 0:  # a 1-digit multiplier may be drawn as 0
            continue
        power = digits + k - 3  # the product has about `digits + k` digits
        a = (rng.randint(10, 99) * 10**power + 10**power - 1) // b
        if len(str(a)) == digits:
            out.append(task.make(a, b))
    return out


def _reach_fit(label, sample, digits, k, examples, correct) -> ReachFit:
    reach, locks, never, exact = [], [], 0, 0
    for example, table in zip(examples, correct, strict=True):
        distance = carry_reach(*example.operands)  # one per answer digit (the table has no EOS row)
        loops = lock_in_loops(table)
        exact += all(lo is not None for lo in loops)
        for r, lo in zip(distance, loops, strict=True):
            if lo is None:
                never += 1
            else:
                reach.append(r)
                locks.append(lo)
    by_reach: dict[int, list[int]] = {}
    for r, lo in zip(reach, locks, strict=True):
        by_reach.setdefault(r, []).append(lo)
    medians = tuple((r, float(sorted(v)[len(v) // 2])) for r, v in sorted(by_reach.items()))
    return ReachFit(label=label, sample=sample, digits=digits, multiplier_digits=k, n_problems=len(examples),
                    exact_match_at_horizon=exact / len(examples), never_locked=never, reach=tuple(reach),
                    lock_in=tuple(locks), median_by_reach=medians, fit=LinearFit.of(reach, locks))


def _delayed(model, task, digits: int, k: int, switch_loops: list[int], horizon: int,
             rng: random.Random) -> DelayedProduct:
    """A pair (a + 1) * b and a * b, where a * b is c followed by 9s: the clean product (a + 1)
    carries into every 9 (they become 0s), so the digits that differ are the run the carry
    crosses; the multiplicands differ only in their units digit."""
    a, b = delayed_pair(task, digits, k, rng)
    clean, corrupted = task.make(a + 1, b), task.make(a, b)
    differ = tuple(i for i, (x, y) in enumerate(zip(clean.target, corrupted.target, strict=True)) if x != y)
    patch = delayed_carry(model, task, (a + 1, b), (a, b), len(differ), switch_loops, horizon, answer_digits=differ)
    return DelayedProduct(digits=differ, patch=patch)

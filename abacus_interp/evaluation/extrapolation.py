"""Length extrapolation: exact match of greedy answers on operands far longer than training,
on two samplers that are not the training one, with the loops each problem used.

* "uniform": both operands of exactly `digits` digits, every digit uniform (most carry
  chains are short: a chain of length c has probability about 10^-(c-1) per column);
* "chain c": a planted carry chain of exactly length c (one generating column, then c - 1
  columns summing to 9; `tasks.carries.sample_with_cascade`) in operands of `digits` digits,
  the rest random: the problems a carry has to travel furthest in (addition only);
* "uniform x k" (`multipliers`, multiplication): a multiplicand of exactly `digits` digits
  times a multiplier of exactly k digits, every digit uniform (N x k multiplication, where
  only the multiplicand grows).

Answers are decoded with the model's default loops (adaptive when `cfg.halt_tol` is set, see
`abacus_interp.core.halting`) or a fixed count. The result is a typed table; `format_table`
prints it with every row's sample size.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ..core.devices import free_memory
from ..core.halting import generate_adaptive, resolve_halting
from ..errors import UserError
from ..tasks.carries import longest_cascade, sample_with_cascade
from .common import check_fits_model, section_rng

# A batch's attention memory (ArithmeticModel.attention_bytes, summed over its problems) is
# kept under this, unless one problem alone needs more (check_fits_model bounds that by the
# memory free): 2 GiB batches the usual lengths whole and thousands of digits one by one.
ATTENTION_BYTES_PER_BATCH = 2 * 2**30


@dataclass(frozen=True)
class ExtrapolationRow:
    digits: int  # operand length (both operands; the multiplicand's with multiplier_digits)
    sample: str  # "uniform", "chain c" or "uniform x k"
    chain: int | None  # the planted chain length; None for uniform problems
    multiplier_digits: int | None  # k of "uniform x k"; None when both operands have `digits`
    n: int  # problems scored
    exact_match: float
    loops_median: float
    loops_max: int
    converged: float | None  # share that met the tolerance before the cap; None at fixed loops
    # exact match among the problems that did and did not converge (None: no such problem)
    exact_match_converged: float | None
    exact_match_not_converged: float | None
    # of the problems scored (uniform: what the sampler gave); None for a task without carries
    longest_chain_median: float | None


@dataclass(frozen=True)
class ExtrapolationResult:
    trained_digits: int  # the task's max_digits: the in-distribution length
    rows: tuple[ExtrapolationRow, ...]
    tol: float | None  # the halting tolerance; None at a fixed loop count
    cap: int | None  # the loop cap of adaptive halting
    fixed_loops: int | None  # the loop count when not adaptive
    seed: int

    def row(self, digits: int, chain: int | None = None, multiplier_digits: int | None = None) -> ExtrapolationRow:
        for r in self.rows:
            if r.digits == digits and r.chain == chain and r.multiplier_digits == multiplier_digits:
                return r
        raise KeyError(f"no row for {digits} digits, chain {chain}, multiplier of {multiplier_digits} digits")

    def to_dict(self) -> dict:
        return asdict(self)


def problems(task, digits: int, chain: int | None, n: int, seed: int, multiplier_digits: int | None = None):
    """The `n` problems of one row, from a stream keyed by (seed, digits, chain) or
    (seed, digits, "x", multiplier_digits)."""
    if multiplier_digits is not None:
        return task.sample_cell(n, section_rng(seed, "extrapolation", digits, "x", multiplier_digits),
                                digits, multiplier_digits)
    rng = section_rng(seed, "extrapolation", digits, chain)
    if chain is None:
        return task.sample_cell(n, rng, digits, digits)
    if chain > digits:
        raise UserError(f"a carry chain of {chain} columns does not fit operands of {digits} digits")
    return [task.make(*sample_with_cascade(chain, digits, rng)) for _ in range(n)]


def length_extrapolation(
    model,
    task,
    lengths: Sequence[int],
    chains: Sequence[tuple[int, int]] = (),
    n: int = 100,
    n_loops: int | None = None,
    tol: float | None = None,
    max_loops: int | None = None,
    seed: int = 0,
    batch_size: int = 128,
    multipliers: Sequence[int] = (),
) -> ExtrapolationResult:
    """Exact match per operand length on uniform problems (`lengths`) and per (digits,
    chain) on planted carry chains (`chains`). With `multipliers` (multiplication), each
    length is scored once per multiplier length k instead: a `digits`-digit multiplicand
    times a k-digit multiplier. `n_loops` fixes the loop count; otherwise each problem runs
    to convergence (`tol`, default the model's `halt_tol`, at most `max_loops`)."""
    has_carries = getattr(task, "has_carries", False)
    _check_task(task, chains, multipliers, has_carries)
    fixed, tol = resolve_halting(model, n_loops, tol)
    cap = (model.cfg.max_loops if max_loops is None else max_loops) if fixed is None else None
    specs = _row_specs(lengths, chains, multipliers)
    _check_attention_fits(model, specs)
    # every row drawn and checked against the model's positions before any is decoded, so a
    # length the model cannot read ends in one line, not after the rows before it ran
    row_problems = [problems(task, digits, chain, n, seed, k) for digits, chain, k in specs]
    for (digits, _chain, k), examples in zip(specs, row_problems, strict=True):
        what = f"a {digits}-digit x {k}-digit problem" if k is not None else f"a problem with {digits}-digit operands"
        for example in examples:
            check_fits_model(model, example, what)
    rows = [_score_row(model, task, spec, examples, fixed, tol, cap, batch_size, has_carries)
            for spec, examples in zip(specs, row_problems, strict=True)]
    return ExtrapolationResult(trained_digits=task.max_digits, rows=tuple(rows), tol=tol, cap=cap,
                               fixed_loops=fixed, seed=seed)


def _check_task(task, chains: Sequence[tuple[int, int]], multipliers: Sequence[int], has_carries: bool) -> None:
    """Refuse rows the task cannot have: planted chains without carries, multiplier lengths
    outside multiplication, and any task that is neither addition nor multiplication."""
    if chains and not has_carries:
        raise UserError(f"planted carry chains are addition problems; task {task.name!r} has no carries")
    if multipliers and task.name != "multiplication":
        raise UserError(f"multiplier lengths apply to multiplication; task {task.name!r} has none: leave them out")
    if not has_carries and task.name != "multiplication":
        raise UserError(f"length extrapolation scores addition and multiplication; task {task.name!r} is neither")


def _row_specs(lengths: Sequence[int], chains: Sequence[tuple[int, int]],
               multipliers: Sequence[int]) -> list[tuple[int, int | None, int | None]]:
    """(digits, chain, multiplier digits) of every row, in the table's order: the uniform
    rows (once per multiplier length with `multipliers`), then the planted chains."""
    if multipliers:
        specs = [(d, None, k) for d in lengths for k in multipliers]
    else:
        specs = [(d, None, None) for d in lengths]
    specs += [(d, c, None) for d, c in chains]
    return specs


def _check_attention_fits(model, specs: list[tuple[int, int | None, int | None]]) -> None:
    for digits, _chain, _k in specs:
        # a problem has at least 2 x digits tokens (the operand and the answer): a length whose
        # attention could not fit even so is refused before its problems are drawn, which
        # for 10**30 digits would never end
        needed, free = model.attention_bytes(2 * digits), free_memory(model.W_E.device)
        if free is not None and needed > free:
            raise UserError(
                f"a problem with {digits}-digit operands has at least {2 * digits} tokens, and attending over "
                f"them needs more than {needed / 2**30:.3g} GiB, more than the {free / 2**30:.1f} GiB free; "
                "use shorter operands"
            )


def _score_row(model, task, spec: tuple[int, int | None, int | None], examples, fixed: int | None,
               tol: float | None, cap: int | None, batch_size: int, has_carries: bool) -> ExtrapolationRow:
    """Decode one row's problems (adaptive loops unless `fixed`) and score them."""
    digits, chain, k = spec
    prompts = [e.prompt for e in examples]
    budget = task.max_answer_digits(digits, digits if k is None else k) + 1  # the answer and its EOS
    # attention's memory grows with the square of the length: long rows run fewer
    # problems at a time (one, for thousands of digits) instead of asking for hundreds of GB
    longest = max(len(model.cfg.vocab.split(p)) for p in prompts) + budget
    per_batch = max(1, min(batch_size, ATTENTION_BYTES_PER_BATCH // model.attention_bytes(longest)))
    if fixed is None:
        decoded = generate_adaptive(model, prompts, tol=tol, max_loops=cap, max_new_tokens=budget,
                                    batch_size=per_batch)
        completions, used, converged = decoded.completions, decoded.loops_used, decoded.converged
    else:
        completions = model.generate(prompts, n_loops=fixed, max_new_tokens=budget, batch_size=per_batch)
        used, converged = [fixed] * len(prompts), None
    correct = [task.check(e, c) for e, c in zip(examples, completions, strict=True)]
    return ExtrapolationRow(
        digits=digits,
        sample=(f"uniform x {k}" if k is not None else "uniform") if chain is None else f"chain {chain}",
        chain=chain,
        multiplier_digits=k,
        n=len(examples),
        exact_match=sum(correct) / len(correct),
        loops_median=float(statistics.median(used)),
        loops_max=max(used),
        converged=None if converged is None else sum(converged) / len(converged),
        exact_match_converged=_share(correct, converged, True),
        exact_match_not_converged=_share(correct, converged, False),
        longest_chain_median=float(statistics.median(longest_cascade(*e.operands) for e in examples))
        if has_carries else None,
    )


def _share(correct: list[bool], converged: list[bool] | None, which: bool) -> float | None:
    if converged is None:
        return None
    picked = [c for c, ok in zip(correct, converged, strict=True) if ok == which]
    return sum(picked) / len(picked) if picked else None


def format_table(result: ExtrapolationResult) -> str:
    if result.fixed_loops is not None:
        how = f"{result.fixed_loops} loops for every problem"
    else:
        how = f"adaptive loops: each problem until its answer's relative step < {result.tol:g}, at most {result.cap}"
    lines = [
        f"length extrapolation (trained on operands of up to {result.trained_digits} digits; {how})",
        f"{'digits':>6} {'x trained':>9} {'sample':>11} {'n':>5} {'exact':>7} {'loops med':>9} {'max':>4} "
        f"{'converged':>9} {'exact|conv':>10} {'exact|not':>9}",
    ]
    for r in result.rows:
        lines.append(
            f"{r.digits:>6} {r.digits / result.trained_digits:>8.1f}x {r.sample:>11} {r.n:>5} {r.exact_match:>7.1%} "
            f"{r.loops_median:>9g} {r.loops_max:>4} {_pct(r.converged):>9} {_pct(r.exact_match_converged):>10} "
            f"{_pct(r.exact_match_not_converged):>9}"
        )
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"

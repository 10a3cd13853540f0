"""Measure the carry wave of an answer-slot adder: per loop, which answer digits are right.

Every answer digit k of a problem has a carry distance: how many columns below it decide
whether a carry arrives (`tasks.carries.decision_distance`: the run of columns summing to 9
directly below it, plus the column that generates or kills). Its lock-in loop is the first
loop from which the logit lens reads the right digit at every later loop up to the horizon.
A model that ripples carries one column per step locks a digit in at a loop that grows
linearly with its carry distance; the slope is the loops it spends per link.

Samples (named in every label, because they give different numbers):
* uniform: both operands of exactly D digits, digits uniform (mostly short distances);
* planted chains: a run of c - 1 columns summing to 9 above one deciding column, c spread
  over 1..D (`tasks.carries.sample_with_cascade`), the rest random. In every other problem
  the deciding column kills the carry instead of generating it, so the digits above it are
  9s, not 0s: a model that guessed "a carry comes" without waiting for it is wrong on half.
"""

from __future__ import annotations

import statistics

import numpy as np
import torch

from abacus_interp.core.halting import generate_adaptive
from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.evaluation.common import section_rng
from abacus_interp.evaluation.extrapolation import length_extrapolation
from abacus_interp.evaluation.grid import cell_fits
from abacus_interp.tasks.carries import (
    carry_chain_lengths,
    decision_distance,
    sample_with_cascade,
)
from analyses.common import resolve
from analyses.contract import configure
from analyses.prose import LinearFit

from .config import CarryWaveConfig
from .heads import head_reading, knockout, reads_columns
from .patching import chain_pair, delayed_carry
from .result import CarryWaveResult, ConvergenceCheck, HaltingFit, LockInFit, WaveProblem
from .stability import path_independence_by_length

# the key groups whose removal, head by head, the knockout measures
KNOCKOUT_GROUPS = ("aligned a_i, b_i", "carry source a_(i-1), b_(i-1)", "answer slot below")


def run(model_or_run, task=None, *, config: CarryWaveConfig | None = None, **overrides) -> CarryWaveResult:
    """The carry wave of an answer-slot adder (a LoopedTransformer, a run directory or a
    .safetensors checkpoint; `task` defaults to the run's).

    config: every setting (`CarryWaveConfig`, whose field comments say what each does);
        default `CarryWaveConfig()`, the report's, so this computes its numbers (the report
        lowers `horizon` to the model's max_loops; here a horizon past it is an error).
    overrides: fields of the config by name, e.g. `n_problems=16, horizon=32`.
    """
    cfg = configure(CarryWaveConfig, config, overrides, "carry_wave.run()")
    n_problems, horizon, seed = cfg.n_problems, cfg.horizon, cfg.seed
    subject = resolve(model_or_run, task, max_loops=None)
    model, task = subject.model, subject.task
    _check_model(model, task, horizon, cfg.far_multiple)
    n_trained, far = task.max_digits, task.max_digits * cfg.far_multiple
    accuracy = length_extrapolation(model, task, _fitting_lengths(model, task, cfg.length_multiples),
                                    chains=[(n_trained, n_trained), (far, far)], n=n_problems, seed=seed)
    groups = {
        ("uniform", n_trained): _uniform(task, n_trained, n_problems, seed),
        ("planted chains", n_trained): planted_chains(task, n_trained, n_problems, seed),
        ("uniform", far): _uniform(task, far, n_problems, seed),
        ("planted chains", far): planted_chains(task, far, n_problems, seed),
    }
    fits = [_lock_in_fit(f"{sample}, {digits} digits", sample, digits, examples,
                         per_loop_correct(model, examples, horizon)[1])
            for (sample, digits), examples in groups.items()]
    halting = _halting_fit(model, groups[("planted chains", n_trained)], groups[("planted chains", far)],
                           n_trained, far)
    far_planted = groups[("planted chains", far)]
    example = wave_example(task, far)
    wave = _wave(example, per_loop_correct(model, [example], horizon)[0][0])

    chain = max(1, far - 2)
    clean, corrupted = chain_pair(far, chain, section_rng(seed, "carry-wave delayed carry", far))
    delayed = delayed_carry(model, task, clean, corrupted, chain, [s for s in cfg.switch_loops if s < horizon], horizon)
    convergence = _convergence_check(model, task, far_planted, cfg.stress_cap, far)
    heads_trained = heads_far = knocked = None
    if reads_columns(model):
        heads_trained, heads_far = (
            head_reading(model, groups[("planted chains", d)], min(cfg.head_loops, horizon), f"planted chains, {d} digits")
            for d in (n_trained, far))
        knocked = knockout(model, far_planted, horizon, f"planted chains, {far} digits", KNOCKOUT_GROUPS)
    path_lengths = _fitting_lengths(model, task, cfg.path_multiples)
    path = path_independence_by_length(model, {d: _uniform(task, d, n_problems, seed) for d in path_lengths}, horizon, seed)
    return CarryWaveResult(trained_digits=n_trained, horizon=horizon, accuracy=accuracy, lock_in=tuple(fits),
                           halting=halting, wave=wave, delayed=delayed, convergence=convergence,
                           heads_trained=heads_trained, heads_far=heads_far, knockout=knocked, path_independence=path)


def _check_model(model, task, horizon: int, far_multiple: int) -> None:
    """Refuse a model the carry wave cannot read: not an answer-slot adder, too few hook sets
    for the horizon, or positions too short for the far length."""
    if not (model.cfg.answer_slots and getattr(task, "has_carries", False)):
        raise UserError("the carry wave needs an addition model trained in the answer-slot format")
    if horizon > model.cfg.max_loops:
        raise UserError(f"horizon={horizon} exceeds the model's max_loops={model.cfg.max_loops}; "
                         f"load it with load_model(path, max_loops={horizon})")
    reason = far_length_reason(model, task, far_multiple)
    if reason:
        raise UserError(reason)


def _fitting_lengths(model, task, multiples) -> list[int]:
    """The operand lengths `multiples` x the trained one, leaving out those past the model's
    positions (a model without a position table takes any)."""
    n_trained = task.max_digits
    return sorted({d for m in multiples if fits_positions(model, task, d := max(1, round(m * n_trained)))})


def _halting_fit(model, planted_trained, planted_far, n_trained: int, far: int) -> HaltingFit:
    """Loops adaptive halting uses against each planted problem's longest carry distance."""
    planted = planted_trained + planted_far
    decoded = generate_adaptive(model, [e.prompt for e in planted], max_new_tokens=far + 2)
    chains = [max(decision_distance(*e.operands)) for e in planted]
    return HaltingFit(label=f"planted chains, {n_trained} and {far} digits", longest_chain=tuple(chains),
                      loops_used=tuple(decoded.loops_used), converged=tuple(decoded.converged),
                      fit=LinearFit.of(chains, decoded.loops_used))


def _convergence_check(model, task, far_planted, stress_cap: int, far: int) -> ConvergenceCheck:
    """Exact match of the far planted chains among those that converge by `stress_cap` loops
    and those that do not."""
    stressed = generate_adaptive(model, [e.prompt for e in far_planted], max_loops=stress_cap, max_new_tokens=far + 2)
    right = [task.check(e, c) for e, c in zip(far_planted, stressed.completions, strict=True)]
    return ConvergenceCheck(
        label=f"planted chains, {far} digits", cap=stress_cap, n=len(right),
        converged=stressed.convergence_rate,
        exact_match_converged=_mean([r for r, c in zip(right, stressed.converged, strict=True) if c]),
        exact_match_not_converged=_mean([r for r, c in zip(right, stressed.converged, strict=True) if not c]),
    )


def fits_positions(model, task, digits: int) -> bool:
    """Whether a problem with two operands of `digits` digits fits the model's positions."""
    return cell_fits(task, digits, digits, model.cfg.max_seq_len)


def far_length_reason(model, task, far_multiple: int) -> str | None:
    """Why the carry wave cannot run on `model` (None when it can): it compares problems of
    the trained length N with problems `far_multiple` times longer."""
    far = task.max_digits * far_multiple
    if fits_positions(model, task, far):
        return None
    return (f"the carry wave compares {task.max_digits}-digit problems with {far}-digit ones, which do not fit this "
            f"model's positions (max_seq_len={model.cfg.max_seq_len}): it was not built to extrapolate in length")


def _uniform(task, digits: int, n: int, seed: int):
    return task.sample_cell(n, section_rng(seed, "carry-wave uniform", digits), digits, digits)


def wave_example(task, digits: int):
    """The problem the wave is drawn on: 199...95 + 5, whose units column generates a carry that
    the nines above pass up to the top digit (answer digit k waits for a carry k columns below).
    Not a planted chain of the sample: there a 9-sum column is any pair (4+5, 7+2, ...), and
    extrap-add has every digit of such a chain right by loop 2 (it answers a 9-sum column as if
    a carry were coming), so the wave hides; on 199...95 + 5 its digits lock in one by one
    (loop 2 at the units to 26 at digit 20)."""
    return task.make(int("1" + "9" * (digits - 2) + "5"), 5)


def planted_chains(task, digits: int, n: int, seed: int):
    """`n` problems whose planted chain lengths are spread evenly over 1..digits; every other
    one with its generating column turned into a killing one (no carry, same distances)."""
    rng = section_rng(seed, "carry-wave planted", digits)
    chains = [1 + (i * (digits - 1)) // max(1, n - 1) for i in range(n)]
    out = []
    for i, c in enumerate(chains):
        a, b = sample_with_cascade(c, digits, rng)
        if i % 2:
            a, b = _kill_generator(a, b, c, rng)
        out.append(task.make(a, b))
    return out


def _kill_generator(a: int, b: int, chain: int, rng) -> tuple[int, int]:
    """(a, b) with the column that starts the chain of length `chain` made to sum to 2..8
    (digits kept non-zero, so neither operand gets shorter)."""
    lengths = carry_chain_lengths(a, b)
    column = lengths.index(chain) - chain  # the chain of `chain` links arrives at lengths.index(chain)
    x = rng.randint(1, 7)
    y = rng.randint(1, 8 - x)
    scale = 10**column
    a += (x - (a // scale) % 10) * scale
    b += (y - (b // scale) % 10) * scale
    return a, b


@torch.no_grad()
def per_loop_correct(model, examples, horizon: int, batch_size: int = 64) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per problem, [loop, answer digit] arrays of the logit lens after each loop 1..horizon:
    the probability of the right digit, and whether it is the greedy one. Inputs are what
    training feeds (prompt, answer, EOS; the model reads every answer token as a slot)."""
    vocab = model.cfg.vocab
    probs, correct = [], []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        batch = encode_batch(vocab, [e.prompt for e in chunk], [e.target for e in chunk])
        tokens = batch.tokens.to(model.W_E.device)
        inputs, index = model.embed(tokens), model.attention_index(tokens)
        rows = _answer_rows(vocab, chunk, batch.prompt_lengths)
        p_loops = [[] for _ in chunk]
        state = None
        for t in range(horizon):
            state = model.run_loops(inputs, range(t, t + 1), state=state, index=index)
            logp = model.unembed(state).float().log_softmax(-1)  # [batch pos d_vocab]
            for i, positions in enumerate(rows):
                targets = tokens[i, positions + 1]
                p_loops[i].append((logp[i, positions].gather(-1, targets[:, None])[:, 0].exp(),
                                   logp[i, positions].argmax(-1) == targets))
        for i in range(len(chunk)):
            probs.append(torch.stack([p for p, _ in p_loops[i]]).cpu().numpy())  # [loop digit]
            correct.append(torch.stack([c for _, c in p_loops[i]]).cpu().numpy())
    return probs, correct


@torch.no_grad()
def lens_answers(model, examples, loops: int, batch_size: int = 64) -> list[np.ndarray]:
    """Per problem, the token the logit lens reads greedily at each answer position after
    `loops` loops (the answer's digits; the EOS after them is not read): what
    `per_loop_correct`'s last loop scores, in one pass, kept as tokens so that a wrong digit can
    be compared with the right one."""
    vocab = model.cfg.vocab
    out = []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        batch = encode_batch(vocab, [e.prompt for e in chunk], [e.target for e in chunk])
        tokens = batch.tokens.to(model.W_E.device)
        state = model.run_loops(model.embed(tokens), range(loops), index=model.attention_index(tokens))
        greedy = model.unembed(state).float().argmax(-1)  # [batch pos], as per_loop_correct reads it
        for i, positions in enumerate(_answer_rows(vocab, chunk, batch.prompt_lengths)):
            out.append(greedy[i, positions].cpu().numpy())
    return out


def _answer_rows(vocab, chunk, prompt_lengths) -> list[torch.Tensor]:
    """Per problem, the positions whose next token is an answer token (the last prompt token's first)."""
    n_answer = [len(vocab.encode(e.target)) for e in chunk]
    return [torch.arange(int(p) - 1, int(p) - 1 + k) for p, k in zip(prompt_lengths, n_answer, strict=True)]


def lock_in_loops(correct: np.ndarray) -> list[int | None]:
    """Per answer digit: the first loop (1-based) from which it is right at every later loop
    up to the horizon; None when it is wrong at the horizon."""
    out = []
    for k in range(correct.shape[1]):
        column = correct[:, k]
        if not column[-1]:
            out.append(None)
            continue
        wrong = np.nonzero(~column)[0]
        out.append(int(wrong[-1]) + 2 if len(wrong) else 1)
    return out


def _lock_in_fit(label, sample, digits, examples, correct) -> LockInFit:
    chains, locks, never, exact = [], [], 0, 0
    for example, table in zip(examples, correct, strict=True):
        distance = decision_distance(*example.operands)  # one per answer digit (the table has no EOS row)
        loops = lock_in_loops(table)
        exact += all(lo is not None for lo in loops)
        for c, lo in zip(distance, loops, strict=True):
            if lo is None:
                never += 1
            else:
                chains.append(c)
                locks.append(lo)
    by_chain = sorted({c: statistics.median([lo for cc, lo in zip(chains, locks, strict=True) if cc == c])
                       for c in set(chains)}.items())
    return LockInFit(label=label, sample=sample, digits=digits, n_problems=len(examples),
                     exact_match_at_horizon=exact / len(examples), never_locked=never, chain=tuple(chains),
                     lock_in=tuple(locks), median_by_chain=tuple(by_chain), fit=LinearFit.of(chains, locks))


def _wave(example, p_correct: np.ndarray) -> WaveProblem:
    a, b = example.operands
    distance = decision_distance(a, b)
    n = len(distance)
    locks = lock_in_loops(p_correct > 0.5)[:n]
    return WaveProblem(prompt=example.prompt, human=f"{a}+{b}", chain=max(distance), carry_distance=tuple(distance),
                       p_correct=tuple(tuple(round(float(p), 4) for p in row[:n]) for row in p_correct),
                       lock_in=tuple(locks))


def _mean(values: list[bool]) -> float | None:
    return sum(values) / len(values) if values else None

"""Adaptive loops: run each problem's loop until its answer has converged.

A model trained in the answer-slot format (`ModelConfig.answer_slots`) reads a placeholder in
every answer position, so it computes the whole answer in one forward pass: the answer
positions are filled with placeholder digits and the block is applied one loop at a time.
After each loop t, a problem halts when the relative step of the state at its answer
positions,

    ||s_t - s_(t-1)|| / ||s_t||      (the fixed-point analysis's criterion)

falls below `tol`; its answer is read at that loop. A problem that never gets there halts
at the cap (`max_loops`) and is marked not converged. Halted problems leave the batch, so a
batch costs what its hardest problem needs, not the cap.

The answer region of a problem is its positions from "=" up to the first predicted EOS: a
position's state depends only on the tokens up to it (causal attention), so the placeholders
after the answer change nothing before them. Greedy readout from the one pass equals
token-by-token greedy decoding at the same loop count whenever the answer is digits then
EOS; a row whose readout holds another token is re-run with that token in place until the
readout is stable (at most one re-run per answer position), so the two agree always.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..errors import UserError
from .tokens import EOS_ID, PAD_ID

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AdaptiveDecoding:
    """Completions of adaptive-loop decoding with the loops each problem used."""

    completions: list[str]  # greedy, EOS stripped, in the order of the prompts
    loops_used: list[int]  # per prompt: the loop count its answer was read at
    converged: list[bool]  # per prompt: False when it reached the cap before the tolerance
    tol: float
    cap: int

    @property
    def convergence_rate(self) -> float:
        return sum(self.converged) / max(1, len(self.converged))


def relative_step(state, previous, valid) -> torch.Tensor:
    """Per-example ||s_t - s_(t-1)|| / ||s_t|| over real positions: zero at a fixed point."""
    step = ((state - previous) * valid).flatten(1).norm(dim=1)
    return step / (state * valid).flatten(1).norm(dim=1).clamp_min(1e-6)


def resolve_halting(model, n_loops: int | None, tol: float | None) -> tuple[int | None, float | None]:
    """(fixed loop count, tolerance): exactly one is not None. An explicit `n_loops` wins;
    otherwise the tolerance given, or the model's own (`cfg.halt_tol`), or its trained depth."""
    if n_loops is not None:
        return n_loops, None
    tol = tol if tol is not None else model.cfg.halt_tol
    if tol is None:
        return model.cfg.n_loops, None
    if not model.cfg.answer_slots:
        raise UserError(
            "adaptive loops need a model trained in the answer-slot format (answer_slots=True): "
            "an autoregressive model's answer passes through its own earlier tokens; pass n_loops"
        )
    return None, tol


@torch.no_grad()
def generate_adaptive(
    model,
    prompts: Sequence[str],
    tol: float | None = None,
    max_loops: int | None = None,
    max_new_tokens: int | None = None,
    batch_size: int = 256,
) -> AdaptiveDecoding:
    """Greedy completions of model-order prompts, each problem's loop run until its answer
    converged (`tol`, default `cfg.halt_tol`) or `max_loops` (default `cfg.max_loops`).

    `max_new_tokens`: answer positions computed per prompt (EOS included); default as many
    as the prompt has tokens (enough for the sum or product of its operands)."""
    if isinstance(prompts, str):
        raise TypeError("generate_adaptive takes a list of prompts; wrap a single prompt in a list")
    cfg = model.cfg
    if not cfg.answer_slots:
        raise UserError("adaptive loops need a model trained in the answer-slot format (answer_slots=True)")
    _, tol = resolve_halting(model, None, tol)
    if tol is None or not math.isfinite(tol) or tol < 0:
        raise UserError(f"tol={tol}: give a finite tolerance >= 0 (0 runs every problem to the cap)")
    cap = cfg.max_loops if max_loops is None else max_loops
    model.check_loops(cap)
    placeholder = cfg.vocab.encode("0")[0]  # read as the slot symbol; any digit gives the same indices
    digits = set(cfg.vocab.digit_ids)
    completions, loops_used, converged = [], [], []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(prompts), batch_size):
            rows = [cfg.vocab.encode(p) for p in prompts[start : start + batch_size]]
            budgets = [_budget(len(r), max_new_tokens, model.longest_sequence) for r in rows]
            answers = [[placeholder] * b for b in budgets]
            pending = list(range(len(rows)))
            done: dict[int, tuple[list[int], int, bool]] = {}
            fixed: dict[int, int] = {}  # rows being re-run: the loop count their first pass halted at
            for _ in range(max(budgets) + 1):  # each re-run fixes at least one more answer token
                results = _halting_pass(model, [rows[i] + answers[i] for i in pending],
                                        [len(rows[i]) for i in pending], tol, cap, [fixed.get(i) for i in pending])
                again = []
                for i, (read, used, ok) in zip(pending, results, strict=True):
                    done[i] = (read, used, done[i][2] if i in fixed else ok)
                    if _place_non_digits(answers[i], read, digits, placeholder):
                        fixed.setdefault(i, used)
                        again.append(i)
                if not again:
                    break
                pending = again
            for i in range(len(rows)):
                read, used, ok = done[i]
                completions.append(cfg.vocab.decode(read))
                loops_used.append(used)
                converged.append(ok)
    finally:
        model.train(was_training)
    return AdaptiveDecoding(completions=completions, loops_used=loops_used, converged=converged, tol=tol, cap=cap)


def _place_non_digits(answer: list[int], read: list[int], digits: set[int], placeholder: int) -> bool:
    """Make `answer` (the tokens fed at the answer positions) hold every non-digit token the
    readout predicted before its EOS, and the placeholder digit everywhere else; True when
    that changed it. Digits need no exact value: every answer token is read as the slot
    symbol and any digit gives the same Abacus index, but a non-digit resets the index of
    the digits after it."""
    body = read[:-1] if read and read[-1] == EOS_ID else read
    wanted = [t if t not in digits else placeholder for t in body]
    wanted += [placeholder] * (len(answer) - len(wanted))
    if wanted == answer:
        return False
    answer[:] = wanted
    return True


def _budget(prompt_len: int, max_new_tokens: int | None, longest_sequence: int | None) -> int:
    """Answer positions to compute: `max_new_tokens`, or as many as the prompt has tokens
    (enough for the sum or product of its operands), within the model's longest sequence
    when it has one (`ArithmeticModel.longest_sequence`; a model without a position table
    has none, and its answers are not cut at max_seq_len)."""
    if max_new_tokens is not None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        return max_new_tokens
    if longest_sequence is None:
        return max(1, prompt_len)
    return max(1, min(prompt_len, longest_sequence - prompt_len))


def _halting_pass(
    model, rows: list[list[int]], prompt_lens: list[int], tol: float, cap: int, fixed: list[int | None]
):
    """One forward pass over right-padded `rows`, a loop at a time. A row with a `fixed` loop
    count halts there (a re-run with non-digit tokens in place keeps its first pass's loop
    count, so its readout settles). Returns per row (greedy answer ids up to and including
    EOS, loops used, converged)."""
    device = model.W_E.device
    length = max(len(r) for r in rows)
    tokens = torch.full((len(rows), length), PAD_ID, dtype=torch.long)
    for i, r in enumerate(rows):
        tokens[i, : len(r)] = torch.tensor(r)
    tokens = tokens.to(device)
    starts = torch.tensor(prompt_lens, device=device) - 1  # the "=" predicts the first answer token
    # the last answer token is predicted one position before the last placeholder
    ends = torch.tensor([len(r) for r in rows], device=device) - 2
    positions = torch.arange(length, device=device)
    # right padding needs no mask under causal attention: a real position never sees a pad
    inputs = model.embed(tokens)  # [batch pos d_model]
    index = model.attention_index(tokens)
    out: list[tuple[list[int], int, bool] | None] = [None] * len(rows)
    active = torch.arange(len(rows), device=device)
    fixed_at = torch.tensor([f or 0 for f in fixed], device=device)  # 0: halt by the tolerance
    state = None
    for t in range(cap):
        new = model.run_loops(inputs, range(t, t + 1), state=state, index=index)  # [active pos d_model]
        predicted = _greedy(model.unembed(new))  # [active pos]
        region = _answer_region(predicted, positions, starts[active], ends[active])  # [active pos]
        # ||s_t - s_(t-1)|| / ||s_t|| over each row's answer region; 1 before the first loop
        step = torch.ones(len(active), device=device) if state is None else relative_step(new, state, region[..., None])
        at = fixed_at[active]
        halted = torch.where(at > 0, at == t + 1, step < tol) | (t + 1 >= cap)
        for j in halted.nonzero().flatten().tolist():
            row = int(active[j])
            read = predicted[j, region[j]].tolist()
            out[row] = (read, t + 1, bool(step[j] < tol))
        keep = ~halted
        if not bool(keep.any()):
            break
        active, state, inputs = active[keep], new[keep], inputs[keep]
        index = index[keep] if index is not None else None
    return out


def _greedy(logits: Float[Tensor, "batch pos d_vocab"]) -> Int[Tensor, "batch pos"]:
    logits = logits.clone()
    logits[..., PAD_ID] = float("-inf")  # padding is never an answer
    return logits.argmax(-1)


def _answer_region(
    predicted: Int[Tensor, "batch pos"], positions: Int[Tensor, " pos"], starts: Int[Tensor, " batch"],
    ends: Int[Tensor, " batch"],
) -> Bool[Tensor, "batch pos"]:
    """Positions whose prediction is part of the answer: from the "=" up to the first
    predicted EOS (included), or to the last computed position."""
    inside = (positions[None] >= starts[:, None]) & (positions[None] <= ends[:, None])
    is_eos = (predicted == EOS_ID) & inside
    first_eos = torch.where(is_eos, positions[None], ends[:, None] + 1).amin(1)  # [batch]
    return inside & (positions[None] <= first_eos[:, None])

"""Patching the carry wave: switch the carry on at loop s and watch the wave start at s.

A pair of problems differs only in the units column: in the clean problem it generates a
carry that travels up a chain of columns summing to 9 (the answer digits above become 0s and
the column after the chain gains one); in the corrupted problem it does not (they stay 9s).
Both answers have the same length, so the two sequences align token by token and differ only
in the two units digits of the input, which every loop re-injects.

The patch: run the corrupted problem for s loops, then inject the clean input (the units
column patched) from loop s + 1 on. If the loop carries by a wave that starts where the carry
is generated, each chain digit locks in to the clean answer s loops later than in the clean
run (lock-in - s constant in s). Patching a single position's state instead changes nothing
at the horizon: a path-independent loop recomputes its state from the input it keeps reading.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError


@dataclass(frozen=True)
class DelayedCarry:
    clean: str  # "a+b" in the usual order; its units column generates the carry
    corrupted: str  # the same but for the units column, which does not
    chain: int  # columns the carry travels: answer digits 1..chain differ between the two
    switch_loops: tuple[int, ...]  # loops run on the corrupted input before the clean one (0: the clean run)
    # [switch][answer digit 1..chain]: the loop (1-based, from the start) from which the digit
    # reads the clean answer at every later loop up to the horizon; None: not by the horizon
    lock_in: tuple[tuple[int | None, ...], ...]
    horizon: int
    corrupted_right: bool  # the corrupted run alone reads the corrupted answer at the horizon


def chain_pair(digits: int, chain: int, rng: random.Random) -> tuple[tuple[int, int], tuple[int, int]]:
    """Operands of `digits` digits whose units column generates (clean) or does not generate
    (corrupted) a carry through columns 1..chain-1 summing to 9; the columns above the chain
    sum to at most 8, so neither answer gains a digit."""
    if not 1 <= chain < digits:
        raise UserError(f"a chain of {chain} in {digits} digits: need 1 <= chain < digits (the top column stays free)")
    a, b = [], []  # least significant first
    for column in range(digits):
        if column == 0:
            x = rng.randint(1, 9)
            y = rng.randint(10 - x, 9)  # generates
        elif column < chain:
            x = rng.randint(0, 9)
            y = 9 - x
        else:  # gains at most the arriving carry: never overflows; the top digits are non-zero
            x = rng.randint(1, 7)
            y = rng.randint(1, 8 - x) if column == digits - 1 else rng.randint(0, 8 - x)
        a.append(x)
        b.append(y)
    kill_x = rng.randint(0, 8)
    kill_y = rng.randint(0, 8 - kill_x)

    def number(ds: list[int]) -> int:
        return int("".join(str(d) for d in reversed(ds)))

    return (number(a), number(b)), (number([kill_x, *a[1:]]), number([kill_y, *b[1:]]))


@torch.no_grad()
def delayed_carry(model, task, clean_operands: tuple[int, int], corrupted_operands: tuple[int, int],
                  chain: int, switch_loops: list[int], horizon: int,
                  answer_digits: Sequence[int] | None = None) -> DelayedCarry:
    """Lock-in loops of the chain's answer digits when the clean input replaces the corrupted
    one after each number of loops in `switch_loops` (see the module docstring).
    `answer_digits`: the digits to follow (units = 0), when they are not 1..chain (the
    multiplication analysis follows the digits in which its two products differ)."""
    clean_ex, corrupted_ex = task.make(*clean_operands), task.make(*corrupted_operands)
    batch = encode_batch(model.cfg.vocab, [clean_ex.prompt, corrupted_ex.prompt], [clean_ex.target, corrupted_ex.target])
    if not bool(batch.valid.all()) or int(batch.prompt_lengths[0]) != int(batch.prompt_lengths[1]):
        raise ValueError(f"{clean_operands} and {corrupted_operands} must give sequences of the same layout")
    tokens = batch.tokens.to(model.W_E.device)  # [2 pos]
    n_prompt, n_digits = int(batch.prompt_lengths[0]), len(clean_ex.target)
    # the logits at position n_prompt - 1 + k read answer digit k; the chain's are digits 1..chain
    followed = range(1, chain + 1) if answer_digits is None else answer_digits
    reads = n_prompt - 1 + torch.tensor(list(followed), dtype=torch.long)
    inputs, index = model.embed(tokens), model.attention_index(tokens)  # [2 pos d_model], [2 pos]
    clean_in, corrupted_in = inputs[:1], inputs[1:]
    index = None if index is None else index[:1]  # both inputs share one layout

    corrupted_states, state = [None], None  # the state after s corrupted loops, s = 0..
    for t in range(max(switch_loops)):
        state = model.run_loops(corrupted_in, range(t, t + 1), state=state, index=index)
        corrupted_states.append(state)
    answer = torch.arange(n_prompt - 1, n_prompt - 1 + n_digits)
    final = model.unembed(model.run_loops(corrupted_in, range(horizon), index=index))[0, answer].argmax(-1)
    corrupted_right = bool((final == tokens[1, answer + 1]).all())

    lock_in = []
    for s in switch_loops:
        state, right = corrupted_states[s], []  # right: [loop chain] after each loop s+1..horizon
        for t in range(s, horizon):
            state = model.run_loops(clean_in, range(t, t + 1), state=state, index=index)
            right.append(model.unembed(state)[0, reads].argmax(-1) == tokens[0, reads + 1])
        lock_in.append(tuple(_lock_in(torch.stack(right), first_loop=s + 1)))
    human = [f"{x}{task.op_symbol}{y}" for x, y in (clean_operands, corrupted_operands)]
    return DelayedCarry(clean=human[0], corrupted=human[1], chain=chain, switch_loops=tuple(switch_loops),
                        lock_in=tuple(lock_in), horizon=horizon, corrupted_right=corrupted_right)


def _lock_in(right: torch.Tensor, first_loop: int) -> list[int | None]:
    """Per column of `right` [loop digit] (its rows are loops first_loop, first_loop + 1, ...):
    the first loop from which the digit is right at every later row; None if wrong at the last."""
    out = []
    for column in right.T.tolist():
        if not column[-1]:
            out.append(None)
            continue
        wrong = [i for i, ok in enumerate(column) if not ok]
        out.append(first_loop + (wrong[-1] + 1 if wrong else 0))
    return out

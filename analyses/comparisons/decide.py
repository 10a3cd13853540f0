"""The deciding digit: when does a sorter's answer lock in, against which digit decides it, and
where in the list is the decision carried, loop by loop?

Planted pairs `a:X,b:Y=` of two numbers of the trained length that agree on every digit above
Abacus index m and differ at m (digits below m random): digit m decides which label comes
first, and it sits depth = length - m + 1 places from the top, where a comparison starts.

* Lock-in: the logit lens of the "=" position (which predicts the first answer label) after
  each loop; the loop from which it names the right label through the last trained loop.
* Patching: the corrupted pair swaps the two digits at index m, which flips the order. The
  state entering loop t at one group of positions is copied from the clean run into the
  corrupted run; "flipped" is the share of pairs whose first label then follows the clean
  run, over the pairs the model tells apart (right on the clean pair and giving the other
  label on the swapped one: elsewhere a flip says nothing). A group that flips the answer in
  loop t carries the decision into that loop. LSD-first and causal, the digits above the
  deciding one come after it and can have read it: their state may carry the decision too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from abacus_interp.core.hooks import hook_name
from abacus_interp.core.tokens import encode_batch
from analyses.prose import LinearFit

PATCH_GROUPS = ("the deciding digits", "digits above them", "digits below them", "labels and separators", "=")


@dataclass(frozen=True)
class DecidingRow:
    index: int  # the deciding digit's Abacus index (1 = units)
    depth: int  # its place from the top (1 = the leading digit)
    n: int
    exact_match: float  # the first label right after the trained loops
    lock_in: float | None  # mean loop (1-based) the first label locks in at, over the right pairs


@dataclass(frozen=True)
class DecidingDigit:
    label: str  # the sample
    digits: int
    n_loops: int
    rows: tuple[DecidingRow, ...]
    fit: LinearFit  # lock-in loop against depth, one point per right pair
    patch_groups: tuple[str, ...]
    flipped: tuple[tuple[float | None, ...], ...]  # [group][loop]; None where no told-apart pair has the group
    n_told_apart: int  # pairs the patching reads: right on the clean pair, the other label on the swapped one

    def strongest_patch(self) -> tuple[str, int, float]:
        """The (group, 1-based loop) whose patch flips most pairs, and that share."""
        cells = [(v, g, t + 1) for g, row in zip(self.patch_groups, self.flipped, strict=True)
                 for t, v in enumerate(row) if v is not None]
        v, g, t = max(cells)
        return g, t, v


def planted_pair(digits: int, index: int, rng: random.Random) -> tuple[int, int, int]:
    """Two `digits`-digit numbers x, y equal above Abacus `index` and different at it, and
    x with its digit at `index` swapped for y's (the corrupted pair is that and x + y - it)."""
    lead = 1 if index == digits else 0  # the leading digit is never 0
    above = [rng.randrange(10) for _ in range(digits - index)]  # LSD first
    if above:
        above[-1] = rng.randrange(1, 10)
    dx, dy = rng.sample(range(lead, 10), 2)
    below_x = [rng.randrange(10) for _ in range(index - 1)]
    below_y = [rng.randrange(10) for _ in range(index - 1)]

    def value(lsd_first: list[int]) -> int:
        return int("".join(map(str, reversed(lsd_first))))

    return value(below_x + [dx] + above), value(below_y + [dy] + above), value(below_x + [dy] + above)


def _states(model, tokens, n_loops: int) -> dict[str, torch.Tensor]:
    """The state entering and leaving every loop, by hook name."""
    states: dict[str, torch.Tensor] = {}

    def keep(state, hook):
        states[hook.name] = state.detach().clone()
        return state

    names = [hook_name(site, loop=t) for t in range(n_loops) for site in ("hook_state_pre", "hook_state_post")]
    model.run_with_hooks(tokens, n_loops=n_loops, fwd_hooks=[(n, keep) for n in names])
    return states


def _lock_in(model, tokens, states, equals: int, first, n_loops: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per pair: right after the last loop, and the 1-based loop from which the logit lens of
    the "=" position names the right first label through the last loop. The lens is the
    model's answer read off that loop's state (`answer_logits`: with a pairwise answer, the
    items' summaries of that loop compared)."""
    lens = torch.stack([model.answer_logits(states[hook_name("hook_state_post", loop=t)], tokens)[:, equals].argmax(-1)
                        for t in range(n_loops)], 1) == first[:, None]  # [pair loop]
    trailing = torch.flip(lens.long(), [1]).cumprod(1).sum(1)  # the run of right loops at the end
    return lens[:, -1], (n_loops - trailing + 1).float()


def _flips(model, corrupted, states, positions: list[int], equals: int, first, n_loops: int) -> torch.Tensor:
    """[loop pair]: whether the corrupted pair gives the clean first label when the state
    entering loop t at `positions` is the clean run's."""
    out = []
    for t in range(n_loops):
        name = hook_name("hook_state_pre", loop=t)
        clean = states[name][:, positions]

        def patch(state, hook, clean=clean):
            state[:, positions] = clean
            return state

        logits = model.run_with_hooks(corrupted, n_loops=n_loops, fwd_hooks=[(name, patch)])
        out.append(logits[:, equals].argmax(-1) == first)
    return torch.stack(out)


def _position_groups(digits: int, index: int) -> list[list[int]]:
    """`PATCH_GROUPS` of a pair `a:X,b:Y=` of two `digits`-digit numbers decided at `index`."""
    a_digits = list(range(2, 2 + digits))
    b_digits = list(range(digits + 5, 2 * digits + 5))
    equals = 2 * digits + 5
    return [
        [a_digits[index - 1], b_digits[index - 1]],
        a_digits[index:] + b_digits[index:],
        a_digits[: index - 1] + b_digits[: index - 1],
        [0, 1, digits + 2, digits + 3, digits + 4],
        [equals],
    ]


@torch.no_grad()
def deciding_digit(model, task, cfg) -> DecidingDigit:
    digits, n_loops = task.max_digits, model.cfg.n_loops
    equals = 2 * digits + 5  # "a:" X "," "b:" Y, then "="
    rows, points = [], []
    flipped = torch.zeros(len(PATCH_GROUPS), n_loops)
    seen = torch.zeros(len(PATCH_GROUPS), 1)
    for index in range(1, digits + 1):
        rng = random.Random(f"comparisons deciding {cfg.seed} {index}")
        pairs = [planted_pair(digits, index, rng) for _ in range(cfg.n_pairs)]
        clean = [task.make(x, y) for x, y, _ in pairs]
        corrupt = [task.make(sx, x + y - sx) for x, y, sx in pairs]
        tokens = encode_batch(task.vocab, [e.prompt for e in clean], [e.target for e in clean]).tokens
        corrupted = encode_batch(task.vocab, [e.prompt for e in corrupt], [e.target for e in corrupt]).tokens
        first = tokens[:, equals + 1]  # the clean answer's first label
        states = _states(model, tokens, n_loops)
        right, lock = _lock_in(model, tokens, states, equals, first, n_loops)
        depth = digits - index + 1
        points += [(depth, float(v)) for v in lock[right]]
        rows.append(DecidingRow(index=index, depth=depth, n=len(clean), exact_match=float(right.float().mean()),
                                lock_in=float(lock[right].mean()) if right.any() else None))
        told_apart = right & (model(corrupted, n_loops=n_loops)[:, equals].argmax(-1) != first)  # [pair]
        if not told_apart.any():
            continue
        for g, positions in enumerate(_position_groups(digits, index)):
            if positions:
                seen[g] += int(told_apart.sum())
                flips = _flips(model, corrupted, states, positions, equals, first, n_loops)  # [loop pair]
                flipped[g] += flips[:, told_apart].sum(1).float()
    rate = flipped / seen.clamp(min=1)
    return DecidingDigit(
        label=f"planted pairs of two {digits}-digit numbers equal above the deciding digit",
        digits=digits, n_loops=n_loops, rows=tuple(rows),
        fit=LinearFit.of(*zip(*points, strict=True)) if points else LinearFit.of([], []),
        patch_groups=PATCH_GROUPS,
        flipped=tuple(tuple(None if seen[g] == 0 else round(float(v), 4) for v in rate[g])
                      for g in range(len(PATCH_GROUPS))),
        n_told_apart=int(seen[0]))

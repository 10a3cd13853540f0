"""What each list item's summary holds: the state at its closing separator (the "," after its
number, where a number head reads the whole item), after every loop.

Three linear readouts of the same states, fitted on some lists and scored on the others:
* a digit probe per place (logistic regression; place 0 is the leading digit, chance 10%): is
  that digit there, as one of ten classes?
* an order readout (one ridge regression of the number's value): the share of held-out pairs of
  one list it puts in the right order, by how many leading digits the pair shares;
* a pair probe per count of shared leading digits: a linear comparator (logistic regression on
  the difference of two items' states) fitted to such pairs alone. An answer query scores each
  separator through a linear key, so it compares two items by such a difference: pairs this
  probe cannot order, a score of that form cannot either (up to what the fit can find).

A class probe understates a digit the state holds as a magnitude, which the order readouts read;
so a low class probe with a high order readout says how the digit is held, not that it is missing.

The lists hold the trained maximum of numbers, all of the trained maximum length; a third share
their leading digit and a third their two leading digits (`SortingTask.shared_prefix_values`),
so that close pairs are not rare.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from abacus_interp.core.hooks import hook_name, loop_label
from abacus_interp.core.tokens import encode_batch
from abacus_interp.tasks.base import random_with_digits

from .layout import ListLayout

SHARED = (0, 1, 2)  # leading digits a pair of numbers has in common
TEST_FRACTION = 0.3  # the share of lists the readouts are scored on (never fitted on)
BATCH = 64


@dataclass(frozen=True)
class ItemSummary:
    label: str  # the lists read, in words
    n_lists: int
    n_items: int  # items read: every number of a list but the last (whose closer is "=")
    digits: int
    sites: tuple[str, ...]  # "embedding", then "loop 1", "loop 2", ...
    # [site][place]: held-out accuracy of the digit probe, place 0 the leading digit
    digit_accuracy: tuple[tuple[float, ...], ...]
    # [site][shared]: held-out pairs of one list the order readout puts right, per SHARED
    ordered: tuple[tuple[float | None, ...], ...]
    # [site][shared]: held-out pairs the pair probe fitted to that SHARED alone puts right
    pair_probe: tuple[tuple[float | None, ...], ...]
    # held-out pairs of distinct numbers per SHARED (pairs that share more digits are not read)
    n_pairs: tuple[int, ...]

    @property
    def last(self) -> int:
        """The index of the last loop's site."""
        return len(self.sites) - 1


def summary_lists(task, n: int, seed: int) -> list:
    """`n` lists of the trained maximum of numbers of the trained maximum length: in turn
    uniform, sharing the leading digit, sharing the two leading digits."""
    rng = random.Random(f"comparisons summary {seed}")
    count, digits = task.max_numbers, task.max_digits
    lists = []
    for i in range(n):
        shared = min(SHARED[i % len(SHARED)], digits - 1)
        values = ([random_with_digits(rng, digits) for _ in range(count)] if shared == 0
                  else task.shared_prefix_values(count, digits, digits - shared, rng))
        lists.append(task.make(*values, labels=task.draw_labels(count, rng)))
    return lists


@torch.no_grad()
def item_states(model, task, lists) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[site item d_model] states at each item's closing separator (the state entering loop 1,
    then after each loop), each item's value and the index of its list."""
    n_loops = model.cfg.n_loops
    names = [hook_name("hook_state_pre", loop=0)] + [hook_name("hook_state_post", loop=t) for t in range(n_loops)]
    states, values, owners = [], [], []
    for start in range(0, len(lists), BATCH):
        chunk = lists[start : start + BATCH]
        tokens = encode_batch(task.vocab, [e.prompt for e in chunk], [e.target for e in chunk]).tokens
        items = [(row, number.digit_pos[-1] + 1, value) for row, e in enumerate(chunk)
                 for number, value in zip(ListLayout.of(e.prompt).numbers[:-1], e.operands[:-1], strict=True)]
        rows, positions = torch.tensor([i[0] for i in items]), torch.tensor([i[1] for i in items])
        kept = {}

        def keep(state, hook, kept=kept, rows=rows, positions=positions):
            kept[hook.name] = state[rows, positions].float().cpu()
            return state

        model.run_with_hooks(tokens.to(model.W_E.device), n_loops=n_loops, fwd_hooks=[(n, keep) for n in names])
        states.append(torch.stack([kept[n] for n in names]))
        values += [i[2] for i in items]
        owners += [start + i[0] for i in items]
    return torch.cat(states, 1).numpy(), np.array(values), np.array(owners)


def digit_probe(X: np.ndarray, y: np.ndarray, test: np.ndarray) -> float:
    """Held-out accuracy of a logistic-regression probe for the class `y` (fitted where not `test`)."""
    if len(np.unique(y[~test])) < 2:
        return float(np.mean(y[test] == y[~test][0]))
    probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=3000))
    with threadpool_limits(limits=1):
        probe.fit(X[~test], y[~test])
        return float(probe.score(X[test], y[test]))


def order_readout(X: np.ndarray, values: np.ndarray, test: np.ndarray) -> np.ndarray:
    """A ridge regression of `values` fitted where not `test`: its prediction for every row."""
    readout = make_pipeline(StandardScaler(), Ridge(alpha=1.0))
    with threadpool_limits(limits=1):
        readout.fit(X[~test], values[~test].astype(float))
        return readout.predict(X)


def shared_digits(x: int, y: int) -> int:
    """How many leading digits two numbers have in common (0 when their lengths differ)."""
    a, b = str(x), str(y)
    if len(a) != len(b):
        return 0
    return next((i for i, (p, q) in enumerate(zip(a, b, strict=True)) if p != q), len(a))


def list_pairs(values: np.ndarray, owners: np.ndarray) -> list[tuple[int, int, int]]:
    """(a, b, shared leading digits) for every pair of distinct numbers of one list whose shared
    count is one of `SHARED`."""
    pairs = []
    for owner in np.unique(owners):
        idx = np.nonzero(owners == owner)[0]
        for i, a in enumerate(idx):
            for b in idx[i + 1:]:
                shared = shared_digits(int(values[a]), int(values[b]))
                if values[a] != values[b] and shared in SHARED:
                    pairs.append((int(a), int(b), shared))
    return pairs


def pairs_ordered(predicted: np.ndarray, values: np.ndarray, owners: np.ndarray) -> dict[int, list[bool]]:
    """Per count of shared leading digits (`SHARED`), whether each pair of distinct numbers of one
    list is in the same order by `predicted` as by value."""
    out: dict[int, list[bool]] = {s: [] for s in SHARED}
    for a, b, shared in list_pairs(values, owners):
        out[shared].append(bool((predicted[a] < predicted[b]) == (values[a] < values[b])))
    return out


def pair_probe(X: np.ndarray, values: np.ndarray, owners: np.ndarray, test: np.ndarray) -> dict[int, float | None]:
    """Per `SHARED`: held-out accuracy of a logistic regression of [x < y] on the difference of the
    two states, fitted to the training lists' pairs that share that many leading digits (each pair
    in both orders, no intercept: swapping the pair flips the answer)."""
    fit, scored = list_pairs(values[~test], owners[~test]), list_pairs(values[test], owners[test])
    Xf, vf, Xs, vs = X[~test], values[~test], X[test], values[test]
    out: dict[int, float | None] = {}
    for shared in SHARED:
        train = [(a, b) for a, b, s in fit if s == shared]
        score = [(a, b) for a, b, s in scored if s == shared]
        if len(train) < 4 or not score:
            out[shared] = None
            continue
        diffs = np.concatenate([[Xf[a] - Xf[b] for a, b in train], [Xf[b] - Xf[a] for a, b in train]])
        below = np.array([vf[a] < vf[b] for a, b in train] + [vf[b] < vf[a] for a, b in train])
        probe = make_pipeline(StandardScaler(with_mean=False), LogisticRegression(fit_intercept=False, max_iter=3000))
        with threadpool_limits(limits=1):
            probe.fit(diffs, below)
            out[shared] = float(probe.score(np.array([Xs[a] - Xs[b] for a, b in score]),
                                            np.array([vs[a] < vs[b] for a, b in score])))
    return out


def item_summary(model, task, n_lists: int, seed: int) -> ItemSummary:
    """The digit probes, the order readout and the pair probes at each item's closing separator,
    at the embedding and after every loop, on `summary_lists(task, n_lists, seed)`."""
    lists = summary_lists(task, n_lists, seed)
    states, values, owners = item_states(model, task, lists)
    test = owners >= round(len(lists) * (1 - TEST_FRACTION))  # the last lists: every share of planting
    digits = task.max_digits
    places = np.array([[int(c) for c in str(v)] for v in values])  # [item place], the leading digit first
    accuracy, ordered, paired = [], [], []
    for X in states:
        accuracy.append(tuple(round(digit_probe(X, places[:, p], test), 4) for p in range(digits)))
        pairs = pairs_ordered(order_readout(X, values, test)[test], values[test], owners[test])
        ordered.append(tuple(round(float(np.mean(pairs[s])), 4) if pairs[s] else None for s in SHARED))
        probed = pair_probe(X, values, owners, test)
        paired.append(tuple(None if probed[s] is None else round(probed[s], 4) for s in SHARED))
    held_out = [shared for *_, shared in list_pairs(values[test], owners[test])]
    sites = ("embedding",) + tuple(loop_label(t) for t in range(model.cfg.n_loops))
    return ItemSummary(
        label=(f"lists of {task.max_numbers} numbers of {digits} digits, a third sharing the leading "
               "digit and a third the two leading digits"),
        n_lists=len(lists), n_items=len(values), digits=digits, sites=sites, digit_accuracy=tuple(accuracy),
        ordered=tuple(ordered), pair_probe=tuple(paired), n_pairs=tuple(held_out.count(s) for s in SHARED))

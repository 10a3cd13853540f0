"""What a sorting run writes when an answer label is wrong: a label it already wrote (it failed to
leave a number out), the runner-up (it chose among the numbers left and missed the smallest by
one), a number further down, a number equal to the right one (only the letter order of a tie
missed), a token that labels no number of the list, or the stop too early.

Why: a list of more numbers than trained can fail in two ways that exact match does not tell
apart. Leaving out what is written is bookkeeping over the answer; choosing the smallest of
those left is a comparison among more candidates. Every step with two or more numbers left is
also counted by how close the two smallest of them are (equal, of different lengths, or of one
length and first differing k digits from the top), with how often such a step is wrong: whether
the steps it misses are the close calls or also the easy ones says which of the two fails.

Every step is scored teacher-forced (the right labels before it), as `lists.list_row` scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from abacus_interp.core.tokens import EOS_ID

KINDS = ("written", "runner_up", "later", "tie", "not_in_list", "stopped")


@dataclass(frozen=True)
class Closeness:
    """The steps at which the smallest number left and the runner-up differ one way."""

    kind: str  # "equal", "length" (different lengths) or "place" (one length)
    place: int | None  # for "place": the first differing digit, counted from the top (0 = leading)
    steps: int
    wrong: int  # of them, steps whose pick was wrong (of any kind)

    @property
    def label(self) -> str:
        return {"equal": "are equal", "length": "differ in length"}.get(self.kind, f"differ first at place {self.place}")

    @property
    def wrong_rate(self) -> float:
        return self.wrong / self.steps


@dataclass(frozen=True)
class WrongPicks:
    """The wrong label steps of a row's lists, by what was written instead (counts of steps)."""

    n_steps: int  # label steps scored (the stop excluded)
    written: int  # a label already written
    runner_up: int  # the next smallest number of those left
    later: int  # a number left, further down the order than the runner-up
    tie: int  # a number equal to the right one, written before it against the letter order
    not_in_list: int  # a token that labels no number of the list (another letter, a digit, a symbol)
    stopped: int  # the stop (EOS) before the last label
    # the steps with two or more numbers left, by how the two smallest differ, in the order
    # equal, by length, at place 0, 1, ...
    closeness: tuple[Closeness, ...] = ()

    @property
    def wrong(self) -> int:
        return sum(getattr(self, kind) for kind in KINDS)

    def closeness_of(self, kind: str, place: int | None = None) -> Closeness | None:
        return next((c for c in self.closeness if (c.kind, c.place) == (kind, place)), None)


def classify(labels: str, values: Sequence[int], target: str, step: int, picked: str | None) -> str:
    """What `picked` (a token's text, or None for the stop) is at answer step `step` of the list
    whose number k is `values[k]`, labelled `labels[k]`, and whose answer is `target`: "right",
    or one of KINDS."""
    right = target[step]
    if picked == right:
        return "right"
    if picked is None:
        return "stopped"
    if picked not in tuple(labels):  # a tuple: "" (padding) or "ab" is no label
        return "not_in_list"
    if picked in tuple(target[:step]):
        return "written"
    if values[labels.index(picked)] == values[labels.index(right)]:
        return "tie"
    return "runner_up" if target.index(picked) == step + 1 else "later"


def how_close(smaller: int, larger: int) -> tuple[str, int | None]:
    """("equal", None), ("length", None), or ("place", k): two numbers of one length that first
    differ k digits from the top (k = 0: the leading digit)."""
    if smaller == larger:
        return ("equal", None)
    a, b = str(smaller), str(larger)
    if len(a) != len(b):
        return ("length", None)
    return ("place", next(k for k in range(len(a)) if a[k] != b[k]))


def wrong_picks(examples: Sequence, predicted: Sequence[Sequence[int]], vocab) -> WrongPicks:
    """The wrong picks of `examples` (sorting Examples) from `predicted`, each one's argmax token
    ids at its answer steps, the stop's last (`score_examples(..., per_token=True)`)."""
    kinds = dict.fromkeys(("right", *KINDS), 0)
    steps: dict[tuple[str, int | None], int] = {}  # closeness -> steps
    misses: dict[tuple[str, int | None], int] = {}  # closeness -> wrong steps
    for example, ids in zip(examples, predicted, strict=True):
        labels = "".join(item.split(":")[0] for item in example.prompt.rstrip("=").split(","))
        values, target = example.operands, example.target
        for step, token in enumerate(ids[: len(target)]):
            kind = classify(labels, values, target, step, None if token == EOS_ID else vocab.tokens[token])
            kinds[kind] += 1
            if step + 1 < len(target):  # two or more left: how close are the smallest and the runner-up
                closeness = how_close(values[labels.index(target[step])], values[labels.index(target[step + 1])])
                steps[closeness] = steps.get(closeness, 0) + 1
                misses[closeness] = misses.get(closeness, 0) + (kind != "right")
    n_steps = sum(kinds.values())
    del kinds["right"]
    order = sorted(steps, key=lambda c: (("equal", "length", "place").index(c[0]), c[1] or 0))
    return WrongPicks(n_steps=n_steps, **kinds,
                      closeness=tuple(Closeness(kind, place, steps[kind, place], misses[kind, place])
                                      for kind, place in order))


def describe(picks: WrongPicks) -> str:
    """"of 295 wrong labels (1000 steps): 6% already written, 62% the runner-up, ...; a step is
    wrong where the two smallest left are equal 33% (n=33), differ in length 26% (n=341), ..." """
    if not picks.wrong:
        return "no wrong label"

    def share(count: int) -> str:
        return f"{count / picks.wrong:.0%}"

    rates = ", ".join(f"{c.label} {c.wrong_rate:.0%} (n={c.steps})" for c in picks.closeness)
    return (f"of {picks.wrong} wrong labels ({picks.n_steps} steps): {share(picks.written)} already written, "
            f"{share(picks.runner_up)} the runner-up, {share(picks.later)} one further down, {share(picks.tie)} "
            f"an equal number out of letter order, {share(picks.not_in_list)} no number's, {share(picks.stopped)} "
            f"the stop; a step is wrong where the two smallest left {rates}")

"""What a sorting run writes when an answer label is wrong: a label it already wrote (it failed to
leave a number out), the runner-up (it chose among the numbers left and missed the smallest by
one), a number further down the order, a letter of no number in the list, or the stop too early.

Why: a list of more numbers than trained can fail in two ways that exact match does not tell
apart. Leaving out what is written is bookkeeping over the answer; choosing the smallest of
those left is a comparison among more candidates. The runner-up picks are split further by how
the right number and the runner-up differ (equal, by length, or by the first digit from the top
where two numbers of one length differ), which says how close the candidates it confuses are.

Every step is scored teacher-forced (the right labels before it), as `lists.list_row` scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from abacus_interp.core.tokens import EOS_ID


@dataclass(frozen=True)
class Closeness:
    """The steps at which the smallest number left and the runner-up differ one way."""

    how: str  # "equal", "by length", or "at place k" (one length, first differing k digits from the top)
    steps: int
    wrong: int  # of them, wrong
    runner_up: int  # of the wrong, the runner-up written


@dataclass(frozen=True)
class WrongPicks:
    """The wrong label steps of a row's lists, by what was written instead (counts of steps)."""

    n_steps: int  # label steps scored (the stop excluded)
    written: int  # a label already written
    runner_up: int  # the next smallest number of those left
    later: int  # a number left, further down the order than the runner-up
    not_in_list: int  # a letter that labels no number of the list
    stopped: int  # the stop (EOS) before the last label
    # the steps with two or more numbers left, by how the two smallest differ: how often each
    # kind of closeness is got wrong, in the order equal, by length, at place 0, 1, ...
    closeness: tuple[Closeness, ...] = ()

    @property
    def wrong(self) -> int:
        return self.written + self.runner_up + self.later + self.not_in_list + self.stopped


def classify(labels: str, target: str, step: int, picked: str | None) -> str:
    """What `picked` (a label, or None for the stop) is at answer step `step` of the list whose
    numbers carry `labels` and whose answer is `target`: "right",
    "written", "runner_up", "later", "not_in_list" or "stopped"."""
    if picked == target[step]:
        return "right"
    if picked is None:
        return "stopped"
    if picked in target[:step]:
        return "written"
    if picked not in labels:
        return "not_in_list"
    return "runner_up" if target.index(picked) == step + 1 else "later"


def how_close(smaller: int, larger: int) -> str:
    """"equal", "by length", or "at place k": where two numbers of one length first differ, k
    digits from the top (place 0 = the leading digit)."""
    if smaller == larger:
        return "equal"
    a, b = str(smaller), str(larger)
    if len(a) != len(b):
        return "by length"
    return f"at place {next(k for k in range(len(a)) if a[k] != b[k])}"


def wrong_picks(examples: Sequence, predicted: Sequence[Sequence[int]], vocab) -> WrongPicks:
    """The wrong picks of `examples` (sorting Examples) from `predicted`, each one's argmax token
    ids at its answer steps, the stop's last (`score_examples(..., per_token=True)`)."""
    kinds = dict.fromkeys(("right", "written", "runner_up", "later", "not_in_list", "stopped"), 0)
    close: dict[str, list[int]] = {}  # how -> [steps, wrong, runner_up]
    for example, ids in zip(examples, predicted, strict=True):
        labels = "".join(item.split(":")[0] for item in example.prompt.rstrip("=").split(","))
        value_of = dict(zip(labels, example.operands, strict=True))
        target = example.target
        for step, token in enumerate(ids[: len(target)]):
            kind = classify(labels, target, step, None if token == EOS_ID else vocab.decode([token]))
            kinds[kind] += 1
            if step + 1 < len(target):  # two or more left: how close the smallest and the runner-up are
                tally = close.setdefault(how_close(value_of[target[step]], value_of[target[step + 1]]), [0, 0, 0])
                tally[0] += 1
                tally[1] += kind != "right"
                tally[2] += kind == "runner_up"
    n_steps = sum(kinds.values())
    del kinds["right"]
    return WrongPicks(n_steps=n_steps, **kinds, closeness=tuple(
        Closeness(how, *close[how]) for how in sorted(close, key=_closeness_order)))


def _closeness_order(how: str) -> tuple[int, int]:
    """equal, by length, at place 0, at place 1, ...: from the most to the least told apart by the top."""
    if how.startswith("at place "):
        return (2, int(how.removeprefix("at place ")))
    return (0 if how == "equal" else 1, 0)


def describe(picks: WrongPicks) -> str:
    """"of 295 wrong labels (1000 steps): 6% already written, 62% the runner-up, ...; wrong where
    the two smallest left differ by length 4% (n=310), at place 0 21% (n=430), ..." for a row."""
    if not picks.wrong:
        return "no wrong label"

    def share(count: int) -> str:
        return f"{count / picks.wrong:.0%}"

    rates = ", ".join(f"{c.how} {c.wrong / c.steps:.0%} (n={c.steps})" for c in picks.closeness)
    return (f"of {picks.wrong} wrong labels ({picks.n_steps} steps): {share(picks.written)} already written, "
            f"{share(picks.runner_up)} the runner-up, {share(picks.later)} one further down, "
            f"{share(picks.not_in_list)} no number's, {share(picks.stopped)} the stop; wrong where the two "
            f"smallest left differ {rates}")

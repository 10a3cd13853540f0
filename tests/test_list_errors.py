"""What a sorting run writes instead of the right label (`evaluation/list_errors.py`): each wrong
step sorted by kind on hand-built lists and predictions, a row's tallies against its own
scores, and, on the shipped sorter, that with ten numbers it gets steps wrong whose two smallest
numbers differ in length, which it never gets wrong in its trained range."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from abacus_interp.checkpoints import load_model
from abacus_interp.core.scoring import score_examples
from abacus_interp.core.tokens import EOS_ID, PAD_ID
from abacus_interp.evaluation.list_errors import classify, how_close, wrong_picks
from abacus_interp.evaluation.lists import list_row, list_rows
from abacus_interp.tasks import get_task
from tests.test_eval_lists import tiny_sorter

SHIPPED_SORT = Path(__file__).resolve().parents[1] / "checkpoints" / "extrap-sort"


@pytest.fixture
def task():
    return get_task("sorting", max_numbers=3, max_digits=3, label_pool=8, random_labels=True)


@pytest.mark.parametrize(("step", "picked", "kind"), [
    (0, "a", "right"), (0, "c", "runner_up"), (0, "b", "later"), (0, "e", "not_in_list"), (0, None, "stopped"),
    (0, "", "not_in_list"), (0, "ab", "not_in_list"), (0, "3", "not_in_list"),
    (1, "a", "written"), (1, "b", "later"), (1, "d", "tie"), (2, "b", "runner_up"), (3, "c", "written"),
])
def test_each_pick_is_named_by_its_place_in_the_answer(step, picked, kind):
    # a:3, b:12, c:7, d:7 sorts to "acdb": c and d are equal, c first by letter order
    assert classify("abcd", (3, 12, 7, 7), "acdb", step, picked) == kind


@pytest.mark.parametrize(("smaller", "larger", "how"), [
    (5, 5, ("equal", None)), (9, 12, ("length", None)), (31, 41, ("place", 0)), (12345, 12445, ("place", 2)),
    (700, 701, ("place", 2)),
])
def test_how_close_two_numbers_are(smaller, larger, how):
    assert how_close(smaller, larger) == how


def test_planted_predictions_are_tallied_step_by_step(task):
    lists = [task.make(3, 12, 7, labels="abc"), task.make(40, 45, labels="de"), task.make(5, 5, labels="fg")]
    # list 1 ("acb") writes the prompt's order: a (right), b (the runner-up of c=7 and b=12 left),
    # c (already written); list 2 ("de") stops at once, then writes e (right); list 3 ("fg", equal)
    # writes g first (a tie out of letter order), then padding (no label)
    predicted = [[*_ids(task, "abc"), EOS_ID], [EOS_ID, *_ids(task, "e"), EOS_ID], [*_ids(task, "g"), PAD_ID, EOS_ID]]
    picks = wrong_picks(lists, predicted, task.vocab)
    assert (picks.n_steps, picks.written, picks.runner_up, picks.later, picks.tie, picks.not_in_list,
            picks.stopped) == (7, 1, 1, 0, 1, 1, 1)
    # steps with two or more left: 5 = 5 (wrong), 7 vs 12 (wrong), 3 vs 7 (right), 40 vs 45 (wrong)
    assert [(c.kind, c.place, c.steps, c.wrong) for c in picks.closeness] == \
        [("equal", None, 1, 1), ("length", None, 1, 1), ("place", 0, 1, 0), ("place", 1, 1, 1)]


def test_the_row_tallies_every_wrong_label_its_scores_count(task):
    model = tiny_sorter(task)
    examples = task.sample(24, random.Random(0), min_numbers=5, max_numbers=5)
    row = list_row(model, task, "5 numbers", (5, 5), (1, 3), examples, False)
    correct = score_examples(model, examples, per_token=True).per_token_correct
    picks = row.wrong_picks
    assert picks.n_steps == 5 * 24
    assert picks.wrong == sum(not ok for c in correct for ok in c[:-1]) > 0  # a random model errs
    assert sum(c.steps for c in picks.closeness) == 4 * 24  # every step but the last of each list
    assert sum(c.wrong for c in picks.closeness) <= picks.wrong


def _ids(task, text: str) -> list[int]:
    return [task.vocab.encode(ch)[0] for ch in text]


@pytest.mark.skipif(not (SHIPPED_SORT / "config.json").exists(), reason="checkpoints/extrap-sort is not shipped here")
def test_ten_numbers_break_the_comparisons_the_trained_range_never_misses():
    task = get_task(**json.loads((SHIPPED_SORT / "config.json").read_text())["task"])
    rows = list_rows(load_model(SHIPPED_SORT), task, lengths=(), counts=(10,), n=100, seed=0)
    assert [r.label for r in rows[:2]] == ["in distribution", "10 numbers"]
    inside, ten = rows[0].wrong_picks, rows[1].wrong_picks
    # measured at n=100, seed 0: in distribution 0 of 166 steps wrong where the two smallest left
    # differ in length, with 10 numbers 26% of 341
    assert inside.closeness_of("length").wrong_rate <= 0.03
    assert ten.closeness_of("length").wrong_rate >= 0.15
    # the wrong labels name numbers not yet written (runner-up or later), not the written ones
    assert (ten.runner_up + ten.later) / ten.wrong >= 0.75 and ten.written / ten.wrong <= 0.15


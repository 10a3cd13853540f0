"""What a sorting run writes instead of the right label (`evaluation/list_errors.py`): each wrong
step sorted by kind on hand-built lists and predictions, the tallies against the run's own
scores, and, on the shipped sorter, that ten numbers break even comparisons it never misses in
its trained range."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from abacus_interp.checkpoints import load_model
from abacus_interp.core.scoring import score_examples
from abacus_interp.core.tokens import EOS_ID
from abacus_interp.evaluation.list_errors import classify, how_close, wrong_picks
from abacus_interp.evaluation.lists import list_rows
from abacus_interp.tasks import get_task
from tests.test_eval_lists import tiny_sorter

SHIPPED_SORT = Path(__file__).resolve().parents[1] / "checkpoints" / "extrap-sort"


@pytest.fixture
def task():
    return get_task("sorting", max_numbers=3, max_digits=3, label_pool=8, random_labels=True)


@pytest.mark.parametrize(("step", "picked", "kind"), [
    (0, "a", "right"), (0, "c", "runner_up"), (0, "b", "later"), (0, "d", "not_in_list"), (0, None, "stopped"),
    (1, "a", "written"), (1, "b", "runner_up"), (2, "c", "written"),
])
def test_each_pick_is_named_by_its_place_in_the_answer(step, picked, kind):
    # a:3, b:12, c:7 sorts to "acb"
    assert classify("abc", "acb", step, picked) == kind


@pytest.mark.parametrize(("smaller", "larger", "how"), [
    (5, 5, "equal"), (9, 12, "by length"), (31, 41, "at place 0"), (12345, 12445, "at place 2"), (700, 701, "at place 2"),
])
def test_how_close_two_numbers_are(smaller, larger, how):
    assert how_close(smaller, larger) == how


def test_planted_predictions_are_tallied_step_by_step(task):
    lists = [task.make(3, 12, 7, labels="abc"), task.make(40, 45, labels="de")]  # answers "acb" and "de"
    # list 1 writes the prompt's order "abc": a (right), b (the runner-up of c=7 and b=12 left),
    # c (already written); list 2 stops at once, then writes e (right)
    predicted = [[*_ids(task, "abc"), EOS_ID], [EOS_ID, *_ids(task, "e"), EOS_ID]]
    picks = wrong_picks(lists, predicted, task.vocab)
    assert (picks.n_steps, picks.written, picks.runner_up, picks.later, picks.not_in_list, picks.stopped) == \
        (5, 1, 1, 0, 0, 1)
    # steps with two or more left: 3 vs 7 (place 0, right), 7 vs 12 (by length, wrong), 40 vs 45 (place 1, wrong)
    assert [(c.how, c.steps, c.wrong, c.runner_up) for c in picks.closeness] == \
        [("by length", 1, 1, 1), ("at place 0", 1, 0, 0), ("at place 1", 1, 1, 0)]


def test_the_tallies_count_every_wrong_label_the_scores_count(task):
    model = tiny_sorter(task)
    rows = list_rows(model, task, lengths=(4,), counts=(5,), n=24, seed=3)
    row = rows[3]  # 5 numbers
    examples = task.sample(24, random.Random(0), min_numbers=5, max_numbers=5)
    scores = score_examples(model, examples, per_token=True)
    picks = wrong_picks(examples, scores.per_token_predicted, task.vocab)
    assert picks.n_steps == 5 * 24
    assert picks.wrong == sum(not ok for c in scores.per_token_correct for ok in c[:-1])
    assert sum(c.steps for c in picks.closeness) == 4 * 24  # every step but the last of each list
    assert row.wrong_picks is not None and row.wrong_picks.n_steps == 5 * row.n


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
    assert _wrong_rate(inside, "by length") <= 0.03
    assert _wrong_rate(ten, "by length") >= 0.15
    # the wrong labels name numbers not yet written (runner-up or later), not the written ones
    assert (ten.runner_up + ten.later) / ten.wrong >= 0.75 and ten.written / ten.wrong <= 0.15


def _wrong_rate(picks, how: str) -> float:
    row = next(c for c in picks.closeness if c.how == how)
    return row.wrong / row.steps

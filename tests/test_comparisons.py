"""Comparisons: the sorting task's label pool, the layout of a list's key groups, planted pairs
whose deciding digit is known, and a run of the analysis on a tiny sorter."""

from __future__ import annotations

import dataclasses
import functools
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from abacus_interp.checkpoints import load_model, load_task
from abacus_interp.core.scoring import score_examples
from abacus_interp.errors import UserError
from abacus_interp.evaluation.list_errors import Closeness
from abacus_interp.evaluation.lists import hard_lists, list_row
from abacus_interp.tasks import get_task
from analyses import comparisons
from analyses.comparisons.analysis import accuracy_rows, skip_reason
from analyses.comparisons.decide import PATCH_GROUPS, deciding_digit, planted_pair
from analyses.comparisons.layout import (
    ANSWER_GROUPS,
    DIGIT_GROUPS,
    ListLayout,
    answer_masks,
    digit_masks,
)
from analyses.prose import pct
from tests.conftest import tiny_sorter

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "extrap-sort"


def small_sorting_task():
    return get_task("sorting", max_numbers=3, max_digits=3, label_pool=8, random_labels=True)


@pytest.fixture
def task():
    return small_sorting_task()


@functools.cache
def quick_run_on_a_tiny_sorter():
    """`comparisons.run` at its quick sizes on a random tiny sorter over the `task` fixture's task,
    seeded as every test is (the analysis seeds its own draws), computed once for the tests that
    read it."""
    torch.manual_seed(0)
    random.seed(0)
    task = small_sorting_task()
    return comparisons.run(tiny_sorter(task), task, config=comparisons.ComparisonsConfig.quick())


def test_random_labels_come_from_the_whole_pool_in_letter_order(task):
    assert task.labels == "abcdefgh" and all(c in task.vocab.symbols for c in "abcdefgh")
    seen = set()
    for e in task.sample(200, random.Random(0)):
        labels = "".join(part[0] for part in e.prompt[:-1].split(","))
        assert list(labels) == sorted(labels) and len(set(labels)) == len(labels)
        seen |= set(labels)
        values = [int(part[2:][::-1]) for part in e.prompt[:-1].split(",")]
        assert e.target == "".join(lab for _, lab in sorted(zip(values, labels, strict=True), key=lambda p: p[0]))
    assert seen == set("abcdefgh")  # 3-number lists reach every letter of an 8-letter pool
    again = get_task("sorting", **task.config())
    assert again.config() == task.config() and again.vocab == task.vocab


def test_a_list_longer_than_training_uses_the_pool_and_bad_labels_are_refused(task):
    e = task.make(5, 3, 9, 1, 7)  # 5 numbers from a task trained on up to 3
    assert e.target == "dbaec"
    with pytest.raises(UserError, match="label_pool"):
        task.make(*range(9))
    with pytest.raises(UserError, match="distinct letters"):
        task.make(1, 2, labels="aa")
    with pytest.raises(UserError, match="label_pool"):
        get_task("sorting", max_numbers=5, label_pool=3)
    plain = get_task("sorting", max_numbers=5)
    assert plain.labels == "abcde" and "label_pool" not in plain.config()  # older configs unchanged


def test_answer_queries_split_the_list_into_the_answer_and_the_rest():
    layout = ListLayout.of("a:21,b:5,c:403=")  # 12, 5, 304 -> "bac"
    assert [n.digit_pos for n in layout.numbers] == [(2, 3), (7,), (11, 12, 13)] and layout.equals == 14
    queries, masks = answer_masks(layout, "bac", 18)
    assert queries == [14, 15, 16]
    where = {name: np.flatnonzero(masks[1, g].numpy()).tolist() for g, name in enumerate(ANSWER_GROUPS)}
    # answer label 1 ("a", predicted at position 15 after "b" was written)
    assert where["the answer's label"] == [0] and where["the answer's digits"] == [2, 3]
    assert where["labels still to write"] == [9] and where["digits still to write"] == [11, 12, 13]
    assert where["numbers already written"] == [5, 7] and where["answer so far"] == [15]
    assert where[": , ="] == [1, 4, 6, 8, 10, 14] and where["other"] == []
    assert masks[:, :-1].sum(1)[1, :16].tolist() == [1.0] * 16  # every visible key in one group


def test_digit_queries_see_the_same_index_in_earlier_numbers_only():
    layout = ListLayout.of("a:21,b:5,c:403=")
    queries, masks = digit_masks(layout, 15)
    assert queries == [2, 3, 7, 11, 12, 13]
    row = masks[queries.index(12)]  # c's digit of index 2 (the 0 of 304)
    same = DIGIT_GROUPS.index("same index, earlier numbers")
    assert np.flatnonzero(row[same].numpy()).tolist() == [3]  # a's index 2; b has no index 2
    assert np.flatnonzero(row[DIGIT_GROUPS.index("own number")].numpy()).tolist() == [11, 12]


@pytest.mark.parametrize("index", [1, 2, 3, 4])
def test_planted_pairs_are_decided_by_their_digit_and_swapping_it_flips_the_order(index):
    rng = random.Random(index)
    for _ in range(50):
        x, y, swapped = planted_pair(4, index, rng)
        assert len(str(x)) == len(str(y)) == 4
        first_difference = max(i for i in range(1, 5) if str(x)[-i] != str(y)[-i])
        assert first_difference == index
        assert (x < y) != (swapped < x + y - swapped)


def test_hard_lists_differ_only_in_the_units(task):
    for e in hard_lists(task, 20, 3, 6, random.Random(0)):
        tops = {str(v)[:-1] for v in e.operands}
        assert len(tops) == 1 and all(len(str(v)) == 6 for v in e.operands)


def test_run_on_a_tiny_sorter_reports_mass_that_sums_to_one_and_every_row(task):
    result = quick_run_on_a_tiny_sorter()
    assert [r.label for r in result.rows][:6] == ["in distribution", f"{task.max_digits}-digit numbers", "8-digit numbers",
                                                  "6 numbers", f"6 numbers of {task.max_digits} digits",
                                                  "6 numbers of 8 digits"]
    for reading in (result.answer_reading, result.digit_reading):
        mass = np.asarray(reading.mass)  # [loop head group]
        assert mass.shape[:2] == (2, 2)
        np.testing.assert_allclose(mass.sum(-1), 1.0, atol=2e-3)  # softmax over keys, keys partitioned
    d = result.deciding
    assert [r.depth for r in d.rows] == [3, 2, 1] and len(d.flipped) == len(PATCH_GROUPS)
    # a random model tells few pairs apart; a group is None exactly when none of them has it
    above = d.flipped[PATCH_GROUPS.index("digits above them")][0]
    assert (above is None) == (d.n_told_apart == 0)
    assert set(result.figures()) == {"accuracy_rows", "answer_places", "answer_reading",
                                     "digit_reading", "knockout", "lock_in", "patching", "choice_margin", "blinds",
                                     "summary_digits", "summary_order"}
    assert result.to_dict()["deciding"]["digits"] == 3
    summary = result.summary  # a probe per place of the 3-digit numbers, at the embedding and after each loop
    assert summary.sites == ("embedding", "loop 1", "loop 2") and summary.n_lists == 12
    assert np.asarray(summary.digit_accuracy).shape == (3, 3) and len(summary.n_pairs) == 3


def test_the_findings_say_what_the_wrong_labels_of_more_numbers_named():
    result = quick_run_on_a_tiny_sorter()
    picks = result.row("6 numbers").wrong_picks  # a random model gets most of them wrong
    named = pct((picks.runner_up + picks.later) / picks.wrong)
    assert f"With 6 numbers, {named} of the wrong labels (n={picks.wrong}) name a number not yet written" \
        in result.findings()[0]

    def with_length_steps(row, wrong):  # the row, its steps of two smallest of different lengths set to wrong/100
        closeness = (Closeness("length", None, 100, wrong),)
        return dataclasses.replace(row, wrong_picks=dataclasses.replace(row.wrong_picks, closeness=closeness))

    def conclusion(far_wrong):
        rows = tuple(with_length_steps(r, 0 if r.in_distribution else far_wrong) if r.wrong_picks else r
                     for r in result.rows)
        return "break the choice, not the comparison" in dataclasses.replace(result, rows=rows).findings()[0]

    # only a comparison made in distribution and missed among more numbers is called the choice's failure
    assert conclusion(30) and not conclusion(3)


def test_answer_places_agree_with_the_exact_match_and_count_every_list(task):
    model = tiny_sorter(task)
    examples = task.sample(40, random.Random(3), min_numbers=2, max_numbers=4)
    row = list_row(model, task, "mixed", (2, 4), (1, 3), examples, True)
    assert row.exact_match == score_examples(model, examples).exact_match
    assert len(row.label_accuracy) == 4  # the longest list's labels
    # a list is exactly right only if every place is, so no place is below the exact match
    assert min(*row.label_accuracy, row.stop_accuracy) >= row.exact_match


def test_a_knockout_worth_stating_keeps_its_finding_beside_failing_rows():
    result = quick_run_on_a_tiny_sorter()
    assert any(r.exact_match < 0.95 for r in result.rows)  # a random model: every far row fails
    strong = dataclasses.replace(result, knockout=dataclasses.replace(result.knockout, baseline=0.97))
    findings = strong.findings()
    assert any("Forbidding one head one key group" in f for f in findings)
    assert "the stop after the last" in findings[0]


def test_other_runs_are_skipped_with_their_reason(task):
    assert skip_reason(tiny_sorter(task), task) is None
    assert "addition" in skip_reason(tiny_sorter(task), get_task("addition", max_digits=3))


@pytest.mark.skipif(not (SHIPPED / "config.json").exists(), reason="checkpoints/extrap-sort is not shipped here")
def test_the_shipped_sorter_compares_leading_digits_and_the_decision_moves_up_the_number():
    """checkpoints/extrap-sort on held-out lists: what docs/runs/sorting.md and the report state,
    measured (97% in distribution, 69% on lists of 5-digit numbers, 2% on lists equal but the units; planted pairs right when the
    leading digits differ and near chance when only the units do; the decision read from the
    deciding digits in loop 1 and from the digits above them in loop 2)."""
    model, task = load_model(SHIPPED), load_task(SHIPPED)
    cfg = comparisons.ComparisonsConfig(n_per_row=100, n_pairs=32)
    measured = accuracy_rows(model, task, cfg)
    rows = {r.label: r.exact_match for r in measured}
    assert rows["in distribution"] >= 0.95
    assert rows["hard: 5 numbers of 5 digits, equal but the units"] <= 0.1
    # lists whose numbers all have the trained 5 digits fail at the labels, in range (69%, stop 100%)
    one_length = next(r for r in measured if r.label == "5-digit numbers")
    assert one_length.exact_match <= 0.8 and one_length.stop_accuracy >= 0.95
    # 20-digit lists fail at the stop: after the last label it writes another letter, not EOS
    far = next(r for r in measured if r.label == "20-digit numbers")
    assert far.stop_accuracy <= 0.5 < min(far.label_accuracy)
    d = deciding_digit(model, task, cfg)
    by_depth = {r.depth: r.exact_match for r in d.rows}
    assert by_depth[1] >= 0.95 and by_depth[5] <= 0.7
    assert d.n_told_apart >= 32
    deciding, above = (d.flipped[PATCH_GROUPS.index(g)] for g in ("the deciding digits", "digits above them"))
    assert deciding[0] >= 0.9 and above[0] == 0.0  # loop 1: only the deciding digits hold the decision
    assert above[1] > deciding[1]  # loop 2: the digits above them have read it

"""The choice of each sorting label: which keys each blind hides, the margin, parity of the
unblinded logits with the scorer, and what the blinds find on the shipped sorter."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from abacus_interp.checkpoints import load_model, load_task, load_tensors, step_path
from abacus_interp.core.scoring import score_examples
from abacus_interp.evaluation.list_errors import wrong_picks
from abacus_interp.evaluation.lists import list_row, list_rows
from abacus_interp.tasks import get_task
from analyses.comparisons.choice import BLINDS, answer_logits, choice, hidden_keys, margins
from tests.conftest import tiny_sorter

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "extrap-sort"
NOTHING, WRITTEN, TWO_LEFT = BLINDS


def rows_of(run: Path, *, lengths: tuple[int, ...] = (), counts: tuple[int, ...] = (), n: int = 64) -> dict:
    """`run`'s list eval on `n` held-out lists per row (seed 0), by row label."""
    rows = list_rows(load_model(run), load_task(run), lengths=lengths, counts=counts, n=n, seed=0)
    return {r.label: r for r in rows}


def row_of(run: Path, label: str, **sample):
    """The row labelled `label` of `rows_of(run, **sample)`."""
    rows = rows_of(run, **sample)
    assert label in rows, f"no row {label!r} among {list(rows)}"
    return rows[label]


def needs(*runs: Path):
    """Skip unless every one of `runs` is shipped here."""
    names = ", ".join(run.name for run in runs)
    return pytest.mark.skipif(not all((run / "config.json").exists() for run in runs),
                              reason=f"needs the shipped runs {names} in checkpoints/")


@pytest.fixture
def task():
    return get_task("sorting", max_numbers=4, max_digits=3, label_pool=8, random_labels=True)


def hidden_positions(hidden: str) -> list[list[int]]:
    # "a:21,b:3,c:654=": a at 0 (digits 2, 3), b at 5 (digit 7), c at 9 (digits 11-13), "=" at 14
    queries, masks = hidden_keys("a:21,b:3,c:654=", "bac", hidden, n_pos=18)
    assert queries == [14, 15, 16]
    return [torch.nonzero(m).flatten().tolist() for m in masks]


def test_each_blind_hides_the_label_and_digits_of_the_numbers_it_names():
    assert hidden_positions(NOTHING) == [[], [], []]
    # b (3) is written first, then a ("21" LSD-first is 12): each later query loses them
    assert hidden_positions(WRITTEN) == [[], [5, 7], [0, 2, 3, 5, 7]]
    # only the smallest left and the runner-up stay: c is hidden while b and a lead, then b once written
    assert hidden_positions(TWO_LEFT) == [[9, 11, 12, 13], [5, 7], [0, 2, 3, 5, 7]]
    with pytest.raises(ValueError, match="pick one of"):
        hidden_keys("a:1,b:2=", "ab", "everything", n_pos=8)


def test_the_margin_is_the_right_labels_logit_over_the_best_other_label(task):
    example = task.make(30, 4, 5, labels="bdf")  # answer: d (4), f (5), b (30)
    assert example.target == "dfb"
    ids = {label: task.vocab.encode(label)[0] for label in "bdf"}
    logits = torch.zeros(3, len(task.vocab.tokens))
    logits[:, task.vocab.encode("a")[0]] = 50.0  # a token that labels no number of the list is no rival
    logits[0, [ids["d"], ids["f"], ids["b"]]] = torch.tensor([3.0, 1.0, 2.0])
    logits[1, [ids["d"], ids["f"], ids["b"]]] = torch.tensor([4.0, 1.5, 0.0])
    logits[2, [ids["d"], ids["f"], ids["b"]]] = torch.tensor([0.0, 0.0, -1.0])
    assert margins(task.vocab, example, logits) == [1.0, -2.5, -1.0]


def test_unblinded_logits_pick_what_the_scorer_picks_and_the_rows_tally(task):
    model = tiny_sorter(task, n_layers=2)
    examples = task.sample(24, random.Random(1), min_numbers=2, max_numbers=4)
    picked = [x.argmax(-1).tolist() for x in answer_logits(model, task.vocab, examples, NOTHING)]
    scored = score_examples(model, examples, per_token=True).per_token_predicted
    assert picked == [list(ids[: len(e.target)]) for ids, e in zip(scored, examples, strict=True)]
    row = list_row(model, task, "mixed", (2, 4), (1, 3), examples, True)
    assert wrong_picks(examples, picked, task.vocab) == row.wrong_picks
    assert row.wrong_picks.wrong > 0  # a random model: the parity covers wrong picks too


def test_a_blind_changes_only_the_queries_it_hides_keys_from(task):
    model = tiny_sorter(task, n_layers=2)
    examples = task.sample(16, random.Random(2), min_numbers=3, max_numbers=3)
    plain = answer_logits(model, task.vocab, examples, NOTHING)
    blind = answer_logits(model, task.vocab, examples, WRITTEN)
    for x, y in zip(plain, blind, strict=True):
        torch.testing.assert_close(x[0], y[0])  # nothing is written before the first label
        assert not torch.allclose(x[1:], y[1:])


def test_the_cells_count_every_step_with_two_or_more_left(task):
    result = choice(tiny_sorter(task, n_layers=2), task, (3, 6), n=10, seed=0)
    assert [(c.count, c.left) for c in result.cells] == [(3, 3), (3, 2), (6, 6), (6, 5), (6, 4), (6, 3), (6, 2)]
    assert all(c.n == 10 for c in result.cells)
    assert [(b.hidden, b.count) for b in result.blinds] == [(h, c) for c in (3, 6) for h in BLINDS]


def test_a_count_whose_lists_do_not_fit_the_model_is_left_out(task):
    # lists of 6 numbers need at least 6 * 4 + 6 + 1 = 31 positions: none fits 30, those of 3 do
    small = tiny_sorter(task, n_layers=2, max_seq_len=30, positional="learned", rotary="none")
    result = choice(small, task, (3, 6), n=10, seed=0)
    assert result.counts == (3,) and {c.count for c in result.cells} == {3}
    assert result.blind(NOTHING, 6) is None and result.blind(NOTHING, 3).picks.n_steps == 30


@needs(SHIPPED)
def test_the_shipped_sorter_reads_the_whole_list_to_choose():
    """checkpoints/extrap-sort, 64 held-out lists of 5 and of 10 numbers of 1-5 digits (the
    report's sample is 128; measured there: margin 9.7 / 1.6 with 5 left, the blinds 98% -> 23%
    and 9%): the margin with 5 numbers left falls in lists of 10; hiding the numbers already
    written makes it write them again; fewer candidates do not help."""
    model, task = load_model(SHIPPED), load_task(SHIPPED)
    result = choice(model, task, (5, 10), n=64, seed=0)
    near, far = result.cell(5, 5), result.cell(10, 5)
    assert far.median_margin < near.median_margin / 2 and near.accuracy >= 0.9
    seen, unwritten, two = (result.blind(hidden, 5) for hidden in BLINDS)
    assert seen.accuracy >= 0.95
    assert unwritten.accuracy <= 0.5 and unwritten.picks.written >= 0.3 * unwritten.picks.wrong
    assert two.accuracy < unwritten.accuracy - 0.05  # hiding the other candidates as well costs more
    assert np.isclose(seen.accuracy, 1 - seen.picks.wrong / (5 * 64))


BLIND_RUN = SHIPPED.parent / "extrap-sort-blind"


@needs(BLIND_RUN)
def test_the_answer_blind_keeps_the_margin_and_sorts_more_numbers():
    """checkpoints/extrap-sort-blind (the number head and `answer_hides_earlier_answer`, 14,000
    steps): on held-out lists of 10 numbers the margin with 5 numbers left stays several logits
    (measured 6.0, n=128; the shipped sorter 1.6) and a third of the lists are exactly right
    (measured 35%, n=100; the shipped sorter 2%), where hiding the other candidates costs little."""
    model, task = load_model(BLIND_RUN), load_task(BLIND_RUN)
    assert model.cfg.answer_hides_earlier_answer and model.cfg.number_heads == 1
    result = choice(model, task, (5, 10), n=64, seed=0)
    assert result.cell(10, 5).median_margin >= 4 and result.cell(10, 5).accuracy >= 0.85
    unwritten, two = (result.blind(hidden, 10) for hidden in (WRITTEN, TWO_LEFT))
    assert two.accuracy >= unwritten.accuracy - 0.1  # a pick among the numbers left
    rows = {r.label: r for r in list_rows(model, task, lengths=(), counts=(10,), n=100, seed=0)}
    assert rows["in distribution"].exact_match >= 0.95 and rows["10 numbers"].exact_match >= 0.25


@needs(SHIPPED, BLIND_RUN)
def test_the_answer_blind_loses_the_stop_of_longer_numbers():
    """The blind's cost (docs/runs/sorting.md): with the earlier labels hidden, the answer query
    must stop when the label just written is the largest number, and on lists of 10-digit
    numbers extrap-sort-blind writes the EOS after the last label (teacher-forced) less than half
    the time where extrap-sort, which reads what it wrote, nearly always does (measured on these
    64 lists 42% and 94%; `eval --lengths 10 --n 100` 34% and 96%)."""
    stops = {run.name: row_of(run, "10-digit numbers", lengths=(10,)).stop_accuracy for run in (SHIPPED, BLIND_RUN)}
    assert stops["extrap-sort"] >= 0.85 and stops["extrap-sort-blind"] <= 0.6, stops


SPARE_RUN = SHIPPED.parent / "extrap-sort-spare"


@needs(SPARE_RUN, BLIND_RUN)
def test_a_symbol_head_spared_by_the_blind_gives_back_the_stop_of_hard_lists():
    """extrap-sort-spare is extrap-sort-blind grown by a symbol head that the answer blind spares
    (it reads the labels written, so it can tell when all are), 2,500 steps on. On lists of 5
    numbers equal but the units its answer writes the EOS after the last label (teacher-forced)
    about half the time, where its source, whose every answer head is blind, rarely does
    (measured on these 64 lists 53% and 16%; `eval --n 400 --seed 1`: 55% and 14%, the same
    growth without the sparing 3%: docs/runs/sorting.md)."""
    hard = "hard: 5 numbers of 5 digits, equal but the units"
    stops = {run.name: row_of(run, hard).stop_accuracy for run in (SPARE_RUN, BLIND_RUN)}
    assert stops["extrap-sort-spare"] >= 0.35 and stops["extrap-sort-blind"] <= 0.3, stops


SPARE_FT_RUN = SHIPPED.parent / "extrap-sort-spare-ft"


@needs(SPARE_FT_RUN, SPARE_RUN, BLIND_RUN)
def test_the_spared_head_run_trained_on_sorts_more_numbers():
    """extrap-sort-spare-ft starts at extrap-sort-spare's last weights (its step 0 is that file,
    tensor for tensor, though its config.json names the scratch copy it was trained from) and
    trains 5,000 steps more: lists of 10 numbers 64-69% on 400 lists against extrap-sort-blind's
    40-43% (docs/runs/sorting.md); on these 64 lists 53% and 36%. Against extrap-sort-spare
    (44% on these lists) the gap is too small for 64 lists, and is not asserted."""
    start, end = load_tensors(step_path(SPARE_FT_RUN, 0)), load_tensors(step_path(SPARE_RUN, 2500))
    assert start.keys() == end.keys() and all(torch.equal(start[k], end[k]) for k in end)
    exact = {run.name: row_of(run, "10 numbers", counts=(10,)).exact_match for run in (SPARE_FT_RUN, BLIND_RUN)}
    assert exact["extrap-sort-spare-ft"] >= 0.45 and exact["extrap-sort-spare-ft"] >= exact["extrap-sort-blind"] + 0.1, exact


CONTROL_FT_RUN = SHIPPED.parent / "extrap-sort-control-ft"


@needs(SPARE_FT_RUN, CONTROL_FT_RUN)
def test_at_equal_steps_the_spared_head_carries_the_stop_and_part_of_the_count():
    """extrap-sort-control-ft is extrap-sort-spare-ft's control: the same growth and the same
    2,500 + 5,000 steps, with the symbol head blind like the others. On 128 held-out lists per
    row (seed 0) measured: 10 numbers 59% against 47% (`eval --n 400`: 69% against 55.5% with
    `--seed 1`, 64% against 53% with seed 0); the hard lists' stop 82% against 2%."""
    rows = {run.name: rows_of(run, counts=(10,), n=128) for run in (SPARE_FT_RUN, CONTROL_FT_RUN)}
    exact = {name: r["10 numbers"].exact_match for name, r in rows.items()}
    stops = {name: r["hard: 5 numbers of 5 digits, equal but the units"].stop_accuracy for name, r in rows.items()}
    assert exact["extrap-sort-spare-ft"] >= exact["extrap-sort-control-ft"] + 0.06, exact
    assert stops["extrap-sort-spare-ft"] >= 0.6 and stops["extrap-sort-control-ft"] <= 0.1, stops


@needs(SPARE_FT_RUN)
def test_the_sorters_accuracy_falls_past_its_trained_loops():
    """loop-add's answers settle and stay as loops are added; this sorter's fall, so more loops at
    test time are no lever for its close comparisons (docs/runs/sorting.md: 98.75 / 93.5 / 62.5%
    in distribution at 4 / 6 / 8 loops on 400 lists of `--seed 1`). Measured on these 128 held-out
    lists: 97.7 / 94.5 / 54.7%."""
    model, task = load_model(SPARE_FT_RUN, max_loops=8), load_task(SPARE_FT_RUN)
    lists = task.sample_held_out(128, random.Random(0))
    exact = {loops: float(np.mean([all(c) for c in score_examples(model, lists, n_loops=loops, per_token=True)
                                   .per_token_correct])) for loops in (4, 8)}
    assert exact[4] >= 0.95 and exact[8] <= exact[4] - 0.25, exact


SPARE_FT2_RUN = SHIPPED.parent / "extrap-sort-spare-ft2"


@needs(SPARE_FT2_RUN, SPARE_FT_RUN)
def test_more_steps_sort_more_numbers():
    """extrap-sort-spare-ft2 is extrap-sort-spare-ft trained 8,000 steps more (lr 3e-4, seed 5), where the
    2,500-step continuations of docs/runs/sorting.md stayed at 64.5-69.25% with 10 numbers. On the
    eval's 400 held-out lists of seed 0 (these): 10 numbers 70.5% against 64.25%, in distribution 99.5%."""
    rows = {run.name: rows_of(run, counts=(10,), n=400) for run in (SPARE_FT2_RUN, SPARE_FT_RUN)}
    exact = {name: r["10 numbers"].exact_match for name, r in rows.items()}
    assert exact["extrap-sort-spare-ft2"] >= exact["extrap-sort-spare-ft"] + 0.04, exact
    assert rows["extrap-sort-spare-ft2"]["in distribution"].exact_match >= 0.99

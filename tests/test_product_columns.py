"""Product columns: the key groups of an N x N multiplier's answer queries, the attention mass
split over them, knockouts, and the grid, on a tiny model of the `mul` layout."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.tasks import get_task
from analyses import product_columns
from analyses.product_columns.analysis import UNION_GROUPS, _masks, group_names, skip_reason


@pytest.fixture
def task():
    return get_task("multiplication", max_digits=3)


def tiny_multiplier(task, **overrides):
    cfg = dict(vocab=task.vocab, d_model=32, n_heads=2, n_layers=2, n_loops=2, max_seq_len=24, abacus_max_offset=0,
               positional=task.positional)
    return LoopedTransformer(ModelConfig(**{**cfg, **overrides})).eval()


def test_each_answer_query_splits_its_keys_into_the_column_groups(task):
    example = task.make(123, 45)  # prompt "321*54=", answer 5535 written "5355" (LSD-first)
    names = group_names(3)
    tokens, queries, masks = next(_masks(task.vocab, [example], 3, 8))
    assert [int(q) for q in queries[:, 1]] == [6, 7, 8, 9]  # "=" then each written digit
    i = 2  # answer digit 2 is predicted at position "=" + 2 = 8
    row = masks[i]
    where = {name: [int(p) for p in np.flatnonzero(row[g].numpy())] for g, name in enumerate(names)}
    # a = 3,2,1 at positions 0..2 (a_0 = 3); b = 5,4 at 4..5; "*" at 3, "=" at 6
    assert where["a_i"] == [2] and where["a_(i-1)"] == [1] and where["a_(i-2)"] == [0]
    assert where["b_(i-1)"] == [5] and where["b_(i-2)"] == [4] and where["b_i"] == []
    assert where["answer digit just written"] == [8] and where["lower answer digits"] == [7]
    assert where["* and ="] == [3, 6] and where["other"] == []
    named = row[: len(names)]
    assert named[:, : 8 + 1].sum(0).tolist() == [1.0] * 9  # every visible key in exactly one group
    assert row[len(names) + UNION_GROUPS.index("all of a")].tolist()[:3] == [1.0, 1.0, 1.0]


def test_digits_far_below_the_column_have_no_partner_and_count_as_outside(task):
    _, _, masks = next(_masks(task.vocab, [task.make(999, 999)], 3, 8))
    names = group_names(3)
    row = masks[4]  # digit 4 of 998001: a_0, a_1 are 4 and 3 below it, with no b_4, b_3
    assert np.flatnonzero(row[names.index("a outside the column")].numpy()).tolist() == [0, 1]
    assert np.flatnonzero(row[names.index("a_(i-2)")].numpy()).tolist() == [2]


def test_run_on_a_tiny_multiplier_reports_mass_that_sums_to_one_and_every_cell(task):
    model = tiny_multiplier(task)
    # 16 problems read: the running-sum readouts fit on 64 others, more than d_model=32
    config = dataclasses.replace(product_columns.ProductColumnsConfig.quick(), n_problems=16)
    result = product_columns.run(model, task, config=config)
    assert {(c.digits_a, c.digits_b) for c in result.grid} == {(i, j) for i in range(1, 5) for j in range(1, 5)}
    mass = np.asarray(result.reading.mass)  # [loop head group]
    assert mass.shape == (2, 4, len(group_names(3)))
    np.testing.assert_allclose(mass.sum(-1), 1.0, atol=2e-3)  # softmax over keys, keys partitioned
    assert len(result.knockout.groups) == 2 + len(UNION_GROUPS)
    assert result.findings() and set(result.figures()) == {"grid", "column_reading", "knockout", "running_sum_by_loop"}
    (sums,) = result.running_sum
    assert sums.trained is None and len(sums.fitted.read) == 2 and len(sums.baseline.read) == 1  # per loop; the input


def test_other_runs_are_skipped_with_their_reason(task):
    model = tiny_multiplier(task)
    assert skip_reason(model, task) is None
    assert "answer slots" in skip_reason(model, get_task("multiplication", max_digits=3, answer_format="slots"))
    assert "shorter multiplier" in skip_reason(model, get_task("multiplication", max_digits=3,
                                                                 max_multiplier_digits=1))
    assert "addition" in skip_reason(model, get_task("addition", max_digits=3))

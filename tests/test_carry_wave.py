"""The carry-wave analysis: carry distances, lock-in loops and the planted samples on
synthetic inputs, and the whole analysis on a tiny answer-slot model."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig, Vocab
from abacus_interp.tasks import get_task
from abacus_interp.tasks.carries import decision_distance, longest_cascade
from analyses import carry_wave
from analyses.carry_wave.analysis import (
    _kill_generator,
    lock_in_loops,
    planted_chains,
    wave_example,
)
from analyses.carry_wave.heads import GROUP_NAMES, _key_groups, head_reading, knockout
from analyses.carry_wave.patching import _lock_in, chain_pair, delayed_carry
from analyses.prose import LinearFit


def test_decision_distance_counts_the_columns_a_digit_waits_for():
    assert decision_distance(999, 1) == [0, 1, 2, 3]
    assert decision_distance(909, 91) == [0, 1, 2, 3]
    assert decision_distance(450, 540) == [0, 1, 2]  # no carry, yet the 9-sums wait for the units
    assert decision_distance(123, 456) == [0, 1, 1]


def test_lock_in_is_the_first_loop_right_from_then_on():
    correct = np.array([[0, 1, 0], [1, 1, 0], [0, 1, 1], [1, 1, 1]], dtype=bool)  # [loop digit]
    assert lock_in_loops(correct) == [4, 1, 3]
    assert lock_in_loops(np.array([[1, 1], [1, 0]], dtype=bool)) == [1, None]


def test_a_linear_fit_recovers_a_planted_slope():
    x = [1, 2, 3, 4, 5, 6]
    fit = LinearFit.of(x, [2 * v + 3 for v in x])
    assert fit.slope == pytest.approx(2) and fit.intercept == pytest.approx(3) and fit.r2 == pytest.approx(1)
    assert LinearFit.of([2, 2], [1, 5]).slope is None


def test_a_fit_calls_a_slope_an_effect_only_when_its_test_rejects_zero():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 6, 200)
    planted = LinearFit.of(x, 0.5 * x + rng.normal(0, 1, 200))
    assert planted.significant and planted.slope == pytest.approx(0.5, abs=0.15)
    assert planted.describe("loops per link").startswith("0.")
    noise = LinearFit.of(x, rng.normal(0, 1, 200))
    assert not noise.significant and noise.pvalue > 0.01
    assert noise.describe("loops per link").startswith("no dependence distinguishable from noise")


def test_planted_problems_keep_their_distances_and_alternate_carry_and_no_carry():
    task = get_task("addition", max_digits=5, answer_format="slots")
    problems = planted_chains(task, 10, 10, seed=0)
    for i, e in enumerate(problems):
        a, b = e.operands
        assert len(str(a)) == len(str(b)) == 10
        planted = 1 + (i * 9) // 9
        if i % 2 == 0:
            assert longest_cascade(a, b) == planted and max(decision_distance(a, b)) >= planted
        else:  # killed: no carry, so a chain reaching the top column has no extra answer digit
            assert longest_cascade(a, b) < planted and max(decision_distance(a, b)) >= planted - 1
    a, b = _kill_generator(999, 1, 3, random.Random(0))
    assert longest_cascade(a, b) == 0 and decision_distance(a, b) == [0, 1, 2] and len(str(a)) == 3


def test_the_wave_is_drawn_on_a_carry_generated_in_the_units_and_carried_by_nines():
    task = get_task("addition", max_digits=5, answer_format="slots")
    a, b = wave_example(task, 20).operands
    assert (a, b) == (19999999999999999995, 5) and a + b == 2 * 10**19
    # every digit above the units waits for the units' carry: distances 0, 1, ..., 19
    assert decision_distance(a, b) == list(range(20)) and longest_cascade(a, b) == 19


def test_the_analysis_runs_on_a_slot_model_and_reports_its_samples():
    task = get_task("addition", max_digits=3, answer_format="slots")
    cfg = ModelConfig(vocab=Vocab(tuple("0123456789+=_")), d_model=32, n_heads=4, n_loops=3, max_loops=24,
                      max_seq_len=64, answer_slots=True, positional="none", rotary="abacus", abacus_window=1,
                      input_injection="norm_add", halt_tol=0.05)
    model = LoopedTransformer(cfg).eval()
    result = carry_wave.run(model, task, config=carry_wave.CarryWaveConfig.quick())
    assert [f.label for f in result.lock_in] == ["uniform, 3 digits", "planted chains, 3 digits",
                                                 "uniform, 6 digits", "planted chains, 6 digits"]
    assert len(result.wave.p_correct) == 12 and len(result.wave.p_correct[0]) == len(result.wave.carry_distance)
    assert result.convergence.cap == 6 and result.convergence.n == 6
    assert set(result.figures()) == {"accuracy_by_length", "lock_in_by_chain", "loops_by_chain", "carry_wave",
                                     "delayed_carry", "convergence", "head_reading", "knockout", "path_independence"}
    assert (result.heads_trained.label, result.heads_far.label) == ("planted chains, 3 digits", "planted chains, 6 digits")
    assert len(result.heads_trained.mass) == 3 and len(result.heads_trained.mass[0]) == 4
    assert [r.digits for r in result.path_independence] == [3]
    assert result.delayed.switch_loops == (0, 2, 4) and result.delayed.chain == 4
    assert all(len(row) == 4 for row in result.delayed.lock_in)
    text = " ".join(result.findings())
    assert "Uniform problems" in text and "planted chains, 6 digits" in text
    assert 2 <= len(result.findings()) <= 6
    assert result.to_dict()["accuracy"]["trained_digits"] == 3


@pytest.mark.parametrize("digits,chain", [(20, 18), (5, 4), (3, 1)])
def test_a_chain_pair_differs_only_in_whether_the_units_column_carries(digits, chain):
    clean, corrupted = chain_pair(digits, chain, random.Random(digits))
    assert all(len(str(x)) == digits for x in (*clean, *corrupted))
    assert str(clean[0])[:-1] == str(corrupted[0])[:-1] and str(clean[1])[:-1] == str(corrupted[1])[:-1]
    assert longest_cascade(*clean) == chain and longest_cascade(*corrupted) == 0
    clean_sum, corrupted_sum = str(sum(clean))[::-1], str(sum(corrupted))[::-1]  # least significant first
    assert len(clean_sum) == len(corrupted_sum) == digits, "no answer gains a digit"
    assert clean_sum[1:chain] == "0" * (chain - 1) and corrupted_sum[1:chain] == "9" * (chain - 1)
    assert clean_sum[chain + 1:] == corrupted_sum[chain + 1:]
    with pytest.raises(ValueError, match="top column"):
        chain_pair(5, 5, random.Random(0))


def test_delayed_lock_in_counts_loops_from_the_start():
    right = np.array([[0, 1], [1, 0], [1, 1]], dtype=bool)  # [loop digit], loops 5, 6, 7
    assert _lock_in(torch.as_tensor(right), first_loop=5) == [6, 7]
    assert _lock_in(torch.as_tensor(np.array([[1, 1], [1, 0]], dtype=bool)), first_loop=1) == [1, None]


def test_the_shipped_extrapolator_starts_its_carry_wave_when_the_carry_is_switched_on():
    """checkpoints/extrap-add: switching the units column to generate the carry after s loops
    makes each chain digit lock in a fixed number of loops after s, growing with the digit."""
    from pathlib import Path

    from abacus_interp.checkpoints import load_model, load_task

    run = Path(__file__).resolve().parents[1] / "checkpoints" / "extrap-add"
    model, task = load_model(run, max_loops=48).eval(), load_task(run)
    clean, corrupted = chain_pair(20, 18, random.Random(0))
    result = delayed_carry(model, task, clean, corrupted, 18, [4, 8, 16], horizon=48)
    assert result.corrupted_right
    after = np.array([[lo - s for lo in row] for s, row in zip(result.switch_loops, result.lock_in, strict=True)])
    assert np.abs(after - after[-1]).max() <= 1, "the same wave, whenever it starts"
    assert after[-1, -1] - after[-1, 0] >= 18, "the top of the chain waits for the carry to climb"


def test_the_analysis_runs_without_head_reading_on_a_model_that_reads_no_index():
    """A slot model with a learned Abacus table (loop-add's kind): no column bookkeeping, so
    no head reading or knockout, and the rest of the section still runs."""
    task = get_task("addition", max_digits=3, answer_format="slots")
    cfg = ModelConfig(vocab=Vocab(tuple("0123456789+=_")), d_model=32, n_heads=4, n_loops=3, max_loops=24,
                      max_seq_len=64, answer_slots=True, input_injection="norm_add", halt_tol=0.05)
    result = carry_wave.run(LoopedTransformer(cfg).eval(), task, config=carry_wave.CarryWaveConfig.quick())
    assert result.heads_far is None and result.knockout is None
    assert "head_reading" not in result.figures() and result.path_independence
    assert not any("attention on the aligned digits" in f for f in result.findings())


def test_key_groups_name_the_columns_around_the_predicted_digit():
    """4321+789= then slots (model order, units first): the position predicting answer digit
    i sees a_i, b_i as "aligned", a_(i-1), b_(i-1) as "carry source" and the position
    predicting digit i - 1 as "answer slot below"."""
    vocab = Vocab(tuple("0123456789+=_"))
    task = get_task("addition", max_digits=4, answer_format="slots")
    example = task.make(1234, 987)
    cfg = ModelConfig(vocab=vocab, d_model=16, n_heads=2, max_seq_len=32, answer_slots=True, positional="none",
                      rotary="abacus", abacus_window=1)
    model = LoopedTransformer(cfg)
    from abacus_interp.core.tokens import encode_batch

    batch = encode_batch(vocab, [example.prompt], [example.target])
    queries, masks = _key_groups(batch.tokens, model.attention_index(batch.tokens), vocab.encode("=")[0],
                                 vocab.encode("+")[0], batch.prompt_lengths, [len(example.target)])
    assert queries[:, 1].tolist() == [8, 9, 10, 11]  # "=" predicts the units digit, then the slots

    def keys(row, group):
        return torch.nonzero(masks[row, GROUP_NAMES.index(group)]).flatten().tolist()

    # digit 2 (hundreds), predicted at position 10: a = 4321 at 0..3, "+" at 4, b = 789 at 5..7
    assert keys(2, "aligned a_i, b_i") == [2, 7]
    assert keys(2, "carry source a_(i-1), b_(i-1)") == [1, 6]
    assert keys(2, "two below a_(i-2), b_(i-2)") == [0, 5]
    assert keys(2, "answer slot below") == [9] and keys(2, "query itself") == [10]
    assert keys(1, "answer slot below") == [8] and keys(0, "query itself") == [8]  # "=" predicts the units
    assert keys(0, "carry source a_(i-1), b_(i-1)") == [] and keys(0, "answer slot below") == []
    assert 13 in keys(0, "other") and 13 in keys(1, "other")  # the end token is no answer slot
    assert (masks.sum(1) == 1).all(), "every key falls in exactly one group"


def _shipped_extrapolator():
    from pathlib import Path

    from abacus_interp.checkpoints import load_model, load_task

    run = Path(__file__).resolve().parents[1] / "checkpoints" / "extrap-add"
    return load_model(run, max_loops=64).eval(), load_task(run)


def test_the_shipped_extrapolator_carries_through_one_head_reading_the_answer_slot_below():
    """checkpoints/extrap-add on planted 20-digit chains: L0H0 alone reads the answer slot
    below; removing its access to it breaks the long chains, the same removal in any other
    head changes nothing."""
    model, task = _shipped_extrapolator()
    examples = planted_chains(task, 20, 24, 0)
    reading = head_reading(model, examples, 8, "planted chains, 20 digits")
    mass = np.array(reading.mass)  # [loop head group]
    assert np.allclose(mass.sum(-1), 1, atol=1e-3), "the groups split each attention row"
    below = mass[-1, :, GROUP_NAMES.index("answer slot below")]
    assert below.argmax() == 0 and below[0] > 0.05 and below[1:].max() < 0.05
    result = knockout(model, examples, 48, "planted chains, 20 digits", ["answer slot below"])
    assert result.baseline == 1.0
    assert result.exact_match[0][0] <= 0.1 and min(result.exact_match[0][1:]) >= 0.95


def test_the_shipped_extrapolator_is_path_independent_beyond_its_trained_length():
    from analyses.carry_wave.analysis import _uniform
    from analyses.carry_wave.stability import path_independence_by_length

    model, task = _shipped_extrapolator()
    rows = path_independence_by_length(model, {d: _uniform(task, d, 16, 0) for d in (5, 20)}, 48, seed=0)
    for row in rows:
        assert row.reference_exact_match == 1.0
        assert [s.start for s in row.starts] == ["noise", "noise_x4", "other"]
        assert all(s.same_answer == 1.0 and s.same_state == 1.0 for s in row.starts), row


def test_a_second_seed_of_the_recipe_solves_longer_chains_by_looping_longer():
    """checkpoints/extrap-add-seed1 (train.seed=1): planted chains 4x longer than any trained
    are solved, with loops that grow with the chain."""
    from pathlib import Path

    from abacus_interp.checkpoints import load_model, load_task
    from abacus_interp.evaluation.extrapolation import length_extrapolation

    run = Path(__file__).resolve().parents[1] / "checkpoints" / "extrap-add-seed1"
    model, task = load_model(run).eval(), load_task(run)
    short, long = length_extrapolation(model, task, [], chains=[(5, 5), (20, 20)], n=16, seed=3).rows
    assert short.exact_match == 1.0 and long.exact_match == 1.0
    assert long.loops_median >= short.loops_median + 10


def test_a_model_whose_positions_stop_at_the_trained_length_is_told_why_not():
    """checkpoints/loop-add (a learned Abacus table, max_seq_len 36) cannot take 4N-digit
    problems: the section says so instead of failing on a position index."""
    from pathlib import Path

    from abacus_interp.checkpoints import load_model, load_task
    from abacus_interp.errors import UserError
    from analyses.carry_wave.analysis import far_length_reason

    run = Path(__file__).resolve().parents[1] / "checkpoints" / "loop-add"
    model, task = load_model(run), load_task(run)
    reason = far_length_reason(model, task, 4)
    assert reason is not None and "20-digit" in reason and "max_seq_len=36" in reason
    assert far_length_reason(model, task, 1) is None
    with pytest.raises(UserError, match="not built to extrapolate"):
        carry_wave.run(model, task, config=carry_wave.CarryWaveConfig.quick(), far_multiple=4)

"""Reading each answer column's running sum from the state, loop by loop: the fitted readout
recovers a sum planted from a given loop on, the states are taken where each answer digit is
predicted, a run's trained readout is used as it is, and the finding states what was read."""

from __future__ import annotations

import random

import pytest
import torch

from abacus_interp.core.config import ModelConfig
from abacus_interp.core.model import LoopedTransformer
from abacus_interp.tasks import get_task
from abacus_interp.tasks.product_carries import running_sums
from analyses._running_sum import (
    ProductDigits,
    ReadoutScore,
    RunningSumReading,
    column_states,
    fitted_classes,
    fitted_readout,
    partial_products,
    running_sum_reading,
    running_sum_sentence,
    score_readout,
)


@pytest.fixture
def task():
    return get_task("multiplication", max_digits=3, max_multiplier_digits=2, answer_format="slots")


def tiny_slots(task, **overrides):
    cfg = dict(vocab=task.vocab, d_model=32, n_heads=2, n_layers=1, n_loops=2, max_seq_len=24, abacus_max_offset=0,
               positional="abacus", answer_slots=True)
    return LoopedTransformer(ModelConfig(**{**cfg, **overrides})).eval()


def planted_states(sums: torch.Tensor, from_loop: int, loops: int, d: int = 16, seed: int = 0) -> torch.Tensor:
    """[loop column d] features of unrelated values (spread like the sums) plus small noise, and
    the running sum along one fixed direction from loop `from_loop` (1-based) on."""
    direction = torch.nn.functional.normalize(torch.randn(d, generator=torch.Generator().manual_seed(99)), dim=0)
    g = torch.Generator().manual_seed(seed)
    states = 10 * torch.randn(loops, len(sums), d, generator=g)
    states -= (states @ direction)[..., None] * direction  # nothing along the direction but what is planted
    states += 0.05 * torch.randn(loops, len(sums), d, generator=g)
    states[from_loop - 1 :] += sums[None, :, None] * direction
    return states


def test_a_fitted_readout_reads_a_sum_planted_from_loop_3_on():
    rng = random.Random(0)
    fit_sums = torch.tensor([float(rng.randint(0, 40)) for _ in range(600)])
    sums = torch.tensor([float(rng.randint(0, 40)) for _ in range(300)])
    fit, held_out = planted_states(fit_sums, 3, 5, seed=1), planted_states(sums, 3, 5, seed=2)
    score = score_readout(fitted_readout(fit, fit_sums, held_out), sums)
    assert max(score.read[:2]) < 0.2 and min(score.read[2:]) >= 0.99  # absent, then read to within 0.5
    assert max(score.r2[:2]) < 0.2 and min(score.r2[2:]) > 0.999
    assert score.first_read() == 2  # loop index 2: loop 3


def test_states_are_taken_where_each_answer_digit_is_predicted(task):
    torch.manual_seed(0)
    model = tiny_slots(task)
    examples = task.sample_cell(5, random.Random(3), 3, 2) + task.sample_cell(3, random.Random(4), 1, 1)
    states, sums = column_states(model, examples, loops=3, batch_size=4)
    assert states.shape == (1 + 3, len(sums), 32)  # the input, then loops 1..3
    assert sums.tolist() == [float(s) for e in examples for s in running_sums(*e.operands)]
    # the last loop's normalised state at the slot that predicts answer digit 1 of the first problem
    e = examples[0]
    tokens = torch.tensor([task.vocab.encode(e.prompt + e.target)])
    inputs = model.embed(tokens)
    state = model.run_loops(inputs, range(3), index=model.attention_index(tokens))
    position = len(e.prompt) - 1 + 1
    assert torch.allclose(states[-1, 1], model.ln_final(state)[0, position], atol=1e-5)
    assert torch.allclose(states[0, 1], model.ln_final(inputs)[0, position], atol=1e-5)


def test_a_trained_readout_is_read_as_the_model_reads_it(task):
    torch.manual_seed(0)
    model = tiny_slots(task, running_sum_probe=True)
    examples = task.sample_cell(6, random.Random(5), 3, 2)
    fit = task.sample_cell(80, random.Random(6), 3, 2)
    reading = running_sum_reading(model, examples, fit, loops=2, label="uniform 3 x 2 digits")
    predicted = []
    for e in examples:
        tokens = torch.tensor([task.vocab.encode(e.prompt + e.target)])
        for t in (1, 2):
            state = model.run_loops(model.embed(tokens), range(t), index=model.attention_index(tokens))
            start = len(e.prompt) - 1
            predicted.append((t, 10 * model.read_running_sum(state)[0, start : start + len(e.target)]))
    by_loop = torch.stack([torch.cat([p for t, p in predicted if t == loop]) for loop in (1, 2)]).detach()
    sums = torch.tensor([float(s) for e in examples for s in running_sums(*e.operands)])
    assert reading.trained == score_readout(by_loop, sums)
    assert tiny_slots(task).cfg.running_sum_probe is False
    assert running_sum_reading(tiny_slots(task), examples, fit, loops=2, label="x").trained is None


def test_the_fit_learns_on_the_other_problems_only(task, monkeypatch):
    torch.manual_seed(0)
    model = tiny_slots(task)
    examples = task.sample_cell(10, random.Random(7), 3, 2)
    fit = examples[:4] + task.sample_cell(60, random.Random(8), 3, 2)
    fitted_on = []
    original = fitted_readout

    def recording(fit_states, fit_sums, states):
        fitted_on.append(len(fit_sums))
        return original(fit_states, fit_sums, states)

    monkeypatch.setattr("analyses._running_sum.fitted_readout", recording)
    reading = running_sum_reading(model, examples, fit, loops=2, label="x")
    others = [e for e in fit if e.operands not in {x.operands for x in examples}]
    assert reading.n_fit_problems == len(others) < len(fit)
    assert fitted_on == [sum(len(e.target) for e in others)]
    assert running_sum_reading(model, examples, fit[:20], loops=2, label="x") is None  # too few to fit d_model on


def test_the_sentence_states_the_fit_the_baseline_and_the_numbers():
    score = ReadoutScore
    readings = (RunningSumReading(label="uniform 5 x 1 digits", n_problems=48, n_fit_problems=190, n_columns=255,
                                  fitted=score(read=(0.05, 0.06), r2=(0.91, 0.92)),
                                  baseline=score(read=(0.04,), r2=(0.5,)), trained=None),
                RunningSumReading(label="uniform 5 x 2 digits", n_problems=48, n_fit_problems=190, n_columns=326,
                                  fitted=score(read=(0.5, 0.995), r2=(0.95, 0.999)),
                                  baseline=score(read=(0.02,), r2=(0.4,)), trained=score(read=(0.9, 0.99), r2=(0.9, 0.99))))
    sentence = running_sum_sentence(readings)
    assert "fitted per loop on 190 other problems, after 2 loops (48 problems per sample)" in sentence
    assert ("uniform 5 x 1 digits: 6% (R² 0.920; from the input alone 4%, R² 0.500; never 99%; n=255 columns)"
            in sentence)
    assert "the run's trained readout 99%, R² 0.990; 99% from loop 2; n=326 columns" in sentence


def test_partial_products_follow_long_multiplication(task):
    # 345 * 67 = 23,115, units first a = 5 4 3, b = 7 6: column i adds a_i * 7 and a_(i-1) * 6
    full, values = partial_products([task.make(345, 67)], 2)
    assert full.tolist() == [False, True, True, False, False]  # columns 1 and 2 add both
    assert values.tolist() == [[35, 28, 21, 0, 0], [0, 30, 24, 18, 0]]
    with pytest.raises(ValueError, match="multiplier of 2 digits"):
        partial_products([task.make(345, 67)], 3)


def test_a_partial_product_planted_from_loop_2_is_read_and_the_other_is_not(task, monkeypatch):
    """States that hold, along one direction from loop 2 on, a_(i-1) * b_1 in the columns that add
    both products and a_i * b_0 in the others: the fitted readouts, which read the columns that add
    both only, read the first with R² near 1 from loop 2 (not from the input) and the second near
    0, and say the loop it reads best. Reading every column would mix in the other product."""
    def planted(model, examples, loops):
        full, values = partial_products(examples, 2)
        values = torch.where(full, values[1], values[0])
        sums = torch.tensor([float(s) for e in examples for s in running_sums(*e.operands)])
        return planted_states(values, from_loop=3, loops=1 + loops, seed=len(examples)), sums

    monkeypatch.setattr("analyses._running_sum.column_states", planted)
    examples = task.sample_cell(60, random.Random(9), 3, 2)
    fit = task.sample_cell(200, random.Random(10), 3, 2)
    reading = running_sum_reading(tiny_slots(task), examples, fit, loops=3, label="x", products_of=2)
    b0, b1 = reading.partial_products
    assert len(b1.r2) == 3 and b1.r2[0] < 0.2 and min(b1.r2[1:]) > 0.999
    assert max(b0.r2) < 0.3
    assert [len(s.r2) for s in reading.partial_products_baseline] == [1, 1]
    assert reading.partial_products_baseline[1].r2[0] < 0.2
    assert reading.best_partial_product_loop(1) in (1, 2)
    assert running_sum_reading(tiny_slots(task), examples, fit, loops=3, label="x").partial_products == ()
    sentence = running_sum_sentence((reading,))
    assert "Each partial product, read the same way in the columns that add all of them" in sentence
    assert f"x: a_i * b_0 {b0.r2[reading.best_partial_product_loop(0)]:.3f}" in sentence
    assert "a_(i-1) * b_1 1.000 (loop " in sentence and "(input alone " in sentence
    # a multiplicand shorter than the multiplier: no column adds both, nothing is read
    short = get_task("multiplication", max_digits=3, max_multiplier_digits=3, answer_format="slots")
    monkeypatch.undo()
    no_full = running_sum_reading(tiny_slots(short), short.sample_cell(40, random.Random(11), 1, 3),
                                  short.sample_cell(60, random.Random(12), 2, 3), loops=2, label="x", products_of=3)
    assert no_full.partial_products == () and no_full.partial_products_baseline == ()


def digit_states(products: torch.Tensor, as_digits: bool, seed: int, d: int = 24) -> torch.Tensor:
    """[2 column d] states, the input (noise) then one loop that holds `products` either as the
    one-hot of their units and tens (20 dimensions) or as one magnitude along a direction."""
    g = torch.Generator().manual_seed(seed)
    states = 0.05 * torch.randn(2, len(products), d, generator=g)
    if as_digits:
        states[1, torch.arange(len(products)), (products % 10).long()] += 1.0
        states[1, torch.arange(len(products)), 10 + (products // 10).long()] += 1.0
    else:
        states[1, :, 0] += products / 10
    return states


def test_a_classifier_reads_digits_held_as_classes_and_not_the_units_of_a_magnitude():
    """Units and tens planted as classes are read at every column; a product held as one
    magnitude gives its units no better than about chance, as they repeat every ten."""
    rng = random.Random(0)
    fit = torch.tensor([float(rng.randint(0, 9) * rng.randint(0, 9)) for _ in range(800)])
    held_out = torch.tensor([float(rng.randint(0, 9) * rng.randint(0, 9)) for _ in range(400)])
    for as_digits in (True, False):
        fit_states, states = digit_states(fit, as_digits, seed=1), digit_states(held_out, as_digits, seed=2)
        units = (fitted_classes(fit_states, fit % 10, states) == (held_out % 10).long()).double().mean(1)
        tens = (fitted_classes(fit_states, fit // 10, states) == (held_out // 10).long()).double().mean(1)
        # what a constant reads: the commonest digit (units 0, a fifth of one-digit products; tens 0, two fifths)
        commonest_units, commonest_tens = (max((digit_of(held_out) == c).double().mean().item() for c in range(10))
                                           for digit_of in (lambda v: v % 10, lambda v: v // 10))
        if as_digits:
            assert units[1] == 1.0 and tens[1] == 1.0
        else:
            assert units[1] <= commonest_units + 0.05
        assert units[0] <= commonest_units + 0.05 and tens[0] <= commonest_tens + 0.05  # the input's noise


def test_the_sentence_gives_each_products_digits_where_its_units_are_read_best():
    reading = RunningSumReading(label="uniform 5 x 2 digits", n_problems=48, n_fit_problems=190, n_columns=326,
                                fitted=ReadoutScore(read=(0.5, 0.9), r2=(0.9, 0.99)),
                                baseline=ReadoutScore(read=(0.02,), r2=(0.4,)), trained=None,
                                partial_products=(ReadoutScore(read=(0, 0), r2=(0.8, 0.9)),) * 2,
                                partial_products_baseline=(ReadoutScore(read=(0,), r2=(0.0,)),) * 2,
                                product_digits=(ProductDigits(units=(0.9, 0.8), tens=(0.95, 0.9), units_from_input=0.2,
                                                              tens_from_input=0.3),
                                                ProductDigits(units=(0.4, 0.45), tens=(0.9, 0.93), units_from_input=0.15,
                                                              tens_from_input=0.3)))
    sentence = running_sum_sentence((reading,))
    assert ("uniform 5 x 2 digits: a_i * b_0 90% / 95% (loop 1; 20% / 30%), a_(i-1) * b_1 45% / 93% (loop 2; "
            "15% / 30%)") in sentence


def test_a_trained_product_readout_is_read_as_the_model_reads_it(task):
    torch.manual_seed(0)
    model = tiny_slots(task, partial_product_probe=2)
    torch.nn.init.normal_(model.W_products, std=1.0)  # a readout that guesses differently per column
    examples = task.sample_cell(8, random.Random(5), 3, 2)
    fit = task.sample_cell(80, random.Random(6), 3, 2)
    reading = running_sum_reading(model, examples, fit, loops=2, label="uniform 3 x 2 digits", products_of=2)
    full, values = partial_products(examples, 2)
    right = {(j, which): [] for j in range(2) for which in range(2)}
    for t in (0, 1, 2):  # the input, then loops 1 and 2
        guesses = []
        for e in examples:
            tokens = torch.tensor([task.vocab.encode(e.prompt + e.target)])
            inputs = model.embed(tokens)
            state = inputs if t == 0 else model.run_loops(inputs, range(t), index=model.attention_index(tokens))
            start = len(e.prompt) - 1
            guesses.append(model.read_partial_products(state)[0, start : start + len(e.target)].argmax(-1))
        guess = torch.cat(guesses)[full]  # [column k 2]
        for j in range(2):
            for which, digit in enumerate((values[j, full] % 10, values[j, full] // 10)):
                right[j, which].append(round(float((guess[:, j, which] == digit.long()).double().mean()), 4))
    for j, d in enumerate(reading.product_digits_trained):
        assert (d.units_from_input, *d.units) == pytest.approx(tuple(right[j, 0]), abs=1e-4)
        assert (d.tens_from_input, *d.tens) == pytest.approx(tuple(right[j, 1]), abs=1e-4)
    assert len(reading.product_digits_trained) == 2
    assert "(the run's trained readout after the last loop: " in running_sum_sentence((reading,))
    assert running_sum_reading(tiny_slots(task), examples, fit, loops=2, label="x",
                               products_of=2).product_digits_trained == ()

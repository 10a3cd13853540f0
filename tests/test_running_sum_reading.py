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
    RunningSumReading,
    column_states,
    fitted_readout,
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
    read, r2 = score_readout(fitted_readout(fit, fit_sums, held_out), sums)
    assert max(read[:2]) < 0.2 and min(read[2:]) >= 0.99  # absent, then read to within 0.5
    assert max(r2[:2]) < 0.2 and min(r2[2:]) > 0.999
    reading = RunningSumReading(label="planted", readout="fitted", n_problems=1, n_columns=300, read=read, r2=r2)
    assert reading.first_read() == 3


def test_states_are_taken_where_each_answer_digit_is_predicted(task):
    torch.manual_seed(0)
    model = tiny_slots(task)
    examples = task.sample_cell(5, random.Random(3), 3, 2) + task.sample_cell(3, random.Random(4), 1, 1)
    states, sums = column_states(model, examples, loops=3, batch_size=4)
    assert states.shape == (3, len(sums), 32)
    assert sums.tolist() == [float(s) for e in examples for s in running_sums(*e.operands)]
    # the last loop's normalised state at the slot that predicts answer digit 1 of the first problem
    e = examples[0]
    tokens = torch.tensor([task.vocab.encode(e.prompt + e.target)])
    state = model.run_loops(model.embed(tokens), range(3), index=model.attention_index(tokens))
    assert torch.allclose(states[-1, 1], model.ln_final(state)[0, len(e.prompt) - 1 + 1], atol=1e-5)


def test_a_trained_readout_is_used_as_it_is(task):
    torch.manual_seed(0)
    model = tiny_slots(task, running_sum_probe=True)
    examples = task.sample_cell(6, random.Random(5), 3, 2)
    reading = running_sum_reading(model, examples, loops=2, label="uniform, 3 x 2 digits")
    states, sums = column_states(model, examples, loops=2)
    predicted = 10 * (states @ model.W_sum.detach() + model.b_sum.detach())
    assert reading.readout == "trained" and (reading.read, reading.r2) == score_readout(predicted, sums)
    with pytest.raises(ValueError, match="fit_examples"):
        running_sum_reading(tiny_slots(task), examples, loops=2, label="x")


def test_the_sentence_states_the_readout_the_sample_and_the_numbers():
    readings = (RunningSumReading(label="uniform 5 x 1 digits", readout="fitted", n_problems=48, n_columns=255,
                                  read=(0.05, 0.06), r2=(0.91, 0.92)),
                RunningSumReading(label="uniform 5 x 2 digits", readout="fitted", n_problems=48, n_columns=326,
                                  read=(0.04, 0.07), r2=(0.85, 0.9)))
    sentence = running_sum_sentence(readings)
    assert "fitted per loop on other problems" in sentence and "after 2 loops (48 problems per sample)" in sentence
    assert "uniform 5 x 1 digits 6% (R² 0.920; never 99%; n=255 columns)" in sentence
    assert sentence.endswith("does not hold the running sum as one linear quantity.")

"""analyses.multiplication.errors: whether a wrong answer digit went wrong in the multiplying (a
partial product read wrong by the trained readout) or in the adding. On the shipped N x 3 run,
far past the trained length, nearly every wrong digit had its column's products right, and most
had a large carry coming in; a readout that reads nothing puts the blame on the multiplying."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from abacus_interp import checkpoints as ckpt
from abacus_interp.errors import UserError
from analyses.multiplication.analysis import _uniform
from analyses.multiplication.errors import error_sources

CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
BEST = CHECKPOINTS / "extrap-mul-digits-ft8"

pytestmark = pytest.mark.skipif(not (BEST / "config.json").exists(),
                                reason="checkpoints/extrap-mul-digits-ft8 is not shipped in this checkout")


def far_problems(task):
    return _uniform(task, 50, 3, 48, 0)


@pytest.fixture(scope="module")
def intact():
    """The shipped run's count on 48 problems of 50 x 3 digits (seed 0), after 64 loops."""
    model, task = ckpt.load_model(BEST, device="cpu"), ckpt.load_task(BEST)
    return error_sources(model, task, far_problems(task), 50, 3, 64, "uniform, 50 x 3 digits")


def test_far_from_home_the_wrong_digits_go_wrong_in_the_adding(intact):
    """docs/runs/multiplication.md's figures on 100 problems of 50 x 3: 26 of 5,288 digits wrong,
    23 of them with every product read right, 23 with a carry of 9 or more. Here 48 problems:
    13 of 2,539 wrong, 12 in the adding, 10 with a large carry; no right digit has a product misread."""
    assert intact.n_digits == sum(len(p.target) for p in far_problems(ckpt.load_task(BEST)))
    assert 0 < intact.wrong <= 0.01 * intact.n_digits
    assert intact.adding_share >= 0.8 and intact.right_misread == 0
    assert intact.wrong_large_carry >= 0.6 * intact.wrong
    assert f"{intact.wrong} of {intact.n_digits} answer digits wrong" in intact.sentence()


def test_a_readout_that_reads_nothing_blames_the_multiplying(intact):
    """The same 48 problems with the readout's weights zeroed: it answers its biases' digits at
    every column. The answer is untouched (the readout reads the state, it does not write it), so
    the same digits are wrong, but now nearly every digit, right or wrong, has a product misread."""
    model, task = ckpt.load_model(BEST, device="cpu"), ckpt.load_task(BEST)
    with torch.no_grad():
        model.W_products.zero_()
    blind = error_sources(model, task, far_problems(task), 50, 3, 64, "uniform, 50 x 3 digits")
    assert blind.wrong == intact.wrong and blind.wrong_large_carry == intact.wrong_large_carry
    assert blind.right_misread >= 0.9 * (blind.right + blind.right_misread)
    assert blind.adding_share <= 0.2 < intact.adding_share


def test_a_run_without_the_readout_is_told_which_runs_have_one():
    baseline = CHECKPOINTS / "extrap-mul"
    if not (baseline / "config.json").exists():
        pytest.skip("checkpoints/extrap-mul is not shipped in this checkout")
    model, task = ckpt.load_model(baseline, device="cpu"), ckpt.load_task(baseline)
    with pytest.raises(UserError, match="partial_product_probe"):
        error_sources(model, task, _uniform(task, 5, 2, 4, 0), 5, 2, 8)


def test_the_report_says_how_many_wrong_digits_went_wrong_in_the_adding():
    from analyses.multiplication.errors import ErrorSources
    from analyses.multiplication.findings import _error_sources_sentence

    def counted(k, adding, multiplying):
        return ErrorSources(label=f"uniform, 50 x {k} digits", digits=50, multiplier_digits=k, loops=64,
                            n_problems=100, right=5000, right_misread=0, wrong_in_adding=adding,
                            wrong_in_multiplying=multiplying, wrong_large_carry=adding)

    sentence = _error_sources_sentence((counted(2, 0, 0), counted(3, 23, 3)))
    assert "x 3 at 50 digits 23 of 26" in sentence and "x 2" not in sentence  # x 2 had none wrong
    assert _error_sources_sentence((counted(2, 0, 0),)) == ""
    assert counted(3, 23, 3).adding_share == 23 / 26 and counted(2, 0, 0).adding_share is None


def test_one_pass_reads_the_same_answer_digits_as_the_logit_lens():
    """The report reads the far problems once for both their digit accuracy and their error
    sources: the answers read beside the products equal what lens_answers reads on its own."""
    from analyses.multiplication.analysis import digit_accuracy
    from analyses.multiplication.errors import count_error_sources, read_answers_and_products

    model, task = ckpt.load_model(BEST, device="cpu"), ckpt.load_task(BEST)
    examples = _uniform(task, 20, 3, 24, 3)
    readings = read_answers_and_products(model, task, examples, 32)
    assert [len(r.answer_read) for r in readings] == [len(r.products_right) for r in readings]
    one_pass = digit_accuracy(model, examples, 20, 3, 32, [r.answer_read for r in readings])
    assert one_pass == digit_accuracy(model, examples, 20, 3, 32)
    assert count_error_sources(model, examples, readings, 20, 3, 32) == error_sources(model, task, examples, 20, 3, 32)

"""The end of cleanup, read from the progress series: the single-frequency share and the sum
of squared weights flat over the last 2,000 steps (planted series, then the shipped run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyses.fourier.progress import CleanupCheck, cleanup_check
from analyses.fourier.result import ProgressSeries

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "grok-mod113"


def series(steps, share, weights) -> ProgressSeries:
    n = len(steps)
    zeros = (0.0,) * n
    return ProgressSeries(step=tuple(steps), restricted_loss=zeros, restricted_accuracy=zeros, excluded_loss=zeros,
                          excluded_accuracy=zeros, full_loss_train=zeros, restricted_loss_all=zeros, full_loss=zeros,
                          train_loss=zeros, test_loss=zeros, train_accuracy=zeros, test_accuracy=zeros,
                          gini_embed=zeros, gini_neuron_logit=zeros, sum_sq_weights=tuple(weights), key_frequencies=(),
                          single_frequency_share=tuple(share))


def test_cleanup_is_over_when_share_and_weights_are_flat_over_the_window():
    steps = [0, 10_000, 12_000, 13_000, 14_000]
    flat = cleanup_check(series(steps, [0, 0.3, 0.785, 0.788, 0.789], [2000, 1200, 900, 899, 898]))
    assert flat == CleanupCheck(12_000, 14_000, 0.785, 0.789, 900, 898) and flat.over
    # the share still rising by 1.5 points over the window: not over
    rising = cleanup_check(series(steps, [0, 0.3, 0.76, 0.77, 0.775], [2000, 1200, 900, 899, 898]))
    assert rising.from_step == 12_000 and not rising.over
    # the weights still shrinking by 2%: not over
    assert not cleanup_check(series(steps, [0, 0.3, 0.785, 0.788, 0.789], [2000, 1200, 900, 890, 882])).over
    # a series shorter than the window, or made before the share was measured, says nothing
    assert cleanup_check(series([0, 1000, 1500], [0.1, 0.2, 0.3], [3, 2, 1])) is None
    assert cleanup_check(series(steps, [], [2000, 1200, 900, 899, 898])) is None


@pytest.mark.slow
@pytest.mark.skipif(not (SHIPPED / "config.json").exists(), reason="checkpoints/grok-mod113 is not here")
def test_the_shipped_grok_run_trained_until_cleanup_was_over():
    from analyses import fourier

    result = fourier.run(SHIPPED, progress=False)
    check = cleanup_check(result.summary.progress)
    assert (check.from_step, check.to_step) == (18_000, 20_000) and check.over
    assert check.share_to == pytest.approx(404 / 512)  # 78.9%: the paper's 84.6% is not reached
    assert any(f.startswith("Cleanup is over: from step 18,000 to 20,000") for f in result.findings())

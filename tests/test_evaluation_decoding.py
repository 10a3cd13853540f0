"""The evaluation reads answers at the run's own decoding: adaptive loops for a run with
`halt_tol` (extrap-add), a fixed loop count otherwise, and every finding and figure says which.

Issue 37: the report's accuracy section ran extrap-add at a fixed 6 loops and said 99999+1
gives 90000, while `solve` (adaptive loops) answers 100000."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.evaluation import evaluate
from abacus_interp.evaluation.answers import AnswerDecoding
from abacus_interp.evaluation.report import EvalReport
from abacus_interp.tasks import get_task

EXTRAP_ADD = Path(__file__).resolve().parents[1] / "checkpoints" / "extrap-add"


def _extrap_add_context():
    from abacus_interp.checkpoints import load_model, load_task
    from analyses.contract import RunContext

    return RunContext(run_dir=EXTRAP_ADD, model=load_model(EXTRAP_ADD, device="cpu"), task=load_task(EXTRAP_ADD))


@pytest.mark.skipif(not (EXTRAP_ADD / "config.json").exists(), reason="checkpoints/extrap-add is not here")
def test_report_evaluation_of_extrap_add_uses_adaptive_loops_and_passes_the_carry_chains():
    from analyses.report.evaluation import EvaluationSizes, build_evaluation

    ctx = _extrap_add_context()
    # the report's path (no loop count given), on a small grid and sets: the edge cases are
    # the report's own (operand lengths up to 2x trained, as the report's max_length allows)
    sizes = EvaluationSizes(settings={"n_per_cell": 2, "n_per_set": 4, "grid": (1, 2)}, max_loops=6)
    built = build_evaluation(ctx, sizes)
    d = EvalReport.from_dict(built.data)
    assert d.to_dict() == built.data  # report.json holds the evaluation's own JSON
    cases = {c.name: c for c in d.edge_cases.cases}
    for name, expected, in_distribution in (("99999+1", "100000", True), ("9999999999+1", "10000000000", False)):
        case = cases[name]
        assert case.in_distribution is in_distribution
        assert case.passed and case.answers == (expected,), (name, case.answers)
        assert 6 < case.loops_used[0] <= 128  # read where its answer converged, not at the trained 6
    label = "adaptive loops, at most 128, halting at relative step < 0.001"
    assert d.settings.decoding.label == label
    assert d.grid.decoding == label and d.lengths.decoding == label and d.edge_cases.decoding == label
    assert d.edge_cases.in_distribution_pass_rate == 1.0
    assert set(d.loops.adaptive.sets) == {"in_distribution", "out_of_distribution"}
    # every finding names its sample and its loops
    assert built.sentences[0].endswith(f"(n=2 per digit-count cell, {label}).")
    assert any(s.startswith("All ") and f"pass under greedy decoding ({label})" in s for s in built.sentences)
    # every edge case is a row of the HTML table, not a scrolling figure
    assert "edge_cases" not in built.plots
    assert built.tables.count("<tr>") == len(d.edge_cases.cases) + 1
    assert "99999+1" in built.tables and "in distribution 42 of 42 pass" in built.tables
    # the report's opening summary reads these numbers, with their n and loops
    from analyses.report.summary import summary_sentences

    summary = summary_sentences(d)
    # a run with no position table is asked how far it goes (10x; 25x does not fit its max_seq_len)
    assert summary[0] == ("Far past its training (operands of up to 5 digits), exact match is 100% at 50 digits "
                          f"(10x) (both operands of exactly that length, uniform digits, n=2 each, {label}).")
    assert summary[1].startswith("In distribution (operands of 1-5 digits, the trained range), exact match is 100% "
                                 "on 8 problems (4 digit-count cells of n=2)")
    assert summary[1].endswith(f"Answers are read with {label}.")
    assert summary[-1] == ("No known failure: all 42 in-distribution edge cases pass, and all 22 beyond the trained "
                           f"lengths (greedy decoding, {label}).")


@pytest.mark.skipif(not (EXTRAP_ADD / "config.json").exists(), reason="checkpoints/extrap-add is not here")
def test_extrap_add_at_a_fixed_six_loops_still_fails_the_chain_and_says_six_loops():
    """The fixed count stays available (n_loops=6): there the chain fails, and the finding says 6 loops."""
    from analyses.report.findings import evaluation as evaluation_findings

    ctx = _extrap_add_context()
    report = evaluate(ctx.model, ctx.task, grid=(1, 1), loops=[6], n_per_cell=1, n_per_set=2, max_length=5,
                      n_loops=6, progress=False)
    chain = next(c for c in report.edge_cases.cases if c.name == "99999+1")
    assert not chain.passed and chain.loops_used == (6,)
    assert report.loops.adaptive is None
    finding = next(f for f in evaluation_findings(report) if "edge cases" in f)
    assert "under greedy decoding (6 loops): 99999+1 gives" in finding


def test_a_model_without_halting_is_read_at_its_trained_depth():
    torch.manual_seed(0)
    task = get_task("addition", max_digits=2)
    model = LoopedTransformer(ModelConfig(vocab=task.vocab, d_model=32, n_heads=4, n_layers=1, n_loops=2,
                                          max_seq_len=40)).eval()
    assert AnswerDecoding.of(model) == AnswerDecoding(n_loops=2)
    report = evaluate(model, task, grid=(1, 2), loops=[1, 2], n_per_cell=2, n_per_set=4, max_length=2, progress=False)
    assert report.settings.decoding.label == "2 loops" and report.grid.decoding == "2 loops"
    assert report.loops.adaptive is None
    assert all(c.loops_used == (2,) * len(c.answers) for c in report.edge_cases.cases)
    rates = report.edge_cases
    inside = [c.passed for c in rates.cases if c.in_distribution]
    assert rates.in_distribution_pass_rate == sum(inside) / len(inside)

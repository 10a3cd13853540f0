"""The evaluation suite: planted generators checked exactly, the whole suite end-to-end on
tiny random models (shapes, keys, JSON, figures, greedy/teacher-forced agreement)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import plotly.graph_objects as go
import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.evaluation import EvalReport, evaluate, format_report, sample_with_cascade
from abacus_interp.evaluation.cascades import cascade_bucket
from abacus_interp.evaluation.edge_cases import edge_cases, run_edge_cases
from abacus_interp.evaluation.suite import (
    cell_examples,
    cell_fits,
    cell_length,
    default_grid,
    default_loops,
)
from abacus_interp.jsonsafe import json_safe
from abacus_interp.tasks import get_task
from abacus_interp.tasks.carries import carry_in, longest_cascade


def tiny(task, **kw) -> LoopedTransformer:
    cfg = dict(vocab=task.vocab, d_model=32, n_heads=4, n_layers=1, n_loops=2, max_seq_len=40)
    return LoopedTransformer(ModelConfig(**{**cfg, **kw})).eval()


# ------------------------------------------------------------------ planted cascades


@pytest.mark.parametrize("n_digits", [1, 2, 3, 5, 8])
def test_sample_with_cascade_plants_exactly_the_requested_length(n_digits):
    for length in range(0, n_digits + 1):
        seen = set()
        for seed in range(40):
            a, b = sample_with_cascade(length, n_digits, random.Random(seed))
            assert longest_cascade(a, b) == length, (a, b, length)
            assert len(str(a)) == n_digits and len(str(b)) == n_digits
            seen.add((a, b))
        # the other digits are random, not one fixed problem per length
        assert len(seen) > 5


def test_sample_with_cascade_is_seeded_and_validates():
    assert sample_with_cascade(3, 6, random.Random(7)) == sample_with_cascade(
        3, 6, random.Random(7)
    )
    assert carry_in(*sample_with_cascade(0, 6, random.Random(1))) == [0] * 6
    with pytest.raises(ValueError, match="0..3"):
        sample_with_cascade(4, 3, random.Random(0))
    with pytest.raises(ValueError, match="n_digits"):
        sample_with_cascade(0, 0, random.Random(0))
    assert [cascade_bucket(k) for k in (0, 4, 5, 9)] == ["0", "4", "5+", "5+"]


# ------------------------------------------------------------------ grid cells


def test_grid_cells_have_the_right_digit_counts_and_are_stable():
    task = get_task("addition", max_digits=5)
    for i, j in [(1, 1), (1, 7), (4, 2), (10, 10)]:
        ex = cell_examples(task, i, j, 30, seed=3)
        assert len(ex) == 30
        assert all(len(str(e.operands[0])) == i and len(str(e.operands[1])) == j for e in ex)
        assert all(e.answer == e.operands[0] + e.operands[1] for e in ex)
        # a cell's problems depend on (seed, i, j) only
        assert ex == cell_examples(task, i, j, 30, seed=3)
        assert ex != cell_examples(task, i, j, 30, seed=4)


def test_cell_fitting_and_defaults():
    add = get_task("addition", max_digits=5)
    mul = get_task("multiplication", max_digits=3)
    # prompt i + 1 + j + 1, answer, EOS
    assert cell_length(add, 3, 2) == 3 + 1 + 2 + 1 + 4 + 1
    assert cell_length(mul, 3, 2) == 3 + 1 + 2 + 1 + 5 + 1
    for task in (add, mul):
        for i, j in [(1, 1), (3, 2), (5, 5)]:
            ex = task.sample_cell(20, random.Random(0), i, j)
            longest = max(len(task.vocab.encode(e.prompt + e.target)) + 1 for e in ex)
            assert longest <= cell_length(task, i, j)
    assert default_grid(add, 40) == (1, 10)
    assert default_grid(add, 20) == (1, 7)  # 7 + 1 + 1 + 1 + 8 + 1 = 19 tokens
    assert cell_fits(add, 7, 1, 20) and not cell_fits(add, 7, 7, 20)
    # powers of two and 1x, 2x, 4x the trained depth, up to 4x it: a few passes over the sets
    # (every count up to 16 took most of a minute of `eval checkpoints/small-add`)
    cfg = tiny(add, n_loops=4).cfg  # max_loops 16
    assert default_loops(cfg) == [1, 2, 4, 8, 16]
    assert default_loops(tiny(add, n_loops=3, max_loops=40).cfg) == [1, 2, 3, 4, 6, 8, 12]
    assert default_loops(tiny(add, n_loops=6, max_loops=128).cfg) == [1, 2, 4, 6, 8, 12, 16, 24]
    assert default_loops(tiny(add, n_loops=4, max_loops=6).cfg) == [1, 2, 4, 6]


# ------------------------------------------------------------------ edge cases


@pytest.mark.parametrize("name", ["addition", "multiplication"])
def test_edge_case_expected_answers_are_correct(name):
    task = get_task(name, max_digits=4)
    op = (lambda a, b: a + b) if name == "addition" else (lambda a, b: a * b)
    cases = edge_cases(task, [1, 2, 4, 8], random.Random(0), max_seq_len=64)
    groups = {c.group for c in cases}
    assert {"zeros", "unequal_lengths", "commutativity"} <= groups
    for c in cases:
        for p in c.problems:
            a, b = p.operands
            assert p.answer == op(a, b)
            assert p.target == str(op(a, b))[::-1]
            assert p.prompt == f"{str(a)[::-1]}{task.op_symbol}{str(b)[::-1]}="
        lengths = [len(str(x)) for p in c.problems for x in p.operands]
        assert c.in_distribution == (max(lengths) <= 4)
        if c.group == "carry_chain":
            ((a, b),) = [p.operands for p in c.problems]
            assert b == 1 and set(str(a)) == {"9"} and longest_cascade(a, b) == len(str(a))
        if c.group == "no_carry":
            assert not any(carry_in(*c.problems[0].operands))
        if c.group in ("max_sum", "max_product"):
            a, b = c.problems[0].operands
            assert a == b and set(str(a)) == {"9"}
        if c.group == "zeros":
            assert 0 in c.problems[0].operands
        if c.group == "commutativity":
            (p, q) = c.problems
            assert p.operands == q.operands[::-1] and c.kind == "commutative"
    if name == "addition":
        assert {"carry_chain", "no_carry", "max_sum"} <= groups
        assert any(c.name == "9999+1" for c in cases)
    # cases that do not fit are left out
    short = edge_cases(task, [1, 8], random.Random(0), max_seq_len=12)
    assert short and all(
        max(len(str(x)) for p in c.problems for x in p.operands) < 8 for c in short
    )


class _Scripted:
    """Stands in for a model: `generate` answers from a script (model order)."""

    def __init__(self, answer):
        self.answer = answer

    def generate(self, prompts, n_loops=None, max_new_tokens=None):
        return [self.answer(p) for p in prompts]


def test_run_edge_cases_judges_and_reports_human_order():
    task = get_task("addition", max_digits=3)
    cases = edge_cases(task, [1, 3], random.Random(0))
    truth = {
        c.problems[k].prompt: c.problems[k].target for c in cases for k in range(len(c.problems))
    }
    results = run_edge_cases(_Scripted(lambda p: truth[p]), task, cases)
    assert results and all(r.passed for r in results)
    chain = next(r for r in results if r.name == "999+1")
    assert chain.expected == ("1000",) and chain.answers == ("1000",)
    # an oracle that botches one operand order fails that commutativity case only
    comm = next(c for c in cases if c.kind == "commutative")
    bad = comm.problems[1].prompt
    results = run_edge_cases(
        _Scripted(lambda p: "0" + truth[p] if p == bad else truth[p]), task, cases
    )
    failed = {r.name for r in results if not r.passed}
    assert comm.name in failed
    assert failed == {c.name for c in cases if bad in {p.prompt for p in c.problems}}


# ------------------------------------------------------------------ end to end


def test_evaluate_addition_end_to_end():
    torch.manual_seed(0)
    task = get_task("addition", max_digits=2)
    model = tiny(task)
    report = evaluate(
        model, task, grid=(1, 3), loops=[1, 2], n_per_cell=5, seed=0, progress=False, max_length=4
    )
    assert isinstance(report, EvalReport)
    g = report.grid
    assert g.digits_a == (1, 2, 3) and g.digits_b == (1, 2, 3)
    assert len(g.exact_match) == 3 and all(len(row) == 3 for row in g.exact_match)
    assert all(0.0 <= v <= 1.0 for row in g.exact_match for v in row)
    assert g.skipped_cells == () and g.trained_digits == (1, 2)
    assert 0.0 <= g.in_distribution_exact_match <= 1.0
    assert 0.0 <= g.out_of_distribution_exact_match <= 1.0
    # greedy decoding reaches the same verdict as teacher-forced scoring
    assert report.generate_agreement == 1.0 and report.agreement.n == 9 * 5
    assert report.loops.loops == (1, 2)
    assert set(report.loops.sets) == {"in_distribution", "out_of_distribution"}
    assert all(len(s.exact_match) == 2 for s in report.loops.sets.values())
    assert report.lengths.lengths == (1, 2, 3, 4) and len(report.lengths.exact_match) == 4
    assert [b.bucket for b in report.carry.buckets] == ["0", "1", "2", "3", "4", "5+"]
    assert [b.n for b in report.carry.buckets] == [20, 20, 20, 0, 0, 0]
    assert "3" in report.carry.buckets[3].reason
    assert report.edge_cases.cases and set(report.edge_cases.by_group) >= {
        "carry_chain",
        "zeros",
    }
    for s in report.perplexity.values():
        assert s.perplexity > 1.0 and s.n == 20
    assert report.skipped == {}

    d = report.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False))["grid"]["digits_a"] == [1, 2, 3]
    # the JSON reads back into the same tree, and writes the same JSON again
    assert EvalReport.from_dict(d) == report and EvalReport.from_dict(d).to_dict() == d
    assert "reason" not in d["carry"]["buckets"][0] and d["carry"]["buckets"][3]["reason"]
    figs = report.figures()
    assert set(figs) == {"grid", "loops", "lengths", "edge_cases", "carry", "perplexity"}
    assert all(isinstance(f, go.Figure) for f in figs.values())
    assert figs["grid"].layout.shapes  # the trained region is outlined
    text = format_report(report)
    assert "Exact match" in text and "Edge cases" in text and "carry" in text
    # same seed, same numbers
    again = evaluate(
        model, task, grid=(1, 3), loops=[1, 2], n_per_cell=5, seed=0, progress=False, max_length=4
    )
    assert again.to_dict() == d


def test_evaluate_skips_cells_that_do_not_fit():
    task = get_task("addition", max_digits=2)
    model = tiny(task, max_seq_len=12)  # 3x3 digits needs 13 tokens
    report = evaluate(model, task, grid=(1, 3), loops=[2], n_per_cell=2, progress=False)
    assert report.grid.skipped_cells == ((3, 3),)
    assert report.grid.exact_match[2][2] is None and report.grid.exact_match[2][1] is not None
    assert any("skipped" in n for n in report.notes)
    json.dumps(report.to_dict(), allow_nan=False)
    assert "-" in format_report(report)


def test_far_lengths_are_scored_after_the_equal_lengths_where_they_fit():
    task = get_task("addition", max_digits=2)
    model = tiny(task, max_seq_len=80)  # 20-digit operands fit (64 tokens), 30-digit ones (94) do not
    report = evaluate(model, task, grid=(1, 2), loops=[2], n_per_cell=2, max_length=3, far_lengths=[20, 30],
                      progress=False)
    assert report.lengths.lengths == (1, 2, 3, 20) and len(report.lengths.exact_match) == 4


def test_evaluate_modular_addition_reports_splits_and_skips_digit_sections():
    task = get_task("modular_addition", p=7, train_fraction=0.5)
    model = tiny(task, positional="learned", max_seq_len=8)
    report = evaluate(model, task, loops=[1, 2, 3], progress=False)
    assert set(report.splits) == {"train", "test"}
    assert report.splits["train"].n + report.splits["test"].n == 49
    assert set(report.loops.sets) == {"train", "test"} and report.loops.loops == (1, 2, 3)
    assert set(report.skipped) == {"grid", "lengths", "edge_cases", "carry"}
    assert report.grid is None and report.generate_agreement == 1.0
    json.dumps(report.to_dict(), allow_nan=False)
    assert EvalReport.from_dict(report.to_dict()).to_dict() == report.to_dict()
    assert set(report.figures()) == {"loops", "perplexity", "splits"}
    assert "Skipped" in format_report(report)


@pytest.mark.parametrize("kind", ["addition", "addition_no_ood", "modular", "expressions"])
def test_eval_report_reads_back_the_json_it_writes(kind):
    """`from_dict(to_dict())` is the same typed tree and writes the same JSON, key order included:
    a digit task (with a bucket's reason and the out-of-distribution digits), one whose longer
    operands do not fit (no ood_digits, a note), the modular splits and a task of another kind."""
    torch.manual_seed(0)
    if kind == "modular":
        task = get_task("modular_addition", p=7, train_fraction=0.5)
        report = evaluate(tiny(task, positional="learned", max_seq_len=8), task, loops=[1, 2], progress=False)
    elif kind == "expressions":
        task = get_task("expressions", grammar="reference")
        model = tiny(task, n_loops=1, max_loops=2, max_seq_len=task.max_sequence_length())
        report = evaluate(model, task, loops=[1], n_per_cell=2, progress=False)
    else:
        task = get_task("addition", max_digits=2)
        model = tiny(task, max_seq_len=12 if kind == "addition_no_ood" else 40)
        report = evaluate(model, task, grid=(1, 3), loops=[1, 2], n_per_cell=3, progress=False, max_length=3)
    d = report.to_dict()
    back = EvalReport.from_dict(json.loads(json.dumps(d, allow_nan=False)))
    assert back == report
    assert json.dumps(back.to_dict()) == json.dumps(d)  # the same keys in the same order
    assert list(d) == ["task", "model", "settings", "grid", "loops", "lengths", "edge_cases", "carry", "perplexity",
                       "splits", "generate_agreement", "agreement", "skipped", "notes"]
    assert ("ood_digits" in d["settings"]) == (kind == "addition")


def test_evaluate_rejects_bad_arguments_with_a_fix():
    task = get_task("addition", max_digits=2)
    model = tiny(task)  # max_loops 8
    with pytest.raises(ValueError, match="max_loops=9"):
        evaluate(model, task, loops=[1, 9], progress=False)
    with pytest.raises(ValueError, match="1 <= lo <= hi"):
        evaluate(model, task, grid=(3, 1), progress=False)
    with pytest.raises(ValueError, match="vocabulary"):
        evaluate(model, get_task("modular_addition", p=7), progress=False)


def test_json_safe_drops_non_finite_floats():
    assert json_safe({"a": float("inf"), "b": [float("nan"), 1.5, True], 3: (1, None)}) == {
        "a": None,
        "b": [None, 1.5, True],
        "3": [1, None],
    }


def test_every_printed_accuracy_says_its_n_and_its_sample():
    task = get_task("expressions", grammar="reference")  # held-out split, problems of 8-30 characters
    model = tiny(task, n_loops=1, max_loops=2, max_seq_len=task.max_sequence_length())
    report = evaluate(model, task, loops=[1], n_per_cell=10, progress=False)
    text = format_report(report)
    assert "in_distribution: n=40, the held-out split (problems training never draws), problems of 8-30 characters" in text
    # --n counts problems per grid cell; the set is four cells' worth, and the text says so
    assert "(n=40 is 4 x --n 10: --n counts problems per grid cell" in text
    assert f"on n={report.agreement.n} problems (the first {report.agreement.n} problems of the in_distribution set)" in text
    from analyses.report.findings import evaluation as evaluation_findings

    assert evaluation_findings(report)[0].startswith("On 40 held-out in-distribution problems, exact match is")

    modular = get_task("modular_addition", p=7, train_fraction=0.5)
    text = format_report(evaluate(tiny(modular, positional="learned", max_seq_len=8), modular, loops=[1], progress=False))
    assert "test: n=25, every problem of the held-out test split (never trained on)" in text
    assert "train: n=24, every problem of the train split" in text


SMALL_ADD = Path(__file__).resolve().parents[1] / "checkpoints" / "small-add"


@pytest.mark.skipif(not (SMALL_ADD / "config.json").exists(), reason="checkpoints/small-add is not here")
def test_shipped_small_add_drops_the_final_carry_of_long_all_nine_sums_and_eval_says_so():
    """A model failure, not a decoding one: teacher-forced, the final carry digit is the only
    wrong token. The edge cases now test 9..9+9..9 at every trained length, and the text and
    the report name the in-distribution failures."""
    from abacus_interp.checkpoints import load_model, load_task
    from analyses.report.findings import evaluation as evaluation_findings

    model, task = load_model(SMALL_ADD, device="cpu"), load_task(SMALL_ADD)
    report = evaluate(model, task, grid=(1, 2), loops=[4], n_per_cell=2, max_length=2, progress=False)
    max_sum = {c.name: c for c in report.edge_cases.cases if c.group == "max_sum"}
    assert len(max_sum) == 8 and all(c.in_distribution for c in max_sum.values())
    assert [n for n, c in max_sum.items() if not c.passed] == [
        "999999+999999", "9999999+9999999", "99999999+99999999"]
    assert max_sum["99999999+99999999"].answers == ("999999998",)
    text = format_report(report)
    assert "  in-distribution failure: 99999999+99999999: model 999999998, expected 199999998" in text
    finding = next(f for f in evaluation_findings(report) if "edge cases fail" in f)
    assert finding.startswith("3 of ") and "99999999+99999999 gives 999999998, not 199999998" in finding


def test_the_largest_square_of_cells_at_99_percent_and_what_stops_the_next():
    """N x N multiplication's measure, read off planted grids: every cell up to N x N at >= 99%."""
    from abacus_interp.evaluation.result import Grid
    from abacus_interp.evaluation.text import _square_line

    def grid(cells, digits=(1, 2, 3)):
        return Grid(digits_a=digits, digits_b=digits, exact_match=cells, loss=cells, skipped_cells=(),
                    trained_digits=(1, 5), n_per_cell=50, n_loops=8, in_distribution_exact_match=None,
                    out_of_distribution_exact_match=None)

    full = ((1.0, 1.0, 1.0), (1.0, 0.99, 1.0), (1.0, 1.0, 1.0))
    assert grid(full).largest_square() == 3
    assert _square_line(grid(full)).endswith(": 3 (the grid ends at 3 x 3)")
    one_short = ((1.0, 1.0, 1.0), (1.0, 1.0, 1.0), (0.42, 1.0, 0.98))  # 3 x 1 at 42% stops the third square
    assert grid(one_short).largest_square() == 2
    assert _square_line(grid(one_short)).endswith(": 2 (3 x 3: lowest cell 42%)")
    unread = ((1.0, 1.0, None), (1.0, 1.0, None), (1.0, 1.0, None))  # a multiplier the run cannot read
    assert _square_line(grid(unread)).endswith(": 2 (3 x 3: a cell left out)")
    assert grid(((0.5, 1.0), (1.0, 1.0)), digits=(1, 2)).largest_square() is None
    assert _square_line(grid(((0.5, 1.0), (1.0, 1.0)), digits=(1, 2))).endswith(": none (1 x 1: lowest cell 50%)")
    assert grid(full, digits=(2, 3, 4)).largest_square() is None and _square_line(grid(full, digits=(2, 3, 4))) is None

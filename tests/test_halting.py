"""Adaptive loops: each problem's answer is read at the loop where it converged, and equals
token-by-token greedy decoding at that many loops."""

from __future__ import annotations

import random

import pytest

from abacus_interp import LoopedTransformer, ModelConfig, Vocab
from abacus_interp.core.halting import generate_adaptive

SLOT_VOCAB = Vocab(tuple("0123456789+=_"))
SCHEMES = {
    "abacus-table": dict(positional="abacus"),
    "rotary-window": dict(positional="none", rotary="abacus", abacus_window=1),
}


def slot_model(**overrides) -> LoopedTransformer:
    cfg = dict(vocab=SLOT_VOCAB, d_model=32, n_heads=4, n_layers=1, n_loops=3, max_loops=24, max_seq_len=48,
               answer_slots=True, init_std=0.5, input_injection="norm_add")
    return LoopedTransformer(ModelConfig(**{**cfg, **overrides})).eval()


def prompts(n: int = 16, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    numbers = [str(rng.randrange(10 ** rng.randint(1, 6))) for _ in range(2 * n)]
    return [f"{a[::-1]}+{b[::-1]}=" for a, b in zip(numbers[::2], numbers[1::2], strict=True)]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("cap", [1, 3, 7])
def test_without_halting_it_equals_greedy_decoding_at_the_cap(scheme, cap):
    """tol=0 never halts early: every problem runs `cap` loops, and the one-pass readout
    (non-digit tokens re-run in place) equals cached token-by-token decoding."""
    model = slot_model(**SCHEMES[scheme])
    result = generate_adaptive(model, prompts(), tol=0.0, max_loops=cap, max_new_tokens=9)
    assert result.completions == model.generate(prompts(), n_loops=cap, max_new_tokens=9)
    assert result.loops_used == [cap] * len(prompts())
    assert not any(result.converged)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_each_problem_is_read_at_its_own_halting_loop(scheme):
    model = slot_model(**SCHEMES[scheme])
    result = generate_adaptive(model, prompts(), tol=0.3, max_new_tokens=9)
    assert len(set(result.loops_used)) >= 3  # problems halt at different loops
    assert sum(result.converged) >= len(prompts()) // 2
    for prompt, completion, used in zip(prompts(), result.completions, result.loops_used, strict=True):
        assert completion == model.generate([prompt], n_loops=used, max_new_tokens=9)[0]
    # a batch gives each problem what it gives alone
    alone = [generate_adaptive(model, [p], tol=0.3, max_new_tokens=9) for p in prompts()[:4]]
    assert [a.loops_used[0] for a in alone] == result.loops_used[:4]


def test_a_tolerance_above_one_halts_after_the_first_loop():
    model = slot_model()
    result = generate_adaptive(model, prompts(), tol=2.0, max_new_tokens=9)
    assert result.loops_used == [1] * len(prompts()) and all(result.converged)
    assert result.completions == model.generate(prompts(), n_loops=1, max_new_tokens=9)


def test_the_cap_marks_problems_that_did_not_converge():
    model = slot_model()
    result = generate_adaptive(model, prompts(), tol=0.1, max_loops=8, max_new_tokens=9)
    assert set(result.loops_used) <= set(range(1, 9))
    capped = [u == 8 and not c for u, c in zip(result.loops_used, result.converged, strict=True)]
    assert any(capped)
    assert result.convergence_rate == sum(result.converged) / len(prompts())


def test_generate_defaults_to_adaptive_loops_when_the_model_says_so():
    adaptive = slot_model(halt_tol=0.3)
    fixed = slot_model()
    fixed.load_state_dict(adaptive.state_dict())
    expected = generate_adaptive(fixed, prompts(), tol=0.3, max_new_tokens=9).completions
    assert adaptive.generate(prompts(), max_new_tokens=9) == expected
    # an explicit loop count still runs exactly that many loops
    assert adaptive.generate(prompts(), n_loops=2, max_new_tokens=9) == fixed.generate(prompts(), n_loops=2, max_new_tokens=9)


def test_halting_needs_the_answer_slot_format():
    with pytest.raises(ValueError, match="answer_slots"):
        ModelConfig(vocab=SLOT_VOCAB, d_model=32, n_heads=4, halt_tol=1e-3)
    model = LoopedTransformer(ModelConfig(vocab=SLOT_VOCAB, d_model=32, n_heads=4)).eval()
    with pytest.raises(ValueError, match="answer-slot"):
        generate_adaptive(model, ["1+2="], tol=1e-3)


def test_length_extrapolation_scores_what_greedy_decoding_answers():
    from abacus_interp.evaluation.extrapolation import format_table, length_extrapolation
    from abacus_interp.tasks import get_task
    from abacus_interp.tasks.carries import longest_cascade

    task = get_task("addition", max_digits=3, answer_format="slots")
    model = slot_model(halt_tol=0.3)
    result = length_extrapolation(model, task, lengths=[3, 6], chains=[(6, 4)], n=12, seed=1)
    assert [(r.digits, r.chain, r.n) for r in result.rows] == [(3, None, 12), (6, None, 12), (6, 4, 12)]
    from abacus_interp.evaluation.extrapolation import problems

    for r in result.rows:
        examples = problems(task, r.digits, r.chain, 12, seed=1)
        if r.chain is not None:  # the planted chain is the longest one in every problem
            assert {longest_cascade(*e.operands) for e in examples} == {r.chain}
        decoded = generate_adaptive(model, [e.prompt for e in examples], tol=0.3, max_new_tokens=r.digits + 2)
        correct = [task.check(e, c) for e, c in zip(examples, decoded.completions, strict=True)]
        assert r.exact_match == sum(correct) / 12
        assert r.loops_max == max(decoded.loops_used)
    fixed = length_extrapolation(model, task, lengths=[3], n=12, n_loops=2, seed=1)
    assert fixed.fixed_loops == 2 and fixed.rows[0].converged is None and fixed.rows[0].loops_max == 2
    assert "12" in format_table(result) and "adaptive loops" in format_table(result)
    with pytest.raises(ValueError, match="does not fit"):
        length_extrapolation(model, task, lengths=[], chains=[(3, 5)], n=2)


def test_the_shipped_extrap_add_run_solves_longer_numbers_by_looping_longer(capsys):
    """checkpoints/extrap-add, trained on operands of up to 5 digits: 20-digit problems and a
    planted carry chain of 20 columns, at its default (adaptive) loops, and the chain needs
    more loops than a uniform problem does."""
    from pathlib import Path

    from abacus_interp import load_model
    from abacus_interp.checkpoints import load_task
    from abacus_interp.evaluation.extrapolation import length_extrapolation
    from abacus_lab.cli import main

    run = Path(__file__).resolve().parents[1] / "checkpoints" / "extrap-add"
    model, task = load_model(run), load_task(run)
    result = length_extrapolation(model, task, lengths=[20], chains=[(20, 20)], n=30, seed=5)
    uniform, chain = result.row(20), result.row(20, 20)
    assert uniform.exact_match >= 0.95 and chain.exact_match >= 0.95
    # a carry through 19 columns with no second-operand digits beside them: the trained depth
    # of 6 loops moves it only part of the way; the adaptive loop runs until it arrives
    example = task.make(10**20 - 1, 1)
    assert not task.check(example, model.generate([example.prompt], n_loops=6)[0])
    decoded = generate_adaptive(model, [example.prompt])
    assert task.check(example, decoded.completions[0]) and decoded.loops_used[0] > 24
    assert main(["solve", str(run), "99999999999999999999+1", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "100000000000000000000" and "correct" in out and "converged" in out

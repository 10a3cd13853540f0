"""The expressions task's reference grammar (ReTran's PCFG), checked against an independent
`ast` evaluator, a plain stack-expansion sampler written here, and the grammar's own
probabilities; and the default "trees" grammar, checked to be unchanged."""

from __future__ import annotations

import bisect
import hashlib
import random
import re
from collections import Counter

import pytest
from conftest import ast_value

from abacus_interp.evaluation.heldout import HELDOUT_SEED, heldout_sets
from abacus_interp.tasks import TASKS, get_task
from abacus_interp.tasks.expression_grammar import derive, in_test_split
from abacus_interp.tasks.expressions import parse_expression


def _human(prompt: str) -> str:
    return re.sub(r"[0-9]+", lambda m: m.group()[::-1], prompt.removesuffix("="))


def _naive_derive(rng: random.Random, max_len: int) -> str | None:
    """The grammar as written: pop the leftmost symbol, push its expansion, abandon once the
    stack holds more than max_len + 2 symbols, merge signs as terminals are written."""
    rules = {
        "EQ": [(0.5, ["VAL", "OP", "VAL"]), (0.5, ["(", "VAL", "OP", "VAL", ")"])],
        "VAL": [(0.46, ["EQ"]), (0.54, ["NUM"])],
        "OP": [(0.35, ["+"]), (0.35, ["-"]), (0.30, ["*"])],
        "NUM": [(0.05, ["0"]), (0.95, ["NUMH", "NUMT"])],
        "NUMH": [(1 / 18, [d]) for d in "123456789"] + [(1 / 18, ["-", d]) for d in "123456789"],
        "NUMT": [(0.02, [d, "NUMT"]) for d in "0123456789"] + [(0.8, [])],
    }
    cumulative = {
        k: ([sum(p for p, _ in v[: i + 1]) for i in range(len(v))], v) for k, v in rules.items()
    }
    out, stack = "", ["EQ"]
    while stack:
        sym = stack.pop()
        if sym in rules:
            bounds, options = cumulative[sym]
            _, rhs = options[min(bisect.bisect(bounds, rng.random()), len(options) - 1)]
            stack.extend(reversed(rhs))
            if len(stack) > max_len + 2:
                return None
        elif sym == "-" and out[-1:] in ("-", "+"):
            out = out[:-1] + ("+" if out[-1] == "-" else "-")
        else:
            out += sym
    return out


@pytest.fixture(scope="module")
def task():
    return get_task("expressions", grammar="reference")


@pytest.fixture(scope="module")
def drawn(task):
    return task.sample(3000, random.Random(0))


def test_reference_options_config_and_capabilities(task) -> None:
    assert task.config() == {
        "grammar": "reference",
        "min_len": 8,
        "max_len": 30,
        "max_answer_len": 5,
    }
    assert get_task("expressions", **task.config()).config() == task.config()
    assert task.length_range == (8, 30) and task.has_sampled_split
    assert task.max_sequence_length() == 30 + 1 + 5 + 1
    assert task.max_sequence_length(max_len=40) == 47
    for name in TASKS:  # every other task (and the default grammar) declares neither
        if name != "expressions":
            assert get_task(name).length_range is None and not get_task(name).has_sampled_split
    with pytest.raises(ValueError, match="max_depth: not an option of grammar='reference'"):
        get_task("expressions", grammar="reference", max_depth=2)
    with pytest.raises(ValueError, match="min_len: not an option of grammar='trees'"):
        get_task("expressions", min_len=3)
    with pytest.raises(ValueError, match="grammar must be"):
        get_task("expressions", grammar="pcfg")
    with pytest.raises(ValueError, match="min_len \\(9\\) is larger"):
        get_task("expressions", grammar="reference", min_len=9, max_len=8)
    with pytest.raises(ValueError, match="split must be"):
        task.sample(1, random.Random(0), split="val")
    with pytest.raises(ValueError, match="no held-out split"):
        get_task("expressions").sample(1, random.Random(0), split="test")


def test_default_grammar_is_unchanged() -> None:
    """The digests were taken from the code before the grammar option existed."""
    task = get_task("expressions")
    assert task.config() == {"max_depth": 3, "max_digits": 3, "max_prompt_len": 40}
    assert task.length_range is None and not task.has_sampled_split

    def digest(examples) -> str:
        text = "|".join(e.prompt + ":" + e.target for e in examples)
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()

    assert digest(task.sample(200, random.Random(0))) == "fe0b3941ad1358bb"
    small = task.sample(50, random.Random(1), max_depth=2, max_digits=2, max_prompt_len=20)
    assert digest(small) == "35e3d44dc7313e08"
    assert task.max_sequence_length() == 66
    assert task.from_human("(12+3)*-4").prompt == "(21+3)*(-4)="


def test_hand_examples_and_unary_minus(task) -> None:
    ex = task.from_human("3*-4+(-5-2)")
    assert (ex.prompt, ex.target, ex.answer) == ("3*-4+(-5-2)=", "-91", -19)
    assert ex.operands == (3, -4, -5, 2)
    ex = task.make(" -12*3 - 40 ")
    assert (ex.prompt, ex.target, ex.answer) == ("-21*3-04=", "-67", -76)
    assert task.parse("-67") == -76 and task.to_human("-67") == "-76"
    assert task.check(ex, "-67") and not task.check(ex, "-670")
    for text, value in [
        ("3*-4", -12),
        ("-3*-4", 12),
        ("-5-2", -7),
        ("(-1)*-(2+3)", 5),
        ("2-3-4", -5),
    ]:
        assert ast_value(text) == value
        assert task.from_human(text).answer == value
        assert parse_expression(text) is not None
    with pytest.raises(ValueError, match="expected integers"):
        task.from_human("1 2+3")


def test_samples_are_seeded_and_within_bounds(task, drawn) -> None:
    assert drawn[:50] == task.sample(50, random.Random(0))
    assert drawn[:50] != task.sample(50, random.Random(1))
    bound = task.max_sequence_length()
    for ex in drawn:
        human = _human(ex.prompt)
        assert 8 <= len(human) <= 30 and len(str(ex.answer)) <= 5
        assert len(task.vocab.encode(ex.prompt)) + len(task.vocab.encode(ex.target)) + 1 <= bound
        assert task.check(ex, ex.target) and task.parse(ex.target) == ex.answer
        # Signs merged: a '-' is binary after a digit or ')', else unary (at the start or
        # after '(' or '*') and then directly before a number; never '+-' or '--'.
        for i, c in enumerate(human):
            if c == "-" and not (i and (human[i - 1].isdigit() or human[i - 1] == ")")):
                assert (i == 0 or human[i - 1] in "(*") and human[i + 1] in "123456789", human


def test_values_match_ast_and_from_human_round_trips(task, drawn) -> None:
    for ex in drawn:
        human = _human(ex.prompt)
        assert ast_value(human) == ex.answer
        assert task.from_human(human) == ex and task.make(human) == ex
        assert task.to_human(ex.target) == str(ex.answer)
    negative = sum(ex.answer < 0 for ex in drawn) / len(drawn)
    assert 0.40 < negative < 0.55  # measured 0.48: signs are symmetric, zero answers ~2%


def test_raw_grammar_frequencies() -> None:
    """Operators and number lengths of the unconditioned grammar, on ~6000 operators.

    '+' and '-' swap when a negative number follows, symmetrically, so their shares stay
    0.35 each. Standard errors are ~0.006, so uniform operators (1/3 each, 0.033 away) or a
    wrong number-length law could not pass.
    """
    rng = random.Random(0)
    texts = [t for t in (derive(rng, 80) for _ in range(3000)) if t is not None]
    ops = Counter(m.group(1) for t in texts for m in re.finditer(r"[0-9)]([-+*])", t))
    total = sum(ops.values())
    assert total > 5000
    for op, p in (("+", 0.35), ("-", 0.35), ("*", 0.30)):
        assert abs(ops[op] / total - p) < 0.02, (op, ops[op] / total)
    numbers = [m.group() for t in texts for m in re.finditer(r"[0-9]+", t)]
    one_digit = sum(len(n) == 1 for n in numbers) / len(numbers)
    assert abs(one_digit - (0.05 + 0.95 * 0.8)) < 0.015, one_digit
    assert abs(sum(n == "0" for n in numbers) / len(numbers) - 0.05) < 0.012
    heads = Counter(n[0] for n in numbers if n != "0")
    assert set(heads) == set("123456789")  # no leading zeros
    assert max(abs(c / len(numbers) - 0.95 / 9) for c in heads.values()) < 0.012
    # Where a sign cannot merge (at the start, after '(' or '*'), 0.95 / 2 of numbers show one.
    unmerged = [m.group(1) for t in texts for m in re.finditer(r"(?:^|[(*])(-?)[0-9]+", t)]
    assert abs(unmerged.count("-") / len(unmerged) - 0.475) < 0.025, len(unmerged)


def test_pruned_sampler_matches_the_plain_one() -> None:
    """Abandoning derivations early must not change which problems are kept: length
    histograms of the two samplers agree (two-sample KS distance; 0.06 is p < 0.001 here)."""
    ours, plain = [], []
    rng_a, rng_b = random.Random(1), random.Random(2)
    while len(ours) < 2000:
        t = derive(rng_a, 30)
        if t is not None and len(t) >= 8:
            ours.append(len(t))
    while len(plain) < 2000:
        t = _naive_derive(rng_b, 30)
        if t is not None and 8 <= len(t) <= 30:
            plain.append(len(t))
    cdf = lambda xs, k: sum(x <= k for x in xs) / len(xs)  # noqa: E731
    assert max(abs(cdf(ours, k) - cdf(plain, k)) for k in range(8, 31)) < 0.06
    assert abs(sum(ours) / len(ours) - sum(plain) / len(plain)) < 0.65  # 3.5 standard errors


def test_exact_length_draws_including_longer_than_trained(task) -> None:
    for length, n in ((8, 50), (30, 30), (31, 20), (40, 20)):
        for ex in task.sample(n, random.Random(length), min_len=length, max_len=length):
            assert len(_human(ex.prompt)) == length and len(str(ex.answer)) <= 5
            assert ast_value(_human(ex.prompt)) == ex.answer
            assert len(task.vocab.encode(ex.prompt)) + len(
                ex.target
            ) + 1 <= task.max_sequence_length(max_len=length)


def test_hashed_split_is_disjoint_and_about_a_tenth(task, drawn) -> None:
    test = task.sample(300, random.Random(5), split="test")
    test_texts = {_human(ex.prompt) for ex in test}
    train_texts = {_human(ex.prompt) for ex in drawn}
    assert not test_texts & train_texts
    assert all(in_test_split(t) for t in test_texts) and not any(map(in_test_split, train_texts))
    both = [_human(ex.prompt) for ex in task.sample(3000, random.Random(6), split=None)]
    share = sum(map(in_test_split, both)) / len(both)
    assert 0.075 < share < 0.125, share  # standard error 0.0055
    # The rule is a function of the text alone: stable across processes and seeds.
    assert in_test_split("3*-4+(-5-2)") == in_test_split("3*-4+(-5-2)")


def test_heldout_in_distribution_set_comes_from_the_test_split(task) -> None:
    sets = heldout_sets(task, 40, max_seq_len=task.max_sequence_length())
    assert set(sets) == {"in_distribution"}
    assert all(in_test_split(_human(ex.prompt)) for ex in sets["in_distribution"])
    trees = get_task("expressions")  # unchanged: drawn as before, no split
    assert heldout_sets(trees, 20, 66)["in_distribution"] == trees.sample(
        20, random.Random(HELDOUT_SEED)
    )


def test_every_evaluation_set_draws_held_out_problems(task) -> None:
    # the evaluation suite, the fixed-point problems and checkpoint comparison all draw
    # through sample_held_out: the test split wherever a task has one
    assert all(in_test_split(_human(ex.prompt)) for ex in task.sample_held_out(30, random.Random(1)))
    modular = get_task("modular_addition", p=7, train_fraction=0.5)
    test = {ex.prompt for ex in modular.full_split("test")}
    assert {ex.prompt for ex in modular.sample_held_out(10, random.Random(0))} <= test
    trees = get_task("expressions")
    assert trees.sample_held_out(5, random.Random(2)) == trees.sample(5, random.Random(2))

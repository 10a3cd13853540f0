"""Tasks: formatting, sampling, parsing and the carry labels, checked against hand examples
and against independent computations (Python ints, sorted(), an `ast` evaluator)."""

from __future__ import annotations

import json
import os
import random
import re
from collections import Counter

import pytest
from conftest import ast_value

from abacus_interp.tasks import (
    TASKS,
    AdditionTask,
    Example,
    ExpressionTask,
    ModularAdditionTask,
    MultiplicationTask,
    SortingTask,
    Task,
    get_task,
)
from abacus_interp.tasks.carries import (
    carry_chain_lengths,
    carry_in,
    generates_carry,
    longest_cascade,
    sum_is_nine,
)

SMALL_CONFIGS = {
    "addition": {"max_digits": 4},
    "multiplication": {"max_digits": 3},
    "sorting": {"max_numbers": 4, "max_digits": 4},
    "modular_addition": {"p": 13},
    "expressions": {},
}


def _build(name: str) -> Task:
    return get_task(name, **SMALL_CONFIGS[name])


# ---------------------------------------------------------------------------------------
# Properties every task shares.


@pytest.mark.parametrize("name", sorted(TASKS))
def test_sampling_is_seeded_and_encodable(name: str) -> None:
    task = _build(name)
    a = task.sample(200, random.Random(0))
    assert a == task.sample(200, random.Random(0))
    assert a != task.sample(200, random.Random(1))
    bound = task.max_sequence_length()
    for ex in a:
        assert isinstance(ex, Example)
        assert ex.prompt.endswith("=")
        ids = task.vocab.encode(ex.prompt) + task.vocab.encode(ex.target)
        assert len(ids) + 1 <= bound  # + EOS
        assert task.check(ex, ex.target)
        assert task.parse(ex.target) == ex.answer


@pytest.mark.parametrize("name", sorted(TASKS))
def test_config_round_trips_through_json(name: str) -> None:
    task = _build(name)
    rebuilt = get_task(task.name, **json.loads(json.dumps(task.config())))
    assert type(rebuilt) is type(task) and rebuilt.config() == task.config()
    assert rebuilt.vocab == task.vocab
    assert task.positional in ("abacus", "learned")


def test_get_task_errors_name_the_alternatives() -> None:
    with pytest.raises(ValueError, match="known tasks: .*addition"):
        get_task("subtraction")
    with pytest.raises(ValueError, match="valid options: max_digits, min_digits"):
        get_task("addition", digits=3)
    assert isinstance(get_task("addition"), AdditionTask)


def test_bad_sizes_say_what_to_do() -> None:
    with pytest.raises(ValueError, match="min_digits"):
        AdditionTask(max_digits=2, min_digits=3)
    with pytest.raises(ValueError, match="n must be"):
        AdditionTask().sample(-1, random.Random(0))
    with pytest.raises(ValueError, match="non-negative"):
        AdditionTask().make(-1, 2)
    with pytest.raises(ValueError, match="max_prompt_len"):
        ExpressionTask(max_digits=5, max_prompt_len=8)


# ---------------------------------------------------------------------------------------
# Addition and its carry labels.


def test_addition_formatting_and_round_trips() -> None:
    task = AdditionTask()
    ex = task.make(123, 456)
    assert (ex.prompt, ex.target, ex.operands, ex.answer) == ("321+654=", "975", (123, 456), 579)
    assert task.from_human(" 123 + 456 ") == ex
    assert task.parse("975") == 579 and task.to_human("975") == "579"
    assert task.check(ex, "975") and not task.check(ex, "9750") and not task.check(ex, "976")
    assert task.parse("") is None and task.parse("9+") is None
    assert task.make(999, 1).target == "0001"
    with pytest.raises(ValueError, match="e.g. '123\\+45'"):
        task.from_human("123-456")


def test_addition_samples_exact_digit_counts_uniformly() -> None:
    task = AdditionTask(max_digits=4, min_digits=2)
    examples = task.sample(4000, random.Random(0))
    cells = Counter((len(str(a)), len(str(b))) for a, b in (ex.operands for ex in examples))
    assert set(cells) == {(i, j) for i in range(2, 5) for j in range(2, 5)}
    assert all(350 < c < 540 for c in cells.values())  # 4000 / 9 ~ 444 per cell
    for ex in examples:
        a, b = ex.operands
        assert ex.answer == a + b and ex.prompt == f"{str(a)[::-1]}+{str(b)[::-1]}="


def test_addition_sample_cell_and_one_digit_zero() -> None:
    task = AdditionTask()
    cell = task.sample_cell(200, random.Random(3), 12, 1)
    assert all(len(str(a)) == 12 and 0 <= b <= 9 for a, b in (ex.operands for ex in cell))
    ones = task.sample(2000, random.Random(0), min_digits=1, max_digits=1)
    assert {ex.operands[0] for ex in ones} == set(range(10))
    assert task.max_sequence_length(max_digits=12) == 12 + 1 + 12 + 1 + 13 + 1


@pytest.mark.parametrize(
    "a, b, cin, chains",
    [
        (999, 1, [0, 1, 1, 1], [0, 1, 2, 3]),
        (123, 456, [0, 0, 0], [0, 0, 0]),
        (55, 55, [0, 1, 1], [0, 1, 1]),
        (95, 5, [0, 1, 1], [0, 1, 2]),
        (0, 0, [0], [0]),
        (19, 81, [0, 1, 1], [0, 1, 2]),  # 9+1 generates, 1+8 == 9 passes it on
        (4951, 5049, [0, 1, 1, 1, 1], [0, 1, 2, 3, 4]),
        (1955, 8055, [0, 1, 1, 1, 1], [0, 1, 1, 2, 3]),  # 5+5 regenerates mid-chain
    ],
)
def test_carry_labels_on_hand_examples(a: int, b: int, cin: list[int], chains: list[int]) -> None:
    assert len(cin) == len(str(a + b))
    assert carry_in(a, b) == cin
    assert carry_chain_lengths(a, b) == chains
    assert longest_cascade(a, b) == max(chains)


def test_sum_is_nine_and_generation() -> None:
    assert sum_is_nine(45, 54) == [True, True]
    assert sum_is_nine(999, 1) == [False, True, True, False]
    assert generates_carry(999, 1) == [True, False, False, False]


def test_carry_in_reproduces_the_sum() -> None:
    rng = random.Random(0)
    for _ in range(300):
        a, b = rng.randrange(10**8), rng.randrange(10**8)
        digits = [
            ((a // 10**i) % 10 + (b // 10**i) % 10 + c) % 10 for i, c in enumerate(carry_in(a, b))
        ]
        assert sum(d * 10**i for i, d in enumerate(digits)) == a + b


# ---------------------------------------------------------------------------------------
# Multiplication and sorting against Python.


def test_multiplication() -> None:
    task = MultiplicationTask()
    ex = task.make(12, 34)
    assert (ex.prompt, ex.target, ex.answer) == ("21*43=", "804", 408)
    assert task.from_human("12 x 34") == ex and task.to_human("804") == "408"
    for ex in task.sample(300, random.Random(5)):
        a, b = ex.operands
        assert 1 <= len(str(a)) <= 5 and 1 <= len(str(b)) <= 5
        assert ex.answer == a * b and task.parse(ex.target) == a * b


def test_sorting() -> None:
    task = SortingTask()
    ex = task.make(89850, 1, 210273)
    assert (ex.prompt, ex.target) == ("a:05898,b:1,c:372012=", "bac")
    assert task.make(7, 3, 7).target == "bac"  # ties keep letter order
    assert task.from_human("89850, 1 210273") == ex
    assert task.parse("bac") == "bac" and task.parse("bx") is None and task.parse("") is None
    with pytest.raises(ValueError, match="max_numbers"):
        task.make(*range(6))
    for ex in task.sample(300, random.Random(2)):
        assert 2 <= len(ex.operands) <= 5
        order = sorted(range(len(ex.operands)), key=lambda k: (ex.operands[k], k))
        assert ex.answer == "".join("abcde"[k] for k in order)


def test_sorting_plants_lists_that_agree_above_a_depth_and_keeps_the_plain_stream() -> None:
    plain = SortingTask(label_pool=26, random_labels=True)
    zero = SortingTask(label_pool=26, random_labels=True, shared_prefix_fraction=0.0)
    assert zero.sample(50, random.Random(3)) == plain.sample(50, random.Random(3))
    assert "shared_prefix_fraction" not in zero.config()

    planted = SortingTask(max_digits=8, shared_prefix_fraction=1.0)
    assert SortingTask(**planted.config()).shared_prefix_fraction == 1.0
    deep = 0
    for ex in planted.sample(400, random.Random(4)):
        values = ex.operands
        # the numbers agree above some depth: their common prefix (MSD first, at one width) is
        # non-empty unless the plant drew depth == digits
        width = max(len(str(v)) for v in values)
        padded = [str(v).zfill(width) for v in values]
        shared = len(os.path.commonprefix(padded))
        assert ex.answer == "".join("abcde"[k] for k in sorted(range(len(values)), key=lambda k: (values[k], k)))
        deep += shared >= 3
    assert deep > 100  # the lists a comparison of the three leading digits cannot order
    # a plant shares at least the leading digit, so no number leaves the digit range
    for lo, hi in [(3, 5), (20, 20)]:
        for ex in planted.sample(200, random.Random(6), min_digits=lo, max_digits=hi):
            widths = {len(str(v)) for v in ex.operands}
            assert len(widths) == 1 and lo <= widths.pop() <= hi

    rng = random.Random(5)
    for digits, depth in [(1, 1), (5, 1), (5, 3), (20, 2), (6, 6)]:
        values = SortingTask.shared_prefix_values(7, digits, depth, rng)
        assert all(v < 10**digits for v in values)
        assert len({v // 10**depth for v in values}) == 1
    with pytest.raises(ValueError, match="depth"):
        SortingTask.shared_prefix_values(3, 4, 5, rng)
    with pytest.raises(ValueError, match="shared_prefix_fraction"):
        SortingTask(shared_prefix_fraction=1.5)


def test_sorting_plants_lists_of_one_length_and_keeps_the_plain_stream() -> None:
    plain = SortingTask(label_pool=26, random_labels=True)
    zero = SortingTask(label_pool=26, random_labels=True, same_length_fraction=0.0)
    assert zero.sample(50, random.Random(3)) == plain.sample(50, random.Random(3))
    assert "same_length_fraction" not in zero.config()

    planted = SortingTask(max_digits=5, label_pool=26, random_labels=True, same_length_fraction=1.0)
    assert SortingTask(**planted.config()).same_length_fraction == 1.0
    lengths = set()
    for ex in planted.sample(400, random.Random(4)):
        widths = {len(str(v)) for v in ex.operands}
        assert len(widths) == 1, ex.operands
        lengths |= widths
        labels = [item[0] for item in ex.prompt.rstrip("=").split(",")]
        order = sorted(range(len(ex.operands)), key=lambda k: (ex.operands[k], k))
        assert ex.answer == "".join(labels[k] for k in order)
    assert lengths == {1, 2, 3, 4, 5}
    # under the plain draw (2-5 numbers of 1-5 digits) a list has one length 6% of the time
    plain5 = SortingTask(max_digits=5, label_pool=26, random_labels=True)
    mixed = [ex for ex in plain5.sample(400, random.Random(4)) if len({len(str(v)) for v in ex.operands}) > 1]
    assert len(mixed) > 350

    half = SortingTask(max_digits=5, same_length_fraction=0.5)
    one_length = sum(len({len(str(v)) for v in ex.operands}) == 1 for ex in half.sample(2000, random.Random(5)))
    assert 0.49 < one_length / 2000 < 0.58  # the plant's half, plus 6% of the plain half (0.53)
    with pytest.raises(ValueError, match="same_length_fraction"):
        SortingTask(same_length_fraction=-0.1)
    with pytest.raises(ValueError, match="set one of them"):
        SortingTask(shared_prefix_fraction=0.3, same_length_fraction=0.3)


def near_tie_pairs(values) -> int:
    """How many pairs of `values` have one length and the same leading digit."""
    strings = [str(v) for v in values]
    return sum(len(a) == len(b) and a[0] == b[0] for i, a in enumerate(strings) for b in strings[i + 1 :])


def test_sorting_plants_a_near_twin_in_an_otherwise_uniform_list_and_keeps_the_plain_stream() -> None:
    plain = SortingTask(max_digits=5, label_pool=26, random_labels=True)
    zero = SortingTask(max_digits=5, label_pool=26, random_labels=True, near_twin_fraction=0.0)
    assert zero.sample(50, random.Random(3)) == plain.sample(50, random.Random(3))
    assert "near_twin_fraction" not in zero.config()

    planted = SortingTask(max_digits=5, label_pool=26, random_labels=True, near_twin_fraction=1.0)
    assert SortingTask(**planted.config()).near_twin_fraction == 1.0
    twinned = planted.sample(400, random.Random(4))
    for ex in twinned:
        labels = [item[0] for item in ex.prompt.rstrip("=").split(",")]
        order = sorted(range(len(ex.operands)), key=lambda k: (ex.operands[k], k))
        assert ex.answer == "".join(labels[k] for k in order)
        assert all(1 <= len(str(v)) <= 5 for v in ex.operands)
    # every list with a number of two digits or more holds a pair of one length and leading digit;
    # the plain draw gives one to about a list in ten
    with_pair = sum(near_tie_pairs(ex.operands) > 0 for ex in twinned) / len(twinned)
    plain_pair = sum(near_tie_pairs(ex.operands) > 0 for ex in plain.sample(400, random.Random(4))) / 400
    assert with_pair > 0.95 and plain_pair < 0.3, (with_pair, plain_pair)

    rng = random.Random(5)
    for values in ([7, 40213], [123, 5, 99999, 310], [1, 2, 3]):
        twins = SortingTask.near_twin(values, rng)
        changed = [k for k, (a, b) in enumerate(zip(values, twins, strict=True)) if a != b]
        assert len(changed) <= 1
        if values == [1, 2, 3]:
            assert twins == values  # no number with a digit below its leading one to vary
        for k in changed:
            assert near_tie_pairs(twins) > near_tie_pairs(values[:k] + values[k + 1 :])
    with pytest.raises(ValueError, match="near_twin_fraction"):
        SortingTask(near_twin_fraction=2.0)


# ---------------------------------------------------------------------------------------
# Modular addition (grokking).


def test_modular_addition_split() -> None:
    task = ModularAdditionTask(p=13, train_fraction=0.3, split_seed=0)
    assert len(task.all_pairs()) == 169 == len(set(task.all_pairs()))
    train, test = task.split()
    assert len(train) == round(0.3 * 169) and len(train) + len(test) == 169
    assert not set(train) & set(test) and set(train) | set(test) == set(task.all_pairs())
    assert task.split() == ModularAdditionTask(p=13, split_seed=0).split()
    assert task.split()[0] != ModularAdditionTask(p=13, split_seed=1).split()[0]
    assert [ex.operands for ex in task.full_split("test")] == test
    drawn = task.sample(500, random.Random(0), split="test")
    assert {ex.operands for ex in drawn} <= set(test)
    with pytest.raises(ValueError, match="split must be one of"):
        task.sample(1, random.Random(0), split="val")


def test_modular_addition_formatting() -> None:
    task = ModularAdditionTask()
    ex = task.from_human("5+17")
    assert (ex.prompt, ex.target, ex.answer) == ("5 17 =", "22", 22)
    assert task.make(100, 20).answer == 7
    assert task.vocab.encode(ex.prompt) == [2 + 5, 2 + 17, 2 + 113]
    assert task.parse(" 22 ") == 22 and task.parse("113") is None and task.parse("1 2") is None
    assert task.check(ex, "22") and not task.check(ex, "2 2")
    with pytest.raises(ValueError, match="residues"):
        task.make(113, 0)


# ---------------------------------------------------------------------------------------
# Expressions, checked against an independent evaluation through Python's `ast`.


def test_expressions_hand_examples() -> None:
    task = ExpressionTask()
    ex = task.from_human("(12+3)*-4")
    assert (ex.prompt, ex.target, ex.answer) == ("(21+3)*(-4)=", "-06", -60)
    assert task.parse("-06") == -60 and task.to_human("-06") == "-60"
    assert task.from_human("2-3-4").answer == -5  # left associative
    assert task.from_human("2+3*4").answer == 14  # precedence
    assert task.from_human("10-(2-3)").prompt == "01-(2-3)="
    assert task.from_human("-(2+3)").answer == -5
    assert task.make("7*0").target == "0"
    for bad in ("", "2+", "(2+3", "2**3", "2/3", "abc"):
        with pytest.raises(ValueError, match="expected integers"):
            task.from_human(bad)


def test_expressions_match_independent_evaluation() -> None:
    task = ExpressionTask()
    for ex in task.sample(300, random.Random(7)):
        assert len(ex.prompt) <= 40
        human = re.sub(r"[0-9]+", lambda m: m.group()[::-1], ex.prompt[:-1])
        assert ast_value(human) == ex.answer
        assert task.from_human(human) == ex  # the parser re-renders the same prompt
        assert task.to_human(ex.target) == str(ex.answer)


# ----------------------------------------------------------------------------- capabilities
def test_capabilities_are_declared_on_every_task():
    """What callers ask of a task is a declared flag, consistent with what the task does."""
    from abacus_interp.tasks import TASKS

    for name in TASKS:
        task = get_task(name)
        assert task.has_carries == (name == "addition")
        if name in ("addition", "multiplication"):
            assert task.has_digit_grid
        if task.has_fixed_split:
            assert task.full_split("train") and task.modulus == task.p
        else:
            with pytest.raises(NotImplementedError, match="no fixed"):
                task.full_split("test")
            assert task.modulus is None
        if task.digit_range is not None:
            lo, hi = task.digit_range
            assert task.sample(3, random.Random(0), min_digits=lo, max_digits=hi)
        if task.has_digit_grid:  # the (digits of a, digits of b) grid can be built cell by cell
            for ex in task.sample_cell(5, random.Random(0), 3, 2):
                a, b = ex.operands
                assert (len(str(a)), len(str(b))) == (3, 2)
                assert len(str(ex.answer)) <= task.max_answer_digits(3, 2)

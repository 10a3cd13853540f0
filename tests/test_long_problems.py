"""Problems of any length: operands past Python's 4300-digit int <-> str limit work through the
tasks and `solve`, a problem too long for a model ends in one `error:` line (exit 2, never a
traceback), and `solve` and `eval --lengths` apply one length rule, the model's own: a position
table bounds what it covers, a model without one (checkpoints/extrap-add) has no bound."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import torch

from abacus_interp.checkpoints import load_model, save_checkpoint, write_json
from abacus_interp.core.config import ModelConfig
from abacus_interp.core.halting import generate_adaptive
from abacus_interp.core.model import LoopedTransformer
from abacus_interp.errors import UserError
from abacus_interp.tasks import get_task
from abacus_interp.tasks.base import decimal_text, decimal_value, digit_count, from_lsd, to_lsd
from abacus_interp.tasks.carries import carry_chain_lengths, longest_cascade, sample_with_cascade
from abacus_lab.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_ADD = ROOT / "checkpoints" / "small-add"  # Abacus positions: digits 1..116 of a number
SHIPPED_EXTRAP = ROOT / "checkpoints" / "extrap-add"  # no position table, max_seq_len 320
needs_shipped_add = pytest.mark.skipif(not (SHIPPED_ADD / "config.json").exists(),
                                       reason="checkpoints/small-add is not in this checkout")
needs_shipped_extrap = pytest.mark.skipif(not (SHIPPED_EXTRAP / "config.json").exists(),
                                          reason="checkpoints/extrap-add is not in this checkout")
PAST_THE_LIMIT = 4400  # digits: int(text) and str(n) refuse more than 4300 (sys.get_int_max_str_digits)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_decimal_conversions_work_past_pythons_digit_limit():
    rng = random.Random(0)
    for digits in (1, 9, 10, 1999, 2000, 2001, 4300, 4301, 5000, 12_345):
        for value in (10 ** (digits - 1), 10**digits - 1, rng.randint(10 ** (digits - 1), 10**digits - 1)):
            text = decimal_text(value)
            assert len(text) == digit_count(value) == digits and text[0] != "0"
            assert decimal_value(text) == value and from_lsd(to_lsd(value)) == value
    assert digit_count(0) == 1 and decimal_text(0) == "0"
    assert decimal_value("0" * 5000 + "7") == 7  # leading zeros, as int() reads them
    assert sys.get_int_max_str_digits() in (0, 4300)  # the interpreter's own limit is left as it was


def test_a_5000_digit_addition_through_the_task_functions():
    task = get_task("addition", max_digits=5)
    a, b = "9" * 5000, "1"
    example = task.from_human(f"{a}+{b}")
    assert example.operands == (10**5000 - 1, 1) and example.answer == 10**5000
    assert example.prompt == "9" * 5000 + "+1=" and example.target == "0" * 5000 + "1"
    assert task.check(example, example.target) and task.parse(example.target) == 10**5000
    assert task.to_human(example.target) == "1" + "0" * 5000
    assert longest_cascade(*example.operands) == 5000
    assert carry_chain_lengths(*example.operands)[-1] == 5000
    # sampled and planted problems of that length too
    [sampled] = task.sample_cell(1, random.Random(0), 5000, 4999)
    assert len(sampled.prompt) == 5000 + 1 + 4999 + 1 and task.check(sampled, sampled.target)
    planted = sample_with_cascade(20, 5000, random.Random(0))
    assert digit_count(planted[0]) == 5000 and longest_cascade(*planted) == 20


def test_huge_operands_in_the_other_tasks_answer_or_refuse_in_one_line():
    big = "7" * PAST_THE_LIMIT
    product = get_task("multiplication", max_digits=3).from_human(f"{big}*3")
    assert product.target == ("2" + "3" * (PAST_THE_LIMIT - 1) + "1")[::-1]  # 77 * 3 = 231, 777 * 3 = 2331
    sorting = get_task("sorting", max_numbers=4, max_digits=4).from_human(f"{big}, 5")
    assert sorting.prompt == f"a:{big},b:5=" and sorting.answer == "ba"
    expression = get_task("expressions").from_human(f"{big}-1")
    assert expression.target == ("7" * (PAST_THE_LIMIT - 1) + "6")[::-1]
    with pytest.raises(UserError, match=rf"residues in 0\.\.112, got \(a {PAST_THE_LIMIT}-digit number 77777\.\.\.77777, 3\)"):
        get_task("modular_addition", p=113).from_human(f"{big}+3")


def tiny_run_without_positions(path: Path) -> Path:
    """A run directory holding an untrained one-head addition model with no position table."""
    task = get_task("addition", max_digits=5)
    cfg = ModelConfig(vocab=task.vocab, positional="none", d_model=8, n_heads=1, d_mlp=16, n_layers=1, n_loops=1,
                      max_loops=2, max_seq_len=24)
    torch.manual_seed(0)
    write_json(path / "config.json", {"task": {"name": "addition", **task.config()}, "model": cfg.to_dict(), "train": {}})
    save_checkpoint(path, LoopedTransformer(cfg), 0, {"metrics": {}})
    return path


def test_solve_answers_a_5000_digit_problem_on_a_model_without_a_position_table(tmp_path, capsys):
    run = tiny_run_without_positions(tmp_path / "run")
    assert main(["solve", str(run), "9" * 5000 + "+1", "--loops", "1", "--verbose", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "warning: an operand has 5000 digits" in captured.err
    answer, verdict = captured.out.splitlines()
    assert set(answer) <= set("0123456789")  # untrained, so any digits; the right ones are named below
    assert verdict.endswith(f"expected 1{'0' * 5000}); 1 loops") or verdict.endswith("-> correct; 1 loops")


@needs_shipped_add
def test_operands_past_the_digit_limit_end_in_one_line_through_the_cli(capsys):
    big = "7" * PAST_THE_LIMIT
    # small-add's Abacus table indexes digits 1..116 of a number: refused before any decoding
    assert main(["solve", str(SHIPPED_ADD), f"{big}+{big}", "--device", "cpu"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = one_error_line(captured.err)
    assert f"has a {PAST_THE_LIMIT + 1}-digit number" in line and "digits 1..116" in line
    assert main(["eval", str(SHIPPED_ADD), "--lengths", "5000", "--n", "1", "--device", "cpu"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("error: a problem with 5000-digit operands (prompt 10002 tokens + answer")
    assert "Abacus position table" in line


@needs_shipped_add
def test_solve_and_eval_lengths_refuse_the_same_lengths(capsys):
    rule = ("-digit number, longer than the model's Abacus position table indexes (digits 1..116: "
            "max_seq_len=96 + abacus_max_offset=20); use shorter operands, or a model without a position table "
            "(model.positional='none', as in the extrap-add preset) or with a larger model.max_seq_len")
    assert main(["solve", str(SHIPPED_ADD), "9" * 130 + "+1", "--device", "cpu"]) == 2
    assert one_error_line(capsys.readouterr().err).endswith(f"has a 131{rule}")
    assert main(["eval", str(SHIPPED_ADD), "--lengths", "117", "--n", "1", "--device", "cpu"]) == 2
    assert one_error_line(capsys.readouterr().err).endswith(rule)
    # both accept what the table indexes: 115-digit operands, sums of at most 116 digits (quick: n=1)
    assert main(["solve", str(SHIPPED_ADD), "1" * 115 + "+1", "--device", "cpu"]) == 0
    assert main(["eval", str(SHIPPED_ADD), "--lengths", "115", "--n", "1", "--device", "cpu"]) == 0


def random_operand(digits: int, seed: int) -> str:
    rng = random.Random(seed)
    return rng.choice("123456789") + "".join(rng.choice("0123456789") for _ in range(digits - 1))


@needs_shipped_extrap
def test_solve_accepts_a_200_digit_problem_on_a_model_without_a_position_table(capsys):
    # 604 tokens, past max_seq_len=320, which bounds nothing in a model without a position
    # table: `eval --lengths 200` scores such problems, and solve answers them
    a, b = random_operand(200, 1), random_operand(200, 2)
    assert main(["solve", str(SHIPPED_EXTRAP), f"{a}+{b}", "--loops", "6", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(int(a) + int(b))
    assert captured.err.startswith("warning: an operand has 200 digits")  # past training, said so


@needs_shipped_extrap
def test_adaptive_decoding_computes_the_whole_answer_past_max_seq_len():
    # without max_new_tokens the answer had max_seq_len - prompt positions: 1 for a 402-token prompt
    model = load_model(SHIPPED_EXTRAP, device="cpu")
    task = get_task("addition", max_digits=5, answer_format="slots")
    example = task.make(int(random_operand(200, 3)), int(random_operand(200, 4)))
    completion = generate_adaptive(model, [example.prompt]).completions[0]
    assert task.check(example, completion)


@needs_shipped_extrap
def test_the_shipped_extrapolator_adds_numbers_200_times_longer_than_its_training():
    # docs/runs/addition.md: 100% at 1,000 digits (n = 8, median 13 loops); two of them here
    model = load_model(SHIPPED_EXTRAP, device="cpu")
    task = get_task("addition", max_digits=5, answer_format="slots")
    examples = [task.make(int(random_operand(1000, seed)), int(random_operand(1000, seed + 10))) for seed in (5, 6)]
    decoded = generate_adaptive(model, [e.prompt for e in examples])
    assert all(decoded.converged) and max(decoded.loops_used) <= 32, decoded.loops_used
    assert [task.check(e, c) for e, c in zip(examples, decoded.completions, strict=True)] == [True, True]


@needs_shipped_extrap
def test_a_problem_whose_attention_does_not_fit_in_memory_is_refused_in_one_line(monkeypatch, capsys):
    from abacus_interp.evaluation import common

    monkeypatch.setattr(common, "free_memory", lambda device: 2**20)  # 1 MiB free
    a = random_operand(200, 1)
    assert main(["solve", str(SHIPPED_EXTRAP), f"{a}+1", "--device", "cpu"]) == 2
    line = one_error_line(capsys.readouterr().err)
    tokens = len(a) + 3 + len(str(int(a) + 1)) + 1  # prompt "a+1=", answer, EOS
    assert f"this problem has {tokens} tokens, and attending over them needs about" in line
    assert "GiB free on cpu; use shorter operands" in line


def test_eval_defaults_keep_a_run_to_seconds():
    # a 16x16 grid at 100 problems a cell and every loop count to 16 took 81 s on small-add
    assert build_parser().parse_args(["eval", "RUN"]).n == 25

"""The addition comparison: its cells are exactly the runs trained for it, a cell is evaluated
by operand digits (uniform and carry-balanced), a second seed trains beside the first and
the winners are looked inside."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import statistics
import tempfile
from pathlib import Path

import pytest

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.scoring import score_examples
from abacus_interp.tasks.carries import longest_cascade
from abacus_interp.training import apply_overrides, get_preset
from abacus_lab.experiments.compare import (
    ComparisonSpec,
    Contender,
    get_spec,
    run_comparison,
    summarise,
)
from abacus_lab.experiments.compare_eval import carry_balanced, evaluate_cell


def brief_edits(family: str, width: int, depth: int) -> dict[str, str]:
    """The settings the addition cells were trained with, written out independently of the spec."""
    single = {"model.n_layers": f"{depth}", "model.n_loops": "1", "model.max_loops": "1", "train.progressive": "none",
              "train.mix_depths": "null", "train.step_penalty": "null", "train.init_state_noise": "0.0",
              "model.input_injection": "none", "model.d_model": f"{width}"}
    return {
        "looped": {"model.n_layers": "1", "model.n_loops": f"{depth}", "model.max_loops": f"{4 * depth}",
                   "train.mix_depths": f"[2,{4 * depth}]", "model.d_model": f"{width}"},
        "gpt": single,
        "lstm": {**single, "model.family": "lstm", "model.positional": "none"},
        "retran": {**single, "model.family": "retran", "model.d_model": f"{width // 2}"},
    }[family]


def test_the_addition_spec_is_exactly_the_trained_settings_and_every_cell_builds():
    spec = get_spec("addition")
    assert spec.preset == "loop-add" and spec.length_unit == "digits"
    assert spec.base == ("train.processes=1", "train.steps=2000", "train.checkpoint_every=250")
    assert [c.cell for c in spec.contenders] == [f"{f}-{s}" for f in ("looped", "gpt", "lstm", "retran") for s in "sm"]
    from abacus_interp.core.families import build_model

    for contender in spec.contenders:
        width, depth = {"S": (32, 4), "M": (64, 6)}[contender.size]
        edits = dict(e.split("=", 1) for e in contender.edits)
        assert edits == brief_edits(contender.family, width, depth)
        cfg = apply_overrides(get_preset("loop-add"), [*spec.base, *contender.edits])
        expected = apply_overrides(get_preset("loop-add"),
                                   [*spec.base, *(f"{k}={v}" for k, v in brief_edits(contender.family, width, depth).items())])
        assert cfg.to_dict() == expected.to_dict()
        model = build_model(cfg.model)
        assert model.cfg.n_layers * model.cfg.n_loops == depth and cfg.train.steps == 2000
        # operands of up to 8 digits fit loop-add's positions: every length is scored
        assert cfg.make_task().max_sequence_length(max_digits=max(spec.lengths)) <= cfg.model.max_seq_len
        if contender.family != "looped":
            assert cfg.train.progressive == "none" and cfg.train.step_penalty is None and cfg.model.input_injection == "none"


TINY = ("train.steps=30", "train.batch_size=16", "train.warmup_steps=2", "train.eval_every=10",
        "train.eval_problems=16", "train.checkpoint_every=30", "train.dense_checkpoints=1", "train.dense_until=1",
        "train.device=cpu", "train.processes=1", "task.max_digits=3", "model.max_seq_len=16")


def tiny_addition() -> ComparisonSpec:
    small = ("model.d_model=16", "model.n_heads=2")
    return ComparisonSpec(
        preset="loop-add", base=TINY,
        contenders=(Contender("looped", "S", (*small, "model.n_loops=2", "model.max_loops=4", "train.mix_depths=[2,4]")),
                    Contender("gpt", "S", (*small, "model.n_layers=2", "model.n_loops=1", "model.max_loops=1",
                                           "train.progressive=none", "train.mix_depths=null",
                                           "train.step_penalty=null", "train.init_state_noise=0.0",
                                           "model.input_injection=none"))),
        lengths=(1, 2, 3, 5), n_per_length=12, n_test=24, description="tiny addition", length_unit="digits", band=1)


def test_cells_are_evaluated_by_digits_and_a_second_seed_trains_beside_the_first(tmp_path):
    spec = tiny_addition()
    out = tmp_path / "cmp"
    data = run_comparison(spec, out, progress=False)
    looped = next(c for c in data["cells"] if c["cell"] == "looped-s")
    assert looped["trained_lengths"] == [1, 3] and looped["lengths"] == [1, 2, 3, 5]
    # 5-digit operands need 3*5+4 = 19 positions, past max_seq_len 16; 1-3 fit
    assert looped["exact_match_by_length"][3] is None and all(0 <= e <= 1 for e in looped["exact_match_by_length"][:3])
    assert looped["sample"] == "uniform" and looped["n_carry_balanced"] == 24
    assert 0 <= looped["exact_match_carry_balanced"] <= 1
    # the curve is the in-run evaluations of metrics.jsonl (steps 1, 10, 20, 30) on 16 problems
    assert [p["step"] for p in looped["curve"]] == [1, 10, 20, 30] and {p["n"] for p in looped["curve"]} == {16}
    assert looped["curve"][-1]["train_flops"] > looped["curve"][0]["train_flops"] > 0
    assert "problems of 1-3 digits (uniform: the task's own sampler)" in data["findings"][0]
    assert any(line.startswith("Looped-S by problem length (digits): ") for line in data["findings"])

    # the stored number is what the weights score on the same seeded problems
    model = ckpt.load_model(out / "cells" / "looped-s", device="cpu")
    task = apply_overrides(get_preset("loop-add"), list(TINY)).make_task()
    again = evaluate_cell(model, task, spec)
    assert again.exact_match_by_length == looped["exact_match_by_length"]
    two = task.sample_cell(12, random.Random(spec.eval_seed * 1_000 + 2), 2, 2)
    assert all(len(str(a)) == len(str(b)) == 2 for a, b in (e.operands for e in two))
    assert score_examples(model, two).exact_match == looped["exact_match_by_length"][1]

    # inside the winners: the fixed point runs on the looped cell, not on the one-pass GPT
    inside = {(row["cell"], row["section"]): row for row in data["inside"]}
    assert inside[("looped-s", "fixed_point")]["status"] == "ok"
    assert inside[("gpt-s", "fixed_point")]["status"] == "omitted"
    assert all(row["status"] != "failed" for row in data["inside"])
    assert any(line.startswith("Fixed-point") or "cannot run for the best GPT cell, gpt-s" in line
               for line in data["findings"])

    # a second seed of one cell: its own directory and config, the first run untouched
    metrics = (out / "cells" / "gpt-s" / "metrics.jsonl").read_text()
    again = run_comparison(spec, out, cells=("gpt-s",), seed=1, progress=False, look_inside=False)
    assert (out / "cells" / "gpt-s-seed1" / "evaluation.json").exists()
    assert ckpt.read_run_config(out / "cells" / "gpt-s-seed1")["train"]["seed"] == 1
    assert (out / "cells" / "gpt-s" / "metrics.jsonl").read_text() == metrics
    assert [c["cell"] for c in again["cells"]] == ["looped-s", "gpt-s"]
    assert [(c["cell"], c["seed"]) for c in again["seeds"]] == [("gpt-s-seed1", 1)]
    assert any(line.startswith("GPT-S over seeds 0, 1: exact match ") for line in again["findings"])
    assert json.loads((out / "comparison.json").read_text()) == again

    with pytest.raises(ValueError, match="unknown cell gpt-x"):
        run_comparison(spec, out, cells=("gpt-x",), seed=1, progress=False, look_inside=False)


def test_carry_balanced_problems_spread_their_longest_chain():
    task = apply_overrides(get_preset("loop-add"), []).make_task()
    balanced = carry_balanced(task, 400, random.Random(0))
    uniform = task.sample(400, random.Random(0))
    chains = [longest_cascade(*e.operands) for e in balanced]
    assert set(chains) == set(range(0, 6))  # every chain length 0..5 in 1-5 digit operands
    assert statistics.mean(chains) > statistics.mean(longest_cascade(*e.operands) for e in uniform) + 0.5
    assert all(len(str(a)) == len(str(b)) for a, b in (e.operands for e in balanced))


SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "add-compare"


@pytest.mark.skipif(not (SHIPPED / "comparison.json").exists(), reason="checkpoints/add-compare is not here")
def test_shipped_addition_comparison_is_what_the_command_writes_and_its_weights_score_it():
    shipped = json.loads((SHIPPED / "comparison.json").read_text())
    cells = {c["cell"]: c for c in shipped["cells"]}
    assert set(cells) == {f"{f}-{s}" for f in ("looped", "gpt", "lstm", "retran") for s in ("s", "m")}
    assert {c["cell"] for c in shipped["seeds"]} == {f"{c}-seed1" for c in cells}  # a second seed of every cell
    # the bar: the best cell at >= 90% held-out exact match (1,000 uniform problems)
    assert max(c["exact_match"] for c in cells.values()) >= 0.9 and cells["gpt-m"]["n_test"] == 1000
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(SHIPPED / "cells", Path(tmp) / "cells", ignore=shutil.ignore_patterns("*.safetensors"))
        shutil.copy(SHIPPED / "inside.json", Path(tmp) / "inside.json")
        assert summarise(get_spec("addition"), tmp) == shipped
    # the stored exact match of the best looped cell is what its weights score on the same
    # seeded 1,000 problems
    spec = get_spec("addition")
    model = ckpt.load_model(SHIPPED / "cells" / "looped-m", device="cpu")
    task = apply_overrides(get_preset(spec.preset), [*spec.base, *spec.select(cells=("looped-m",))[0].edits]).make_task()
    again = evaluate_cell(model, task, dataclasses.replace(spec, lengths=(5,)))
    assert again.exact_match == cells["looped-m"]["exact_match"]
    assert again.exact_match_by_length == [cells["looped-m"]["exact_match_by_length"][4]]

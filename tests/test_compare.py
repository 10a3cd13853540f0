"""abacus_lab.experiments.compare: every cell is a real (tiny) run of its family, evaluated on held-out
problems overall and by length; the findings state what planted numbers say; the report
shows the section; the shipped comparison is what the command writes from its cells."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from abacus_interp import checkpoints as ckpt
from abacus_interp.training import apply_overrides, get_preset
from abacus_lab.experiments.compare import (
    ComparisonSpec,
    Contender,
    evaluate_cell,
    get_spec,
    run_comparison,
    summarise,
)
from analyses.report.architectures.summary import (
    accuracy_vs_length_figure,
    accuracy_vs_params_figure,
    findings,
)

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "expr-compare"
TINY = ("train.steps=6", "train.batch_size=16", "train.warmup_steps=2", "train.eval_every=6",
        "train.eval_problems=8", "train.checkpoint_every=6", "train.dense_checkpoints=1", "train.dense_until=1",
        "train.device=cpu", "train.processes=1")


def tiny_spec() -> ComparisonSpec:
    small = ("model.d_model=16", "model.n_heads=2", "model.n_layers=1")
    return ComparisonSpec(
        preset="expressions", base=TINY,
        contenders=(Contender("looped", "S", (*small, "model.n_loops=2", "model.max_loops=4")),
                    Contender("lstm", "S", (*small, "model.family=lstm", "model.positional=none", "model.n_loops=1",
                                            "model.max_loops=1")),
                    Contender("retran", "S", (*small, "model.family=retran", "model.n_loops=1", "model.max_loops=1"))),
        lengths=(8, 20, 31), n_per_length=6, n_test=10, description="tiny")


def test_comparison_trains_each_cell_once_and_evaluates_by_length(tmp_path):
    spec = tiny_spec()
    data = run_comparison(spec, tmp_path / "cmp", families=("looped", "lstm"), progress=False,
                          look_inside=False)
    assert [c["cell"] for c in data["cells"]] == ["looped-s", "lstm-s"]
    for cell in data["cells"]:
        model = ckpt.load_model(tmp_path / "cmp" / "cells" / cell["cell"], device="cpu")
        assert cell["params"] == sum(p.numel() for p in model.parameters())
        assert cell["lengths"] == [8, 20, 31] and len(cell["exact_match_by_length"]) == 3
        assert all(0.0 <= em <= 1.0 for em in [cell["exact_match"], *cell["exact_match_by_length"]])
        assert 0.0 < cell["loss"] < 10.0
        assert cell["trained_lengths"] == [8, 30] and cell["steps"] == 6 and cell["train_seconds"] > 0
    assert json.loads((tmp_path / "cmp" / "comparison.json").read_text()) == data

    # a second call with another family trains only that one and keeps the first two as they were
    metrics = (tmp_path / "cmp" / "cells" / "looped-s" / "metrics.jsonl").read_text()
    again = run_comparison(spec, tmp_path / "cmp", families=("retran",), progress=False, look_inside=False)
    assert [c["cell"] for c in again["cells"]] == ["looped-s", "lstm-s", "retran-s"]
    assert again["cells"][:2] == data["cells"]
    assert (tmp_path / "cmp" / "cells" / "looped-s" / "metrics.jsonl").read_text() == metrics

    # a finished cell trained with other settings is not taken for the one asked for
    changed = dataclasses.replace(spec, base=(*spec.base, "train.lr=1e-4"))
    with pytest.raises(ValueError, match="other settings"):
        run_comparison(changed, tmp_path / "cmp", families=("looped",), progress=False, look_inside=False)
    # ... but one trained in another number of processes is the same cell (the shipped
    # expr-compare cells ran in one process, the preset now asks for two)
    other_processes = dataclasses.replace(spec, base=(*spec.base, "train.processes=2"))
    assert run_comparison(other_processes, tmp_path / "cmp", families=("looped",), progress=False,
                          look_inside=False)["cells"][:2] == data["cells"]

    # the report shows it as a section: the table, both figures and the findings
    from analyses.report import ReportSizes, build_report, load_report_json

    build_report(tmp_path / "cmp" / "cells" / "looped-s", tmp_path / "rep", architectures=tmp_path / "cmp",
                 sizes=ReportSizes.quick(), sections=["model_card", "architectures"], progress=False)
    section = load_report_json(tmp_path / "rep")["sections"]["architectures"]
    assert section["status"] == "ok" and section["findings"] == again["findings"]
    assert set(section["figures"]) == {"accuracy_vs_params", "accuracy_vs_length", "learning_curves"}

    # a report of another family's cell runs what applies and says why the rest does not
    build_report(tmp_path / "cmp" / "cells" / "lstm-s", tmp_path / "rep-lstm", sizes=ReportSizes.quick(),
                 sections=["evaluation", "fixed_point", "checkpoint_compare"], progress=False)
    sections = load_report_json(tmp_path / "rep-lstm")["sections"]
    assert sections["evaluation"]["status"] == "ok"
    assert sections["evaluation"]["findings"][0].startswith("On ") and "held-out" in sections["evaluation"]["findings"][0]
    for key in ("fixed_point", "checkpoint_compare"):
        assert sections[key]["status"] == "omitted" and "lstm model" in sections[key]["reason"]


def test_evaluation_is_seeded_per_length():
    spec = dataclasses.replace(tiny_spec(), lengths=(9, 12), n_per_length=5, n_test=5)
    cfg = apply_overrides(get_preset("expressions"), ["model.d_model=16", "model.n_heads=2"])
    from abacus_interp.core.families import build_model

    model = build_model(cfg.model)
    task = cfg.make_task()
    first, second = evaluate_cell(model, task, spec), evaluate_cell(model, task, spec)
    assert first == second
    assert first.params == sum(p.numel() for p in model.parameters())
    # expressions have no carries: no carry-balanced sample
    assert first.sample == "uniform" and first.exact_match_carry_balanced is None


def planted() -> dict:
    def cell(family, size, params, em, by_length):
        return {"family": family, "size": size, "cell": f"{family}-{size.lower()}", "params": params,
                "exact_match": em, "loss": 2.0 - em, "lengths": [8, 9, 10, 11, 12, 26, 27, 28, 29, 30, 31, 32],
                "exact_match_by_length": by_length, "trained_lengths": [8, 30], "n_test": 1000, "sample": None,
                "exact_match_carry_balanced": None, "n_carry_balanced": None, "seed": 0, "curve": None}

    return {"spec": {"length_unit": "characters", "band": 5}, "seeds": [], "inside": [], "cells": [
        cell("retran", "S", 11_000, 0.8, [0.9] * 5 + [0.6] * 5 + [0.2, 0.0]),
        cell("gpt", "S", 41_000, 0.5, [0.7] * 5 + [0.3] * 5 + [None, 0.1]),
        cell("lstm", "S", 9_000, 0.3, [0.5] * 5 + [0.1] * 5 + [0.0, 0.0]),
    ]}


def test_findings_state_the_planted_ranking_parameters_and_length_bands():
    lines = findings(planted())
    assert lines[0] == ("Exact match on 1000 held-out problems of 8-30 characters: ReTran-S 80% (11k parameters), "
                        "GPT-S 50% (41k parameters), LSTM-S 30% (9k parameters).")
    assert lines[1] == ("Held-out loss per answer token (lower is better; it separates cells whose exact match is "
                        "near zero): ReTran-S 1.20, GPT-S 1.50, LSTM-S 1.70.")
    # ReTran beats GPT with fewer parameters; LSTM beats nobody (it is the smallest but the worst)
    # 80% against 50% over 1,000 problems each: 0.3 / sqrt((0.16 + 0.25) / 1000) = 14.8 standard errors
    assert ("ReTran-S (11k parameters, 80%) is more accurate than GPT-S (41k, 50%; 14.8 SE behind) with no more "
            "parameters.") in lines
    assert ("ReTran-S (11k parameters, loss 1.20) has a lower held-out loss than GPT-S (41k, loss 1.50) "
            "with no more parameters.") in lines
    assert not any(line.startswith("LSTM-S (9k") for line in lines)
    assert "ReTran-S by problem length (characters): 90% at 8-12, 60% at 26-30, 10% at 31-32 (past the trained 30)." in lines
    assert "GPT-S by problem length (characters): 70% at 8-12, 30% at 26-30, 10% at 32 (past the trained 30)." in lines


def test_comparable_sizes_are_named_when_no_cell_dominates():
    data = planted()
    data["cells"] = [data["cells"][1], {**data["cells"][0], "params": 45_000, "exact_match": 0.6, "loss": 1.4}]
    lines = findings(data)
    # 50% and 60% of 1,000: SE of the difference 0.0220, so 4.5 standard errors
    assert ("At comparable size (41k vs 45k parameters), GPT-S scores 50% (loss 1.50) and ReTran-S 60% "
            "(loss 1.40), 4.5 standard errors apart.") in lines
    # the larger one wins: no one wins giving away size
    assert not any("more accurate than" in line or "lower held-out loss" in line for line in lines)


def test_exact_match_gaps_within_sampling_noise_do_not_rank():
    data = planted()
    # 3.4% against 2.0% over 1,000 problems each: 1.7 standard errors apart
    data["cells"] = [{**data["cells"][0], "exact_match": 0.034}, {**data["cells"][1], "exact_match": 0.020}]
    lines = findings(data)
    assert not any("more accurate than" in line for line in lines)
    assert ("No family's exact match is more than 2 standard errors above another's (1000 problems each), so exact "
            "match does not rank them at these sizes.") in lines
    data["cells"][0]["exact_match"] = 0.045  # 3.0 standard errors
    assert any(line.startswith("ReTran-S (11k parameters, 4%) is more accurate than GPT-S") for line in findings(data))


def test_figures_have_one_line_per_family_and_per_cell():
    data = planted()
    params = accuracy_vs_params_figure(data)
    assert sorted(t.name for t in params.data) == ["GPT", "LSTM", "ReTran"]
    lengths = accuracy_vs_length_figure(data)
    assert [t.name for t in lengths.data] == ["ReTran-S", "GPT-S", "LSTM-S"]
    assert list(lengths.data[0].y) == planted()["cells"][0]["exact_match_by_length"]


def test_unknown_names_say_what_exists(tmp_path):
    with pytest.raises(ValueError, match="unknown comparison"):
        get_spec("vision")
    with pytest.raises(ValueError, match="choose from S, M, L"):
        get_spec("expressions").select(sizes=("XL",))
    with pytest.raises(ValueError, match="unknown family gru"):
        get_spec("expressions").select(families=("gru",))
    with pytest.raises(ValueError, match="no evaluated cell"):
        summarise(tiny_spec(), tmp_path)


def test_the_expressions_grid_has_three_sizes_per_family_that_build():
    spec = get_spec("expressions")
    assert len(spec.contenders) == 12 and {c.size for c in spec.contenders} == {"S", "M", "L"}
    params = {}
    for contender in spec.select(sizes=("S",)):
        cfg = apply_overrides(get_preset(spec.preset), list(contender.overrides))
        from abacus_interp.core.families import build_model

        params[contender.family] = sum(p.numel() for p in build_model(cfg.model).parameters())
    # the looped cell has GPT's width and depth with one layer's weights: a third of GPT's layers
    assert params["looped"] < params["gpt"] / 2


def test_shipped_comparison_is_what_the_command_writes_from_its_cells():
    if not (SHIPPED / "comparison.json").exists():
        pytest.skip(f"{SHIPPED} is not present (abacus-interp compare --sizes S --out {SHIPPED})")
    spec = get_spec("expressions")
    shipped = json.loads((SHIPPED / "comparison.json").read_text())
    assert {c["cell"] for c in shipped["cells"]} >= {"looped-s", "gpt-s", "lstm-s", "retran-s"}
    # the summary and findings are re-derived from the cells' evaluations
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(SHIPPED / "cells", Path(tmp) / "cells",
                        ignore=shutil.ignore_patterns("*.safetensors"))
        assert summarise(spec, tmp) == shipped
    # and one cell's stored accuracies are what its weights score on the same seeded problems
    cell = next(c for c in shipped["cells"] if c["cell"] == "lstm-s")
    picked = (8, 31)
    spec_two = dataclasses.replace(spec, lengths=picked, n_test=spec.n_test)
    model = ckpt.load_model(SHIPPED / "cells" / "lstm-s", device="cpu")
    cfg = ckpt.read_run_config(SHIPPED / "cells" / "lstm-s")
    from abacus_interp.tasks import task_from_config

    again = evaluate_cell(model, task_from_config(cfg["task"]), spec_two)
    stored = dict(zip(cell["lengths"], cell["exact_match_by_length"], strict=True))
    assert again.exact_match_by_length == [stored[n] for n in picked]
    assert again.exact_match == cell["exact_match"]
    assert again.loss == pytest.approx(cell["loss"], rel=1e-6)


def test_cli_compare_passes_set_to_every_cell(tmp_path, monkeypatch, capsys):
    from abacus_lab import cli
    from abacus_lab.experiments import compare

    seen = {}

    def fake(spec, out, sizes=None, families=None, cells=None, seed=0, look_inside=True):
        seen.update(base=spec.base, sizes=sizes, families=families, cells=cells, seed=seed, inspect=look_inside)
        return {"cells": [], "seeds": [], "findings": ["a finding"]}

    monkeypatch.setattr(compare, "run_comparison", fake)
    assert cli.main(["compare", "--sizes", "S,M", "--families", "gpt", "--set", "train.steps=7",
                     "--out", str(tmp_path)]) == 0
    
    assert seen == {"base": ("train.steps=7",), "sizes": ("S", "M"), "families": ("gpt",), "cells": None,
                    "seed": 0, "inspect": True}
    assert cli.main(["compare", "--spec", "addition", "--cells", "gpt-m,looped-m", "--seed", "1", "--skip-inside",
                     "--out", str(tmp_path)]) == 0
    assert seen["cells"] == ("gpt-m", "looped-m") and seen["seed"] == 1 and seen["inspect"] is False
    assert "a finding" in capsys.readouterr().out

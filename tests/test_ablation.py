"""abacus_lab.experiments.ablation: cells are real (tiny) runs, evaluated on equal-length
problems, resumable; summarised per factor and drawn (analyses.report.ablation), and shown by
the report."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from abacus_lab.experiments.ablation import (
    AblationSpec,
    Variant,
    get_spec,
    run_ablation,
    slug,
)
from analyses.report.ablation import ablation_figure, extrapolation_limit, findings

pytestmark = pytest.mark.slow

TINY = ("task.max_digits=2", "model.d_model=16", "model.d_head=4", "model.d_mlp=32", "model.max_seq_len=24",
        "train.steps=4", "train.batch_size=8", "train.eval_problems=8", "train.eval_every=4",
        "train.checkpoint_every=4", "train.dense_checkpoints=1", "train.dense_until=1", "train.warmup_steps=1")


def tiny_spec() -> AblationSpec:
    return AblationSpec(preset="plain-add", base=TINY, lengths=(1, 2, 3, 4, 9),
                        variants=(Variant("loops x layers", "1x1", ("model.n_loops=1",)),), n_per_length=8)


def test_ablation_trains_each_cell_once_and_summarises(tmp_path):
    data = run_ablation(tiny_spec(), tmp_path / "abl", progress=False)
    assert [c["cell"] for c in data["cells"]] == ["baseline", "loops-x-layers-1x1"]
    for cell in data["cells"]:
        assert (tmp_path / "abl" / "cells" / cell["cell"] / "config.json").exists()
        assert len(cell["exact_match"]) == 5 and cell["params"] > 0
        assert cell["exact_match"][-1] is None  # 9-digit operands do not fit max_seq_len 24
        assert all(0 <= e <= 1 for e in cell["exact_match"][:-1])
    assert data["spec"]["trained_max_digits"] == 2
    assert data["findings"][0].startswith("loops x layers (exact match at 2 digits/4 digits")
    stored = json.loads((tmp_path / "abl" / "ablation.json").read_text())
    assert stored["cells"] == data["cells"]
    # a finished directory is read, not retrained
    mtime = (tmp_path / "abl" / "cells" / "baseline" / "lengths.json").stat().st_mtime
    again = run_ablation(tiny_spec(), tmp_path / "abl", progress=False)
    assert again["cells"] == data["cells"]
    assert (tmp_path / "abl" / "cells" / "baseline" / "lengths.json").stat().st_mtime == mtime
    fig = ablation_figure(data)
    assert isinstance(fig, go.Figure) and len(fig.data) == 2

    from analyses.report import ReportSizes, build_report, load_report_json

    build_report(tmp_path / "abl" / "cells" / "baseline", tmp_path / "rep", ablation=tmp_path / "abl",
                 sizes=ReportSizes.quick(), sections=["model_card", "ablation"], progress=False)
    section = load_report_json(tmp_path / "rep")["sections"]["ablation"]
    assert section["status"] == "ok" and section["findings"] == data["findings"]


def test_extrapolation_limit_and_named_specs():
    cell = {"lengths": [1, 2, 3, 4], "exact_match": [1.0, 0.9, 0.4, 0.8]}
    assert extrapolation_limit(cell) == 2
    assert extrapolation_limit({"lengths": [1], "exact_match": [0.1]}) is None
    spec = get_spec("extrapolation")
    assert spec.cells()[0].factor == "baseline" and len({v.label for v in spec.variants}) == len(spec.variants)
    with pytest.raises(ValueError, match="unknown ablation"):
        get_spec("nope")


def test_findings_state_the_extrapolation_limit_and_the_stalled_cells():
    def cell(factor, label, ems):
        return {"factor": factor, "label": label, "lengths": [1, 2, 3, 4, 5, 6], "exact_match": ems}

    data = {"spec": {"trained_max_digits": 2, "lengths": [1, 2, 3, 4, 5, 6]},
            "cells": [cell("baseline", "baseline", [1.0, 1.0, 0.6, 0.2, 0.0, 0.0]),
                      cell("k", "k=0", [1.0, 1.0, 0.1, 0.0, 0.0, 0.0]),
                      cell("k", "k=9", [0.9, 0.3, 0.1, 0.0, 0.0, 0.0])]}
    k_sentence, stalled = findings(data)
    assert k_sentence == ("k (exact match at 2 digits/4 digits/6 digits): baseline 100%/20%/0% (>= 50% up to 3 digits), "
                          "k=0 100%/0%/0% (>= 50% up to 2 digits), k=9 30%/0%/0% (>= 50% up to 1 digits).")
    assert stalled.startswith("1 of 3 cells did not learn the trained range (< 50% at 2 digits: k=9)")


# shipped ablation -> (its spec, the --set edits it was run with, its trained length)
SHIPPED_ABLATIONS = {
    "ablation-extrapolation": ("extrapolation", (), 4),
    "ablation-extrapolation-by-loops": ("extrapolation-by-loops", ("train.processes=1",), 5),
}


@pytest.mark.parametrize("name", sorted(SHIPPED_ABLATIONS))
def test_shipped_ablation_is_what_the_command_writes_from_its_cells(tmp_path, name):
    import shutil
    from dataclasses import asdict, replace
    from pathlib import Path

    spec_name, edits, trained = SHIPPED_ABLATIONS[name]
    shipped = Path(__file__).resolve().parents[1] / "checkpoints" / name
    if not (shipped / "ablation.json").exists():
        pytest.skip(f"{shipped} is not present (abacus-interp ablate --spec {spec_name} --out {shipped})")
    data = json.loads((shipped / "ablation.json").read_text())
    spec = get_spec(spec_name)
    spec = replace(spec, base=(*spec.base, *edits))
    assert [c["cell"] for c in data["cells"]] == [slug(v) for v in spec.cells()]
    copy = tmp_path / "abl"
    shutil.copytree(shipped, copy)
    again = run_ablation(spec, copy, progress=False)  # every cell is evaluated: read, not retrained
    assert again["cells"] == data["cells"] and again["findings"] == data["findings"]
    assert again["spec"] == json.loads(json.dumps({**asdict(spec), "trained_max_digits": trained}))


def test_only_the_window_with_rotary_extrapolates_in_the_shipped_by_loops_ablation():
    """checkpoints/ablation-extrapolation-by-loops: rotary attention alone stops at the trained
    length; one loop of six layers solves uniform problems but not long planted chains."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "checkpoints" / "ablation-extrapolation-by-loops" / "ablation.json"
    if not path.exists():
        pytest.skip(f"{path} is not present")
    cells = {c["cell"]: c for c in json.loads(path.read_text())["cells"]}
    assert cells["baseline"]["exact_match"] == [1.0] * 4 and cells["baseline"]["chain_exact_match"] == [1.0] * 3
    assert cells["positions-rotary-no-window"]["exact_match"][1:] == [0.0] * 3
    unlooped = cells["loops-1-loop-x-6-layers"]
    assert unlooped["exact_match"] == [1.0] * 4 and unlooped["chain_exact_match"][-1] < 0.5


def test_a_generated_answer_ablation_trains_cells_in_two_processes_and_scores_chains(tmp_path):
    """The extrapolation-by-loops kind of spec: cells trained by `train.processes=2` (the
    ablation starts the ranks), scored on generated answers, uniform and planted chains."""
    tiny = ("task.max_digits=2", "model.d_model=16", "model.d_head=4", "model.d_mlp=32", "model.max_seq_len=40",
            "model.max_loops=8", "train.mix_depths=[2,8]", "train.steps=4", "train.batch_size=8",
            "train.eval_problems=8", "train.eval_every=4", "train.checkpoint_every=4", "train.dense_checkpoints=1",
            "train.dense_until=1", "train.warmup_steps=1", "train.processes=2", "train.device=cpu")
    spec = AblationSpec(preset="extrap-add", base=tiny, lengths=(2, 4), chains=((2, 2), (4, 3)), generate=True,
                        variants=(Variant("window", "2", ("model.abacus_window=2",)),), n_per_length=8)
    data = run_ablation(spec, tmp_path / "abl", progress=False)
    assert [c["cell"] for c in data["cells"]] == ["baseline", "window-2"]
    for cell in data["cells"]:
        assert len(cell["exact_match"]) == 2 and len(cell["chain_exact_match"]) == 2
        assert all(0 <= e <= 1 for e in [*cell["exact_match"], *cell["chain_exact_match"]])
        assert all(loops >= 1 for loops in cell["chain_loops_median"])
        assert (tmp_path / "abl" / "cells" / cell["cell"] / "resume" / "state.json").exists()
    spec = get_spec("extrapolation-by-loops")
    assert spec.generate and len({v.label for v in spec.variants}) == len(spec.variants)

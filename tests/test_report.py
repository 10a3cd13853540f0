"""The HTML + JSON report: sections, findings, omission and failure handling, escaping, CLI.

Most tests build the report of a tiny freshly trained run with `ReportSizes.quick()`; the
shipped runs (checkpoints/small-add, extrap-add, grok-mod113[-fast]) are checked in slow tests at
`ReportSizes.fast()`, the sizes of `make demo`. Their time against the 3-minute budget of the
default sizes is measured by benchmarks/bench_report.py, not asserted here.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from abacus_interp.jsonsafe import from_json
from abacus_interp.training import apply_overrides, get_preset, train
from analyses.carry_attention.result import TopHeads
from analyses.fixed_point.findings import findings as fixed_point_findings
from analyses.fixed_point.result import FixedPointSummary
from analyses.registry import ANALYSES
from analyses.report import SECTIONS, ReportSizes, build_report, load_report_json
from analyses.report import findings as F
from analyses.report import html as H
from analyses.report.result import EvalReport

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints"

TINY_ADD = [
    "model.d_model=32", "task.max_digits=3", "model.max_seq_len=24",
    "train.steps=16", "train.batch_size=16", "train.eval_every=8", "train.eval_problems=16",
    "train.checkpoint_every=8", "train.dense_until=4", "train.dense_checkpoints=3",
    "train.log_every=2", "train.warmup_steps=3",
]
TINY_MOD = [
    "task.p=13", "model.d_model=32", "model.d_head=8", "model.d_mlp=64", "model.max_seq_len=5",
    "train.steps=8", "train.eval_every=2", "train.log_every=1", "train.checkpoint_every=4",
    "train.dense_checkpoints=2", "train.dense_until=2",
]

_CACHE: dict[str, Path] = {}


def tiny_add_run(base: Path) -> Path:
    """A tiny addition run (a few checkpoints), trained once per test session."""
    if "add" not in _CACHE:
        run = base / "tiny-add"
        train(apply_overrides(get_preset("plain-add"), TINY_ADD), run, progress=False)
        _CACHE["add"] = run
    return _CACHE["add"]


def tiny_mod_run(base: Path) -> Path:
    if "mod" not in _CACHE:
        cfg = apply_overrides(get_preset("grok-mod113"), TINY_MOD)
        # apply_overrides keeps the p=113 vocabulary when task.p changes; rebuild it
        cfg = dataclasses.replace(cfg, model=cfg.model.replace(vocab=cfg.make_task().vocab))
        run = base / "tiny-mod"
        train(cfg, run, progress=False)
        _CACHE["mod"] = run
    return _CACHE["mod"]


def tiny_add_report(base: Path) -> Path:
    """The quick-sized report of the tiny addition run; returns the HTML path."""
    if "add_report" not in _CACHE:
        _CACHE["add_report"] = build_report(tiny_add_run(base), base / "tiny-add-report",
                                            sizes=ReportSizes.quick(), progress=False)
    return _CACHE["add_report"]


@pytest.fixture(scope="module")
def add_report(tmp_path_factory):
    html_path = tiny_add_report(tmp_path_factory.getbasetemp())
    return html_path, load_report_json(html_path.parent)


@pytest.fixture(scope="module")
def mod_report(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    html_path = build_report(tiny_mod_run(base), base / "tiny-mod-report", sizes=ReportSizes.quick(), progress=False)
    return html_path, load_report_json(html_path.parent)


def figure_ids(html: str) -> list[str]:
    return re.findall(r'<script type="application/json" class="figure-data" data-target="([^"]+)">', html)


def assert_well_formed(html_path: Path, report: dict) -> None:
    html = html_path.read_text()
    # plotly.js inlined exactly once, nothing loaded from elsewhere
    assert html.count("* plotly.js v") == 1
    assert not re.search(r"<script[^>]*\ssrc=", html)
    assert not re.search(r"<link[^>]*\shref=", html)
    assert not re.search(r"<img[^>]*\ssrc=[\"']?https?:", html)
    # every section is in the JSON and on the page, with its figures
    ids = figure_ids(html)
    assert len(ids) == len(set(ids))
    expected = [f"fig-{key}-{name}" for key, sec in report["sections"].items() for name in sec["figures"]]
    assert ids == expected
    for key, sec in report["sections"].items():
        assert f'<section id="{key}" data-status="{sec["status"]}">' in html
        assert sec["status"] in ("ok", "omitted", "failed")
        if sec["status"] == "omitted":
            assert sec["reason"] and H.esc(sec["reason"]) in html
        for sentence in sec["findings"]:
            assert H.esc(sentence) in html
    assert set(report["timing"]["sections"]) == {s.key for s in SECTIONS}
    assert report["timing"]["total_s"] > 0
    json.dumps(report, allow_nan=False)  # strictly JSON


# --------------------------------------------------------------------------- tiny runs

# A section states at most this many findings; fixed_point uses them all (its headline, lock-in
# by carry chain, convergence, contraction, path independence).
MAX_FINDINGS = 6


@pytest.mark.slow
def test_report_of_a_tiny_addition_run(add_report):
    html_path, report = add_report
    assert html_path.name == "index.html" and html_path.exists()
    assert (html_path.parent / "report.json").exists()
    assert_well_formed(html_path, report)
    status = {k: s["status"] for k, s in report["sections"].items()}
    assert report["failed_sections"] == [], {k: report["sections"][k]["error"] for k in report["failed_sections"]}
    assert status == {"model_card": "ok", "evaluation": "ok", "fixed_point": "ok", "carry_wave": "omitted",
                      "multiplication": "omitted", "product_columns": "omitted", "comparisons": "omitted",
                      "carry_attention": "ok", "circuit": "ok", "checkpoint_compare": "ok", "embedding_evolution": "ok", "fourier": "omitted",
                      "ablation": "omitted", "architectures": "omitted"}
    assert "modular" in report["sections"]["fourier"]["reason"]
    assert "addition" in report["sections"]["product_columns"]["reason"]
    assert "not multiplication" in report["sections"]["multiplication"]["reason"]
    for key, sec in report["sections"].items():
        if sec["status"] == "ok":
            assert 2 <= len(sec["findings"]) <= MAX_FINDINGS, (key, sec["findings"])
            assert sec["figures"], key
            assert sec["elapsed_s"] is not None and sec["data"]
    # the numbers behind the figures are in the JSON
    ev = report["sections"]["evaluation"]["data"]
    assert ev["grid"]["exact_match"] and ev["loops"]["loops"][0] == 1
    card = report["sections"]["model_card"]["data"]
    assert card["parameters"]["total_parameters"] > 0 and card["training_curves"]["step"]
    # the page opens with the summary (issue 37: some 40 config rows came before any accuracy)
    html = html_path.read_text()
    assert html.index('<section id="summary"') < html.index('<section id="model_card"')
    summary = html[html.index('<section id="summary"'):html.index('<section id="model_card"')]
    assert "In distribution (operands of 1-" in summary and " problems (" in summary and "n=" in summary
    assert "edge cases" in summary


@pytest.mark.slow
def test_report_of_a_tiny_modular_run(mod_report):
    html_path, report = mod_report
    assert_well_formed(html_path, report)
    assert report["failed_sections"] == [], {k: report["sections"][k]["error"] for k in report["failed_sections"]}
    sections = report["sections"]
    assert sections["carry_attention"]["status"] == "omitted"
    assert "addition" in sections["carry_attention"]["reason"]
    assert sections["fixed_point"]["status"] == "omitted" and "not looped" in sections["fixed_point"]["reason"]
    assert sections["fourier"]["status"] == "ok"
    assert sections["evaluation"]["data"]["splits"]


@pytest.mark.slow
def test_compare_run(tmp_path, tmp_path_factory):
    run = tiny_add_run(tmp_path_factory.getbasetemp())
    other = tmp_path / "other"
    shutil.copytree(run, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["train"]["lr"] = 0.5
    (other / "config.json").write_text(json.dumps(cfg))
    html_path = build_report(run, tmp_path / "out", compare=other, sizes=ReportSizes.quick(), progress=False,
                             sections=["model_card", "checkpoint_compare"])
    report = load_report_json(tmp_path / "out")
    assert report["compare"] == str(other)
    card = report["sections"]["model_card"]["data"]
    assert card["compare"]["config_differences"] == {"train.lr": [run_lr(run), 0.5]}
    cmp = report["sections"]["checkpoint_compare"]["data"]
    assert cmp["b"] is not None and cmp["matched_cka"]
    assert report["sections"]["fixed_point"]["status"] == "omitted"  # not requested
    assert H.esc(str(other)) in html_path.read_text()


@pytest.mark.slow
def test_compare_with_a_run_of_another_task_compares_this_run_only(tmp_path, tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    build_report(tiny_add_run(base), tmp_path / "out", compare=tiny_mod_run(base), sizes=ReportSizes.quick(),
                 progress=False, sections=["checkpoint_compare"])
    sec = load_report_json(tmp_path / "out")["sections"]["checkpoint_compare"]
    assert sec["status"] == "ok" and sec["data"]["b"] is None
    assert "different vocabulary" in sec["data"]["compare_skipped"]


def run_lr(run: Path) -> float:
    return json.loads((run / "config.json").read_text())["train"]["lr"]


@pytest.mark.slow
def test_single_checkpoint_sections_are_omitted_with_reason(tmp_path, tmp_path_factory):
    run = tmp_path / "one"
    shutil.copytree(tiny_add_run(tmp_path_factory.getbasetemp()), run)
    steps = sorted((run / "checkpoints").glob("step_*.safetensors"))
    for path in steps[:-1]:
        path.unlink()
        path.with_suffix(".json").unlink()
    build_report(run, tmp_path / "out", sizes=ReportSizes.quick(), progress=False,
                 sections=["checkpoint_compare", "embedding_evolution"])
    report = load_report_json(tmp_path / "out")
    for key in ("checkpoint_compare", "embedding_evolution"):
        sec = report["sections"][key]
        assert sec["status"] == "omitted" and "single checkpoint" in sec["reason"]


@pytest.mark.slow
def test_a_failing_section_does_not_kill_the_report(tmp_path, tmp_path_factory, monkeypatch):
    def boom(run, config, needs):
        raise RuntimeError("analysis exploded on <b>digit</b> & more")

    # fixed_point's registry entry, with a run that raises
    fixed_point = next(s for s in SECTIONS if s.key == "fixed_point")
    exploding = SimpleNamespace(key=fixed_point.key, title=fixed_point.title, Config=fixed_point.Config,
                                requires=(), uses=(), skip_reason=lambda run: None, run=boom)
    patched = [exploding if s.key == "fixed_point" else s for s in SECTIONS]
    monkeypatch.setattr("analyses.report.SECTIONS", patched)
    html_path = build_report(tiny_add_run(tmp_path_factory.getbasetemp()), tmp_path / "out",
                             sizes=ReportSizes.quick(), progress=False, sections=["model_card", "fixed_point"])
    report = load_report_json(tmp_path / "out")
    sec = report["sections"]["fixed_point"]
    assert sec["status"] == "failed" and report["failed_sections"] == ["fixed_point"]
    assert sec["error"] == "RuntimeError: analysis exploded on <b>digit</b> & more"
    assert "Traceback" in sec["data"]["traceback"]
    html = html_path.read_text()
    assert "section failed: RuntimeError: analysis exploded on &lt;b&gt;digit&lt;/b&gt; &amp; more" in html
    assert "<b>digit</b>" not in html
    assert report["sections"]["model_card"]["status"] == "ok"


@pytest.mark.slow
def test_strings_from_configs_names_and_paths_are_escaped(tmp_path, tmp_path_factory):
    evil = '<script>alert("x")</script>'
    run = tmp_path / "run <img src=x onerror=alert(1)> & co"
    shutil.copytree(tiny_add_run(tmp_path_factory.getbasetemp()), run)
    cfg = json.loads((run / "config.json").read_text())
    cfg["preset"] = evil
    cfg["train"]["schedule_note"] = "\"'><b>bold</b>"
    (run / "config.json").write_text(json.dumps(cfg))
    html_path = build_report(run, tmp_path / "out", sizes=ReportSizes.quick(), progress=False, sections=["model_card"])
    html = html_path.read_text()
    assert evil not in html and H.esc(evil) in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt; &amp; co" in html
    assert "<b>bold</b>" not in html
    # figure JSON cannot close its <script> block either
    for block in re.findall(r'class="figure-data"[^>]*>(.*?)</script>', html, re.S):
        assert "<" not in block and ">" not in block
    report = load_report_json(tmp_path / "out")
    assert report["sections"]["model_card"]["data"]["preset"] == evil  # the JSON keeps the raw value


def test_cli_report_prints_the_path(tmp_path, tmp_path_factory, monkeypatch, capsys):
    from abacus_lab import cli

    calls = {}

    def fake(run, out, compare=None, ablation=None, architectures=None, device="auto", step=None, sizes=None,
             sections=None):
        calls.update(run=run, out=out, compare=compare, ablation=ablation, architectures=architectures,
                     sizes=sizes, sections=sections)
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "index.html").write_text("<html></html>")
        report = {"run": run, "sections": {
            "evaluation": {"title": "Accuracy", "status": "ok", "findings": ["in 100%", "out 0%", "third"]},
            "fixed_point": {"title": "Fixed point", "status": "ok", "findings": ["settles", "second"]},
            "fourier": {"title": "Fourier", "status": "omitted", "findings": []}}}
        (Path(out) / "report.json").write_text(json.dumps(report))
        return Path(out) / "index.html"

    monkeypatch.setattr("analyses.report.build_report", fake)
    assert cli.main(["report", "some/run", "--compare", "other/run", "--out", str(tmp_path / "r")]) == 0
    assert calls == {"run": "some/run", "out": str(tmp_path / "r"), "compare": "other/run", "ablation": None,
                     "architectures": None, "sizes": None, "sections": None}
    printed = capsys.readouterr().out
    # the digest: two evaluation findings, one per other analysis that ran, then the path
    assert "[Accuracy] in 100%" in printed and "[Accuracy] out 0%" in printed and "third" not in printed
    assert "[Fixed point] settles" in printed and "second" not in printed and "Fourier" not in printed
    assert printed.strip().endswith(str(tmp_path / "r" / "index.html"))


def test_report_of_a_missing_run_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        build_report(tmp_path / "nope", tmp_path / "out")
    from abacus_lab import cli

    assert cli.main(["report", str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == 2


def test_unknown_section_is_rejected(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="unknown report sections"):
        build_report(tmp_path, tmp_path / "out", sections=["fixed_points"])


# --------------------------------------------------------------------------- units


def test_escaping_helpers():
    assert H.esc('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
    text = H.script_json({"title": "</script><script>alert(1)</script> & <!--"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"title": "</script><script>alert(1)</script> & <!--"}
    assert H.fmt_value(0.000123) == "0.000123" and H.fmt_value(12345) == "12,345" and H.fmt_value(None) == "-"


def test_section_html_shows_status_and_escapes():
    sec = {"key": "k", "title": "T<1>", "status": "failed", "error": "E<x>", "findings": ["a<b"], "elapsed_s": 1.0}
    out = H.section_html(sec, "")
    assert "section failed: E&lt;x&gt;" in out and "T&lt;1&gt;" in out and "<li>a&lt;b</li>" in out
    sec = {"key": "k", "title": "T", "status": "omitted", "reason": "no <carry>", "findings": []}
    assert "Omitted: no &lt;carry&gt;" in H.section_html(sec, "")


def test_every_registered_analysis_is_a_section_with_typed_sizes():
    keys = [a.key for a in ANALYSES]
    assert [s.key for s in SECTIONS] == ["model_card", "evaluation", *keys, "ablation", "architectures"]
    for analysis in ANALYSES:
        config = ReportSizes().analyses[analysis.key]
        assert dataclasses.is_dataclass(config) and isinstance(config, analysis.Config)
        with pytest.raises(dataclasses.FrozenInstanceError):
            config.__setattr__(dataclasses.fields(config)[0].name, 0)


def test_evaluation_findings_from_numbers():
    data = {
        "settings": {"n_loops": 4, "decoding": {"label": "4 loops"}},
        "grid": {"trained_digits": [1, 5], "digits_a": list(range(1, 11)), "digits_b": list(range(1, 11)),
                 "in_distribution_exact_match": 0.987, "out_of_distribution_exact_match": 0.42, "n_per_cell": 10},
        "lengths": {"lengths": [1, 2, 3, 4, 5, 6, 7], "exact_match": [1.0, 1.0, 0.99, 0.95, 0.93, 0.5, 0.1],
                    "trained_max": 5, "n_per_length": 10},
        "loops": {"loops": [1, 2, 4, 8], "trained_loops": 4,
                  "sets": {"in_distribution": {"exact_match": [0.0, 0.3, 0.98, 0.97], "n": 64}}},
        "carry": {"buckets": [{"bucket": "0", "exact_match": 1.0}, {"bucket": "1", "exact_match": 0.9},
                              {"bucket": "2", "exact_match": 0.8}, {"bucket": "5+", "exact_match": 0.5}]},
    }
    out = F.evaluation(EvalReport.from_dict(data, partial=True))
    assert 2 <= len(out) <= 4
    # every sentence names its sample and its loops (issue 37: no bullet said which)
    assert out[0] == ("Exact match is 99% on operands of 1-5 digits (the trained range) and 42% beyond it, "
                      "up to 10 digits (2.0x the trained length) (n=10 per digit-count cell, 4 loops).")
    assert "first drops below 50% at 7 digits: the model extrapolates to 6 digits, 1.2x the trained 5" in out[1]
    assert out[1].endswith("(n=10 per length, 4 loops).")
    assert "(n=64, teacher-forced at fixed loop counts)" in out[2]
    assert "peaks at 4 loops (98%), the trained depth; running 8 loops gives 97% (accuracy holds" in out[2]
    assert "costs about 10.0 points" in out[3] and out[3].endswith("4 loops).")


def test_summary_names_the_samples_and_the_failures_in_and_out_of_distribution():
    from analyses.report.summary import summary_sentences

    def case(name, answer, expected, inside, passed):
        return {"group": "carry_chain", "name": name, "kind": "correct", "in_distribution": inside, "passed": passed,
                "expected": [expected], "answers": [answer], "correct": [passed]}

    data = {
        "task": {"name": "addition"}, "settings": {"n_loops": 6, "decoding": {"label": "6 loops"}},
        "grid": {"trained_digits": [1, 2], "digits_a": [1, 2, 3], "digits_b": [1, 2, 3], "n_per_cell": 10,
                 "exact_match": [[1.0, 1.0, 0.9], [1.0, 1.0, 0.8], [0.7, 1.0, 0.5]],
                 "in_distribution_exact_match": 1.0, "out_of_distribution_exact_match": 0.78},
        "edge_cases": {"cases": [case("99+1", "90", "100", True, False), case("9+1", "10", "10", True, True),
                                 case("999+1", "900", "1000", False, False)], "by_group": {}, "pass_rate": 1 / 3,
                       "lengths": [1, 2, 3]},
    }
    out = summary_sentences(EvalReport.from_dict(data, partial=True))
    assert out[0] == ("In distribution (operands of 1-2 digits, the trained range), exact match is 100% on 40 problems "
                      "(4 digit-count cells of n=10); out of distribution (the longer operand of 3 digits) it is 78% on 50 "
                      "problems (5 cells). Answers are read with 6 loops.")
    assert out[-1] == ("Known failures: 1 of 2 in-distribution edge cases fail (99+1 gives 90, not 100); 1 of 1 edge "
                       "cases beyond the trained lengths fail (999+1 gives 900, not 1000); the weakest grid cell, "
                       "operands of 3 and 3 digits, is at 50% (n=10) (greedy decoding, 6 loops).")


def test_fixed_point_findings_lock_in_and_chain():
    data = {
        "trained_loops": 4, "horizon": 16, "settings": {"halt_tol": 0.03},
        "lock_in": {"by_digit": [{"digit": 0, "n": 10, "median": 2.0, "locked_fraction": 1.0},
                                 {"digit": 1, "n": 10, "median": 5.0, "locked_fraction": 0.9}],
                    "slope_loops_per_link": 1.04, "slope_pvalue": 2e-9},
        "steps": {"first_loop_below": {"all": {"0.03": 7}}},
        "behaviour": {"overall": "converging", "fractions": {"converging": 0.9}, "exact_match_at_trained": 0.99,
                      "exact_match_at_horizon": 0.98, "relative_step_decay_rate": {"median": 0.6}},
    }
    out = fixed_point_findings(from_json(FixedPointSummary, data, partial=True))
    assert out[0].startswith("Answer digits lock in by loop 5") and "adds ~1.04 loops (p = 2e-09" in out[0]
    assert "falls below 0.03 at loop 7" in out[1]
    assert "converging for 90%" in out[2]
    # the demo's old sentence: "each extra link removes ~0.3 loops", read off a slope whose test says noise
    data["lock_in"].update(slope_loops_per_link=-0.31, slope_pvalue=0.42)
    out = fixed_point_findings(from_json(FixedPointSummary, data, partial=True))
    assert "removes" not in out[0] and "no dependence on the carry chain distinguishable from noise" in out[0]
    assert "-0.31 loops per link, p = 0.42" in out[0]


def test_fixed_point_findings_say_when_a_converging_state_loses_the_answer_and_does_not_contract():
    """The demo's old page: "converging for 99% of problems" beside accuracy falling to 1% and
    "0% contract (spectral radius 1.30)", with nothing to reconcile them."""
    data = {
        "trained_loops": 2, "horizon": 8, "settings": {"halt_tol": 0.03},
        "lock_in": {"by_digit": [{"digit": 0, "n": 10, "median": 1.0, "locked_fraction": 1.0}]},
        "steps": {"first_loop_below": {"all": {"0.03": None}}},
        "behaviour": {"overall": "converging", "fractions": {"converging": 0.99}, "exact_match_at_trained": 1.0,
                      "exact_match_at_horizon": 0.01, "relative_step_decay_rate": {"median": 0.8}},
        "contraction": {"at": {"8": {"radius_quantiles": {"median": 1.3}, "contracting_fraction": 0.0}}},
    }
    out = fixed_point_findings(from_json(FixedPointSummary, data, partial=True))
    behaviour = next(f for f in out if f.startswith("Past the trained depth"))
    assert "converging for 99% of problems (its relative step shrinks), but not to the answer" in behaviour
    contraction = next(f for f in out if "spectral radius" in f)
    assert "0% of sampled problems contract" in contraction and "slowing drift, not an attracting" in contraction


def test_findings_of_a_changed_layout_raise_instead_of_emptying_the_section():
    # the findings read a typed result: a head whose layout changed fails where it is typed
    with pytest.raises(TypeError, match="missing 'layer'"):
        from_json(TopHeads, {"alignment": [{"loop": 0}], "carry_source": []})


def test_quick_sizes_are_smaller_than_the_defaults():
    quick, full = ReportSizes.quick(), ReportSizes()
    for name in ("fixed_point", "carry_attention", "checkpoint_compare"):
        assert quick.to_dict()[name]["n_problems"] < full.to_dict()[name]["n_problems"]


# --------------------------------------------------------------------------- shipped runs


def shipped(name: str) -> Path:
    run = SHIPPED / name
    if not (run / "config.json").exists() or not list((run / "checkpoints").glob("step_*.safetensors")):
        pytest.skip(f"{run} is not present (train it with `abacus-interp train --preset {name} --out {run}`)")
    return run


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ["small-add", "extrap-add", "grok-mod113", "grok-mod113-fast"])
def test_report_of_shipped_run(name, tmp_path):
    run = shipped(name)
    html_path = build_report(run, tmp_path / "report", sizes=ReportSizes.fast(), progress=False)
    report = load_report_json(tmp_path / "report")
    assert report["failed_sections"] == [], {k: report["sections"][k]["error"] for k in report["failed_sections"]}
    assert_well_formed(html_path, report)
    status = {k: s["status"] for k, s in report["sections"].items()}
    modular = name.startswith("grok")
    assert status["fourier"] == ("ok" if modular else "omitted")
    assert status["carry_attention"] == ("omitted" if modular else "ok")
    assert status["fixed_point"] == ("omitted" if modular else "ok")
    assert status["carry_wave"] == ("ok" if name == "extrap-add" else "omitted")
    for key, sec in report["sections"].items():
        if sec["status"] == "ok":
            assert 2 <= len(sec["findings"]) <= MAX_FINDINGS, (key, sec["findings"])
    print(f"report of {run}: {report['timing']['total_s']:.1f} s; per section: "
          + ", ".join(f"{k} {v:.1f}" for k, v in report["timing"]["sections"].items()))


def test_the_summary_opens_with_how_far_past_its_training_a_model_goes():
    """Issue 38: the demo adder's report opens with what it extrapolates to."""
    from analyses.report.summary import summary_sentences

    data = {
        "task": {"name": "addition"}, "settings": {"n_loops": 6, "decoding": {"label": "adaptive loops"}},
        "grid": {"trained_digits": [1, 5], "digits_a": [1, 5], "digits_b": [1, 5], "n_per_cell": 10,
                 "exact_match": [[1.0, 1.0], [1.0, 1.0]], "in_distribution_exact_match": 1.0,
                 "out_of_distribution_exact_match": None},
        "lengths": {"lengths": [1, 5, 15, 50, 125], "exact_match": [1.0, 1.0, 1.0, 0.99, 0.96], "trained_max": 5,
                    "n_per_length": 25},
    }
    out = summary_sentences(EvalReport.from_dict(data, partial=True))
    assert out[0] == ("Far past its training (operands of up to 5 digits), exact match is 99% at 50 digits (10x) and "
                      "96% at 125 digits (25x) (both operands of exactly that length, uniform digits, n=25 each, "
                      "adaptive loops).")
    assert out[1].startswith("In distribution")

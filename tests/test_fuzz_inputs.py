"""Bad input ends in one error line with exit status 2 or in a correct result, and loses
nothing (issue 39): the fixed cases of the fuzzer (benchmarks/fuzz_cli.py) against the CLI
on copies of checkpoints/extrap-add and of a 2-step plain-add run, plus what the fuzzer
cannot judge alone: the messages themselves, a full disk mid-checkpoint, a read-only run.

A representative subset of the fixed cases (`FAST`, about 15 s with the tests below) is not
marked slow; the other fixed cases and 60 random inputs are. `python benchmarks/fuzz_cli.py`
runs 1,000.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import make_tiny_model

from abacus_interp import checkpoints as ckpt
from abacus_interp.errors import UserError
from abacus_lab.cli import main

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not (ROOT / "checkpoints" / "extrap-add" / "config.json").exists(),
                                reason="checkpoints/extrap-add is not in this checkout")


def _load_fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_cli", ROOT / "benchmarks" / "fuzz_cli.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_cli"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


FUZZ = _load_fuzzer()
# The fixed cases, listed before any run exists (their paths are resolved when they run),
# to name the parameters; each test builds the same list on the real fixtures.
UNBUILT = FUZZ.Fixtures(root=Path("unbuilt"), run=Path("unbuilt/run"), resumable=Path("unbuilt/plain-add"),
                        foreign_weights=Path("unbuilt/w.safetensors"))
FIXED = [(case.category, case.name) for case in FUZZ.fixed_cases(UNBUILT)]

# One or a few cases of every category, chosen to cover each kind of damage once.
FAST = {
    "solve-text": ["solve ''", "solve '١٢+٣'", "solve '1+2\\n3'", "solve '\\udcff+1'", "solve '-5+3'"],
    "solve-numbers": ["solve 5+5 digits", "solve 200000+3 digits", "solve leading zeros"],
    "options": ["eval --step 7", "eval --grid 1..10000000000000000", "eval --loops 1000000000",
                "eval --lengths 10000000000000000000", "eval --seed 18446744073709551616", "eval --json OUT",
                "solve --loops 1000000000", "report --out RUN/config.json", "summary on 'RUN/config.json'",
                "eval on ''"],
    "config-types": ["solve: config model.d_model = '64'", "eval: config model.d_model = 10000000000000000000000000000000000000000",
                     "report: config model.vocab = 5", "summary: config model = []", "solve: config train.readout = 3"],
    "config-file": ["solve: config.json empty", "summary: config.json garbage", "solve: config.json a JSON list",
                    "solve: config.json deep nesting", "summary: config.json a folder"],
    "metrics": ["summary: metrics.jsonl torn line at 100%", "report: metrics.jsonl garbage line at 50%",
                "train resume: metrics.jsonl a list line at 0%", "summary: metrics.jsonl a folder"],
    "checkpoints": ["solve: latest weights missing", "summary: latest weights empty",
                    "summary: latest weights of another model", "report --step: every checkpoint removed",
                    "summary: a stray step name"],
    "train-args": ["a tiny valid run", "seed huge", "max_digits huge", "out under a file"],
    "train-resume": ["train resume: state.json step as text", "train resume: state.safetensors truncated",
                     "train resume: state.safetensors of the weights", "train resume: resumed checkpoint missing"],
    "read-only": ["eval on a read-only run", "train resume in a read-only run"],
    "disk-full": ["train resume, disk full from write 4", "train resume, disk full from write 7",
                  "eval --json, disk full from write 1", "report, disk full from write 1"],
}


def _marks(category: str, name: str):
    return () if name in FAST.get(category, ()) else (pytest.mark.slow,)


def _ascii(text: str) -> str:
    return text.encode("ascii", "backslashreplace").decode()


@pytest.fixture(scope="module")
def fixtures():
    # not tmp_path: the read-only cases run as `nobody` when the tests run as root, and
    # pytest's own folders are closed to other users
    root = Path(tempfile.mkdtemp(prefix="fuzz-inputs-"))
    os.chmod(root, 0o755)
    try:
        yield FUZZ.build_fixtures(root / "fixtures")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def workdir(fixtures):
    folder = fixtures.root.parent / f"case-{os.urandom(4).hex()}"
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def run(case, fixtures, workdir):
    return FUZZ.run_one(case, fixtures, workdir, timeout=120)


def test_fast_names_are_fixed_cases():
    known = set(FIXED)
    assert [(c, n) for c, names in FAST.items() for n in names if (c, n) not in known] == []


@pytest.mark.parametrize("index", [pytest.param(i, id=_ascii(f"{c}: {n}"), marks=_marks(c, n))
                                   for i, (c, n) in enumerate(FIXED)])
def test_fixed_case_ends_cleanly_and_loses_nothing(index, fixtures, workdir):
    case = FUZZ.fixed_cases(fixtures)[index]
    assert (case.category, case.name) == FIXED[index]
    verdict = run(case, fixtures, workdir)
    assert verdict.outcome in ("ok", "error"), f"{verdict.outcome}: {verdict.detail}"
    assert verdict.lost == []


# ------------------------------------------------------------------ the messages


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: ") and "Traceback" not in err, err
    return lines[-1]


@pytest.fixture
def run_copy(fixtures, workdir) -> Path:
    shutil.copytree(fixtures.run, workdir / "run")
    return workdir / "run"


@pytest.fixture
def resumable(fixtures, workdir) -> Path:
    shutil.copytree(fixtures.resumable, workdir / "run")
    return workdir / "run"


def edit_config(run: Path, edit) -> None:
    config = json.loads((run / "config.json").read_text())
    edit(config)
    (run / "config.json").write_text(json.dumps(config))


def test_a_config_value_of_the_wrong_type_names_the_field(run_copy, capsys):
    edit_config(run_copy, lambda c: c["model"].update(d_model="64"))
    assert main(["summary", str(run_copy)]) == 2
    assert one_error_line(capsys.readouterr().err) == "error: ModelConfig.d_model is '64', but it must be an integer"


def test_a_config_section_of_the_wrong_kind_says_to_restore_the_file(run_copy, capsys):
    edit_config(run_copy, lambda c: c.update(task="addition"))
    assert main(["solve", str(run_copy), "1+2"]) == 2
    assert one_error_line(capsys.readouterr().err) == (
        f'error: {run_copy / "config.json"} is not a run config: "task" is a string, not an object; '
        "restore the file, or train the run again")
    (run_copy / "config.json").write_bytes(b'{"task": "\xff"}')
    assert main(["eval", str(run_copy)]) == 2
    assert "is not valid JSON" in one_error_line(capsys.readouterr().err)


def test_a_config_too_big_for_any_tensor_is_refused_before_building(run_copy, capsys):
    edit_config(run_copy, lambda c: c["model"].update(d_mlp=10**40))
    assert main(["summary", str(run_copy)]) == 2
    assert "ModelConfig.d_mlp=10000000000000000000000000000000000000000 is larger than any tensor can be" \
        in one_error_line(capsys.readouterr().err)
    edit_config(run_copy, lambda c: c["model"].update(d_mlp=256, n_layers=3))
    with pytest.raises(ckpt.CheckpointError, match="it holds 1 layers, but the config says n_layers=3"):
        ckpt.load_model(run_copy)


def test_weights_of_another_run_are_refused(run_copy, fixtures, capsys):
    latest = ckpt.list_checkpoints(run_copy)[-1][1]
    shutil.copy(fixtures.foreign_weights, latest)
    assert main(["solve", str(run_copy), "1+2"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {latest} does not match {run_copy / 'config.json'}: its embedding W_E is [14, ")
    assert line.endswith("restore the config, or pass the run these weights belong to")


def test_metrics_lines_that_are_no_rows_are_skipped(run_copy, capsys):
    path = run_copy / "metrics.jsonl"
    good = ckpt.read_metrics(run_copy)
    lines = path.read_bytes().splitlines(keepends=True)
    junk = [b"[1, 2]\n", b'{"loss": 0.1}\n', b'{"step": "ten"}\n', b'{"step": 3, "x": "\xff"}\n', b"\x00\x01\n"]
    path.write_bytes(lines[0] + b"".join(junk) + b"".join(lines[1:]) + b'{"step": 99, "lo')
    assert ckpt.read_metrics(run_copy) == good
    assert main(["summary", str(run_copy)]) == 0
    assert "last evaluation (step 3000)" in capsys.readouterr().out


def test_a_damaged_resume_state_says_how_to_recover_and_changes_nothing(resumable, capsys):
    state = resumable / "resume" / "state.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "step": "two"}))
    before = FUZZ.snapshot(resumable)
    assert main(["train", "--out", str(resumable), "--set", "train.steps=3"]) == 2
    assert one_error_line(capsys.readouterr().err) == (
        f"error: {state} is not a resume state (an object with an integer step >= 0, param_groups, scalars and "
        f"an integer tokens); restore {resumable / 'resume'} from a copy, or train into a new --out")
    assert FUZZ.snapshot(resumable) == before  # config.json is rewritten only once the state has loaded


def test_a_full_disk_during_a_checkpoint_keeps_the_last_one_and_the_run_resumes(resumable, monkeypatch, capsys):
    from safetensors import SafetensorError

    real_save_file = ckpt.save_file

    def disk_fills(tensors, filename, metadata=None):  # what safetensors raises on a real full disk
        real_save_file(tensors, filename, metadata=metadata)
        os.truncate(filename, 100)
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(ckpt, "save_file", disk_fills)
    before = FUZZ.snapshot(resumable)
    assert main(["train", "--out", str(resumable), "--set", "train.steps=4"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("error: No space left on device: ") and "free some disk space" in line
    after = FUZZ.snapshot(resumable)
    # every checkpoint and the resume state as they were, no temporary file left; the
    # metrics only grew (the rows of the steps trained before the failure), and config.json
    # records the new target, as a resume that extends a run does
    rewritten = ("metrics.jsonl", "config.json")
    assert {k: v for k, v in after.items() if k not in rewritten} == \
        {k: v for k, v in before.items() if k not in rewritten}
    assert after["metrics.jsonl"].startswith(before["metrics.jsonl"])
    assert json.loads(after["config.json"])["train"]["steps"] == 4
    monkeypatch.undo()
    assert main(["train", "--out", str(resumable), "--set", "train.steps=4"]) == 0
    assert [s for s, _ in ckpt.list_checkpoints(resumable)][-1] == 4
    assert [r["step"] for r in ckpt.read_metrics(resumable)] == [1, 2, 3, 4]


def test_a_group_write_that_fails_leaves_every_old_file(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    ckpt.atomic_write_all([(first, ckpt._json_writer({"v": 1})), (second, ckpt._json_writer({"v": 1}))])

    def full(tmp):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError) as info:
        ckpt.atomic_write_all([(first, ckpt._json_writer({"v": 2})), (second, full)])
    assert info.value.filename == str(second)
    assert json.loads(first.read_text()) == json.loads(second.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json"]


def test_a_read_only_run_reads_and_refuses_writes_in_one_line(resumable, capsys):
    with FUZZ.read_only(resumable, resumable.parent / "out"):
        assert main(["summary", str(resumable)]) == 0
        capsys.readouterr()
        assert main(["train", "--out", str(resumable), "--set", "train.steps=3"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("error: Permission denied: ") and line.endswith("make it writable, or choose another path")


def test_loop_counts_have_a_ceiling(capsys):
    from abacus_interp.core.config import MAX_LAYERS_AND_LOOPS

    with pytest.raises(UserError, match="a model runs at most 10,000 loops"):
        make_tiny_model(max_loops=MAX_LAYERS_AND_LOOPS + 1)
    with pytest.raises(SystemExit):
        main(["solve", "RUN", "1+2", "--loops", str(10**9)])
    assert "a loop count is at most 10,000" in capsys.readouterr().err


def test_empty_output_paths_are_refused(capsys):
    assert main(["train", "--preset", "plain-add", "--out", ""]) == 2
    assert one_error_line(capsys.readouterr().err) == "error: --out is empty; pass a directory path (a new one is created)"


# ------------------------------------------------------------------ the fuzzer's own judgement


def test_the_fuzzer_counts_a_traceback_and_a_lost_file(fixtures, workdir, monkeypatch):
    def buggy(run_dir):
        raise TypeError("a bug")

    monkeypatch.setattr("abacus_interp.checkpoints.read_metrics", buggy)
    verdict = run(FUZZ.Case("test", "a bug", ["summary", FUZZ.RUN]), fixtures, workdir / "bug")
    assert verdict.outcome == "traceback" and "TypeError" in verdict.detail
    monkeypatch.undo()

    def deletes_metrics(run, out):
        (run / "metrics.jsonl").unlink()
        return contextlib.nullcontext()

    case = FUZZ.Case("test", "loses a file", ["solve", FUZZ.RUN, "12+"], during=deletes_metrics)
    verdict = run(case, fixtures, workdir / "lost")
    assert verdict.outcome == "error" and verdict.lost == ["run/metrics.jsonl gone"]


@pytest.mark.slow
def test_random_inputs_end_cleanly(fixtures, workdir):
    cases = FUZZ.generate(fixtures, n_inputs=len(FIXED) + 60, seed=0)[len(FIXED):]
    verdicts = FUZZ.run_cases(cases, fixtures, workdir, timeout=120, progress=False)
    bad = [f"{v.outcome} {v.case.category}: {v.case.name}: {v.detail} {v.lost}" for v in verdicts
           if v.outcome not in ("ok", "error") or v.lost]
    assert bad == []

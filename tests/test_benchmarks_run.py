"""The benchmarks assert nothing, so nothing else notices when a change to the model breaks one
of them (`bench_model.py` once called an attention layer without its context and crashed at its
third row, found on a GPU machine). The model benchmark is run here end to end at a toy size: it
must finish, pass its own parity check, and print every row of its table."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_benchmark(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow  # a subprocess
def test_the_model_benchmark_runs_every_row_at_a_toy_size():
    out = run_benchmark("bench_model.py", "--threads", "1", "--batch", "2", "--d-model", "32", "--reps", "1",
                        "--warmup", "0")
    assert "plain vs hooked logits: max |difference|" in out
    rows = [line for line in out.splitlines() if line.startswith(("forward,", "train step,", "attention layer"))]
    assert len(rows) == 4, out


@pytest.mark.slow  # a subprocess
def test_the_attention_sink_benchmark_runs_every_row_at_a_toy_size():
    out = run_benchmark("bench_attention_sink.py", "--threads", "1", "--batch", "2", "--reps", "1", "--warmup", "0")
    gap = float(out.split("sink on SDPA vs explicit logits: max |difference| ")[1].split()[0])
    assert gap < 1e-4, out
    rows = [line for line in out.splitlines() if line.startswith("train step")]
    assert len(rows) == 2, out


@pytest.mark.slow  # a subprocess
def test_the_item_comparator_benchmark_runs_every_row_at_a_toy_size():
    out = run_benchmark("bench_item_comparator.py", "--threads", "1", "--batch", "2", "--reps", "1", "--warmup", "0")
    rows = [line for line in out.splitlines() if line.startswith(("train step", "decode"))]
    assert len(rows) == 2, out

"""The notebooks in notebooks/: committed without outputs, and each one executes top to
bottom (nbclient) against the shipped runs in checkpoints/. A notebook whose run is missing
is skipped, naming the run and the command that trains it."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

# notebook -> the shipped runs it reads, the one it opens by default first; a later one is
# passed through ABACUS_INTERP_RUN when the default is not shipped yet
RUNS = {
    "01_quickstart.ipynb": ("small-add",),
    "02_fixed_points.ipynb": ("loop-add",),
    "03_carry_attention.ipynb": ("small-add",),
    "04_embedding_evolution.ipynb": ("small-add",),
    "05_grokking_fourier.ipynb": ("grok-mod113", "grok-mod113-fast"),
    "06_extrapolation.ipynb": ("extrap-add",),
}


def _present(name: str) -> Path | None:
    run = ROOT / "checkpoints" / name
    return run if (run / "config.json").exists() and list((run / "checkpoints").glob("step_*.safetensors")) else None


def test_every_notebook_is_listed():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(RUNS)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_notebook_is_committed_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: clear the outputs before committing"


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(RUNS))
def test_notebook_executes(name, monkeypatch):
    from nbclient import NotebookClient

    present = [run for run in map(_present, RUNS[name]) if run is not None]
    if not present:
        default = RUNS[name][0]
        pytest.skip(f"{name} reads checkpoints/{default}, which is not present "
                    f"(train it with `abacus-interp train --preset {default} --out checkpoints/{default}`)")
    if present[0].name == RUNS[name][0]:
        monkeypatch.delenv("ABACUS_INTERP_RUN", raising=False)  # the shipped run, whatever the caller's shell says
    else:
        monkeypatch.setenv("ABACUS_INTERP_RUN", str(present[0]))
    # the kernel inherits this: tiny models run several times faster on one thread, above
    # all on a shared 2-core machine
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    t0 = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - t0
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    # the figures are really produced (plotly output in at least one cell)
    assert any("application/vnd.plotly.v1+json" in o.get("data", {}) or "text/html" in o.get("data", {})
               for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    print(f"{name}: executed in {elapsed:.1f} s")

"""The notebooks in notebooks/: shipped with the outputs `python notebooks/execute.py` made
from their current code (small, no errors, no plotly.js), a first cell that finds the run
from anywhere, and each one executes top to bottom (nbclient) against the shipped runs in
checkpoints/. A notebook whose run is missing is skipped, naming the run and the command that
trains it."""

from __future__ import annotations

import base64
import importlib.util
import json
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
    "07_multiplication.ipynb": ("extrap-mul",),
    "08_circuits.ipynb": ("extrap-add",),
    "09_sorting.ipynb": ("extrap-sort",),
}


# notebook -> what the execution test sets after the notebook's cell tagged `parameters` (as
# papermill injects parameters): the same code on fewer problems. The shipped outputs are made
# at the notebook's own sizes (`python notebooks/execute.py`).
SMALLER = {
    "06_extrapolation.ipynb": "n_per_row = 8\nn_chains = 8\nn_problems = 16",
    "07_multiplication.ipynb": "n_problems = 16\nn_per_multiplier = 48\nn_far = 12\nn_search = 64",
    "08_circuits.ipynb": "n_pairs = 16\nn_patch_pairs = 8\nn_held_out = 16",
    "09_sorting.ipynb": "n_per_row = 16\nn_reading = 16\nn_pairs = 8\nn_choice = 32\nn_summary = 120",
}


def _present(name: str) -> Path | None:
    run = ROOT / "checkpoints" / name
    return run if (run / "config.json").exists() and list((run / "checkpoints").glob("step_*.safetensors")) else None


def test_every_notebook_is_listed():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(RUNS)


def _executor():
    spec = importlib.util.spec_from_file_location("notebook_executor", NOTEBOOKS / "execute.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(RUNS))
def test_notebook_ships_with_small_outputs_of_its_current_code(name):
    executor = _executor()
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    rerun = f"run `python notebooks/execute.py {name}` to refresh its outputs"
    assert nb.metadata.get("abacus_interp", {}).get("code_sha256") == executor.code_hash(nb), \
        f"{name}: its code changed after its outputs were made; {rerun}"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), f"{name}: {rerun}"
    outputs = [o for cell in code for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum(o.output_type == "stream" and o.name == "stdout" for o in outputs) >= 3
    figures = [o.data[executor.PLOTLY_MIME] for o in outputs if executor.PLOTLY_MIME in o.get("data", {})]
    assert figures, f"{name}: no figure is stored"
    for fig in figures:  # figure JSON only: no page with plotly.js, no theme
        assert len(json.dumps(fig)) <= executor.FIGURE_LIMIT and "template" not in fig.get("layout", {})
    # every figure has its static image beside it, for viewers that do not draw plotly
    drawn = [o for o in outputs if str(o.get("data", {}).get("text/plain", "")).startswith("plotly figure")]
    assert len(drawn) >= len(figures)
    for output in drawn:
        assert base64.b64decode(output.data.get("image/png", ""))[:8] == b"\x89PNG\r\n\x1a\n", \
            f"{name}: a figure without its static image; run `python notebooks/execute.py --images-only {name}`"
    assert not [o for o in outputs if "text/html" in o.get("data", {})]
    # the images are most of it (20-220 kB each); a copy of plotly.js alone would be 3.6 MB
    assert (NOTEBOOKS / name).stat().st_size < 520_000  # 09, the largest, is 451 kB with its pairwise section
    text = json.dumps([o for o in outputs])
    assert str(ROOT) not in text and "site-packages" not in text  # nothing about the machine that ran it


@pytest.mark.parametrize("name", sorted(RUNS))
def test_first_cell_finds_the_run_outside_the_repository(name, tmp_path, monkeypatch, capsys):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    first = next(cell for cell in nb.cells if cell.cell_type == "code")
    run = tmp_path / "my-run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)  # no pyproject.toml here or above
    monkeypatch.setenv("ABACUS_INTERP_RUN", str(run))
    scope: dict = {}
    exec(first.source, scope)
    assert scope["RUN"] == run and capsys.readouterr().out == "run: my-run\n"

    monkeypatch.delenv("ABACUS_INTERP_RUN")
    with pytest.raises(AssertionError, match="start Jupyter inside the abacus-interp repository, or set "
                                             "ABACUS_INTERP_RUN to a run directory"):
        exec(first.source, {})


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
    if name in SMALLER:
        _set_parameters(nb, SMALLER[name])
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


def _set_parameters(nb, assignments: str) -> None:
    """Insert a cell of `assignments` after the notebook's cell tagged `parameters`, each of which
    must assign a name that cell defines (papermill's injected parameters)."""
    tagged = [i for i, cell in enumerate(nb.cells) if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, "one cell tagged `parameters` is needed to run the notebook smaller"
    defined = {line.split("=")[0].strip() for line in nb.cells[tagged[0]].source.splitlines()
               if "=" in line and not line.lstrip().startswith("#")}
    for line in assignments.splitlines():
        assert line.split("=")[0].strip() in defined, f"{line!r}: the parameters cell defines {sorted(defined)}"
    nb.cells.insert(tagged[0] + 1, nbformat.v4.new_code_cell(assignments))


@pytest.mark.parametrize("name", sorted(SMALLER))
def test_the_smaller_sizes_set_parameters_that_later_cells_read(name):
    """What the execution test sets after a notebook's `parameters` cell: a listed notebook, names
    that cell defines (`_set_parameters` checks), each read by a later code cell, so a size written
    back into the code as a number would not leave the execution test at full size unnoticed."""
    import re

    assert name in RUNS
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    _set_parameters(nb, SMALLER[name])
    injected = next(i for i, cell in enumerate(nb.cells) if "parameters" in cell.metadata.get("tags", [])) + 1
    later = " ".join(cell.source for cell in nb.cells[injected + 1 :] if cell.cell_type == "code")
    for line in SMALLER[name].splitlines():
        parameter = line.split("=")[0].strip()
        read = re.search(rf"\b{parameter}\b(?!\s*=[^=])", later)  # the value, not a keyword of that name
        assert read, f"{name}: no code cell after the parameters reads {parameter}"


def test_the_quickstart_shows_a_figure_within_its_first_five_cells_and_reads_the_loop_that_decides():
    """Notebook 01 reached its first figure in cell 8, and that figure showed loop 3 while small-add
    computes the sum in loop 0 (its logit lens says so)."""
    executor = _executor()
    nb = nbformat.read(NOTEBOOKS / "01_quickstart.ipynb", as_version=4)
    first = next(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
                 and any(executor.PLOTLY_MIME in o.get("data", {}) for o in cell.outputs))
    assert first < 5
    lens = "".join(o.text for o in nb.cells[first].outputs if o.output_type == "stream")
    assert "loop 1 L0 post  correct-digit logit" in lens and "answer digits right 100%" in lens.splitlines()[1]
    prose = " ".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    assert "the first loop computes the sum" in prose and "loop 3" not in prose


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_problem_named_in_the_text_is_the_one_the_next_cell_solves(name):
    """Notebook 03's text said 1999+1 above a cell that solves 19999+1."""
    import re

    cells = nbformat.read(NOTEBOOKS / name, as_version=4).cells
    for text, code in zip(cells, cells[1:], strict=False):
        solved = re.findall(r'from_human\("([^"]+)"\)', code.source) if code.cell_type == "code" else []
        if text.cell_type != "markdown" or not solved:
            continue
        for named in re.findall(r"`(\d+ ?[+*] ?\d+)`", text.source):
            assert named.replace(" ", "") in solved, f"{name}: the text names {named}, the cell solves {solved}"


def test_a_static_image_is_rendered_from_the_figure_json():
    spec = importlib.util.spec_from_file_location("static_images", NOTEBOOKS / "static_images.py")
    images = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(images)
    chromium = images.find_chromium()
    if chromium is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium)")
    import plotly.graph_objects as go

    figure = go.Figure(go.Bar(x=[1, 2, 3], y=[3, 1, 2]), layout={"height": 300}).to_plotly_json()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
        "display_data", data={images.PLOTLY_MIME: figure, "text/plain": "plotly figure"})])])
    assert images.add_static_images(nb, chromium) == 1
    png = base64.b64decode(nb.cells[0].outputs[0].data["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (images.WIDTH, 300)  # the figure's own height
    assert images.add_static_images(nb, chromium) == 0  # an output that has its image keeps it

"""Run the notebooks in place so they ship with their outputs:

    python notebooks/execute.py                      # every notebook
    python notebooks/execute.py 01_quickstart.ipynb  # some

Each runs top to bottom (nbclient) in notebooks/, against the shipped runs in checkpoints/,
on one thread, with this checkout's packages first on the path. Figures are stored as plotly
JSON (the `plotly_mimetype` renderer: no copy of plotly.js in any output) without their theme,
with a PNG of the figure beside it (`static_images.py`, headless Chromium) for viewers that do
not draw plotly, and a text/plain line naming it; a figure whose JSON is over FIGURE_LIMIT
bytes keeps only its image and that line.

    python notebooks/execute.py --images-only NAME   # add the missing images, run nothing tqdm's warning about a missing
ipywidgets is dropped. The metadata records a hash of the code cells, so
tests/test_notebooks.py can tell a notebook whose code changed after its outputs were made.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from static_images import add_static_images, find_chromium  # noqa: E402  (beside this script, not a package)

NOTEBOOKS = Path(__file__).resolve().parent
ROOT = NOTEBOOKS.parent
PLOTLY_MIME = "application/vnd.plotly.v1+json"
FIGURE_LIMIT = 150_000  # bytes of figure JSON kept per output


def code_hash(nb) -> str:
    """sha256 of the code cells' sources, in order: what the stored outputs were made from."""
    code = "\0".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    return hashlib.sha256(code.encode()).hexdigest()


def describe_figure(fig: dict) -> str:
    title = fig.get("layout", {}).get("title", {})
    title = title.get("text") if isinstance(title, dict) else title
    kinds = Counter(trace.get("type", "scatter") for trace in fig.get("data", []))
    traces = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    frames = len(fig.get("frames") or [])
    return f"plotly figure {title!r}: {traces}" + (f", {frames} animation frames" if frames else "")


def shrink_figures(nb) -> None:
    """Give every figure output a text/plain description, drop its theme, and drop the JSON of
    the large ones."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            fig = output.get("data", {}).get(PLOTLY_MIME)
            if fig is None:
                continue
            text = describe_figure(fig)
            # the theme (layout.template) is most of a small figure's JSON: stored figures are
            # drawn in plotly.js's default style, the live notebook in plotly's theme
            fig.get("layout", {}).pop("template", None)
            size = len(json.dumps(fig))
            if size > FIGURE_LIMIT:
                del output["data"][PLOTLY_MIME]
                text += f" (its {size // 1000} kB of JSON are not stored: run the notebook to see it)"
            output["data"]["text/plain"] = text


def drop_environment_notes(nb) -> None:
    """Drop tqdm's warning that ipywidgets is missing: it is about the machine that ran the
    notebook (and names its site-packages path), not about the notebook."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.name == "stderr"
                                                            and "TqdmWarning: IProgress not found" in o.text)]


def execute(path: Path) -> float:
    """Run the notebook at `path` and write it back with its outputs; returns the seconds."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    started = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - started
    add_static_images(nb)  # from the whole figure, theme included, before its JSON is shrunk
    shrink_figures(nb)
    drop_environment_notes(nb)
    nb.metadata["abacus_interp"] = {"code_sha256": code_hash(nb)}
    nbformat.write(nb, path)
    return elapsed


def add_images_only(path: Path) -> int:
    """Add the missing images to a notebook's stored figures without running it (the code
    hash is unchanged: the outputs are the same outputs, with their pictures)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    rendered = add_static_images(nb)
    nbformat.write(nb, path)
    return rendered


def main(names: list[str]) -> int:
    images_only = "--images-only" in names
    names = [n for n in names if n != "--images-only"]
    # the kernel inherits these: the shipped runs, this checkout's code, one thread (tiny
    # models run faster on one), figures as JSON without plotly.js
    os.environ.pop("ABACUS_INTERP_RUN", None)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PLOTLY_RENDERER="plotly_mimetype")
    if find_chromium() is None:  # checked before any notebook runs: its outputs would be lost at the images
        print("error: the static figure images need headless Chromium (Debian: apt-get install chromium)",
              file=sys.stderr)
        return 2
    paths = [NOTEBOOKS / name for name in names] if names else sorted(NOTEBOOKS.glob("*.ipynb"))
    for path in paths:
        if not path.exists():
            print(f"error: {path} does not exist; pass names such as 01_quickstart.ipynb", file=sys.stderr)
            return 2
        if images_only:
            print(f"{path.name}: {add_images_only(path)} images added, {path.stat().st_size // 1000} kB")
        else:
            print(f"{path.name}: executed in {execute(path):.1f} s, {path.stat().st_size // 1000} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

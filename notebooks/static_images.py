"""Static PNG images of notebook figures, rendered by headless Chromium from the figure's own
JSON, stored beside it in the same output (`image/png`), so a notebook read where plotly is
not drawn (a repository page, a static viewer) still shows every figure.

No image library and no network: each figure is written to a page with plotly.js inline
(from the installed plotly package) and Chromium's `--screenshot` saves it. About 2 s a figure.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
from pathlib import Path

PLOTLY_MIME = "application/vnd.plotly.v1+json"
PNG_MIME = "image/png"
WIDTH, DEFAULT_HEIGHT, MAX_HEIGHT = 900, 450, 1400  # pixels; a figure's layout.height wins, up to MAX_HEIGHT
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    return next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)


def render_png(figure: dict, chromium: str) -> bytes:
    """The PNG of one plotly figure (its JSON as a notebook output stores it)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    fig = go.Figure(figure, skip_invalid=True)
    height = min(int(fig.layout.height or DEFAULT_HEIGHT), MAX_HEIGHT)
    fig.update_layout(width=WIDTH, height=height)
    with tempfile.TemporaryDirectory(prefix="abacus-figure-") as tmp:
        page, image = Path(tmp) / "figure.html", Path(tmp) / "figure.png"
        page.write_text(pio.to_html(fig, include_plotlyjs=True, full_html=True, config={"staticPlot": True}))
        result = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-extensions",
             "--disable-background-networking", f"--user-data-dir={tmp}/profile", f"--screenshot={image}",
             f"--window-size={WIDTH},{height}", "--virtual-time-budget=10000", page.as_uri()],
            capture_output=True, timeout=120,
        )
        if result.returncode != 0 or not image.exists():
            raise RuntimeError(f"chromium could not render a figure (exit {result.returncode}): "
                               f"{result.stderr.decode(errors='replace')[-500:]}")
        return image.read_bytes()


def add_static_images(nb, chromium: str | None = None) -> int:
    """Give every output holding a plotly figure a PNG of it (outputs that have one keep it);
    returns how many were rendered. Raises when Chromium is missing: a notebook without its
    images would fail tests/test_notebooks.py."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("static notebook images need headless Chromium (Debian: apt-get install chromium)")
    rendered = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if PLOTLY_MIME in data and PNG_MIME not in data:
                data[PNG_MIME] = base64.b64encode(render_png(data[PLOTLY_MIME], chromium)).decode()
                rendered += 1
    return rendered

"""The ablation and the architecture comparison as registered analyses of the report: the grids
that `abacus-interp ablate` and `abacus-interp compare` wrote, shown when the report is given
their directory (`--ablation DIR`, `--architectures DIR`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

# the sibling modules themselves, not `from . import`: the package's __init__ imports this one
import analyses.report.html as H
from abacus_interp.errors import MissingPathError
from analyses.contract import Result, RunContext

from .result import Built, NoSizes


def _missing_option(directory: Path | None, command: str, option: str) -> str | None:
    if directory is None:
        return f"no --{option} given: run `abacus-interp {command} --out DIR` and pass `--{option} DIR`"
    return None


def _grid_json(directory: Path | None, name: str, command: str, option: str) -> dict[str, Any]:
    """The `name` JSON that `abacus-interp {command}` wrote into the directory passed as
    `--{option}` (the section is skipped, by `skip_reason`, when none was passed)."""
    import json

    if directory is None:
        raise MissingPathError(_missing_option(directory, command, option))
    path = directory / name
    if not path.exists():
        raise MissingPathError(f"{path} does not exist; run `abacus-interp {command} --out {directory}` first")
    return json.loads(path.read_text())


def build_ablation(ctx: RunContext) -> Built:
    from .ablation import ablation_figure
    from .ablation import findings as ablation_findings

    data = _grid_json(ctx.ablation_dir, "ablation.json", "ablate", "ablation")
    rows = [[c["factor"], c["label"], c.get("params"), c.get("train_seconds"),
             *("-" if e is None else f"{100 * e:.0f}%" for e in c["exact_match"])] for c in data["cells"]]
    table = H.grid_table(["factor", "value", "params", "train s", *map(str, data["cells"][0]["lengths"])], rows,
                         caption=f"Exact match by operand length ({data['spec']['description']})")
    return Built(data=data, plots={"ablation": ablation_figure(data)}, tables=table,
                 sentences=ablation_findings(data))


def build_architectures(ctx: RunContext) -> Built:
    from .architectures import findings as architecture_findings
    from .architectures.curves import learning_curves_figure
    from .architectures.summary import (
        accuracy_vs_length_figure,
        accuracy_vs_params_figure,
        label,
    )

    data = _grid_json(ctx.architectures_dir, "comparison.json", "compare", "architectures")
    lengths = data["cells"][0]["lengths"]
    cells = [*data["cells"], *data["seeds"]]

    def name(cell: dict[str, Any]) -> str:
        return label(cell) + (f" seed {cell['seed']}" if cell["seed"] else "")

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    rows = [[name(c), f"{c['params']:,}", c["steps"], c["train_seconds"], f"{c['loss']:.3f}", pct(c["exact_match"]),
             *("-" if e is None else f"{100 * e:.0f}" for e in c["exact_match_by_length"])] for c in cells]
    accuracy = H.grid_table(["model", "params", "steps", "train s", "loss", "exact", *map(str, lengths)], rows,
                            caption=f"Held-out exact match overall and by problem length ({data['spec']['length_unit']}), "
                                    f"% ({data['spec']['description']})")
    # a table of its own: beside the one column per length the accuracy table would not fit the page
    compute_rows = [[name(c), f"{c['params']:,}",
                     "-" if c["compute"] is None else f"{c['compute']['layer_applications_per_step']:.1f}",
                     "-" if c["compute"] is None else f"{c['compute']['train_flops_per_token']:.3g}",
                     f"{c['curve'][-1]['train_flops']:.2g}" if c["curve"] else "-",
                     pct(c["exact_match"]), pct(c["exact_match_carry_balanced"])] for c in cells]
    compute = H.grid_table(["model", "params", "layer applications per step", "train FLOPs/token", "train FLOPs",
                            "exact (uniform)", "exact (carry-balanced)"], compute_rows,
                           caption="Training compute (forward and backward: the backward 2x the forward matmul FLOPs of the "
                                   "loops it runs through) and held-out "
                                   "exact match on the task's own sampler and on carry-balanced problems "
                                   "('-' where the task has no carries)")
    table = accuracy + compute
    figures = {"accuracy_vs_params": accuracy_vs_params_figure(data), "accuracy_vs_length": accuracy_vs_length_figure(data),
               "learning_curves": learning_curves_figure(data)}
    return Built(data=data, plots=figures, tables=table, sentences=architecture_findings(data))


class AblationAnalysis:
    key = "ablation"
    title = "Ablation: what makes it extrapolate"
    Config = NoSizes
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        return _missing_option(run.ablation_dir, "ablate", "ablation")

    def run(self, run: RunContext, config: NoSizes, needs: Mapping[str, Result]) -> Built:
        return build_ablation(run)


class ArchitecturesAnalysis:
    key = "architectures"
    title = "Architectures: looped vs GPT vs LSTM vs ReTran"
    Config = NoSizes
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        return _missing_option(run.architectures_dir, "compare", "architectures")

    def run(self, run: RunContext, config: NoSizes, needs: Mapping[str, Result]) -> Built:
        return build_architectures(run)


ABLATION = AblationAnalysis()
ARCHITECTURES = ArchitecturesAnalysis()

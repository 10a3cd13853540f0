"""Where a comparison's evaluated cells are stored and how their evaluations are read back:
`out/cells/<cell>/evaluation.json`, and `out/cells/<cell>-seed<n>/` for a cell's run at
another seed.

Apart from `compare.py` (the driver, which writes the cells) because both the driver's summary
and `compare_inside` (which picks the winners the driver then reads about) read them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from abacus_interp import checkpoints as ckpt

from .compare_eval import CellEvaluation, cell_curve


def cell_dirs(spec, out: Path) -> list[tuple[Any, Path]]:
    """(contender, directory) of every evaluated cell under out/cells, in the spec's order,
    each cell's first run before its other seeds (ascending). `spec` is a `ComparisonSpec`,
    each contender a `Contender` (compare.py, which imports this module)."""
    found = []
    for contender in spec.contenders:
        seeds = [replace(contender, seed=int(p.name.rsplit("-seed", 1)[1]))
                 for p in (out / "cells").glob(f"{contender.base_cell}-seed*") if p.name.rsplit("-seed", 1)[1].isdigit()]
        for c in [contender, *sorted(seeds, key=lambda c: c.seed)]:
            if (out / "cells" / c.cell / "evaluation.json").exists():
                found.append((c, out / "cells" / c.cell))
    return found


def read_evaluation(cell_dir: Path) -> CellEvaluation:
    """A cell's evaluation.json; one written before learning curves existed gets its curve,
    compute and seed from the metrics.jsonl and config.json beside it (and is rewritten)."""
    evaluation = CellEvaluation.from_dict(json.loads((cell_dir / "evaluation.json").read_text()))
    if evaluation.curve is None and (cell_dir / "metrics.jsonl").exists():
        compute, curve = cell_curve(cell_dir, evaluation.params)
        seed = ckpt.read_run_config(cell_dir)["train"]["seed"]
        evaluation = replace(evaluation, compute=compute, curve=curve, seed=seed)
        ckpt.write_json(cell_dir / "evaluation.json", evaluation.to_dict())
    return evaluation

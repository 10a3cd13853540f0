"""Architecture comparison: train one run per (family, size) on one task and measure exact
match overall, by problem length and against parameter count, the figures of the ReTran
reference (Miller et al., ACL 2025), which compares a recurrent transformer, a GPT and a
multi-layer LSTM on arithmetic expressions, three sizes each.

Every cell is a real run of the project's `train` (resumable), evaluated on held-out problems
(the task's test split, which training never draws) and stored beside the run, so
`run_comparison` on a finished directory only reads.

    abacus-interp compare --spec expressions --sizes S --out runs/expr-compare
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import checkpoints as ckpt
from .compare_summary import FAMILY_LABELS, findings
from .errors import UserError, check_output_dir
from .scoring import score_examples

logger = logging.getLogger(__name__)

SIZES = ("S", "M", "L")


@dataclass(frozen=True)
class Contender:
    family: str  # a key of FAMILY_LABELS
    size: str  # one of SIZES
    overrides: tuple[str, ...]  # `--set` edits that make this family at this size

    @property
    def cell(self) -> str:
        return f"{self.family}-{self.size.lower()}"


@dataclass(frozen=True)
class ComparisonSpec:
    preset: str
    base: tuple[str, ...]  # `--set` edits shared by every cell
    contenders: tuple[Contender, ...]
    # accuracy by problem length (characters of the human problem) for each length here;
    # lengths past the task's trained range are out of distribution
    lengths: tuple[int, ...]
    n_per_length: int = 100
    n_test: int = 1000  # held-out problems of the trained length range for the headline accuracy
    eval_seed: int = 0
    description: str = ""

    def select(self, sizes: tuple[str, ...] | None = None, families: tuple[str, ...] | None = None) -> list[Contender]:
        for what, given, known in (("size", sizes, SIZES), ("family", families, tuple(FAMILY_LABELS))):
            unknown = sorted(set(given or ()) - set(known))
            if unknown:
                raise UserError(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(known)}")
        return [c for c in self.contenders
                if (sizes is None or c.size in sizes) and (families is None or c.family in families)]


def _expressions() -> ComparisonSpec:
    """The reference's grid on its grammar: problems of 8-30 characters, answers of at most
    5, evaluated to 40 characters as its out-of-distribution set. Depths 3/4/6 for every
    family; GPT 32/64/128 wide and ReTran half that, as in the reference. The reference's
    LSTM is 16/32/64 wide with a 4x wider projected cell; this LSTM's cell has no projection,
    so it takes GPT's widths to stay in the same parameter range. The looped model has GPT's
    width and depth with one layer's weights shared across its loops."""

    def sized(family: str, model: dict[str, str]) -> tuple[Contender, ...]:
        out = []
        for size, (width, depth) in zip(SIZES, ((32, 3), (64, 4), (128, 6)), strict=True):
            if family == "retran":
                width //= 2
            shape = {"model.d_model": width}
            if family == "looped":
                shape |= {"model.n_layers": 1, "model.n_loops": depth, "model.max_loops": 4 * depth}
            else:
                shape |= {"model.n_layers": depth, "model.n_loops": 1, "model.max_loops": 1}
            edits = {**model, **shape}
            out.append(Contender(family, size, tuple(f"{k}={v}" for k, v in edits.items())))
        return tuple(out)

    return ComparisonSpec(
        preset="expressions",
        base=(),
        contenders=(
            *sized("looped", {"model.family": "looped"}),
            *sized("gpt", {"model.family": "looped"}),
            *sized("lstm", {"model.family": "lstm", "model.positional": "none"}),
            *sized("retran", {"model.family": "retran"}),
        ),
        lengths=tuple(range(8, 41)),
        n_per_length=100,
        n_test=1000,
        description="looped vs GPT vs LSTM vs ReTran on the reference's expression grammar "
                    "(8-30 characters trained, 31-40 out of distribution)",
    )


SPECS = {"expressions": _expressions}


def get_spec(name: str) -> ComparisonSpec:
    if name not in SPECS:
        raise UserError(f"unknown comparison {name!r}; choose one of {', '.join(SPECS)}")
    return SPECS[name]()


def evaluate_cell(model, task, spec: ComparisonSpec) -> dict[str, Any]:
    """Exact match on `n_test` held-out problems of the trained lengths, and on
    `n_per_length` held-out problems of each length in `spec.lengths` (None where a length
    does not fit the model). Every set is seeded, so each cell sees the same problems."""
    if task.length_range is None:
        raise UserError(f"task {task.name!r} declares no problem-length range; a comparison "
                         "by length needs one (e.g. expressions with grammar='reference')")
    test = task.sample(spec.n_test, random.Random(spec.eval_seed), split="test")
    trained_max = task.length_range[1]
    by_length: list[float | None] = []
    for length in spec.lengths:
        if task.max_sequence_length(max_len=length) > model.cfg.max_seq_len:
            by_length.append(None)
            continue
        rng = random.Random(spec.eval_seed * 1_000 + length)
        # lengths past the trained range were never trained on, so any problem of them is
        # held out (and drawing them from the whole grammar is ten times faster)
        split = "test" if length <= trained_max else None
        examples = task.sample(spec.n_per_length, rng, min_len=length, max_len=length, split=split)
        by_length.append(score_examples(model, examples).exact_match)
    overall = score_examples(model, test)
    return {
        "exact_match": overall.exact_match,
        "loss": overall.loss,  # per answer token: it still separates cells whose exact match is near 0
        "lengths": list(spec.lengths),
        "exact_match_by_length": by_length,
        "trained_lengths": list(task.length_range),
        "n_test": spec.n_test,
        "n_per_length": spec.n_per_length,
        "params": sum(p.numel() for p in model.parameters()),
    }


def run_comparison(
    spec: ComparisonSpec,
    out: str | Path,
    sizes: tuple[str, ...] | None = None,
    families: tuple[str, ...] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Train (or resume) each selected cell under `out/cells/`, evaluate it, and write
    `out/comparison.json` over every evaluated cell there; returns its content."""
    from .training import RunConfig, apply_overrides, get_preset
    from .training.launch import train_run

    out = check_output_dir(out)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    for contender in spec.select(sizes, families):
        cell_dir = out / "cells" / contender.cell
        eval_path = cell_dir / "evaluation.json"
        cfg = apply_overrides(get_preset(spec.preset), [*spec.base, *contender.overrides])
        if eval_path.exists():
            # a finished cell counts only if it is the cell asked for, not one trained with
            # other --set values into the same directory; read back through RunConfig, so a
            # field added since (at its default) is no difference
            saved = RunConfig.from_dict(ckpt.read_run_config(cell_dir)).to_dict()
            if json.loads(json.dumps(saved)) != json.loads(json.dumps(cfg.to_dict())):
                raise UserError(f"{cell_dir} was trained with other settings than this comparison asks for; "
                                 "pass the same --set values, or choose a new --out")
            continue
        started = time.perf_counter()
        train_run(cfg, cell_dir, spec.preset, [*spec.base, *contender.overrides], progress)
        evaluation = evaluate_cell(ckpt.load_model(cell_dir, device="cpu"), cfg.make_task(), spec)
        rows = ckpt.read_metrics(cell_dir)
        evaluation["train_seconds"] = next((r["elapsed_s"] for r in reversed(rows) if "elapsed_s" in r), None)
        evaluation["steps"] = cfg.train.steps
        evaluation["wall_seconds"] = round(time.perf_counter() - started, 1)
        ckpt.write_json(eval_path, evaluation)
        logger.info("comparison cell %s: exact match %.3f", contender.cell, evaluation["exact_match"])
    return summarise(spec, out)


def summarise(spec: ComparisonSpec, out: str | Path) -> dict[str, Any]:
    """`comparison.json` from the evaluated cells under `out/cells/` (in the spec's order)."""
    out = Path(out)
    cells = []
    for contender in spec.contenders:
        eval_path = out / "cells" / contender.cell / "evaluation.json"
        if eval_path.exists():
            cells.append({"family": contender.family, "size": contender.size, "cell": contender.cell,
                          **json.loads(eval_path.read_text())})
    if not cells:
        raise UserError(f"{out}/cells has no evaluated cell; run `abacus-interp compare --out {out}` first")
    data = {"spec": asdict(spec), "cells": cells}
    data["findings"] = findings(data)
    ckpt.write_json(out / "comparison.json", data)
    return json.loads((out / "comparison.json").read_text())  # JSON types, as a later reader sees them

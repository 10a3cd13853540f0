"""Architecture comparison: train one run per (family, size) on one task and measure exact
match overall, by problem length and against parameter count, the figures of the ReTran
reference (Miller et al., ACL 2025), which compares a recurrent transformer, a GPT and a
multi-layer LSTM on arithmetic expressions, three sizes each.

Every cell is a real run of the project's `train` (resumable), evaluated on held-out problems
(compare_eval says which) and stored beside the run with its learning curve against training
FLOPs (abacus_interp.training.compute), so `run_comparison` on a finished directory only reads. A cell can
be trained again at another seed (`cells/<cell>-seed<n>`); the findings then use both runs.

    abacus-interp compare --spec expressions --sizes S --out runs/expr-compare
    abacus-interp compare --spec addition --out runs/add-compare
    abacus-interp compare --spec addition --cells gpt-m,looped-m --seed 1 --out runs/add-compare
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from abacus_interp import checkpoints as ckpt
from abacus_interp.errors import UserError, check_output_dir
from analyses.report.architectures import findings

from .compare_cells import cell_dirs, read_evaluation
from .compare_eval import cell_curve, evaluate_cell
from .compare_inside import inspect_winners, read_inside

logger = logging.getLogger(__name__)

SIZES = ("S", "M", "L")
# The comparison's cell families: the model families, and "gpt", the looped family run once
# with as many unshared layers (the report labels it, analyses.report.architectures.common).
FAMILIES = ("looped", "gpt", "lstm", "retran")


@dataclass(frozen=True)
class Contender:
    family: str  # one of FAMILIES, or any registered model family (core/family_registry.py)
    size: str  # one of SIZES
    overrides: tuple[str, ...]  # `--set` edits that make this family at this size
    seed: int = 0  # train.seed; a seed other than 0 is a second run of the same cell

    @property
    def base_cell(self) -> str:
        return f"{self.family}-{self.size.lower()}"

    @property
    def cell(self) -> str:
        """The cell's directory name: "gpt-m", and "gpt-m-seed1" for its run at train.seed=1."""
        return self.base_cell if self.seed == 0 else f"{self.base_cell}-seed{self.seed}"

    @property
    def edits(self) -> tuple[str, ...]:
        # seed 0 adds no edit, so the first run of a cell is the one trained without --seed
        return self.overrides if self.seed == 0 else (*self.overrides, f"train.seed={self.seed}")


@dataclass(frozen=True)
class ComparisonSpec:
    preset: str
    base: tuple[str, ...]  # `--set` edits shared by every cell
    contenders: tuple[Contender, ...]
    # accuracy by problem length for each length here, in `length_unit`; lengths past the
    # task's trained range are out of distribution
    lengths: tuple[int, ...]
    n_per_length: int = 100
    n_test: int = 1000  # held-out problems of the trained distribution for the headline accuracy
    eval_seed: int = 0
    description: str = ""
    # what a length counts: "characters" of the human problem (a task with a length range)
    # or "digits" of each operand (a task with a digit range); evaluate_cell checks it
    length_unit: str = "characters"
    band: int = 5  # the findings' "short" and "long" bands: the first and last `band` trained lengths

    def select(self, sizes: tuple[str, ...] | None = None, families: tuple[str, ...] | None = None,
               cells: tuple[str, ...] | None = None) -> list[Contender]:
        spec_families = tuple(dict.fromkeys(c.family for c in self.contenders))
        for what, given, known in (("size", sizes, SIZES), ("family", families, spec_families),
                                   ("cell", cells, tuple(c.base_cell for c in self.contenders))):
            unknown = sorted(set(given or ()) - set(known))
            if unknown:
                raise UserError(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(known)}")
        return [c for c in self.contenders
                if (sizes is None or c.size in sizes) and (families is None or c.family in families)
                and (cells is None or c.base_cell in cells)]


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


def _addition() -> ComparisonSpec:
    """The grid where the families separate: loop-add's addition, operands of 1-5 digits in
    the answer-slot format, evaluated by operand digits to 8 (6-8 out of distribution).

    Why addition: in the answer-slot format the model reads placeholders in the answer
    positions, so the whole answer is computed in one forward pass and a carry can only
    travel through depth (layers, or loops); the best family reaches >= 90% exact match
    within minutes on one CPU core, so accuracy, not only loss, ranks the families (on the
    expression grammar every family sat at 2-3%).

    Sizes S (width 32, depth 4) and M (64, 6), 2,000 steps each in one process. The looped
    cell keeps loop-add's recipe (norm_add injection, mix loss over depths 2..4*depth, step
    penalty, noise starts) with one layer looped `depth` times; GPT, LSTM and ReTran run
    `depth` layers once without any of the loop recipe (no input injection, no mix depths,
    no step penalty, no noise start). ReTran is half as wide, as in the reference; LSTM has
    no position signal (its recurrence knows where it is). loop-add's learned Abacus table
    and max_seq_len=36 fit operands of up to 10 digits, so every length 1-8 is scored."""
    sizes = (("S", 32, 4), ("M", 64, 6))
    single = {"model.n_loops": 1, "model.max_loops": 1, "train.progressive": "none", "train.mix_depths": "null",
              "train.step_penalty": "null", "train.init_state_noise": 0.0, "model.input_injection": "none"}
    contenders = []
    for family in FAMILIES:
        for size, width, depth in sizes:
            if family == "looped":
                edits: dict[str, object] = {"model.n_layers": 1, "model.n_loops": depth, "model.max_loops": 4 * depth,
                                            "train.mix_depths": f"[2,{4 * depth}]"}
            else:
                edits = {"model.n_layers": depth, **single}
            if family in ("lstm", "retran"):
                edits["model.family"] = family
            if family == "lstm":
                edits["model.positional"] = "none"
            edits["model.d_model"] = width // 2 if family == "retran" else width
            contenders.append(Contender(family, size, tuple(f"{k}={v}" for k, v in edits.items())))
    return ComparisonSpec(
        preset="loop-add",
        base=("train.processes=1", "train.steps=2000", "train.checkpoint_every=250"),
        contenders=tuple(contenders),
        lengths=tuple(range(1, 9)),
        n_per_length=200,
        n_test=1000,
        description="looped vs GPT vs LSTM vs ReTran on addition in the answer-slot format "
                    "(operands of 1-5 digits trained, 6-8 out of distribution)",
        length_unit="digits",
        band=2,
    )


SPECS = {"expressions": _expressions, "addition": _addition}


def get_spec(name: str) -> ComparisonSpec:
    if name not in SPECS:
        raise UserError(f"unknown comparison {name!r}; choose one of {', '.join(SPECS)}")
    return SPECS[name]()


# How a run was executed, not what it trained: a cell trained in one process is the same cell
# as one trained in two (the same batches, up to the order of floating-point sums).
EXECUTION_FIELDS = ("processes",)


def _check_same_config(cell_dir: Path, cfg) -> None:
    """A cell directory counts only if it holds the cell asked for, not one trained with other
    --set values into the same directory; read back through RunConfig, so a field added since
    (at its default) is no difference, and EXECUTION_FIELDS are no difference either."""
    from abacus_interp.training import RunConfig

    def trained(config: dict) -> dict:
        config = json.loads(json.dumps(config))
        for name in EXECUTION_FIELDS:
            config["train"].pop(name, None)
        return config

    saved = RunConfig.from_dict(ckpt.read_run_config(cell_dir)).to_dict()
    if trained(saved) != trained(cfg.to_dict()):
        raise UserError(f"{cell_dir} was trained with other settings than this comparison asks for; "
                         "pass the same --set values, or choose a new --out")


def _finished(cell_dir: Path, steps: int) -> bool:
    checkpoints = ckpt.list_checkpoints(cell_dir) if (cell_dir / "checkpoints").is_dir() else []
    return bool(checkpoints) and checkpoints[-1][0] >= steps


def run_comparison(
    spec: ComparisonSpec,
    out: str | Path,
    sizes: tuple[str, ...] | None = None,
    families: tuple[str, ...] | None = None,
    progress: bool = True,
    cells: tuple[str, ...] | None = None,
    seed: int = 0,
    look_inside: bool = True,
) -> dict[str, Any]:
    """Train (or resume) each selected cell under `out/cells/` at train.seed=`seed` (a seed
    other than 0 writes `cells/<cell>-seed<seed>`), evaluate it, look inside the best looped
    and GPT cells with the report's sections when `look_inside` (compare_inside), and write
    `out/comparison.json` over every evaluated cell there (see `summarise`); returns its
    content. A cell whose training finished is
    evaluated without training; one already evaluated is only read."""
    from abacus_interp.training import apply_overrides, get_preset
    from abacus_interp.training.launch import train_run

    out = check_output_dir(out)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    for contender in spec.select(sizes, families, cells):
        contender = replace(contender, seed=seed)
        cell_dir = out / "cells" / contender.cell
        eval_path = cell_dir / "evaluation.json"
        edits = [*spec.base, *contender.edits]
        cfg = apply_overrides(get_preset(spec.preset), edits)
        if (cell_dir / "config.json").exists():
            _check_same_config(cell_dir, cfg)
        if eval_path.exists():
            continue
        started = time.perf_counter()
        if not _finished(cell_dir, cfg.train.steps):
            train_run(cfg, cell_dir, progress)
        evaluation = evaluate_cell(ckpt.load_model(cell_dir, device="cpu"), cfg.make_task(), spec)
        compute, curve = cell_curve(cell_dir, evaluation.params)
        rows = ckpt.read_metrics(cell_dir)
        evaluation = replace(
            evaluation, train_seconds=next((r["elapsed_s"] for r in reversed(rows) if "elapsed_s" in r), None),
            steps=cfg.train.steps, wall_seconds=round(time.perf_counter() - started, 1), seed=cfg.train.seed,
            compute=compute, curve=curve)
        ckpt.write_json(eval_path, evaluation.to_dict())
        logger.info("comparison cell %s: exact match %.3f", contender.cell, evaluation.exact_match)
    if look_inside:
        inspect_winners(spec, out)
    return summarise(spec, out)


def summarise(spec: ComparisonSpec, out: str | Path) -> dict[str, Any]:
    """`comparison.json` from the evaluated cells under `out/cells/` (in the spec's order):
    `cells` holds every cell's first run (train.seed 0), `seeds` its runs at other seeds,
    `inside` what the interpretability sections found in the winners (compare_inside), and
    `findings` what the report's `analyses.report.architectures.findings` says of them."""
    out = Path(out)
    cells, seeds = [], []
    for contender, cell_dir in cell_dirs(spec, out):
        entry = {"family": contender.family, "size": contender.size, "cell": contender.cell,
                 **read_evaluation(cell_dir).to_dict()}
        (cells if contender.seed == 0 else seeds).append(entry)
    if not cells:
        raise UserError(f"{out}/cells has no evaluated cell; run `abacus-interp compare --out {out}` first")
    data = {"spec": asdict(spec), "cells": cells, "seeds": seeds, "inside": [asdict(i) for i in read_inside(out)]}
    data = json.loads(json.dumps(data))  # JSON types (lists, not tuples), as findings and a later reader see them
    data["findings"] = findings(data)
    ckpt.write_json(out / "comparison.json", data)
    return json.loads((out / "comparison.json").read_text())

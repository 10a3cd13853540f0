"""Ablations: train one run per variant of a base recipe and measure exact match against
operand length on equal-length problems, the figure McLeish et al. draw for each factor.

One factor at a time: every variant is the base recipe plus its own `--set` edits, so a
cell differs from the baseline in exactly the factor it names. Each cell is a real run of
the project's `train` (resumable: an interrupted ablation picks up where it stopped), and
its evaluation is stored beside it, so `run_ablation` on a finished directory only reads.

    abacus-interp ablate --spec extrapolation --out runs/ablation-extrapolation
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.scoring import score_examples
from abacus_interp.errors import UserError, check_output_dir
from abacus_interp.evaluation.grid import cell_examples, cell_fits
from analyses.report.ablation import findings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Variant:
    factor: str  # the factor this cell varies, e.g. "Abacus offset k"; "baseline" for the base
    label: str  # its value, e.g. "k=16"
    overrides: tuple[str, ...] = ()  # `--set` edits on top of the base recipe


@dataclass(frozen=True)
class AblationSpec:
    preset: str
    base: tuple[str, ...]  # `--set` edits shared by every cell
    variants: tuple[Variant, ...]
    # equal-length evaluation: operands of exactly n digits for n in lengths
    lengths: tuple[int, ...]
    n_per_length: int = 100
    description: str = ""
    # generated answers with each model's default loops (adaptive when it has halt_tol) and
    # planted carry chains (digits, chain) beside the uniform lengths, instead of teacher-forced
    # exact match at the trained loop count: how a looped extrapolator is meant to be used
    generate: bool = False
    chains: tuple[tuple[int, int], ...] = ()

    def cells(self) -> list[Variant]:
        return [Variant("baseline", "baseline"), *self.variants]


def slug(variant: Variant) -> str:
    text = variant.label if variant.factor == "baseline" else f"{variant.factor}-{variant.label}"
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def _extrapolation() -> AblationSpec:
    # Small enough for 2 CPU cores (minutes per cell): <= 4-digit addition, d_model 64, evaluated
    # to 3x the trained length. The baseline has the offsets that extrapolation needs.
    base = ("task.max_digits=4", "model.d_model=64", "model.n_loops=2", "model.max_seq_len=52",
            "model.abacus_max_offset=16", "model.abacus_offset_mode=example", "train.steps=5000",
            "train.progressive=none", "train.lr=3e-3", "train.eval_every=500", "train.checkpoint_every=5000",
            "train.dense_checkpoints=1", "train.dense_until=1")
    return AblationSpec(
        preset="plain-add",
        base=base,
        variants=(
            Variant("Abacus offset k", "k=0", ("model.abacus_max_offset=0",)),
            Variant("Abacus offset k", "k=32", ("model.abacus_max_offset=32",)),
            Variant("loops x layers", "1x1", ("model.n_loops=1",)),
            Variant("loops x layers", "1x4", ("model.n_loops=4",)),
            Variant("input injection", "none", ("model.input_injection=none",)),
            Variant("progressive loss", "mcleish", ("train.progressive=mcleish",)),
            Variant("width", "d_model=128", ("model.d_model=128",)),
            # the baseline recipe again with another seed: how much of a cell's difference
            # from the baseline a seed alone makes (small adders can stall on a plateau)
            Variant("seed", "seed=1", ("train.seed=1",)),
        ),
        lengths=tuple(range(1, 13)),
        n_per_length=100,
        description="one factor at a time around a 4-digit adder with Abacus offsets up to 16; "
                    "equal-length exact match to 3x the trained length",
    )


def _extrapolation_by_loops() -> AblationSpec:
    # around the extrap-add preset (rotary attention on the Abacus index, a window of 1, mix
    # depths 6..24, adaptive loops): each cell drops or changes one of its levers
    no_loop_recipe = ("train.progressive=none", "train.mix_depths=null", "train.step_penalty=null", "train.init_state_noise=0",
                      "model.halt_tol=null")
    return AblationSpec(
        preset="extrap-add",
        base=("train.eval_every=1000", "train.checkpoint_every=3000", "train.dense_checkpoints=1",
              "train.dense_until=1"),
        variants=(
            Variant("positions", "learned Abacus table, offsets to 96",
                    ("model.positional=abacus", "model.rotary=none", "model.abacus_window=null",
                     "model.abacus_max_offset=96", "model.abacus_offset_mode=example")),
            Variant("positions", "rotary, no window", ("model.abacus_window=null",)),
            Variant("positions", "window, no rotary", ("model.rotary=none",)),
            Variant("window", "2", ("model.abacus_window=2",)),
            Variant("loops", "1 loop x 6 layers", ("model.n_loops=1", "model.max_loops=1", "model.n_layers=6",
                                                  *no_loop_recipe)),
            Variant("loop training", "no mix depths", ("train.progressive=none",)),
        ),
        lengths=(5, 10, 20, 50),
        chains=((5, 5), (10, 10), (20, 20)),
        n_per_length=100,
        generate=True,
        description="one lever at a time around extrap-add (operands of up to 5 digits); exact match of "
                    "generated answers, adaptive loops where the model halts, on uniform problems to 10x the "
                    "trained length and on planted carry chains to 4x",
    )


SPECS = {"extrapolation": _extrapolation, "extrapolation-by-loops": _extrapolation_by_loops}


def get_spec(name: str) -> AblationSpec:
    if name not in SPECS:
        raise UserError(f"unknown ablation {name!r}; choose one of {', '.join(SPECS)}")
    return SPECS[name]()


def evaluate_lengths(model, task, lengths, n_per_length: int, seed: int = 0) -> dict[str, Any]:
    """Exact match on equal-length operands; None where the problem does not fit the model."""
    exact: list[float | None] = []
    for n in lengths:
        if not cell_fits(task, n, n, model.cfg.max_seq_len):
            exact.append(None)
            continue
        exact.append(score_examples(model, cell_examples(task, n, n, n_per_length, seed)).exact_match)
    return {"lengths": list(lengths), "exact_match": exact, "n_per_length": n_per_length}


def evaluate_generated(model, task, lengths, chains, n_per_length: int, seed: int = 0) -> dict[str, Any]:
    """Exact match of generated answers (the model's default loops, adaptive when it halts)
    on uniform lengths and planted chains; None where the problem does not fit the model."""
    from abacus_interp.evaluation.extrapolation import length_extrapolation

    def scored(lengths_, chains_):
        digits = lengths_[0] if lengths_ else chains_[0][0]
        if not cell_fits(task, digits, digits, model.cfg.max_seq_len):
            return None
        return length_extrapolation(model, task, lengths_, chains_, n=n_per_length, seed=seed).rows

    uniform = [scored([d], []) for d in lengths]
    planted = [scored([], [chain]) for chain in chains]
    return {
        "lengths": list(lengths),
        "exact_match": [None if r is None else r[0].exact_match for r in uniform],
        "loops_median": [None if r is None else r[0].loops_median for r in uniform],
        "chains": [list(c) for c in chains],
        "chain_exact_match": [None if r is None else r[0].exact_match for r in planted],
        "chain_loops_median": [None if r is None else r[0].loops_median for r in planted],
        "n_per_length": n_per_length,
    }


def run_ablation(spec: AblationSpec, out: str | Path, progress: bool = True) -> dict[str, Any]:
    """Train (or resume) every cell of `spec` under `out/cells/`, evaluate it, and write
    `out/ablation.json` with what the report's `analyses.report.ablation.findings` says of
    the cells; returns its content."""
    from abacus_interp.training import apply_overrides, get_preset
    from abacus_interp.training.launch import train_run

    out = check_output_dir(out)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    results = []
    for variant in spec.cells():
        cell_dir = out / "cells" / slug(variant)
        cfg = apply_overrides(get_preset(spec.preset), [*spec.base, *variant.overrides])
        eval_path = cell_dir / "lengths.json"
        if not eval_path.exists():
            started = time.perf_counter()
            train_run(cfg, cell_dir, progress)
            model = ckpt.load_model(cell_dir)
            if spec.generate:
                lengths = evaluate_generated(model, cfg.make_task(), spec.lengths, spec.chains, spec.n_per_length)
            else:
                lengths = evaluate_lengths(model, cfg.make_task(), spec.lengths, spec.n_per_length)
            rows = ckpt.read_metrics(cell_dir)
            lengths["train_seconds"] = rows[-1].get("elapsed_s") if rows else None
            lengths["params"] = sum(p.numel() for p in model.parameters())
            lengths["wall_seconds"] = time.perf_counter() - started
            ckpt.write_json(eval_path, lengths)
        lengths = json.loads(eval_path.read_text())
        results.append({**asdict(variant), "cell": slug(variant), **lengths})
        logger.info("ablation cell %s: %s", slug(variant), lengths["exact_match"])
    data = {"spec": {**asdict(spec), "trained_max_digits": _trained_digits(spec)}, "cells": results}
    data["findings"] = findings(data)
    ckpt.write_json(out / "ablation.json", data)
    return json.loads((out / "ablation.json").read_text())  # JSON types, as a later reader sees them


def _trained_digits(spec: AblationSpec) -> int:
    """The baseline's longest trained operand length (its task's max_digits)."""
    from abacus_interp.training import apply_overrides, get_preset

    return apply_overrides(get_preset(spec.preset), list(spec.base)).make_task().max_digits

"""Helpers shared by every analysis: resolving what it looks at (model, task, run)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from abacus_interp.checkpoints import load_model, load_task, run_dir_of
from abacus_interp.errors import UserError


@dataclass
class Subject:
    """What an analysis looks at: a model, the task it was trained on, and its run (if any)."""

    model: Any
    task: Any
    run_dir: Path | None


def resolve(model_or_run, task=None, max_loops: int | None = None) -> Subject:
    """Accept a LoopedTransformer (then `task` is required unless the model was loaded from a
    run), a run directory, or a .safetensors checkpoint path."""
    if isinstance(model_or_run, (str, Path)):
        path = Path(model_or_run)
        model = load_model(path, max_loops=max_loops)
        run_dir = run_dir_of(path)
    else:
        model = model_or_run
        ckpt = getattr(model, "checkpoint_path", None)
        run_dir = run_dir_of(ckpt) if ckpt else None
    if task is None:
        if run_dir is None:
            raise UserError("pass task=get_task(...) when analysing a model that was not loaded from a run")
        task = load_task(run_dir)
    return Subject(model=model, task=task, run_dir=run_dir)


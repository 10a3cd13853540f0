"""Helpers shared by every analysis: resolving what it looks at (model, task, run)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from abacus_interp.checkpoints import load_checkpoint, load_task, run_dir_of
from abacus_interp.core.model_base import ArithmeticModel
from abacus_interp.errors import UserError
from abacus_interp.tasks.base import Task


@dataclass
class Subject:
    """What an analysis looks at: a model, the task it was trained on, and its run (if any)."""

    model: ArithmeticModel
    task: Task
    run_dir: Path | None


def resolve(model_or_run: ArithmeticModel | str | Path, task: Task | None = None,
            max_loops: int | None = None) -> Subject:
    """Accept a model (then `task` is required unless the model was loaded from a run), a run
    directory, or a .safetensors checkpoint path."""
    if isinstance(model_or_run, (str, Path)):
        loaded = load_checkpoint(model_or_run, max_loops=max_loops)
        model, run_dir = loaded.model, loaded.run_dir
    else:
        model = model_or_run
        run_dir = run_dir_of(model.checkpoint_path) if model.checkpoint_path else None
    if task is None:
        if run_dir is None:
            raise UserError("pass task=get_task(...) when analysing a model that was not loaded from a run")
        task = load_task(run_dir)
    return Subject(model=model, task=task, run_dir=run_dir)


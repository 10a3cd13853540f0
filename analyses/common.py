"""Helpers shared by every analysis: resolving the subject, JSON-safe results."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from abacus_interp.checkpoints import load_model, load_task


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
        run_dir = path if path.is_dir() else path.parent.parent
    else:
        model = model_or_run
        ckpt = getattr(model, "checkpoint_path", None)
        run_dir = Path(ckpt).parent.parent if ckpt else None
    if task is None:
        if run_dir is None:
            raise ValueError("pass task=get_task(...) when analysing a model that was not loaded from a run")
        task = load_task(run_dir)
    return Subject(model=model, task=task, run_dir=run_dir)


def jsonable(obj: Any) -> Any:
    """Tensors, arrays and numpy scalars to plain Python; NaN/inf to None (JSON has neither)."""
    if isinstance(obj, torch.Tensor):
        return jsonable(obj.detach().cpu().tolist())
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        value = float(obj)
        return value if math.isfinite(value) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj

"""Run directories, checkpoint series and exact-resume state. No pickle anywhere.

    RUN/config.json                              model + task + training config
    RUN/metrics.jsonl                            one JSON object per logged step
    RUN/checkpoints/step_0000100.safetensors     weights
    RUN/checkpoints/step_0000100.json            sidecar: step, tokens, metrics
    RUN/resume/state.safetensors + state.json    optimizer state and step, for exact resume

Every write goes to a temporary file in the same directory and is renamed into place, so a
crash leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .core.config import ModelConfig
from .errors import UserError

if TYPE_CHECKING:
    from .core.model_base import ArithmeticModel

logger = logging.getLogger(__name__)

T = TypeVar("T")

STEP_FILE = re.compile(r"^step_(\d+)\.safetensors$")


class CheckpointError(UserError, RuntimeError):
    """A checkpoint or run directory that cannot be read (missing, truncated, corrupt); the
    message names the file. A UserError: the fix is another path or a retrained file."""


def atomic_write(path: Path, write) -> None:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it onto `path`: a
    reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; checkpoints are meant to be shared
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json(path: Path, obj) -> None:
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2)

    atomic_write(Path(path), write)


def read_json(path: Path) -> dict:
    path = Path(path)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError as e:
        raise CheckpointError(f"{path} does not exist") from e
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); the file is corrupt or truncated") from e


def save_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    atomic_write(Path(path), lambda tmp: save_file(tensors, tmp, metadata=metadata))


def load_tensors(path: Path) -> dict[str, torch.Tensor]:
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path} does not exist")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(
            f"cannot read checkpoint {path}: {e}. The file is truncated or corrupt; "
            "delete it to fall back to the previous checkpoint of the run"
        ) from e


def step_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step_{step:07d}.safetensors"


def save_checkpoint(run_dir: Path, model, step: int, info: dict) -> Path:
    """Weights as safetensors plus a JSON sidecar (step, tokens seen, metrics). A module
    wrapped by `torch.compile(model)` is saved as the model it wraps, so the keys never
    carry the wrapper's `_orig_mod.` prefix."""
    path = step_path(run_dir, step)
    model = getattr(model, "_orig_mod", model)
    save_tensors(path, dict(model.state_dict()), metadata={"step": str(step)})
    write_json(path.with_suffix(".json"), {"step": step, **info})
    return path


def run_dir_of(path: str | Path) -> Path:
    """The run directory of a run directory (itself) or of one of its checkpoint files
    (RUN/checkpoints/step_*.safetensors)."""
    path = Path(path)
    return path if path.is_dir() else path.parent.parent


def subsample_evenly(items: Sequence[T], max_items: int | None) -> list[T]:
    """At most `max_items` of `items`, evenly spaced by index, always keeping the first and
    the last (evolution analyses need both ends of training)."""
    if max_items is None or len(items) <= max_items:
        return list(items)
    if max_items < 2:
        raise UserError(f"max_checkpoints={max_items}: keep at least 2 (the first and the last checkpoint)")
    keep = sorted({round(i) for i in np.linspace(0, len(items) - 1, max_items)})
    return [items[i] for i in keep]


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint of a run, ascending by step."""
    folder = Path(run_dir) / "checkpoints"
    if not folder.is_dir():
        raise CheckpointError(f"{folder} does not exist: is {run_dir} a run directory made by `train`?")
    found = [(int(m.group(1)), folder / name) for name in os.listdir(folder) if (m := STEP_FILE.match(name))]
    return sorted(found)


def read_run_config(run_dir: str | Path) -> dict:
    return read_json(Path(run_dir) / "config.json")


def load_task(run_dir: str | Path):
    """The task a run was trained on, rebuilt from its config.json."""
    from .tasks import task_from_config

    return task_from_config(read_run_config(run_dir)["task"])


def read_metrics(run_dir: str | Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    with open(path) as f:
        for line_no, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                # a crash mid-append can leave a partial last line; earlier rows are intact
                logger.warning("skipping unreadable line %d of %s", line_no, path)
    return rows


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A model read from a checkpoint, with where it came from."""

    model: ArithmeticModel  # in eval mode, on the device asked for
    config: ModelConfig  # the model's config (max_loops as asked for)
    path: Path  # the .safetensors file read
    run_dir: Path  # the run it belongs to (config.json, metrics, the other checkpoints)
    step: int | None  # the training step, from the file name; None for a file named otherwise


def load_checkpoint(
    path: str | Path,
    max_loops: int | None = None,
    device: str | torch.device = "auto",
    compile: bool | str = False,
) -> LoadedCheckpoint:
    """A model from a `.safetensors` checkpoint or a run directory (its latest checkpoint),
    with its config, file, run and step.

    `max_loops` rebuilds with more hook sets (to run deeper than the stored capacity); hook
    sets hold no parameters, so the weights load unchanged. `device`: "auto" (CUDA when a GPU
    is visible, else the CPU), "cpu", "cuda", ... `compile=True` runs the looped
    block through torch.compile (`LoopedTransformer.compile_loops`); a string names the
    backend, e.g. "aot_eager"."""
    from .core.devices import resolve_device
    from .core.families import build_model

    path = Path(path)
    if path.is_dir():
        checkpoints = list_checkpoints(path)
        if not checkpoints:
            raise CheckpointError(f"{path} has no checkpoints yet")
        run_dir, weights = path, checkpoints[-1][1]
    elif path.suffix == ".safetensors":
        run_dir, weights = run_dir_of(path), path
    else:
        raise CheckpointError(f"{path} is neither a run directory nor a .safetensors checkpoint")
    model_cfg = read_run_config(run_dir)["model"]
    if max_loops is not None:
        model_cfg = {**model_cfg, "max_loops": max_loops}
    cfg = ModelConfig.from_dict(model_cfg)
    model = build_model(cfg)  # the family the config names; "looped" when it names none
    # weights saved from a torch.compile wrapper by other code carry its "_orig_mod." prefix
    state = {key.removeprefix("_orig_mod."): value for key, value in load_tensors(weights).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise CheckpointError(f"{weights} does not match its config: missing {missing}, unexpected {unexpected}")
    model.checkpoint_path = str(weights)
    model = model.to(resolve_device(device)).eval()
    if compile:
        model.compile_loops(compile if isinstance(compile, str) else None)
    step = STEP_FILE.match(weights.name)
    return LoadedCheckpoint(model=model, config=cfg, path=weights, run_dir=run_dir,
                            step=int(step.group(1)) if step else None)


def load_model(
    path: str | Path,
    max_loops: int | None = None,
    device: str | torch.device = "auto",
    compile: bool | str = False,
) -> ArithmeticModel:
    """The model of `load_checkpoint(path, ...)` (same arguments) alone. Its
    `checkpoint_path` names the file it was read from; `load_checkpoint` also gives the run
    directory and the step."""
    return load_checkpoint(path, max_loops=max_loops, device=device, compile=compile).model


# ---------------------------------------------------------------- resume state
def save_resume(run_dir: Path, optimizer: torch.optim.Optimizer, step: int, extra: dict) -> None:
    """Optimizer tensors in safetensors, scalars in JSON. Data and offsets are drawn from
    generators seeded by (seed, rank, step), so no RNG state needs saving."""
    state = optimizer.state_dict()
    tensors, scalars = {}, {}
    for param_id, slots in state["state"].items():
        for slot, value in slots.items():
            key = f"{param_id}.{slot}"
            if torch.is_tensor(value):
                tensors[key] = value
            else:
                scalars[key] = value
    folder = Path(run_dir) / "resume"
    save_tensors(folder / "state.safetensors", tensors)
    write_json(folder / "state.json", {"step": step, "param_groups": state["param_groups"], "scalars": scalars, **extra})


def load_resume(run_dir: Path, optimizer: torch.optim.Optimizer) -> dict:
    folder = Path(run_dir) / "resume"
    meta = read_json(folder / "state.json")
    tensors = load_tensors(folder / "state.safetensors")
    slots: dict[int, dict] = {}
    for key, value in tensors.items():
        param_id, slot = key.split(".", 1)
        slots.setdefault(int(param_id), {})[slot] = value
    for key, value in meta["scalars"].items():
        param_id, slot = key.split(".", 1)
        slots.setdefault(int(param_id), {})[slot] = value
    optimizer.load_state_dict({"state": slots, "param_groups": meta["param_groups"]})
    return meta

"""Run directories, checkpoint series and exact-resume state. No pickle anywhere.

    RUN/config.json                              model + task + training config
    RUN/metrics.jsonl                            one JSON object per logged step
    RUN/checkpoints/step_0000100.safetensors     weights
    RUN/checkpoints/step_0000100.json            sidecar: step, tokens, metrics
    RUN/resume/state.safetensors + state.json    optimizer state and step, for exact resume

Every write goes to a temporary file in the same directory and is renamed into place, so a
crash leaves either the old file or the new one, never half of one; files that belong
together (weights and sidecar, the two resume files) are renamed once all are written.
Reading refuses, as a CheckpointError naming the file, what these writers never write.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Sequence
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
    atomic_write_all([(Path(path), write)])


def atomic_write_all(files: Sequence[tuple[Path, Callable[[str], None]]]) -> None:
    """`atomic_write` of several files that belong together (weights and their sidecar,
    optimizer tensors and their scalars): every temporary file is written before any is
    renamed into place, so a write that fails (a full disk, no permission) leaves all the
    old files, not a new weights file beside an old sidecar. An OSError names the file it
    was writing."""
    written: list[tuple[str, Path]] = []
    try:
        for path, write in files:
            path = Path(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
                os.close(fd)
                written.append((tmp, path))
                write(tmp)
                os.chmod(tmp, 0o644)  # mkstemp creates 0600; checkpoints are meant to be shared
            except OSError as e:
                if e.errno is not None:  # name the file being written, not its temporary name
                    e.filename = str(path)
                raise
            except SafetensorError as e:
                # safetensors reports a failed write as its own error: "... I/O error: No space
                # left on device (os error 28)"; as the OSError it is, it is handled like the others
                code = re.search(r"\(os error (\d+)\)", str(e))
                if code is None:
                    raise
                raise OSError(int(code.group(1)), os.strerror(int(code.group(1))), str(path)) from e
        for tmp, path in written:
            os.replace(tmp, path)
    finally:
        for tmp, _ in written:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _json_writer(obj) -> Callable[[str], None]:
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2)

    return write


def write_json(path: Path, obj) -> None:
    atomic_write(Path(path), _json_writer(obj))


def read_json(path: Path) -> dict:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError as e:
        raise CheckpointError(f"{path} does not exist") from e
    # bytes that are not UTF-8, and nesting deeper than the parser's recursion, are damage too
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); the file is corrupt or truncated") from e
    except OSError as e:  # a folder in its place, a file where a folder should be, no permission
        raise CheckpointError(f"cannot read {path}: {e.strerror or e}") from e


def save_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    atomic_write(Path(path), _tensors_writer(tensors, metadata))


def _tensors_writer(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> Callable[[str], None]:
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    return lambda tmp: save_file(tensors, tmp, metadata=metadata)


def load_tensors(path: Path, fix: str | None = None) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file; a CheckpointError naming it when it is missing or
    cannot be read, ending in `fix`, what to do (by default, for a checkpoint of a series:
    delete it to fall back to the one before)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path} does not exist" + (f"; {fix}" if fix else ""))
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(
            f"cannot read checkpoint {path}: {e}. The file is truncated or corrupt; "
            f"{fix or 'delete it to fall back to the previous checkpoint of the run'}"
        ) from e


def step_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step_{step:07d}.safetensors"


def checkpoint_at(run_dir: str | Path, step: int) -> Path:
    """The checkpoint file of `step` in a run; a CheckpointError naming the steps it has
    when there is none (`eval --step`, `report --step`)."""
    path = step_path(run_dir, step)
    if not path.exists():
        steps = ", ".join(str(s) for s, _ in list_checkpoints(run_dir)) or "none"
        raise CheckpointError(f"{run_dir} has no checkpoint at step {step}; its steps: {steps}")
    return path


def save_checkpoint(run_dir: Path, model, step: int, info: dict) -> Path:
    """Weights as safetensors plus a JSON sidecar (step, tokens seen, metrics). A module
    wrapped by `torch.compile(model)` is saved as the model it wraps, so the keys never
    carry the wrapper's `_orig_mod.` prefix."""
    path = step_path(run_dir, step)
    model = getattr(model, "_orig_mod", model)
    atomic_write_all([(path, _tensors_writer(dict(model.state_dict()), metadata={"step": str(step)})),
                      (path.with_suffix(".json"), _json_writer({"step": step, **info}))])
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
        raise CheckpointError(f"{folder} does not exist, so {run_dir} is no run directory made by `train`")
    found = [(int(m.group(1)), folder / name) for name in os.listdir(folder) if (m := STEP_FILE.match(name))]
    return sorted(found)


class MissingSectionError(CheckpointError, KeyError):
    """A section that a run's config.json lacks; a KeyError too, for code that catches one."""

    def __str__(self) -> str:  # KeyError's own quotes the message
        return str(self.args[0])


class RunConfigFile(dict):
    """The contents of a run's config.json. A section it lacks (`config["task"]`) is a
    MissingSectionError naming the file, not a bare KeyError; `get` and `in` work as on
    any dict (a run written by other code may have no "train", or no "task")."""

    def __init__(self, data: dict, path: Path):
        super().__init__(data)
        self.path = path

    def __missing__(self, key):
        raise MissingSectionError(f"{self.path} has no {key!r} section; restore the file, or train the run again")


def read_run_config(run_dir: str | Path) -> RunConfigFile:
    """RUN/config.json: an object whose sections "task" (an object with the task's "name"),
    "model" and "train" are objects. A file of another shape is a CheckpointError naming
    it, so no reader meets a list or a string where it expects a section; the values inside
    are checked where they are used (`ModelConfig.from_dict`, `task_from_config`,
    `RunConfig.from_dict`)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"{run_dir} is not a run directory; pass a folder made by `abacus-interp train`")
    path = run_dir / "config.json"
    config = read_json(path)
    problem = _run_config_problem(config)
    if problem is not None:
        raise CheckpointError(f"{path} is not a run config: {problem}; restore the file, or train the run again")
    return RunConfigFile(config, path)


def _json_kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _run_config_problem(config) -> str | None:
    if not isinstance(config, dict):
        return f"it holds {_json_kind(config)}, not an object"
    for section in ("task", "model", "train"):
        if section in config and not isinstance(config[section], dict):
            return f'"{section}" is {_json_kind(config[section])}, not an object'
    if "task" in config and not isinstance(config["task"].get("name"), str):
        return f'"task" needs the task\'s "name" as a string, got {_json_kind(config["task"].get("name"))}'
    return None


def load_task(run_dir: str | Path):
    """The task a run was trained on, rebuilt from its config.json."""
    from .tasks import task_from_config

    return task_from_config(read_run_config(run_dir)["task"])


def read_metrics(run_dir: str | Path) -> list[dict]:
    """The rows of RUN/metrics.jsonl: per line, one JSON object of numbers (or null) with an
    integer "step". A line that is not one is skipped with a warning (a crash mid-append
    leaves a partial last line; the rows around it are intact), so every reader can compare
    and format the values. Read as bytes, line by line, so a line that is not UTF-8 costs
    that line, not the file."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    try:
        lines = path.read_bytes().splitlines()
    except OSError as e:  # a folder in its place, no permission
        raise CheckpointError(f"cannot read {path}: {e.strerror or e}") from e
    rows = []
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            row = None
        if isinstance(row, dict) and type(row.get("step")) is int and all(
                value is None or type(value) in (int, float) for value in row.values()):
            rows.append(row)
        else:
            logger.warning("skipping line %d of %s: not a JSON object of numbers with an integer step", line_no, path)
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

    run_dir, weights = checkpoint_file(path)
    model_cfg = read_run_config(run_dir)["model"]
    if max_loops is not None:
        model_cfg = {**model_cfg, "max_loops": max_loops}
    cfg = ModelConfig.from_dict(model_cfg)
    state = read_state(weights)
    # before building: a config.json whose sizes the weights contradict (another run's
    # config, an edited d_model or n_layers) is refused without building a model of its sizes
    problem = _size_mismatch(cfg, state)
    if problem is not None:
        raise CheckpointError(f"{weights} does not match {run_dir / 'config.json'}: {problem}; "
                              "restore the config, or pass the run these weights belong to")
    try:
        model = build_model(cfg)  # the family the config names; "looped" when it names none
    except (RuntimeError, TypeError, OverflowError, MemoryError) as e:
        # a config that passed its checks but names sizes no tensor can have (a d_mlp of
        # 10**40 overflows torch's sizes, 10**12 its memory): the file, not the library
        reason = " ".join(str(e).split())[:200]
        raise CheckpointError(f"cannot build the model {run_dir / 'config.json'} describes ({type(e).__name__}: "
                              f"{reason}); restore the config, or train the run again") from e
    load_state_into(model, state, weights)
    model.checkpoint_path = str(weights)
    model = model.to(resolve_device(device)).eval()
    if compile:
        model.compile_loops(compile if isinstance(compile, str) else None)
    step = STEP_FILE.match(weights.name)
    return LoadedCheckpoint(model=model, config=cfg, path=weights, run_dir=run_dir,
                            step=int(step.group(1)) if step else None)


def checkpoint_file(path: str | Path) -> tuple[Path, Path]:
    """(run directory, weights file) of a run directory (its latest checkpoint) or of one
    `.safetensors` checkpoint; a CheckpointError saying which of the two it is not."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path} does not exist (no such file or directory)")
    if path.is_dir():
        checkpoints = list_checkpoints(path)
        if not checkpoints:
            raise CheckpointError(f"{path} has no checkpoints yet")
        return path, checkpoints[-1][1]
    if path.suffix != ".safetensors":
        raise CheckpointError(f"{path} is neither a run directory nor a .safetensors checkpoint")
    return run_dir_of(path), path


def shape_mismatches(expected: dict[str, torch.Tensor], state: dict[str, torch.Tensor]) -> list[str]:
    """"KEY is [..], not [..]" for each tensor of `state` whose shape is not `expected`'s."""
    return [f"{key} is {list(value.shape)}, not {list(expected[key].shape)}"
            for key, value in state.items() if key in expected and value.shape != expected[key].shape]


def read_state(weights: Path, fix: str | None = None) -> dict[str, torch.Tensor]:
    """The tensors of a checkpoint file by state_dict name (weights saved from a
    torch.compile wrapper by other code carry its "_orig_mod." prefix, dropped here); `fix`
    as in `load_tensors`."""
    tensors = load_tensors(weights, fix)
    return {key.removeprefix("_orig_mod."): value for key, value in tensors.items()}


def load_state_into(model, state: dict[str, torch.Tensor], weights: Path) -> None:
    """Load `state` (read from `weights`) into `model`; a CheckpointError naming the file
    when its tensors are not the model's: missing, unexpected or of another shape."""
    other_shapes = shape_mismatches(model.state_dict(), state)
    if other_shapes:
        raise CheckpointError(f"{weights} does not match its config: {', '.join(other_shapes)}; "
                              "is it a checkpoint of another run?")
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise CheckpointError(f"{weights} does not match its config: missing {missing}, unexpected {unexpected}")


def _size_mismatch(cfg: ModelConfig, state: dict[str, torch.Tensor]) -> str | None:
    """What the embedding and the layer count of `state` say against `cfg`, or None."""
    embedding = state.get("W_E")
    if embedding is not None and tuple(embedding.shape) != (cfg.d_vocab, cfg.d_model):
        return (f"its embedding W_E is {list(embedding.shape)}, but the config's vocabulary and d_model "
                f"make it [{cfg.d_vocab}, {cfg.d_model}]")
    layers = {int(m.group(1)) for key in state if (m := re.match(r"blocks\.(\d+)\.", key))}
    if layers and len(layers) != cfg.n_layers:
        return f"it holds {len(layers)} layers, but the config says n_layers={cfg.n_layers}"
    return None


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
def save_resume(run_dir: Path, optimizer: torch.optim.Optimizer, step: int, extra: dict,
                live_weights: dict[str, torch.Tensor] | None = None) -> None:
    """Optimizer tensors in safetensors, scalars in JSON. Data and offsets are drawn from
    generators seeded by (seed, rank, step), so no RNG state needs saving. `live_weights`:
    the weights the optimizer steps, where the checkpoint holds others (their average,
    `train.average_from`), written with the rest as `live_weights.safetensors`."""
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
    # together: a state.json of one step beside the optimizer tensors of another would resume wrongly
    files = [(folder / "state.safetensors", _tensors_writer(tensors)),
             (folder / "state.json", _json_writer({"step": step, "param_groups": state["param_groups"],
                                                   "scalars": scalars, **extra}))]
    if live_weights is not None:
        files.append((live_weights_path(run_dir), _tensors_writer(live_weights)))
    atomic_write_all(files)


def live_weights_path(run_dir: Path) -> Path:
    """Where `save_resume` keeps the live weights of a run whose checkpoints hold an average."""
    return Path(run_dir) / "resume" / "live_weights.safetensors"


def load_resume(run_dir: Path, optimizer: torch.optim.Optimizer) -> dict:
    """Load the resume state `save_resume` wrote into `optimizer` and return state.json's
    contents. Files that are not what `save_resume` writes, or that belong to another
    optimizer, are a CheckpointError naming them: resuming from them would train wrongly."""
    folder = Path(run_dir) / "resume"
    meta_path = folder / "state.json"
    meta = read_json(meta_path)
    fix = f"restore {folder} from a copy, or train into a new --out"
    if not (isinstance(meta, dict) and type(meta.get("step")) is int and meta["step"] >= 0
            and isinstance(meta.get("param_groups"), list) and isinstance(meta.get("scalars"), dict)
            and type(meta.get("tokens", 0)) is int):
        raise CheckpointError(f"{meta_path} is not a resume state (an object with an integer step >= 0, "
                              f"param_groups, scalars and an integer tokens); {fix}")
    tensors = load_tensors(folder / "state.safetensors", fix)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    slots: dict[int, dict] = {}
    for source, items in ((folder / "state.safetensors", tensors), (meta_path, meta["scalars"])):
        for key, value in items.items():
            m = re.fullmatch(r"(\d+)\.(\w+)", key)
            param_id = int(m.group(1)) if m else None
            if param_id is None or param_id >= len(params) or (
                    torch.is_tensor(value) and value.dim() > 0 and value.shape != params[param_id].shape):
                raise CheckpointError(f"{source} holds {key!r}, which is no slot of this run's optimizer "
                                      f"(its {len(params)} parameters); {fix}")
            slots.setdefault(param_id, {})[m.group(2)] = value
    try:
        optimizer.load_state_dict({"state": slots, "param_groups": meta["param_groups"]})
    except (ValueError, KeyError, TypeError) as e:  # torch's own check of the groups against the optimizer's
        raise CheckpointError(f"{meta_path} does not fit this run's optimizer ({e}); {fix}") from e
    return meta

"""What a training process keeps beside the model: where the run starts (a new run directory
or the resume state), the tokens seen, the metrics file, the checkpoints it writes and the
divergence check before each; the training loop (`loop.py`) calls these between its phases.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import torch

# the module itself, not `from . import distributed`: the package's __init__ imports loop.py
import abacus_interp.training.distributed as dist_utils

from .. import checkpoints as ckpt
from ..core.config import ModelConfig
from ..core.masks import head_kinds
from ..errors import UserError
from .averaging import WeightAverage
from .config import RunConfig
from .growth import grow_state, head_placement

logger = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the run directory keeps the last good checkpoint."""


class DivergenceWatch:
    """The losses and gradient norms of the steps since the last check, left on the device:
    noting one costs no device work and no wait. `check` reads them back together (one wait)
    and raises at the first that is not finite."""

    def __init__(self):
        self.pending: list[tuple[int, torch.Tensor, torch.Tensor]] = []  # (step, loss, gradient norm)

    def note(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        self.pending.append((step, loss.detach(), grad_norm.detach()))

    def check(self, world, last_good_step: int, run_dir: Path) -> None:
        """Raise TrainingDiverged on every rank when any rank noted a non-finite step."""
        first_bad = None
        if self.pending:
            losses = torch.stack([loss.double() for _, loss, _ in self.pending])  # [steps]
            norms = torch.stack([norm.double().to(losses.device) for _, _, norm in self.pending])  # [steps]
            finite = (losses.isfinite() & norms.isfinite()).tolist()
            if not all(finite):
                first_bad = finite.index(False)
                step, loss, grad_norm = self.pending[first_bad][0], float(losses[first_bad]), float(norms[first_bad])
            self.pending.clear()
        if dist_utils.sum_across_ranks(float(first_bad is not None), world) == 0:
            return
        if first_bad is None:
            what = "a non-finite loss or gradient norm on another rank"
        elif not math.isfinite(loss):
            what = f"loss is {loss} at step {step}"
        else:
            what = f"gradient norm is {grad_norm} at step {step} (loss {loss})"
        raise TrainingDiverged(
            f"{what}; stopped without saving it or any later step. The last good checkpoint is "
            f"step {last_good_step} in {run_dir / 'checkpoints'}. Lower train.lr, set train.grad_clip, "
            "or use train.loss_dtype=float64, then train into a new --out"
        )



def start_or_resume(run_dir: Path, cfg: RunConfig, model, optimizer, is_writer: bool,
                    average: WeightAverage) -> tuple[int, int]:
    """Write config.json for a new run (started at train.init_from's weights when it names
    some), or restore weights, optimizer and the weights' running mean (`average`) to resume.
    The step and tokens seen."""
    config_path = run_dir / "config.json"
    if (run_dir / "resume" / "state.json").exists():
        return _resume(run_dir, cfg, model, optimizer, is_writer, average)
    if is_writer and config_path.exists() and any((run_dir / "checkpoints").glob("*.safetensors")):
        raise UserError(f"{run_dir} already has checkpoints but no resume state; choose a new --out")
    written = cfg.to_dict()
    if cfg.train.init_from is not None:
        # config.json names the file read, not the run directory whose latest checkpoint moves on
        written["train"]["init_from"] = str(warm_start(model, cfg.train.init_from))
    if is_writer:
        run_dir.mkdir(parents=True, exist_ok=True)
        ckpt.write_json(config_path, written)
        rewrite_metrics(run_dir, [])
    return 0, 0


def _resume(run_dir: Path, cfg: RunConfig, model, optimizer, is_writer: bool,
            average: WeightAverage) -> tuple[int, int]:
    saved = ckpt.read_run_config(run_dir)
    # the model compared as a config, not as written: a field added since the run was
    # saved reads back at its default (the model the run was trained with)
    if ModelConfig.from_dict(saved["model"]) != cfg.model or saved["task"] != cfg.to_dict()["task"]:
        raise UserError(
            f"{run_dir} holds a run with a different model or task config; "
            "resume with the same preset and --set values, or choose a new --out"
        )
    trained = RunConfig.from_dict(saved)
    trained_with = trained.to_dict()["train"]
    # where step 0 came from is history, not a setting: a resume keeps the recorded source
    wanted = {**cfg.to_dict()["train"], "init_from": trained_with["init_from"]}
    if cfg.train.init_from not in (None, trained_with["init_from"]):
        logger.info("train.init_from is read by a new run only; %s started from %s and resumes from its own state",
                    run_dir, trained_with["init_from"] or "a fresh initialisation")
    # read everything before writing anything: a resume state or checkpoint that cannot
    # be read leaves the run as it was
    meta = ckpt.load_resume(run_dir, optimizer)
    step = meta["step"]
    weights = ckpt.step_path(run_dir, step)
    fix = f"the resume state is at step {step} and needs this file: restore it, or train into a new --out"
    ckpt.load_state_into(model, ckpt.read_state(weights, fix), weights)
    _restore_average(run_dir, meta, trained.train.average_from, cfg, model, average)
    # metrics logged after the resumed step are dropped, so the curve continues exactly
    rows = [r for r in ckpt.read_metrics(run_dir) if r["step"] <= step] if is_writer else []
    if is_writer and trained_with != wanted:
        # e.g. --set train.steps=20000 to extend a finished run: config.json says what the
        # run is now trained to, so `summary` and a later plain resume read the new target
        changed = sorted(k for k, v in wanted.items() if k not in trained_with or trained_with[k] != v)
        logger.info("resuming %s with other training settings (%s); config.json records them",
                    run_dir, ", ".join(changed))
        ckpt.write_json(run_dir / "config.json", {**saved, "train": wanted})
    if is_writer:
        rewrite_metrics(run_dir, rows)
    logger.info("resuming %s from step %d", run_dir, step)
    return step, meta.get("tokens", 0)


def _restore_average(run_dir: Path, meta: dict, trained_from: int | None, cfg: RunConfig, model,
                     average: WeightAverage) -> None:
    """A run stopped while averaging: its checkpoint (in the model now) is the mean of
    `averaged_steps` steps, the live weights the optimizer steps are in the resume state."""
    steps_averaged = meta.get("averaged_steps", 0)
    if type(steps_averaged) is not int or steps_averaged < 0:
        raise ckpt.CheckpointError(f"{run_dir / 'resume' / 'state.json'} holds averaged_steps={steps_averaged!r}, "
                                   "not a count of steps; restore the resume state from a copy, or train into a new --out")
    if not steps_averaged:
        return
    if cfg.train.average_from != trained_from:
        raise UserError(f"{run_dir} has averaged its weights from step {trained_from} on; resume with "
                        f"train.average_from={trained_from}, or train into a new --out")
    average.restore(steps_averaged)
    live = ckpt.live_weights_path(run_dir)
    ckpt.load_state_into(model, ckpt.read_state(live, "restore the resume state from a copy, or train into a new --out"), live)


def warm_start(model, source: str | Path) -> Path:
    """Load the weights of `source` (a run directory's latest checkpoint, or a .safetensors
    file) into `model`, which may hold tensors the source lacks (they keep their fresh
    initialisation, and are logged), a wider MLP or more layers (grown so that the model
    computes the source's function: `growth.py`) or more heads (placed by kind, read from the
    source's config.json), but no fewer tensors and none of another shape. The file read."""
    what = f"train.init_from={str(source)!r}"
    try:
        _, weights = ckpt.checkpoint_file(source)
        state = ckpt.read_state(weights)
    except ckpt.CheckpointError as e:
        raise UserError(f"{what}: {e}; name a run directory `train --out` wrote or one of its "
                        "checkpoints/step_*.safetensors, e.g. checkpoints/extrap-mul") from e
    expected = model.state_dict()
    placement = _head_placement(model.cfg, state, weights, what)
    state, grown = grow_state(expected, state, identity_blocks=model.cfg.family == "looped", placement=placement)
    lost = [key for key in state if key not in expected]
    other_shapes = ckpt.shape_mismatches(expected, state)
    if lost or other_shapes:
        problems = ([f"this model has no {_some(lost)}"] if lost else []) + other_shapes[:4]
        raise UserError(f"{what}: {weights} does not fit this model ({'; '.join(problems)}); the model may add "
                        "tensors to the checkpoint's, widen its MLP (model.d_mlp), add layers or heads, but must keep "
                        f"every other tensor at its shape: use the model settings of "
                        f"{ckpt.run_dir_of(weights) / 'config.json'} and add levers only")
    fresh = [key for key in expected if key not in state]
    model.load_state_dict(state, strict=False)
    if grown:  # the model differs from the checkpoint's: say so where the CLI shows it
        logger.warning("%s: the model is larger than the checkpoint's; grown so that these add nothing at "
                       "step 0 (growth.py): %s", what, _some(grown))
    logger.info("started from the weights of %s%s", weights,
                f"; freshly initialised (the checkpoint lacks them): {', '.join(fresh)}" if fresh else "")
    return weights


def _head_placement(cfg: ModelConfig, state: dict, weights: Path, what: str) -> list[int] | None:
    """Where the source's heads go when this model has more heads per layer than the checkpoint
    `weights` (`growth.head_placement`), else None. The heads' kinds are read from the source's
    config.json, checked against the weights' head count and width."""
    source_heads = state.get("blocks.0.attn.W_Q")  # [head d_model d_head]
    if source_heads is None or source_heads.shape[0] == cfg.n_heads:
        return None
    n_heads, d_head = source_heads.shape[0], source_heads.shape[2]
    if n_heads > cfg.n_heads:
        raise UserError(f"{what}: {weights} has {n_heads} heads per layer and this model {cfg.n_heads}; a warm "
                        f"start may add heads but not drop them: set model.n_heads >= {n_heads}")
    config_file = ckpt.run_dir_of(weights) / "config.json"
    try:
        source_cfg = ModelConfig.from_dict(ckpt.read_run_config(config_file.parent)["model"])
    except UserError as e:
        raise UserError(f"{what}: this model adds heads, and which kind each of the source's is needs its "
                        f"run's config.json ({e}); name the run directory or a checkpoint inside it") from e
    if (source_cfg.n_heads, source_cfg.d_head) != (n_heads, d_head):
        raise UserError(f"{what}: {config_file} describes heads other than {weights}'s ({n_heads} of width "
                        f"{d_head}); is the file in another run's folder? Name the run directory it was saved in")
    try:
        return head_placement(head_kinds(source_cfg), head_kinds(cfg))
    except ValueError as e:
        raise UserError(f"{what}: each of the source's heads must keep the keys it reads, but {e}; give the "
                        f"model at least the heads of each kind that {config_file} names") from e


def _some(keys: list[str], shown: int = 4) -> str:
    return ", ".join(keys[:shown]) + (f" and {len(keys) - shown} more" if len(keys) > shown else "")


def rewrite_metrics(run_dir: Path, rows: list[dict]) -> None:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    ckpt.atomic_write(run_dir / "metrics.jsonl", lambda tmp: Path(tmp).write_text(text))


class Bookkeeping:
    """The run's counters and files on every rank: tokens seen (summed over ranks when read),
    the last step saved, the divergence watch, and (rank 0) the metrics file and checkpoints."""

    def __init__(self, run_dir: Path, model, optimizer, world, step: int, tokens_seen: int,
                 average: WeightAverage):
        self.run_dir, self.model, self.optimizer, self.world = run_dir, model, optimizer, world
        self.average = average
        self.is_writer = world.rank == 0
        self.tokens_seen = tokens_seen
        self.local_tokens = 0  # this rank's real tokens since `tokens_seen` was last summed over ranks
        self.last_good_step = step
        self.divergence = DivergenceWatch()
        self.metrics_file = open(run_dir / "metrics.jsonl", "a") if self.is_writer else None

    def sync_tokens(self) -> None:
        self.tokens_seen += int(dist_utils.sum_across_ranks(float(self.local_tokens), self.world))
        self.local_tokens = 0

    def note_update(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        """After `step`'s update: its loss and gradient norm for the divergence check, its
        weights into the running mean (from train.average_from on)."""
        self.divergence.note(step, loss, grad_norm)
        self.average.update(step)

    def check(self) -> None:
        """Raise TrainingDiverged (every rank) when a step since the last check was not finite."""
        self.divergence.check(self.world, self.last_good_step, self.run_dir)

    def save(self, step: int, row: dict) -> None:
        """A checkpoint and the resume state of `step`; never of a diverged state."""
        self.check()
        self.sync_tokens()
        if self.is_writer:
            with self.average.swapped_in():  # the checkpoint is the averaged model, once averaging has begun
                ckpt.save_checkpoint(self.run_dir, self.model, step, {"tokens": self.tokens_seen, "metrics": row})
            extra, live = {"tokens": self.tokens_seen}, None
            if self.average.active:
                extra["averaged_steps"] = self.average.steps_averaged
                live = getattr(self.model, "_orig_mod", self.model).state_dict()
            ckpt.save_resume(self.run_dir, self.optimizer, step, extra, live_weights=live)
        self.last_good_step = step

    def write(self, row: dict) -> None:
        if self.is_writer:
            self.metrics_file.write(json.dumps(row) + "\n")
            self.metrics_file.flush()

    def close(self) -> None:
        if self.metrics_file:
            self.metrics_file.close()

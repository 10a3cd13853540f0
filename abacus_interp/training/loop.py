"""The training loop, one readable function: `train(run_cfg, run_dir)`.

Resumes when `run_dir/resume/` exists; writes checkpoints on the schedule of
`schedule.checkpoint_steps`; stops cleanly on SIGINT/SIGTERM (checkpoint first) and on a
non-finite loss (the last good checkpoint is kept). Under `torchrun`, gradients are
averaged across ranks (gloo on CPU, nccl on CUDA) and only rank 0 writes.

A step never waits for the accelerator: values are read back (and a divergence noticed)
only at logged steps and checkpoints, so the host prepares the next batch while the
device still works on the last one.
"""

from __future__ import annotations

import logging
import signal
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

# the module itself, not `from . import distributed`: the package's __init__ imports this file
import abacus_interp.training.distributed as dist_utils

from ..core.families import build_model
from ..core.scoring import score_examples
from ..errors import UserError, check_output_dir
from ..evaluation.heldout import heldout_sets
from .averaging import WeightAverage
from .config import RunConfig
from .data import BatchSource, shard_rows
from .decay import build_optimizer
from .losses import StepLosses, readout_ids, to_device, training_losses
from .run_state import Bookkeeping, TrainingDiverged, start_or_resume
from .schedule import checkpoint_steps, lr_multiplier

__all__ = ["StepLosses", "TrainResult", "TrainingDiverged", "TrainingInterrupted", "train", "training_losses"]

logger = logging.getLogger(__name__)


class TrainingInterrupted(RuntimeError):
    """SIGINT/SIGTERM arrived; a checkpoint of the last completed step was written."""


@dataclass
class TrainResult:
    run_dir: Path
    final_step: int
    last_metrics: dict
    is_writer: bool = True


@torch.no_grad()
def _batch_accuracy(model, state, tokens, loss_mask, allowed=None) -> float:
    k = min(state.shape[1], tokens.shape[1] - 1)  # positions whose next token is known
    logits = model.answer_logits(state, tokens)[:, :k]
    if allowed is None:
        predictions = logits.argmax(-1)
    else:  # argmax over the readout's ids, mapped back to token ids
        predictions = allowed[logits[..., allowed].argmax(-1)]
    correct = (predictions == tokens[:, 1 : k + 1]) | ~loss_mask[:, :k]
    return float(correct.all(-1).float().mean())


def _evaluate(model, eval_sets: dict, allowed=None, eos: bool = True) -> dict:
    out = {}
    for name, examples in eval_sets.items():
        scores = score_examples(model, examples, allowed=allowed, eos=eos)
        out[f"{name}_loss"] = scores.loss
        out[f"{name}_exact_match"] = scores.exact_match
    return out


def train(cfg: RunConfig, run_dir: str | Path, progress: bool = True) -> TrainResult:
    """Train (or resume) the run `cfg` in `run_dir`. Under several processes, the process
    group is torn down on every way out, errors included: a process that exits with it alive
    can abort in gloo's threads at interpreter shutdown."""
    run_dir = check_output_dir(run_dir, "run directory")  # before any process group exists
    world = dist_utils.setup(cfg.train.device)
    result = None
    try:
        result = _train(cfg, run_dir, progress, world)
        return result
    finally:
        dist_utils.teardown(world, finished=result is not None and result.final_step >= cfg.train.steps)


@dataclass
class _Setup:
    """What a training process builds before its first step."""

    model: torch.nn.Module
    # listed once: model.parameters() walks every module, and a looped model holds a set of
    # HookPoints per loop up to max_loops (6,414 modules in demo-add: 5.3 ms a walk, 14% of its step)
    parameters: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    source: BatchSource
    part: tuple[int, int]  # (rank, world size): this process's rows of every batch
    eval_sets: dict  # rank 0 only: the held-out sets evaluated while training
    save_at: set[int]  # the steps that write a checkpoint
    loss_readout: torch.Tensor | None  # the loss's readout ids, in host memory
    allowed: torch.Tensor | None  # the same on the device, for the evaluation
    eval_eos: bool
    autocast: object
    average: WeightAverage  # the mean of the weights from train.average_from on
    # the model's own weights (all but the auxiliary readouts): held still for the first
    # train.readouts_first steps
    own_weights: list[torch.nn.Parameter]


def _set_up(cfg: RunConfig, world: dist_utils.World) -> _Setup:
    """Model, optimizer, data and held-out sets, seeded from train.seed."""
    tcfg, device = cfg.train, world.device
    if tcfg.processes > 1 and not world.distributed:
        logger.info("train.processes=%d is how many processes `abacus-interp train` starts; "
                    "this call trains in one", tcfg.processes)
    task = cfg.make_task()
    torch.manual_seed(tcfg.seed)
    model = build_model(cfg.model).to(device)
    if tcfg.compile:  # compiles in place: the checkpoints' state_dict keys are unchanged
        model.compile_loops()
    dist_utils.broadcast_parameters(model, world)
    optimizer = build_optimizer(model, tcfg, device)
    source = BatchSource(task, tcfg, cfg.model.max_seq_len)
    if tcfg.batch_size is not None and tcfg.batch_size < world.world_size:
        raise UserError(
            f"train.batch_size={tcfg.batch_size} cannot be split over {world.world_size} processes; "
            f"use a batch of at least {world.world_size} or fewer processes (train.processes)"
        )
    eval_sets = heldout_sets(task, tcfg.eval_problems, cfg.model.max_seq_len) if world.rank == 0 else {}
    loss_readout = readout_ids(cfg, task)
    use_bf16 = tcfg.bf16 and device.type == "cuda"
    parameters = list(model.parameters())
    return _Setup(model=model, parameters=parameters, optimizer=optimizer, source=source,
                  part=(world.rank, world.world_size), eval_sets=eval_sets, save_at=set(checkpoint_steps(tcfg)),
                  loss_readout=loss_readout,
                  allowed=None if loss_readout is None else loss_readout.to(device),
                  eval_eos=tcfg.loss_positions != "answer_tokens",
                  autocast=torch.autocast("cuda", dtype=torch.bfloat16) if use_bf16 else nullcontext(),
                  average=WeightAverage(parameters, tcfg.average_from),
                  own_weights=_own_weights(model, parameters))


def _own_weights(model, parameters: list[torch.nn.Parameter]) -> list[torch.nn.Parameter]:
    """`parameters` less the model's auxiliary readouts (`readout_parameters`)."""
    readouts = {id(p) for p in model.readout_parameters.values()}
    return [p for p in parameters if id(p) not in readouts]


@contextmanager
def _signals_noted():
    """SIGINT and SIGTERM noted (a list that gets the signal's name) instead of raised, so the
    current step finishes and a checkpoint is written before the run stops; restored after."""
    noted: list[str] = []
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in handlers:
        signal.signal(s, lambda signum, frame: noted.append(signal.Signals(signum).name))
    try:
        yield noted
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


def _train(cfg: RunConfig, run_dir: Path, progress: bool, world: dist_utils.World) -> TrainResult:
    tcfg, device, is_writer = cfg.train, world.device, world.rank == 0
    run = _set_up(cfg, world)
    model, optimizer = run.model, run.optimizer
    step, tokens_seen = start_or_resume(run_dir, cfg, model, optimizer, is_writer, run.average)
    if step == 0 and tcfg.init_from is not None:  # every rank starts at the weights rank 0 read
        dist_utils.broadcast_parameters(model, world)
    dist_utils.barrier(world)  # every rank sees the same run directory state from here
    book = Bookkeeping(run_dir, model, optimizer, world, step, tokens_seen, run.average)
    if step == 0:
        book.save(0, {})
    bar = tqdm(total=tcfg.steps, initial=step, disable=not (progress and is_writer), desc="train", dynamic_ncols=True)
    row: dict = {}
    start_time = time.time()
    # once, not every step: it visits every module (333 in small-add, 2.7 ms a step), and the
    # evaluations switch to eval mode and back themselves
    model.train()
    try:
        with _signals_noted() as stop_signal:
            while step < tcfg.steps:
                step += 1
                # --- learning rate for this step
                for group in optimizer.param_groups:
                    group["lr"] = tcfg.lr * lr_multiplier(step, tcfg)

                # --- forward: full-depth (+ progressive) loss on this process's rows of the batch
                batch = run.source.batch(step)
                rows = shard_rows(batch.tokens.shape[0], *run.part)
                losses = training_losses(
                    model, batch, run.source.generator(step), cfg, device, run.autocast, run.loss_readout, run.part
                )

                # --- backward, average gradients across ranks, clip, update (`_update`); a
                # non-finite loss or gradient norm is raised at the next logged step or checkpoint
                stopping, grad_norm = _update(run.parameters, optimizer, losses.loss, world, bool(stop_signal),
                                               tcfg.grad_clip, _held_weights(run, tcfg, step))
                book.note_update(step, losses.loss, grad_norm)
                book.local_tokens += int(batch.valid[rows].sum())  # the batch is in host memory: no device read

                # --- log, evaluate on held-out sets, checkpoint
                if step % tcfg.log_every == 0 or step == 1 or step in run.save_at:
                    row = _logged_row(run, book, step, losses, grad_norm, to_device(batch.tokens[rows], device),
                                      time.time() - start_time, cfg)
                    book.write(row)
                    bar.set_postfix(loss=f"{row['loss']:.4f}", acc=f"{row['train_exact_match']:.2f}")
                if step in run.save_at:
                    book.save(step, row)
                bar.update(1)
                if stopping:
                    if step not in run.save_at:
                        book.save(step, row)
                    received = stop_signal[0] if stop_signal else "a signal (on another process)"
                    raise TrainingInterrupted(
                        f"{received} received: stopped after step {step} and saved a checkpoint; "
                        f"run the same train command again to resume"
                    )
    finally:
        bar.close()
        book.close()
    return TrainResult(run_dir=run_dir, final_step=step, last_metrics=row, is_writer=is_writer)


def _held_weights(run: _Setup, tcfg, step: int) -> list[torch.nn.Parameter]:
    """The weights that keep their values this step: the model's own for the first
    train.readouts_first steps, while its readouts fit the state."""
    return run.own_weights if tcfg.readouts_first and step <= tcfg.readouts_first else []


def _update(parameters, optimizer, loss, world, stop: bool, grad_clip: float | None,
            held: list[torch.nn.Parameter]):
    """Backward, gradients averaged across ranks (with them, whether any rank was asked to
    stop, so all stop after the same step), clipped, one optimizer step; the parameters in
    `held` keep their values (the optimizer skips a parameter without a gradient: no step, no
    weight decay, no moments). Nothing here reads a value back from the device. Returns
    (whether to stop, the gradient norm, on the device)."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    for p in held:
        p.grad = None
    params = [p for p in parameters if p.grad is not None]
    stopping = dist_utils.average_gradients(params, world, stop=stop)
    grad_norm = torch.nn.utils.clip_grad_norm_(params, grad_clip or float("inf"))
    optimizer.step()
    return stopping, grad_norm


def _logged_row(run: _Setup, book: Bookkeeping, step: int, losses: StepLosses, grad_norm, tokens, elapsed: float,
                cfg: RunConfig) -> dict:
    """The metrics row of a logged step: the batch's loss and exact match (read back from the
    device here, after the divergence check), and at evaluation steps the held-out sets'."""
    world, tcfg = book.world, cfg.train
    book.check()
    book.sync_tokens()
    # each rank's loss is its weighted part (`training_losses`): their mean is the batch's
    accuracy = _batch_accuracy(run.model, losses.state, tokens, losses.loss_mask, run.allowed)
    row = {
        "step": step,
        "loss": dist_utils.mean_across_ranks(losses.loss.item(), world),
        "full_depth_loss": dist_utils.mean_across_ranks(losses.full.item(), world),
        "train_exact_match": dist_utils.weighted_mean_across_ranks(accuracy, len(tokens), world),
        "lr": run.optimizer.param_groups[0]["lr"],
        "grad_norm": float(grad_norm),  # of the averaged gradients: the same on every rank
        "tokens": book.tokens_seen,
        "elapsed_s": round(elapsed, 3),
    }
    if losses.running_sum is not None:  # the readout's squared error, in units of ten squared
        row["running_sum_loss"] = dist_utils.mean_across_ranks(losses.running_sum.item(), world)
    if losses.partial_products is not None:  # the readout's mean cross-entropy over its digit targets
        row["partial_product_loss"] = dist_utils.mean_across_ranks(losses.partial_products.item(), world)
    if losses.carries is not None:  # the carry readout's mean cross-entropy over the answer digits
        row["carry_loss"] = dist_utils.mean_across_ranks(losses.carries.item(), world)
    if losses.order is not None:  # the order readout's mean pairwise logistic loss
        row["order_loss"] = dist_utils.mean_across_ranks(losses.order.item(), world)
    if run.average.active:  # the held-out figures and the checkpoint read the mean of this many steps
        row["averaged_steps"] = run.average.steps_averaged
    if book.is_writer and (step % tcfg.eval_every == 0 or step in run.save_at or step == tcfg.steps):
        with run.average.swapped_in():
            row.update(_evaluate(run.model, run.eval_sets, run.allowed, run.eval_eos))
        run.model.train()
    return row

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

import json
import logging
import math
import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

# the module itself, not `from . import distributed`: the package's __init__ imports this file
import abacus_interp.training.distributed as dist_utils

from .. import checkpoints as ckpt
from ..core.config import ModelConfig
from ..core.families import build_model
from ..core.halting import relative_step
from ..core.positions import sample_offsets
from ..core.scoring import next_token_loss, score_examples
from ..core.scoring import readout_ids as scoring_readout_ids
from ..errors import UserError, check_output_dir
from ..evaluation.heldout import heldout_sets
from .config import RunConfig
from .data import BatchSource, ShardWeights, scored_positions, shard_rows
from .decay import build_optimizer
from .schedule import checkpoint_steps, lr_multiplier

logger = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the run directory keeps the last good checkpoint."""


class TrainingInterrupted(RuntimeError):
    """SIGINT/SIGTERM arrived; a checkpoint of the last completed step was written."""


@dataclass
class TrainResult:
    run_dir: Path
    final_step: int
    last_metrics: dict
    is_writer: bool = True


def readout_ids(cfg: RunConfig, task, device=None) -> torch.Tensor | None:
    """The token ids the loss and evaluation read out over (`scoring.readout_ids` of
    `train.readout`), on `device`; None for the whole vocabulary."""
    ids = scoring_readout_ids(cfg.train.readout, task)
    return None if ids is None else ids.to(device)


def training_losses(model, batch, generator, cfg, device, autocast, allowed=None, part=(0, 1)):
    """Full-depth loss, plus the progressive-loss term when configured. `batch` is the
    step's whole batch, in host memory; `part`: (rank, world_size), this process's rows of it
    (`data.shard_rows`), its loss weighted so that the average over ranks is the whole
    batch's loss. `allowed`: the readout's token ids (`readout_ids`) in host memory, None
    for the whole vocabulary. Returns (loss, full-depth loss, full-depth state, scored
    positions), of this rank's rows.

    Nothing here waits for the device: the masks, the last scored position and the Abacus
    offsets are worked out on the host, and the copies to the device are non-blocking."""
    tcfg, R = cfg.train, cfg.model.n_loops
    scored = scored_positions(batch, tcfg.loss_positions)  # [batch pos], the whole batch
    rows = shard_rows(batch.tokens.shape[0], *part)
    weights = ShardWeights.of(scored, rows, part[1])
    dtype = torch.float64 if tcfg.loss_dtype == "float64" else torch.float32
    # The model reads positions 0..n_in-1. The model is causal, so positions after the last
    # scored one feed nothing the loss reads; with the answer tokens only (no EOS) they are
    # not computed ("a b = c": the input "c" is dropped, 40% of a grokking step). The other
    # modes score up to the last position and their step penalty reads every position.
    # (Every rank takes the whole batch's n_in and draws for the whole batch, then keeps its
    # rows: the draws are those of one process.)
    n_in = batch.tokens.shape[1]
    if tcfg.loss_positions == "answer_tokens" and scored.any():
        n_in = int(scored.any(0).nonzero().max()) + 1
    offsets = 0
    if (cfg.model.positional == "abacus" or cfg.model.rotary == "abacus") and cfg.model.abacus_max_offset > 0:
        # rotary positions read the offset too: labels and separators stay at index 0, so the
        # distance from them to a digit of index j is offset + j, and a random offset trains
        # the distances that numbers longer than any in training put there.
        # drawn in host memory: the model bounds its position indices from them without a device read
        offsets = sample_offsets(
            batch.tokens.shape[0], cfg.model.abacus_max_offset, cfg.model.abacus_offset_mode, generator
        )[rows]
    host_tokens, host_mask = batch.tokens[rows, : n_in + 1], scored[rows, : n_in + 1]
    tokens, loss_mask = to_device(batch.tokens[rows], device), to_device(scored[rows], device)

    def loss_of(state):  # state: [batch n_in d_model]
        logits = model.unembed(state)
        if n_in < tokens.shape[1]:  # a zero row for position n_in, which is never scored
            logits = F.pad(logits, (0, 0, 0, 1))
        # the targets and scored positions from host memory: nothing waits for the device,
        # and a target outside the readout raises here, before the step, on every device
        mean = next_token_loss(logits, host_tokens, host_mask, dtype, allowed)
        return mean * weights.per_token

    with autocast:
        inputs = model.embed(tokens[:, :n_in], abacus_offset=offsets)  # [batch n_in d_model]
        index = model.attention_index(tokens[:, :n_in], offsets)  # [batch n_in], None unless attention reads it
        r = n_prefix = n_progressive = None
        if tcfg.progressive == "mix":  # a random depth r, read out beside the full depth R
            lo, hi = tcfg.mix_depths or (1, R)
            r = int(torch.randint(lo, hi + 1, (1,), generator=generator))
        deepest = max(R, r or 0)
        wanted = {R, deepest} | ({r} if r else set())
        if tcfg.step_penalty and deepest > 1:
            wanted.add(deepest - 1)
        start = None
        if tcfg.init_state_noise and float(torch.rand(1, generator=generator)) < tcfg.init_state_noise:
            noise = torch.randn((batch.tokens.shape[0], *inputs.shape[1:]), generator=generator)  # [batch n_in d_model]
            start = noise[rows].to(inputs, non_blocking=True)
        if tcfg.progressive == "mcleish":
            # McLeish et al.: n loops without gradient, then k loops with gradient. The state
            # after n loops is read off the full-depth pass (detached below) instead of a
            # second, gradient-free pass: the same values without running n loops again.
            n_prefix = int(torch.randint(0, R, (1,), generator=generator))
            n_progressive = int(torch.randint(1, R - n_prefix + 1, (1,), generator=generator))
            wanted.add(n_prefix)
        states = _states_at(model, inputs, wanted, start, index)  # one pass, read out on the way
        state_full = states[R]
        full = loss_of(state_full)
        if tcfg.progressive == "mix":
            # at r == R both terms are the same loss: 0.5 * (full + full) is full, bit for bit
            loss = full if r == R else 0.5 * (full + loss_of(states[r]))
        elif tcfg.progressive == "mcleish":
            prefix = states[n_prefix]
            prefix = prefix.detach() if prefix is not None else None  # n_prefix = 0: the start state
            progressive = model.run_loops(inputs, range(n_prefix, n_prefix + n_progressive), state=prefix, index=index)
            alpha = tcfg.progressive_alpha
            loss = (1 - alpha) * full + alpha * loss_of(progressive)
        else:
            loss = full
        if tcfg.step_penalty and deepest > 1:
            valid = to_device(batch.valid[rows, :n_in, None], device)
            settle = relative_step(states[deepest], states[deepest - 1], valid).mean() * weights.per_example
            loss = loss + tcfg.step_penalty * settle
        return loss, full, state_full, loss_mask


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device`, copied without making the host wait: a blocking copy to a
    GPU first waits for every kernel already queued, which stalls the loop once per tensor."""
    return tensor.to(device, non_blocking=True)


def _states_at(model, inputs, depths: set[int], start=None, index=None) -> dict[int, torch.Tensor | None]:
    """The state after each number of loops in `depths`, from one pass through the deepest
    that starts from `start` (None: the model's own zero state). Depth 0 is `start`."""
    states, state, done = {}, start, 0
    for depth in sorted(depths):
        state = model.run_loops(inputs, range(done, depth), state=state, index=index) if depth > done else state
        states[depth], done = state, depth
    return states


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


@torch.no_grad()
def _batch_accuracy(model, state, tokens, loss_mask, allowed=None) -> float:
    k = min(state.shape[1], tokens.shape[1] - 1)  # positions whose next token is known
    logits = model.unembed(state)[:, :k]
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


def _start(run_dir: Path, cfg: RunConfig, model, optimizer, is_writer: bool) -> tuple[int, int]:
    """Write config.json for a new run, or restore weights and optimizer to resume."""
    config_path = run_dir / "config.json"
    if (run_dir / "resume" / "state.json").exists():
        saved = ckpt.read_run_config(run_dir)
        # the model compared as a config, not as written: a field added since the run was
        # saved reads back at its default (the model the run was trained with)
        if ModelConfig.from_dict(saved["model"]) != cfg.model or saved["task"] != cfg.to_dict()["task"]:
            raise UserError(
                f"{run_dir} holds a run with a different model or task config; "
                "resume with the same preset and --set values, or choose a new --out"
            )
        trained_with = RunConfig.from_dict(saved).to_dict()["train"]
        # read everything before writing anything: a resume state or checkpoint that cannot
        # be read leaves the run as it was
        meta = ckpt.load_resume(run_dir, optimizer)
        step = meta["step"]
        weights = ckpt.step_path(run_dir, step)
        fix = f"the resume state is at step {step} and needs this file: restore it, or train into a new --out"
        ckpt.load_state_into(model, ckpt.read_state(weights, fix), weights)
        # metrics logged after the resumed step are dropped, so the curve continues exactly
        rows = [r for r in ckpt.read_metrics(run_dir) if r["step"] <= step] if is_writer else []
        if is_writer and trained_with != cfg.to_dict()["train"]:
            # e.g. --set train.steps=20000 to extend a finished run: config.json says what the
            # run is now trained to, so `summary` and a later plain resume read the new target
            changed = sorted(k for k, v in cfg.to_dict()["train"].items() if trained_with[k] != v)
            logger.info("resuming %s with other training settings (%s); config.json records them",
                        run_dir, ", ".join(changed))
            ckpt.write_json(config_path, {**saved, "train": cfg.to_dict()["train"]})
        if is_writer:
            _rewrite_metrics(run_dir, rows)
        logger.info("resuming %s from step %d", run_dir, step)
        return step, meta.get("tokens", 0)
    if is_writer:
        if config_path.exists() and any((run_dir / "checkpoints").glob("*.safetensors")):
            raise UserError(f"{run_dir} already has checkpoints but no resume state; choose a new --out")
        run_dir.mkdir(parents=True, exist_ok=True)
        ckpt.write_json(config_path, cfg.to_dict())
        _rewrite_metrics(run_dir, [])
    return 0, 0


def _rewrite_metrics(run_dir: Path, rows: list[dict]) -> None:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    ckpt.atomic_write(run_dir / "metrics.jsonl", lambda tmp: Path(tmp).write_text(text))


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


def _train(cfg: RunConfig, run_dir: Path, progress: bool, world: dist_utils.World) -> TrainResult:
    tcfg = cfg.train
    device, is_writer = world.device, world.rank == 0
    if tcfg.processes > 1 and not world.distributed:
        logger.info("train.processes=%d is how many processes `abacus-interp train` starts; "
                    "this call trains in one", tcfg.processes)
    task = cfg.make_task()

    # --- model, optimizer, data
    torch.manual_seed(tcfg.seed)
    model = build_model(cfg.model).to(device)
    if tcfg.compile:  # compiles in place: the checkpoints' state_dict keys are unchanged
        model.compile_loops()
    dist_utils.broadcast_parameters(model, world)
    optimizer = build_optimizer(model, tcfg, device)
    source = BatchSource(task, tcfg, cfg.model.max_seq_len)
    part = (world.rank, world.world_size)  # this process's rows of every batch
    if tcfg.batch_size is not None and tcfg.batch_size < world.world_size:
        raise UserError(
            f"train.batch_size={tcfg.batch_size} cannot be split over {world.world_size} processes; "
            f"use a batch of at least {world.world_size} or fewer processes (train.processes)"
        )
    eval_sets = heldout_sets(task, tcfg.eval_problems, cfg.model.max_seq_len) if is_writer else {}
    save_at = set(checkpoint_steps(tcfg))
    # the readout of the loss (in host memory, where the loss checks the targets against it)
    # and of the evaluation (on the device)
    loss_readout = readout_ids(cfg, task)
    allowed = None if loss_readout is None else loss_readout.to(device)
    eval_eos = tcfg.loss_positions != "answer_tokens"
    use_bf16 = tcfg.bf16 and device.type == "cuda"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if use_bf16 else nullcontext()

    step, tokens_seen = _start(run_dir, cfg, model, optimizer, is_writer)
    dist_utils.barrier(world)  # every rank sees the same run directory state from here
    metrics_file = open(run_dir / "metrics.jsonl", "a") if is_writer else None
    last_good_step = step
    divergence = DivergenceWatch()
    local_tokens = 0  # this rank's real tokens since `tokens_seen` was last summed over ranks

    def sync_tokens() -> None:
        nonlocal tokens_seen, local_tokens
        tokens_seen += int(dist_utils.sum_across_ranks(float(local_tokens), world))
        local_tokens = 0

    def save(at_step: int, row: dict) -> None:
        nonlocal last_good_step
        divergence.check(world, last_good_step, run_dir)  # never save a diverged state
        sync_tokens()
        if is_writer:
            ckpt.save_checkpoint(run_dir, model, at_step, {"tokens": tokens_seen, "metrics": row})
            ckpt.save_resume(run_dir, optimizer, at_step, {"tokens": tokens_seen})
        last_good_step = at_step

    if step == 0:
        save(0, {})

    # --- signals: finish the current step, write a checkpoint, then stop
    stop_signal: list[str] = []
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in handlers:
        signal.signal(s, lambda signum, frame: stop_signal.append(signal.Signals(signum).name))

    bar = tqdm(total=tcfg.steps, initial=step, disable=not (progress and is_writer), desc="train", dynamic_ncols=True)
    row: dict = {}
    start_time = time.time()
    # once, not every step: it visits every module (333 in small-add, 2.7 ms a step), and the
    # evaluations switch to eval mode and back themselves
    model.train()
    try:
        while step < tcfg.steps:
            step += 1
            # --- learning rate for this step
            for group in optimizer.param_groups:
                group["lr"] = tcfg.lr * lr_multiplier(step, tcfg)

            # --- forward: full-depth (+ progressive) loss on this process's rows of the batch
            batch = source.batch(step)
            rows = shard_rows(batch.tokens.shape[0], *part)
            loss, full_loss, state, loss_mask = training_losses(
                model, batch, source.generator(step), cfg, device, autocast, loss_readout, part
            )

            # --- backward, average gradients across ranks (with them, whether any rank was
            # asked to stop, so all stop after the same step), clip, update. Nothing in a step
            # reads a value back from the device; a non-finite loss or gradient norm is noted
            # on the device and raised at the next logged step or checkpoint, whichever is first.
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            params = [p for p in model.parameters() if p.grad is not None]
            stopping = dist_utils.average_gradients(params, world, stop=bool(stop_signal))
            grad_norm = torch.nn.utils.clip_grad_norm_(params, tcfg.grad_clip or float("inf"))
            divergence.note(step, loss, grad_norm)
            optimizer.step()
            local_tokens += int(batch.valid[rows].sum())  # the batch is in host memory: no device read

            # --- log, evaluate on held-out sets, checkpoint
            if step % tcfg.log_every == 0 or step == 1 or step in save_at:
                divergence.check(world, last_good_step, run_dir)
                sync_tokens()
                # each rank's loss is its weighted part (`training_losses`): their mean is the batch's
                loss_value = dist_utils.mean_across_ranks(loss.item(), world)
                tokens = to_device(batch.tokens[rows], device)
                accuracy = _batch_accuracy(model, state, tokens, loss_mask, allowed)
                row = {
                    "step": step,
                    "loss": loss_value,
                    "full_depth_loss": dist_utils.mean_across_ranks(full_loss.item(), world),
                    "train_exact_match": dist_utils.weighted_mean_across_ranks(accuracy, len(tokens), world),
                    "lr": optimizer.param_groups[0]["lr"],
                    "grad_norm": float(grad_norm),  # of the averaged gradients: the same on every rank
                    "tokens": tokens_seen,
                    "elapsed_s": round(time.time() - start_time, 3),
                }
                if is_writer and (step % tcfg.eval_every == 0 or step in save_at or step == tcfg.steps):
                    row.update(_evaluate(model, eval_sets, allowed, eval_eos))
                    model.train()
                if is_writer:
                    metrics_file.write(json.dumps(row) + "\n")
                    metrics_file.flush()
                bar.set_postfix(loss=f"{loss_value:.4f}", acc=f"{row['train_exact_match']:.2f}")
            if step in save_at:
                save(step, row)
            bar.update(1)
            if stopping:
                if step not in save_at:
                    save(step, row)
                received = stop_signal[0] if stop_signal else "a signal (on another process)"
                raise TrainingInterrupted(
                    f"{received} received: stopped after step {step} and saved a checkpoint; "
                    f"run the same train command again to resume"
                )
    finally:
        bar.close()
        for s, h in handlers.items():
            signal.signal(s, h)
        if metrics_file:
            metrics_file.close()
    return TrainResult(run_dir=run_dir, final_step=step, last_metrics=row, is_writer=is_writer)

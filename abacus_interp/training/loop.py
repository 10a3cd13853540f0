"""The training loop, one readable function: `train(run_cfg, run_dir)`.

Resumes when `run_dir/resume/` exists; writes checkpoints on the schedule of
`schedule.checkpoint_steps`; stops cleanly on SIGINT/SIGTERM (checkpoint first) and on a
non-finite loss (the last good checkpoint is kept). Under `torchrun`, gradients are
averaged across ranks (gloo on CPU, nccl on CUDA) and only rank 0 writes.
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

from .. import checkpoints as ckpt
from ..evaluation.heldout import heldout_sets
from ..model import LoopedTransformer
from ..positions import sample_offsets
from ..scoring import next_token_loss, score_examples, without_eos
from . import distributed as dist_utils
from .config import RunConfig
from .data import BatchSource
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
    """The token ids the loss and evaluation read out over: the task's answer symbols for
    `train.readout="answer_symbols"`, None (the whole vocabulary) otherwise."""
    if cfg.train.readout == "all":
        return None
    return torch.tensor(task.answer_token_ids, dtype=torch.long, device=device)


def training_losses(model, batch, generator, cfg, device, autocast, allowed=None):
    """Full-depth loss, plus the progressive-loss term when configured. `allowed`: the
    readout's token ids (`readout_ids`), None for the whole vocabulary."""
    tcfg, R = cfg.train, cfg.model.n_loops
    tokens = batch.tokens.to(device)
    if tcfg.loss_positions in ("answer", "answer_tokens"):
        loss_mask = batch.loss_mask.to(device)
        if tcfg.loss_positions == "answer_tokens":  # no EOS term (Nanda et al.)
            loss_mask = without_eos(tokens, loss_mask)
    else:  # every position whose next token is real
        valid = batch.valid.to(device)
        loss_mask = torch.cat([valid[:, 1:], torch.zeros_like(valid[:, :1])], dim=1)
    dtype = torch.float64 if tcfg.loss_dtype == "float64" else torch.float32
    # The model reads positions 0..n_in-1. The model is causal, so positions after the last
    # scored one feed nothing the loss reads; with the answer tokens only (no EOS) they are
    # not computed ("a b = c": the input "c" is dropped, 40% of a grokking step). The other
    # modes score up to the last position and their step penalty reads every position.
    n_in = tokens.shape[1]
    if tcfg.loss_positions == "answer_tokens" and loss_mask.any():
        n_in = int(loss_mask.any(0).nonzero().max()) + 1
    offsets = 0
    if cfg.model.positional == "abacus" and cfg.model.abacus_max_offset > 0:
        offsets = sample_offsets(
            tokens.shape[0], cfg.model.abacus_max_offset, cfg.model.abacus_offset_mode, generator, device
        )

    def loss_of(state):  # state: [batch n_in d_model]
        logits = model.unembed(state)
        if n_in < tokens.shape[1]:  # a zero row for position n_in, which is never scored
            logits = F.pad(logits, (0, 0, 0, 1))
        return next_token_loss(logits, tokens[:, : n_in + 1], loss_mask[:, : n_in + 1], dtype, allowed)

    with autocast:
        inputs = model.embed(tokens[:, :n_in], abacus_offset=offsets)  # [batch n_in d_model]
        r = None
        if tcfg.progressive == "mix":  # a random depth r, read out beside the full depth R
            lo, hi = tcfg.mix_depths or (1, R)
            r = int(torch.randint(lo, hi + 1, (1,), generator=generator))
        deepest = max(R, r or 0)
        wanted = {R, deepest} | ({r} if r else set())
        if tcfg.step_penalty and deepest > 1:
            wanted.add(deepest - 1)
        start = None
        if tcfg.init_state_noise and float(torch.rand(1, generator=generator)) < tcfg.init_state_noise:
            start = torch.randn(inputs.shape, generator=generator).to(inputs)  # [batch n_in d_model]
        states = _states_at(model, inputs, wanted, start)  # one pass, read out on the way
        state_full = states[R]
        full = loss_of(state_full)
        if tcfg.progressive == "mix":
            loss = 0.5 * (full + loss_of(states[r]))
        elif tcfg.progressive == "mcleish":
            # McLeish et al.: n loops without gradient, then k loops with gradient
            n = int(torch.randint(0, R, (1,), generator=generator))
            k = int(torch.randint(1, R - n + 1, (1,), generator=generator))
            state = start
            if n:
                with torch.no_grad():
                    state = model.run_loops(inputs, range(n), state=start).detach()
            alpha = tcfg.progressive_alpha
            loss = (1 - alpha) * full + alpha * loss_of(model.run_loops(inputs, range(n, n + k), state=state))
        else:
            loss = full
        if tcfg.step_penalty and deepest > 1:
            valid = batch.valid.to(device)[:, :n_in, None]
            loss = loss + tcfg.step_penalty * relative_step(states[deepest], states[deepest - 1], valid).mean()
        return loss, full, state_full, loss_mask


def _states_at(model, inputs, depths: set[int], start=None) -> dict[int, torch.Tensor]:
    """The state after each number of loops in `depths`, from one pass through the deepest
    that starts from `start` (None: the model's own zero state)."""
    states, state, done = {}, start, 0
    for depth in sorted(depths):
        state = model.run_loops(inputs, range(done, depth), state=state) if depth > done else state
        states[depth], done = state, depth
    return states


def relative_step(state, previous, valid) -> torch.Tensor:
    """Per-example ||s_t - s_(t-1)|| / ||s_t|| over real positions: zero at a fixed point."""
    step = ((state - previous) * valid).flatten(1).norm(dim=1)
    return step / (state * valid).flatten(1).norm(dim=1).clamp_min(1e-6)


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
        if saved["model"] != cfg.model.to_dict() or saved["task"] != cfg.to_dict()["task"]:
            raise ValueError(
                f"{run_dir} holds a run with a different model or task config; "
                "resume with the same preset and --set values, or choose a new --out"
            )
        meta = ckpt.load_resume(run_dir, optimizer)
        step = meta["step"]
        model.load_state_dict(ckpt.load_tensors(ckpt.step_path(run_dir, step)))
        if is_writer:  # drop metrics logged after the resumed step, so the curve continues exactly
            rows = [r for r in ckpt.read_metrics(run_dir) if r["step"] <= step]
            _rewrite_metrics(run_dir, rows)
        logger.info("resuming %s from step %d", run_dir, step)
        return step, meta.get("tokens", 0)
    if is_writer:
        if config_path.exists() and any((run_dir / "checkpoints").glob("*.safetensors")):
            raise ValueError(f"{run_dir} already has checkpoints but no resume state; choose a new --out")
        run_dir.mkdir(parents=True, exist_ok=True)
        ckpt.write_json(config_path, cfg.to_dict())
        _rewrite_metrics(run_dir, [])
    return 0, 0


def _rewrite_metrics(run_dir: Path, rows: list[dict]) -> None:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    ckpt.atomic_write(run_dir / "metrics.jsonl", lambda tmp: Path(tmp).write_text(text))


def train(cfg: RunConfig, run_dir: str | Path, progress: bool = True) -> TrainResult:
    run_dir = Path(run_dir)
    tcfg = cfg.train
    world = dist_utils.setup(tcfg.device)
    device, is_writer = world.device, world.rank == 0
    task = cfg.make_task()

    # --- model, optimizer, data
    torch.manual_seed(tcfg.seed)
    model = LoopedTransformer(cfg.model).to(device)
    if tcfg.compile:  # compiles in place: the checkpoints' state_dict keys are unchanged
        model.compile_loops()
    dist_utils.broadcast_parameters(model, world)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": tcfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=tcfg.lr, betas=tcfg.betas,
    )
    source = BatchSource(task, tcfg, cfg.model.max_seq_len, world.rank, world.world_size)
    eval_sets = heldout_sets(task, tcfg.eval_problems, cfg.model.max_seq_len) if is_writer else {}
    save_at = set(checkpoint_steps(tcfg))
    allowed = readout_ids(cfg, task, device)  # the readout of the loss and the evaluation
    eval_eos = tcfg.loss_positions != "answer_tokens"
    use_bf16 = tcfg.bf16 and device.type == "cuda"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if use_bf16 else nullcontext()

    step, tokens_seen = _start(run_dir, cfg, model, optimizer, is_writer)
    dist_utils.barrier(world)  # every rank sees the same run directory state from here
    metrics_file = open(run_dir / "metrics.jsonl", "a") if is_writer else None
    last_good_step = step

    def save(at_step: int, row: dict) -> None:
        nonlocal last_good_step
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
    try:
        while step < tcfg.steps:
            step += 1
            model.train()
            # --- learning rate for this step
            for group in optimizer.param_groups:
                group["lr"] = tcfg.lr * lr_multiplier(step, tcfg)

            # --- forward: full-depth (+ progressive) loss on this step's batch
            batch = source.batch(step)
            loss, full_loss, state, loss_mask = training_losses(
                model, batch, source.generator(step), cfg, device, autocast, allowed
            )
            loss_value = dist_utils.mean_across_ranks(loss.item(), world)
            if not math.isfinite(loss_value):
                raise TrainingDiverged(
                    f"loss is {loss_value} at step {step}; stopped without saving it. The last good checkpoint "
                    f"is step {last_good_step} in {run_dir / 'checkpoints'}. Lower train.lr, set train.grad_clip, "
                    "or use train.loss_dtype=float64, then train into a new --out"
                )

            # --- backward, average gradients across ranks, clip, update
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            dist_utils.average_gradients(model, world)
            params = [p for p in model.parameters() if p.grad is not None]
            grad_norm = torch.nn.utils.clip_grad_norm_(params, tcfg.grad_clip or float("inf"))
            grad_norm_value = dist_utils.mean_across_ranks(float(grad_norm), world)
            if not math.isfinite(grad_norm_value):
                raise TrainingDiverged(
                    f"gradient norm is {grad_norm_value} at step {step} (loss {loss_value}); the update was "
                    f"not applied. The last good checkpoint is step {last_good_step} in {run_dir / 'checkpoints'}. "
                    "Lower train.lr or use train.loss_dtype=float64, then train into a new --out"
                )
            optimizer.step()
            tokens_seen += int(dist_utils.sum_across_ranks(float(batch.valid.sum()), world))

            # --- log, evaluate on held-out sets, checkpoint
            if step % tcfg.log_every == 0 or step == 1 or step in save_at:
                tokens = batch.tokens.to(device)
                row = {
                    "step": step,
                    "loss": loss_value,
                    "full_depth_loss": full_loss.item(),
                    "train_exact_match": _batch_accuracy(model, state, tokens, loss_mask, allowed),
                    "lr": optimizer.param_groups[0]["lr"],
                    "grad_norm": grad_norm_value,
                    "tokens": tokens_seen,
                    "elapsed_s": round(time.time() - start_time, 3),
                }
                if is_writer and (step % tcfg.eval_every == 0 or step in save_at or step == tcfg.steps):
                    row.update(_evaluate(model, eval_sets, allowed, eval_eos))
                if is_writer:
                    metrics_file.write(json.dumps(row) + "\n")
                    metrics_file.flush()
                bar.set_postfix(loss=f"{loss_value:.4f}", acc=f"{row['train_exact_match']:.2f}")
            if step in save_at:
                save(step, row)
            bar.update(1)
            if stop_signal:
                if step not in save_at:
                    save(step, row)
                raise TrainingInterrupted(
                    f"{stop_signal[0]} received: stopped after step {step} and saved a checkpoint; "
                    f"run the same train command again to resume"
                )
    finally:
        bar.close()
        for s, h in handlers.items():
            signal.signal(s, h)
        if metrics_file:
            metrics_file.close()
        dist_utils.teardown(world, finished=step >= tcfg.steps and not stop_signal)
    return TrainResult(run_dir=run_dir, final_step=step, last_metrics=row, is_writer=is_writer)

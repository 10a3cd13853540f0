"""One training step's forward pass and its losses: `training_losses` runs the loops once,
reads out the full depth and the progressive depth on the way, and adds the configured terms
(progressive loss, step penalty, the running-sum, partial-product, carry and order readouts). The training
loop (`loop.py`) calls it every step; tests and benchmarks call it alone.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..core.halting import relative_step
from ..core.positions import sample_offsets
from ..core.scoring import next_token_loss
from ..core.scoring import readout_ids as scoring_readout_ids
from .config import RunConfig
from .data import ShardWeights, scored_positions, shard_rows


def readout_ids(cfg: RunConfig, task, device=None) -> torch.Tensor | None:
    """The token ids the loss and evaluation read out over (`scoring.readout_ids` of
    `train.readout`), on `device`; None for the whole vocabulary."""
    ids = scoring_readout_ids(cfg.train.readout, task)
    return None if ids is None else ids.to(device)


def training_losses(model, batch, generator, cfg, device, autocast, allowed=None, part=(0, 1)):
    """Full-depth loss, plus the progressive, step-penalty and readout terms when configured. `batch` is the
    step's whole batch, in host memory; `part`: (rank, world_size), this process's rows of it
    (`data.shard_rows`), its loss weighted so that the average over ranks is the whole
    batch's loss. `allowed`: the readout's token ids (`readout_ids`) in host memory, None
    for the whole vocabulary. Returns the `StepLosses` of this rank's rows.

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
    offsets = _abacus_offsets(cfg.model, batch.tokens.shape[0], generator, rows)
    host_tokens, host_mask = batch.tokens[rows, : n_in + 1], scored[rows, : n_in + 1]
    tokens, loss_mask = to_device(batch.tokens[rows], device), to_device(scored[rows], device)

    def loss_of(state):  # state: [batch n_in d_model]
        logits = model.answer_logits(state, tokens)
        if n_in < tokens.shape[1]:  # a zero row for position n_in, which is never scored
            logits = F.pad(logits, (0, 0, 0, 1))
        # the targets and scored positions from host memory: nothing waits for the device,
        # and a target outside the readout raises here, before the step, on every device
        mean = next_token_loss(logits, host_tokens, host_mask, dtype, allowed, tcfg.focal_gamma)
        return mean * weights.per_token

    with autocast:
        inputs = model.embed(tokens[:, :n_in], abacus_offset=offsets)  # [batch n_in d_model]
        index = model.attention_index(tokens[:, :n_in], offsets)  # [batch n_in], None unless attention reads it
        plan = _draw_depths(tcfg, R, generator, batch.tokens.shape[0], inputs, rows)
        # one pass, read out on the way; autograd from loop `grad_from` on (train.backprop_loops)
        grad_from = max(0, plan.deepest - tcfg.backprop_loops) if tcfg.backprop_loops else 0
        states = _states_at(model, inputs, plan.wanted, plan.start, index, grad_from)
        state_full = states[R]
        full = loss_of(state_full)
        loss = _progressive_loss(model, tcfg, R, plan, states, full, loss_of, inputs, index)
        if tcfg.step_penalty and plan.deepest > 1:
            valid = to_device(batch.valid[rows, :n_in, None], device)
            settle = relative_step(states[plan.deepest], states[plan.deepest - 1], valid).mean() * weights.per_example
            loss = loss + tcfg.step_penalty * settle
    terms = _readout_terms(model, tcfg, batch, state_full, n_in, rows, part[1], device)
    for weight, term in ((tcfg.running_sum_loss, terms.running_sum), (tcfg.partial_product_loss, terms.partial_products),
                         (tcfg.carry_loss, terms.carries), (tcfg.order_loss, terms.order)):
        if term is not None:
            loss = loss + weight * term
    return StepLosses(loss, full, state_full, loss_mask, *terms)


class ReadoutTerms(NamedTuple):
    """The auxiliary readouts' terms of the full-depth state, unweighted, this rank's part;
    each None when its loss is off."""

    running_sum: torch.Tensor | None
    partial_products: torch.Tensor | None
    carries: torch.Tensor | None
    order: torch.Tensor | None


def _readout_terms(model, tcfg, batch, state, n_in: int, rows: slice, world_size: int, device) -> ReadoutTerms:
    """The auxiliary readouts' terms of the full-depth `state` (`ReadoutTerms`)."""
    running_sum = partial_products = carries = order = None
    if tcfg.running_sum_loss:
        if batch.running_sum is None:
            raise ValueError("train.running_sum_loss needs the batch's running-sum targets: draw batches with "
                             "training.data.BatchSource, which adds them (encode_batch alone does not)")
        running_sum = _running_sum_loss(model, state, batch.running_sum[:, :n_in], rows, world_size, device)
    if tcfg.partial_product_loss:
        if batch.partial_products is None:
            raise ValueError("train.partial_product_loss needs the batch's partial-product targets: draw batches "
                             "with training.data.BatchSource, which adds them (encode_batch alone does not)")
        partial_products = _partial_product_loss(model, state, batch.partial_products[:, :n_in], rows, world_size,
                                                 device)
    if tcfg.carry_loss:
        if batch.carries is None:
            raise ValueError("train.carry_loss needs the batch's carry targets: draw batches with "
                             "training.data.BatchSource, which adds them (encode_batch alone does not)")
        carries = _carry_loss(model, state, batch.carries[:, :n_in], rows, world_size, device)
    if tcfg.order_loss:
        if batch.item_values is None:
            raise ValueError("train.order_loss needs the batch's item values: draw batches with "
                             "training.data.BatchSource, which adds them (encode_batch alone does not)")
        order = _order_loss(model, state, batch.item_values[:, :n_in], rows, world_size, device)
    return ReadoutTerms(running_sum, partial_products, carries, order)


def _abacus_offsets(model_cfg, batch_size: int, generator, rows: slice):
    """This rank's rows of the step's random Abacus offsets (0 when the run draws none).
    Rotary positions read the offset too: labels (and separators, but for closers under
    rotary="abacus_closers") stay at index 0, so the distance from them to a digit of index j
    is offset + j, and a random offset trains the distances that numbers longer than any in
    training put there. Drawn in host memory: the model bounds its position indices from them
    without a device read."""
    uses_abacus = model_cfg.positional == "abacus" or model_cfg.rotary != "none"
    if not (uses_abacus and model_cfg.abacus_max_offset > 0):
        return 0
    return sample_offsets(batch_size, model_cfg.abacus_max_offset, model_cfg.abacus_offset_mode, generator)[rows]


class StepLosses(NamedTuple):
    """What one training step's forward pass gives, of this rank's rows."""

    loss: torch.Tensor  # what backward reads: the full-depth loss and every configured term
    full: torch.Tensor  # the cross-entropy (focal with train.focal_gamma) at the full depth, this rank's weighted part
    state: torch.Tensor  # the full-depth state [batch n_in d_model]
    loss_mask: torch.Tensor  # the scored positions [batch pos], on the device
    # the running-sum readout's mean squared error, in tens squared, unweighted by
    # train.running_sum_loss (which `loss` applies), this rank's weighted part; None when off
    running_sum: torch.Tensor | None
    # the partial-product readout's mean cross-entropy over its digit targets, unweighted by
    # train.partial_product_loss, this rank's weighted part; None when off
    partial_products: torch.Tensor | None = None
    # the carry readout's mean cross-entropy over the answer digits, unweighted by
    # train.carry_loss, this rank's weighted part; None when off
    carries: torch.Tensor | None = None
    # the order readout's mean pairwise logistic loss over the pairs of items of one list,
    # unweighted by train.order_loss, this rank's weighted part; None when off
    order: torch.Tensor | None = None


def _running_sum_loss(model, state, targets, rows: slice, world_size: int, device):
    """Mean squared error of the running-sum readout of `state` against `targets` (the whole
    batch's, in host memory, NaN where a position has none), weighted like the cross-entropy so
    that the average over ranks is the whole batch's mean over its answer digits. In float32
    (`_read_at_answers`): in bfloat16 a sum of 26 tens is held to 0.125 tens, coarser than the
    unit the loss is meant to resolve."""
    has_target = ~targets.isnan()  # [batch n_in], the whole batch
    predicted, wanted = _read_at_answers(model.read_running_sum, state, has_target, targets, rows, device)
    weight = ShardWeights.of(has_target, rows, world_size).per_token
    return F.mse_loss(predicted, wanted.to(predicted.dtype)) * weight


def _read_at_answers(read, state, has_target, targets, rows: slice, device):
    """`read` (a readout of the model) of `state` at this rank's positions that have a target,
    and those targets on the device: (readout [answer_digits ...], targets [answer_digits ...]).
    The positions are found on the host (a boolean index on the device would wait for it), and
    the readout runs outside autocast, in float32 at least (a float64 model stays so)."""
    batch_rows, positions = has_target[rows].nonzero(as_tuple=True)  # host tensors
    wanted = targets[rows][batch_rows, positions]  # [answer_digits ...]
    batch_rows, positions = to_device(batch_rows, device), to_device(positions, device)
    at_answers = state[batch_rows, positions][None]  # [1 answer_digits d_model]
    with torch.autocast(device.type, enabled=False):
        read_out = read(at_answers.to(torch.promote_types(at_answers.dtype, torch.float32)))[0]
    return read_out, to_device(wanted, device)


def _partial_product_loss(model, state, targets, rows: slice, world_size: int, device):
    """Mean cross-entropy of the partial-product readout of `state` against `targets` (the
    whole batch's digit classes [batch n_in k 2], in host memory, -100 where a position or a
    multiplier digit has none), over every class read, weighted by this rank's share of those
    classes so that the average over ranks is the whole batch's mean; read as the running sum
    is (`_read_at_answers`)."""
    read = targets >= 0  # [batch n_in k 2], the whole batch
    # ShardWeights.per_token's formula over digit targets, not positions: a row holds 2 to 2k of them
    weight = world_size * int(read[rows].sum()) / max(int(read.sum()), 1)
    has_target = read.flatten(2).any(-1)  # [batch n_in]
    logits, wanted = _read_at_answers(model.read_partial_products, state, has_target, targets, rows, device)
    logits = logits[:, : wanted.shape[1]]  # [answer_digits k 2 10]: the task's k may be below the readout's
    return F.cross_entropy(logits.reshape(-1, 10), wanted.reshape(-1), ignore_index=-100) * weight


def _carry_loss(model, state, targets, rows: slice, world_size: int, device):
    """Mean cross-entropy of the carry readout of `state` against `targets` (the whole batch's
    carry classes [batch n_in], in host memory, -100 where a position has none), weighted like
    the answer's cross-entropy so that the average over ranks is the whole batch's mean over
    its answer digits; read as the running sum is (`_read_at_answers`)."""
    has_target = targets >= 0  # [batch n_in], the whole batch
    logits, wanted = _read_at_answers(model.read_carries, state, has_target, targets, rows, device)
    return F.cross_entropy(logits, wanted) * ShardWeights.of(has_target, rows, world_size).per_token


@dataclass(frozen=True)
class _Depths:
    """The loops one training step runs and reads out, drawn from the step's generator."""

    r: int | None  # "mix": the random depth read out beside the full depth
    n_prefix: int | None  # "mcleish": loops before the progressive part (its state detached)
    n_progressive: int | None  # "mcleish": loops with gradient after them
    deepest: int
    wanted: set[int]  # the depths whose states the pass keeps
    start: torch.Tensor | None  # the state the loop starts from (None: zero), noise with init_state_noise


def _draw_depths(tcfg, R: int, generator, batch_size: int, inputs, rows) -> _Depths:
    """The step's random depths and start, drawn in one fixed order (r, the noise, McLeish's
    n and k) so that a run draws the same numbers whatever the process count."""
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
        noise = torch.randn((batch_size, *inputs.shape[1:]), generator=generator)  # [batch n_in d_model]
        start = noise[rows].to(inputs, non_blocking=True)
    if tcfg.progressive == "mcleish":
        # McLeish et al.: n loops without gradient, then k loops with gradient. The state
        # after n loops is read off the full-depth pass (detached below) instead of a
        # second, gradient-free pass: the same values without running n loops again.
        n_prefix = int(torch.randint(0, R, (1,), generator=generator))
        n_progressive = int(torch.randint(1, R - n_prefix + 1, (1,), generator=generator))
        wanted.add(n_prefix)
    return _Depths(r=r, n_prefix=n_prefix, n_progressive=n_progressive, deepest=deepest, wanted=wanted, start=start)


def _progressive_loss(model, tcfg, R: int, plan: _Depths, states, full, loss_of, inputs, index):
    """The full-depth loss `full` with the progressive term of `tcfg.progressive` added."""
    if tcfg.progressive == "mix":
        # at r == R both terms are the same loss: 0.5 * (full + full) is full, bit for bit
        return full if plan.r == R else 0.5 * (full + loss_of(states[plan.r]))
    if tcfg.progressive == "mcleish":
        prefix = states[plan.n_prefix]
        prefix = prefix.detach() if prefix is not None else None  # n_prefix = 0: the start state
        progressive = model.run_loops(inputs, range(plan.n_prefix, plan.n_prefix + plan.n_progressive), state=prefix,
                                      index=index)
        return (1 - tcfg.progressive_alpha) * full + tcfg.progressive_alpha * loss_of(progressive)
    return full


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device`, copied without making the host wait: a blocking copy to a
    GPU first waits for every kernel already queued, which stalls the loop once per tensor."""
    return tensor.to(device, non_blocking=True)


def _states_at(model, inputs, depths: set[int], start=None, index=None,
               grad_from: int = 0) -> dict[int, torch.Tensor | None]:
    """The state after each number of loops in `depths`, from one pass through the deepest
    that starts from `start` (None: the model's own zero state). Depth 0 is `start`. The
    first `grad_from` loops run without autograd: no gradient reaches them or flows back
    through them, and the states they end in are constants."""
    states, state, done = {}, start, 0
    for depth in sorted(depths | ({grad_from} if grad_from else set())):
        if depth > done:
            with torch.no_grad() if depth <= grad_from else nullcontext():
                state = model.run_loops(inputs, range(done, depth), state=state, index=index)
        states[depth], done = state, depth
    return states


def _order_loss(model, state, values, rows: slice, world_size: int, device):
    """Mean of softplus(score_i - score_j) over every two items i, j of one list with value_i <
    value_j, the scores the order readout of `state` at their closing separators: zero only
    when each list's scores rise with its values. `values`: the whole batch's item values
    [batch n_in] in host memory, NaN where a position closes no item. Weighted by this rank's
    share of the batch's pairs, so that the average over ranks is the whole batch's mean."""
    smaller = values[:, :, None] < values[:, None, :]  # [batch n_in n_in]: NaN compares False
    weight = world_size * int(smaller[rows].sum()) / max(int(smaller.sum()), 1)
    # the pairs are found on the host: a boolean index on the device would wait for it
    batch_rows, lower, higher = (to_device(index, device) for index in smaller[rows].nonzero(as_tuple=True))
    with torch.autocast(device.type, enabled=False):
        scores = model.read_order(state.to(torch.promote_types(state.dtype, torch.float32)))  # [batch n_in]
    if batch_rows.numel() == 0:  # lists of one item only: nothing to order, the graph kept
        return scores.sum() * 0.0
    return F.softplus(scores[batch_rows, lower] - scores[batch_rows, higher]).mean() * weight

"""The model pass: run the loops one at a time and keep per-example numbers only.

For each batch the states of every loop are held (`[horizon, batch, pos, d_model]`, the
batch size chosen so they fit `state_budget_mb`) because the distance to the *last* state
needs the last state; everything kept after the batch is a few numbers per example and
loop (step and state norms per position class, logit-lens correctness and argmax per
answer token, KL), plus the trajectories of a handful of chosen examples.

The loop map is `model.run_loops(inputs, range(t, t + 1), state=s)`; the state before loop
0 is zero (loop 0 sees the injected input alone), so the first relative step is 1.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from abacus_interp.core.hooks import hook_name
from abacus_interp.core.tokens import encode_batch
from abacus_interp.tasks.base import Example

from .dynamics import SpectrumEstimate, spectrum
from .problems import CLASSES, class_masks

logger = logging.getLogger(__name__)


@dataclass
class Collected:
    step: np.ndarray  # [N, H, C] ||s_n - s_{n-1}|| over the class's positions
    norm: np.ndarray  # [N, H, C] ||s_n||
    distance: np.ndarray  # [N, H, C] ||s_n - s_H||
    correct: np.ndarray  # [N, H, L] teacher-forced argmax == target (False where padded)
    predicted: np.ndarray  # [N, H, L] argmax token id (-1 where padded)
    answer_mask: np.ndarray  # [N, L] real answer tokens (digits, then EOS)
    kl: np.ndarray  # [N, H] mean over readout positions of KL(p_n || p_{n-1}); NaN at n=1
    trajectories: dict[int, np.ndarray]  # example index -> [H, d_model] states at one position
    trajectory_positions: dict[int, int]
    batch_size: int


def _batch_size(model, examples: Sequence[Example], horizon: int, batch_size: int, budget_mb: float) -> int:
    longest = max(len(e.prompt) + len(e.target) + 1 for e in examples)
    bytes_per_example = horizon * longest * model.cfg.d_model * model.W_E.element_size()
    fit = int(budget_mb * 2**20 // max(bytes_per_example, 1))
    if fit < 1:
        logger.warning("one example's %d states exceed state_budget_mb=%s; using batch size 1", horizon, budget_mb)
    return max(1, min(batch_size, fit))


@torch.no_grad()
def collect(
    model,
    examples: Sequence[Example],
    horizon: int,
    batch_size: int = 256,
    state_budget_mb: float = 256.0,
    trajectory_examples: dict[int, int] | None = None,
    progress: bool = True,
) -> Collected:
    """Per-example loop dynamics and logit lens for loops 1..horizon.

    `trajectory_examples` maps example index -> answer-token index k whose readout state
    (the position predicting answer token k) is kept at every loop."""
    n = len(examples)
    ans_len = np.array([len(model.cfg.vocab.encode(e.target)) + 1 for e in examples])  # + EOS
    c = _empty(ans_len, horizon, _batch_size(model, examples, horizon, batch_size, state_budget_mb))
    trajectory_examples = trajectory_examples or {}
    # sorting by length keeps padding (and wasted compute) low
    order = sorted(range(n), key=lambda i: len(examples[i].prompt) + len(examples[i].target))
    chunks = [order[i : i + c.batch_size] for i in range(0, n, c.batch_size)]
    for rows in tqdm(chunks, desc="fixed point", disable=not progress or len(chunks) < 2, leave=False):
        _collect_batch(model, [examples[i] for i in rows], rows, ans_len[rows], horizon, c, trajectory_examples)
    # padded answer slots stay False in `correct`; trailing slots of short rows are not answers
    c.correct &= c.answer_mask[:, None, :]
    return c


def _empty(ans_len: np.ndarray, horizon: int, batch_size: int) -> Collected:
    """Every example's arrays before any batch fills its rows: zeros, False, -1 argmax and
    NaN KL; `ans_len` is each example's answer length with its EOS."""
    n, n_cls, width = len(ans_len), len(CLASSES), int(ans_len.max())
    return Collected(
        step=np.zeros((n, horizon, n_cls)),
        norm=np.zeros((n, horizon, n_cls)),
        distance=np.zeros((n, horizon, n_cls)),
        correct=np.zeros((n, horizon, width), dtype=bool),
        predicted=np.full((n, horizon, width), -1, dtype=np.int32),
        answer_mask=np.arange(width)[None, :] < ans_len[:, None],
        kl=np.full((n, horizon), np.nan),
        trajectories={},
        trajectory_positions={},
        batch_size=batch_size,
    )


def _collect_batch(model, chunk: Sequence[Example], rows: list[int], ans_len: np.ndarray, horizon: int,
                   c: Collected, trajectory_examples: dict[int, int]) -> None:
    """Fill rows `rows` of `c` (the examples `chunk`, answers of `ans_len` tokens with EOS):
    every loop's numbers, then the distances to the last state and the kept trajectories."""
    device, width = model.W_E.device, c.correct.shape[2]
    batch = encode_batch(model.cfg.vocab, [e.prompt for e in chunk], [e.target for e in chunk],
                         max_len=model.cfg.max_seq_len)
    lens = torch.tensor(ans_len)
    masks = class_masks(batch, model.digit_ids, lens - 1).to(device).float()  # [C B P]
    tokens = batch.tokens.to(device)
    p = tokens.shape[1]
    k = torch.arange(width)
    real = (k[None, :] < lens[:, None]).to(device)  # [B L]
    where = (batch.prompt_lengths[:, None] - 1 + k[None, :]).clamp(max=p - 1).to(device)  # readout pos
    target = tokens.gather(1, (where + 1).clamp(max=p - 1))  # [B L]
    states = _run_batch_loops(model, tokens, rows, horizon, c, masks, real, where, target)
    last = states[-1]
    for t in range(horizon):
        d_sq = (states[t] - last).float().pow(2).sum(-1)
        c.distance[rows, t] = (masks * d_sq).sum(-1).sqrt().T.cpu().numpy()
    for j, i in enumerate(rows):
        if i in trajectory_examples:
            pos = int(where[j, min(trajectory_examples[i], int(lens[j]) - 1)])
            c.trajectories[i] = states[:, j, pos].float().cpu().numpy()
            c.trajectory_positions[i] = pos


def _run_batch_loops(model, tokens: torch.Tensor, rows: list[int], horizon: int, c: Collected, masks: torch.Tensor,
                     real: torch.Tensor, where: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Run loops 1..horizon on one batch, filling its rows of `c`'s step and norm per class,
    logit-lens correctness and argmax at the readout positions `where` ([B L], `real` where
    an answer token), and KL; returns every loop's state [horizon B P d_model]."""
    b, p = tokens.shape
    readout_count = real.sum(1).clamp_min(1)
    inputs = model.embed(tokens)
    index = model.attention_index(tokens)
    states = torch.empty((horizon, b, p, model.cfg.d_model), dtype=inputs.dtype, device=model.W_E.device)
    s, prev_logp = None, None
    for t in range(horizon):
        new = model.run_loops(inputs, range(t, t + 1), state=s, index=index)
        diff_sq = ((new - s) if s is not None else new).float().pow(2).sum(-1)  # [B P]
        norm_sq = new.float().pow(2).sum(-1)
        c.step[rows, t] = (masks * diff_sq).sum(-1).sqrt().T.cpu().numpy()
        c.norm[rows, t] = (masks * norm_sq).sum(-1).sqrt().T.cpu().numpy()
        states[t] = new
        s = new
        # the answer as the model reads it off this loop's state (with sorting's pairwise answer,
        # the comparison of the list's items in that state), at the readout positions
        logits = model.answer_logits(new, tokens)  # [B P d_vocab]
        logp = logits.gather(1, where[..., None].expand(-1, -1, logits.shape[-1])).float().log_softmax(-1)  # [B L d_vocab]
        top = logp.argmax(-1)
        c.correct[rows, t, :] = ((top == target) & real).cpu().numpy()
        c.predicted[rows, t, :] = torch.where(real, top, -1).cpu().numpy()
        if prev_logp is not None:
            div = (logp.exp() * (logp - prev_logp)).sum(-1)  # [B L] KL(p_t || p_{t-1})
            c.kl[rows, t] = ((div * real).sum(1) / readout_count).cpu().numpy()
        prev_logp = logp
    return states


def _force_explicit_attention(model, loop: int):
    """A no-op hook on every layer's pattern makes `attention_backend="auto"` take the
    explicit path, whose ops all have double-backward rules (the fused CPU kernel does not)."""
    names = [hook_name("attn.hook_pattern", loop=loop, layer=layer) for layer in range(model.cfg.n_layers)]
    return model.hooks(fwd_hooks=[(name, lambda x, hook: None) for name in names])


def loop_map(model, inputs: torch.Tensor, loop: int, index: torch.Tensor | None = None):
    """f(s) = the state leaving loop `loop` given the state `s` leaving the loop before,
    with the input injected (the map whose fixed points the analysis is about). `index`:
    `model.attention_index(tokens)` of the same tokens as `inputs`."""
    return lambda s: model.run_loops(inputs, range(loop, loop + 1), state=s, index=index)


def model_spectrum(
    model,
    examples: Sequence[Example],
    at_loops: Sequence[int],
    n_iter: int = 200,
    tol: float = 1e-5,
    seed: int = 0,
) -> dict[int, SpectrumEstimate]:
    """Spectrum of the loop map's Jacobian at the state after `n` loops, for each n in
    `at_loops` (1-based), one batch of `examples`. The map applied is loop index n (hook
    sets hold no weights, so every loop index is the same function)."""
    vocab, device = model.cfg.vocab, model.W_E.device
    batch = encode_batch(vocab, [e.prompt for e in examples], [e.target for e in examples],
                         max_len=model.cfg.max_seq_len)
    tokens = batch.tokens.to(device)
    mask = batch.valid.to(device)[..., None].to(model.W_E.dtype)
    was_training = model.training
    model.eval()
    out = {}
    try:
        with torch.no_grad():
            inputs = model.embed(tokens)
            index = model.attention_index(tokens)
        for n in sorted(set(at_loops)):
            with torch.no_grad():
                s = model.run_loops(inputs, range(n), index=index)
            loop = min(n, model.cfg.max_loops - 1)
            with _force_explicit_attention(model, loop):
                out[n] = spectrum(loop_map(model, inputs, loop, index), s, mask=mask, n_iter=n_iter, tol=tol, seed=seed)
    finally:
        model.train(was_training)
    return out

"""Teacher-forced losses and exact match, shared by training, evaluation and analyses.

Exact match here is greedy exact match: if the argmax at every answer position (EOS
included) equals the target, greedy decoding reproduces the target token for token, and
if one is wrong, greedy decoding diverges there. So one forward pass scores a whole batch
without generating.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..errors import UserError
from .tokens import EOS_ID, PAD_ID, Batch, encode_batch


def without_eos(tokens: Int[Tensor, "batch pos"], loss_mask: Bool[Tensor, "batch pos"]) -> Bool[Tensor, "batch pos"]:
    """`loss_mask` minus the positions whose next token is EOS: the answer tokens only."""
    next_is_eos = torch.zeros_like(loss_mask)
    next_is_eos[:, :-1] = tokens[:, 1:] == EOS_ID
    return loss_mask & ~next_is_eos


def readout_targets(targets: Int[Tensor, " n"], allowed: Tensor, d_vocab: int) -> Int[Tensor, " n"]:
    """`targets` (token ids below `d_vocab`) re-indexed into the restricted readout `allowed`,
    on the targets' device. A target outside `allowed` is a ValueError: its probability under
    this readout is zero, so its loss would be infinite."""
    allowed = allowed.to(targets.device)
    index = torch.full((d_vocab,), -1, dtype=torch.long, device=targets.device)
    index[allowed] = torch.arange(len(allowed), device=targets.device)
    new_targets = index[targets]
    if (new_targets < 0).any():
        bad = sorted(set(targets[new_targets < 0].tolist()))[:5]
        raise ValueError(
            f"target token ids {bad} are outside the restricted readout ({len(allowed)} ids); score "
            "only the answer tokens (no EOS) with a readout restricted to the answer symbols"
        )
    return new_targets


def next_token_loss(
    logits: Float[Tensor, "batch pos d_vocab"],
    tokens: Int[Tensor, "batch pos"],
    loss_mask: Bool[Tensor, "batch pos"],
    dtype: torch.dtype = torch.float32,
    allowed: Tensor | None = None,
    focal_gamma: float | None = None,
) -> Float[Tensor, ""]:
    """Mean cross-entropy of the next token over the masked positions (focal, if asked), the one loss of
    training and scoring on every device. `dtype=float64` follows Nanda et al.: in float32,
    grokking's tiny losses underflow and stall. `allowed` (token ids) restricts the softmax
    to those ids, as Nanda et al.'s readout; None: the whole vocabulary. A scored target
    outside `allowed` is a ValueError. `focal_gamma` (`train.focal_gamma`): each token's
    cross-entropy weighed by (1 - p)^focal_gamma, p its target's probability; None: plain.

    Which positions are scored and what their targets are is worked out where `tokens` and
    `loss_mask` live; only the logits need be on the accelerator. The training loop passes
    them in host memory, so the loss never makes the host wait for the device (and a bad
    target is caught before the step), whatever the device."""
    if tokens.device != loss_mask.device:
        raise ValueError(f"tokens ({tokens.device}) and loss_mask ({loss_mask.device}) must be on one device")
    rows, positions = loss_mask[:, :-1].nonzero(as_tuple=True)  # the scored positions, in row-major order
    targets = tokens[:, 1:][rows, positions]  # [n_scored]
    if allowed is not None:
        targets = readout_targets(targets, allowed, logits.shape[-1])
    device = logits.device
    rows, positions = rows.to(device, non_blocking=True), positions.to(device, non_blocking=True)
    logits = logits[:, :-1][rows, positions].to(dtype)  # [n_scored d_vocab]
    if allowed is not None:
        logits = logits[:, allowed.to(device, non_blocking=True)]
    targets = targets.to(device, non_blocking=True)
    if focal_gamma is None:
        return F.cross_entropy(logits, targets)
    per_token = F.cross_entropy(logits, targets, reduction="none")  # [n_scored]
    # 1 - p as -expm1(-loss): exact for the tiny losses of tokens already right; floored above 0
    # so that a gamma below 1 has a finite gradient where a token's loss is exactly 0
    one_minus_p = (-torch.expm1(-per_token)).clamp_min(torch.finfo(per_token.dtype).tiny)
    return (one_minus_p**focal_gamma * per_token).mean()


def readout_ids(readout: str, task) -> Tensor | None:
    """The token ids a run's softmax covers (`train.readout`): None for "all" (the whole
    vocabulary), the task's answer symbols for "answer_symbols", every token but PAD and EOS
    for "symbols"."""
    if readout == "all":
        return None
    if readout == "answer_symbols":
        if task.answer_token_ids is None:
            raise UserError(
                f"train.readout='answer_symbols' needs a task that declares its answer tokens "
                f"(Task.answer_token_ids); {task.name!r} does not, so use train.readout=all or symbols"
            )
        return torch.tensor(task.answer_token_ids, dtype=torch.long)
    if readout == "symbols":
        return torch.tensor([i for i in range(len(task.vocab)) if i not in (PAD_ID, EOS_ID)], dtype=torch.long)
    raise UserError(f"train.readout={readout!r}; choose one of all, answer_symbols, symbols")


def run_readout(train: dict, task) -> dict:
    """How a run was trained to answer, as `score_examples` keywords: `allowed` (the token
    ids its readout covers, `readout_ids`; None for the whole vocabulary) and `eos` (False for
    `train.loss_positions="answer_tokens"`: the EOS was never trained, so it is not scored).
    `train` is config.json's "train" dict."""
    return {
        "allowed": readout_ids(train.get("readout", "all"), task),
        "eos": train.get("loss_positions", "answer") != "answer_tokens",
    }


def decode_budget(task, examples: Sequence, eos: bool = True) -> int:
    """Tokens greedy decoding needs to judge `examples` as teacher forcing scores them: the
    longest answer the task defines for them (`len(target)` in tokens), plus the EOS when
    the run was trained to write it (`run_readout(...)["eos"]`). A run trained on the answer
    tokens only never learned to stop, so without this bound it writes on past its answer
    (grok-mod113's one-token residue followed by a second, untrained one)."""
    if not examples:
        raise ValueError("decode_budget needs at least one example")
    return max(len(task.vocab.split(e.target)) for e in examples) + (1 if eos else 0)


@dataclass
class Scores:
    loss: float
    token_accuracy: float
    exact_match: float
    per_example_correct: list[bool]
    # log-likelihood of the whole correct answer (EOS included), per example
    answer_logprob: list[float]
    # per example, whether each scored answer token (EOS included unless eos=False) is the
    # argmax, in order: where in the answer an example fails. Built only when asked for
    # (`per_token=True`): a list per example that most callers never read.
    per_token_correct: list[list[bool]] | None = None
    # the argmax token id at each of those positions (`per_token=True`): what a wrong token was
    per_token_predicted: list[list[int]] | None = None

    @property
    def perplexity(self) -> float:
        """Per-token perplexity of the correct answers."""
        return float(torch.exp(torch.tensor(self.loss)))


def score_batch(
    model, batch: Batch, n_loops: int | None = None, allowed: Tensor | None = None, eos: bool = True,
    per_token: bool = False,
) -> Scores:
    """Teacher-forced scores of one batch. `eos=False` scores the answer tokens without the
    EOS; `allowed` restricts the readout to those token ids (needs `eos=False` unless EOS is
    among them), matching a run trained with `train.readout="answer_symbols"`; `per_token`
    fills `Scores.per_token_correct` and `Scores.per_token_predicted`."""
    device = model.W_E.device
    tokens = batch.tokens.to(device)
    return score_logits(model(tokens, n_loops), tokens, batch.loss_mask.to(device), allowed, eos, per_token)


def score_logits(
    logits: Float[Tensor, "batch pos d_vocab"],
    tokens: Int[Tensor, "batch pos"],
    loss_mask: Bool[Tensor, "batch pos"],
    allowed: Tensor | None = None,
    eos: bool = True,
    per_token: bool = False,
) -> Scores:
    """`score_batch` on logits already computed (by a caller that runs the loops itself)."""
    device = logits.device
    if not eos:
        loss_mask = without_eos(tokens, loss_mask)
    target = tokens[:, 1:]
    mask = loss_mask[:, :-1]
    if allowed is None:
        logprobs = logits[:, :-1].float().log_softmax(-1)
    else:  # the readout over `allowed` only, in the full vocabulary's index space
        allowed = allowed.to(device)
        restricted = torch.full_like(logits[:, :-1], float("-inf"), dtype=torch.float32)
        restricted[..., allowed] = logits[:, :-1, allowed].float()
        logprobs = restricted.log_softmax(-1)
        outside = mask & ~torch.isin(target, allowed)
        if outside.any():
            raise ValueError("a scored target token is outside the restricted readout; pass eos=False")
    token_logprob = logprobs.gather(-1, target[..., None])[..., 0].masked_fill(~mask, 0.0)  # [batch pos-1]
    predicted = logprobs.argmax(-1)  # [batch pos-1]
    hits = predicted == target
    correct = hits | ~mask
    n_scored = mask.sum()
    return Scores(
        loss=float(-(token_logprob * mask).sum() / n_scored),
        token_accuracy=float((hits & mask).sum() / n_scored),
        exact_match=float(correct.all(-1).float().mean()),
        per_example_correct=correct.all(-1).tolist(),
        answer_logprob=(token_logprob * mask).sum(-1).tolist(),
        per_token_correct=_split_rows(hits[mask], mask.sum(-1)) if per_token else None,
        per_token_predicted=_split_rows(predicted[mask], mask.sum(-1)) if per_token else None,
    )


def _split_rows(flat: Tensor, counts: Int[Tensor, " batch"]) -> list[list]:
    """A flat tensor of every scored position, row after row, as one list per row: one read
    from the device for the whole batch, not one per row."""
    values, out, start = flat.tolist(), [], 0
    for count in counts.tolist():
        out.append(values[start : start + count])
        start += count
    return out


@torch.no_grad()
def score_examples(
    model,
    examples: Sequence,
    n_loops: int | None = None,
    batch_size: int = 512,
    allowed: Tensor | None = None,
    eos: bool = True,
    per_token: bool = False,
) -> Scores:
    """Teacher-forced scores of task examples (objects with .prompt and .target); `allowed`,
    `eos` and `per_token` as in `score_batch`."""
    was_training = model.training
    model.eval()
    parts: list[tuple[Scores, int]] = []
    try:
        for start in range(0, len(examples), batch_size):
            chunk = examples[start : start + batch_size]
            batch = encode_batch(model.cfg.vocab, [e.prompt for e in chunk], [e.target for e in chunk])
            mask = batch.loss_mask if eos else without_eos(batch.tokens, batch.loss_mask)
            parts.append((score_batch(model, batch, n_loops, allowed, eos, per_token), int(mask.sum())))
    finally:
        model.train(was_training)
    if not parts:
        raise ValueError("score_examples needs at least one example")
    n_tokens = sum(n for _, n in parts)
    return Scores(
        loss=sum(s.loss * n for s, n in parts) / n_tokens,
        token_accuracy=sum(s.token_accuracy * n for s, n in parts) / n_tokens,
        exact_match=sum(sum(s.per_example_correct) for s, _ in parts) / len(examples),
        per_example_correct=[c for s, _ in parts for c in s.per_example_correct],
        answer_logprob=[lp for s, _ in parts for lp in s.answer_logprob],
        per_token_correct=[c for s, _ in parts for c in s.per_token_correct] if per_token else None,
        per_token_predicted=[p for s, _ in parts for p in s.per_token_predicted] if per_token else None,
    )

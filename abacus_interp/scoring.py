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

from .tokens import Batch, encode_batch


def next_token_loss(
    logits: Float[Tensor, "batch pos d_vocab"],
    tokens: Int[Tensor, "batch pos"],
    loss_mask: Bool[Tensor, "batch pos"],
    dtype: torch.dtype = torch.float32,
) -> Float[Tensor, ""]:
    """Mean cross-entropy of the next token over the masked positions. `dtype=float64`
    follows Nanda et al.: in float32, grokking's tiny losses underflow and stall."""
    mask = loss_mask[:, :-1]
    logits = logits[:, :-1][mask].to(dtype)  # [n_scored d_vocab]
    targets = tokens[:, 1:][mask]  # [n_scored]
    return F.cross_entropy(logits, targets)


@dataclass
class Scores:
    loss: float
    token_accuracy: float
    exact_match: float
    per_example_correct: list[bool]
    # log-likelihood of the whole correct answer (EOS included), per example
    answer_logprob: list[float]

    @property
    def perplexity(self) -> float:
        """Per-token perplexity of the correct answers."""
        return float(torch.exp(torch.tensor(self.loss)))


def score_batch(model, batch: Batch, n_loops: int | None = None) -> Scores:
    device = model.W_E.device
    tokens, loss_mask = batch.tokens.to(device), batch.loss_mask.to(device)
    logits = model(tokens, n_loops)  # [batch pos d_vocab]
    logprobs = logits[:, :-1].float().log_softmax(-1)
    target = tokens[:, 1:]
    mask = loss_mask[:, :-1]
    token_logprob = logprobs.gather(-1, target[..., None])[..., 0]  # [batch pos-1]
    correct = (logprobs.argmax(-1) == target) | ~mask
    n_scored = mask.sum()
    return Scores(
        loss=float(-(token_logprob * mask).sum() / n_scored),
        token_accuracy=float(((logprobs.argmax(-1) == target) & mask).sum() / n_scored),
        exact_match=float(correct.all(-1).float().mean()),
        per_example_correct=correct.all(-1).tolist(),
        answer_logprob=(token_logprob * mask).sum(-1).tolist(),
    )


@torch.no_grad()
def score_examples(model, examples: Sequence, n_loops: int | None = None, batch_size: int = 512) -> Scores:
    """Teacher-forced scores of task examples (objects with .prompt and .target)."""
    was_training = model.training
    model.eval()
    parts: list[tuple[Scores, int]] = []
    try:
        for start in range(0, len(examples), batch_size):
            chunk = examples[start : start + batch_size]
            batch = encode_batch(model.cfg.vocab, [e.prompt for e in chunk], [e.target for e in chunk])
            parts.append((score_batch(model, batch, n_loops), int(batch.loss_mask.sum())))
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
    )

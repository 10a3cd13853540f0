"""Shared plumbing of the evaluation suite's sections, with no evaluation logic of its own.

This module owns the pieces every section uses: the seeded `random.Random` streams keyed by
seed and section/cell name (`section_rng`, so one cell's problems never depend on which other
cells are evaluated), the does-it-fit-max_seq_len check (`fits_context`), the length rule
of `solve` and `eval --lengths` (`check_fits_model`), the per-set score
summary (`scores_summary`), a None-skipping mean (`mean_or_none`) and the single tqdm progress bar the
suite advances section by section (`SectionProgress`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from tqdm.auto import tqdm

from abacus_interp.core.devices import free_memory
from abacus_interp.core.scoring import Scores
from abacus_interp.core.tokens import EOS_ID
from abacus_interp.errors import UserError
from abacus_interp.evaluation.result import SetScores
from abacus_interp.tasks.base import Example


def section_rng(seed: int, *parts: Any) -> random.Random:
    """A stream keyed by the seed and a name; str seeds hash with SHA-512, so this is
    stable across processes (unlike hash())."""
    return random.Random(":".join(["abacus-eval", str(seed), *map(str, parts)]))


def fits_context(example: Example, vocab, max_seq_len: int) -> bool:
    """Whether prompt + target + EOS fits the model (the teacher-forced input length)."""
    return len(vocab.encode(example.prompt)) + len(vocab.encode(example.target)) + 1 <= max_seq_len


def check_fits_model(model, example: Example, what: str = "this problem") -> None:
    """UserError, naming `what`, when `example` (prompt, answer and EOS) needs a position the
    model has no row for (`ArithmeticModel.why_too_long`), or more memory for its attention
    than the model's device has free: the one length rule of `solve` and of `eval --lengths`,
    checked before any decoding, so a problem too long for the model ends in one line rather
    than in its answer cut short or an error mid-run."""
    vocab = model.cfg.vocab
    prompt, answer = vocab.encode(example.prompt), vocab.encode(example.target)
    n_tokens = len(prompt) + len(answer) + 1
    reason = model.why_too_long([*prompt, *answer, EOS_ID])
    if reason is not None:
        raise UserError(
            f"{what} (prompt {len(prompt)} tokens + answer {len(answer)} + EOS) {reason}; use shorter "
            "operands, or a model without a position table (model.positional='none', as in the "
            "extrap-add preset) or with a larger model.max_seq_len"
        )
    device = model.W_E.device
    needed, free = model.attention_bytes(n_tokens), free_memory(device)
    if free is not None and needed > free:
        raise UserError(
            f"{what} has {n_tokens} tokens, and attending over them needs about {needed / 2**30:.1f} GiB, "
            f"more than the {free / 2**30:.1f} GiB free on {device}; use shorter operands"
        )


def scores_summary(s: Scores, n: int) -> SetScores:
    return SetScores(
        exact_match=s.exact_match,
        loss=s.loss,
        token_accuracy=s.token_accuracy,
        perplexity=s.perplexity,
        mean_answer_logprob=sum(s.answer_logprob) / len(s.answer_logprob),
        n=n,
    )


def mean_or_none(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


class SectionProgress:
    def __init__(self, enabled: bool, total: int):
        self.bar = tqdm(
            total=total, desc="eval", disable=not enabled, dynamic_ncols=True, leave=False
        )

    def section(self, name: str) -> None:
        self.bar.set_postfix_str(name, refresh=False)

    def step(self, n: int = 1) -> None:
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()

"""Shared plumbing of the evaluation suite's sections, with no evaluation logic of its own.

This module owns the pieces every section uses: the seeded `random.Random` streams keyed by
seed and section/cell name (`section_rng`, so one cell's problems never depend on which other
cells are evaluated), the does-it-fit-max_seq_len check (`fits_context`), the per-set score
summary (`scores_summary`), a None-skipping mean (`mean_or_none`) and the single tqdm progress bar the
suite advances section by section (`SectionProgress`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from tqdm.auto import tqdm

from abacus_interp.core.scoring import Scores
from abacus_interp.tasks.base import Example


def section_rng(seed: int, *parts: Any) -> random.Random:
    """A stream keyed by the seed and a name; str seeds hash with SHA-512, so this is
    stable across processes (unlike hash())."""
    return random.Random(":".join(["abacus-eval", str(seed), *map(str, parts)]))


def fits_context(example: Example, vocab, max_seq_len: int) -> bool:
    """Whether prompt + target + EOS fits the model (the teacher-forced input length)."""
    return len(vocab.encode(example.prompt)) + len(vocab.encode(example.target)) + 1 <= max_seq_len


def scores_summary(s: Scores, n: int) -> dict[str, Any]:
    return {
        "exact_match": s.exact_match,
        "loss": s.loss,
        "token_accuracy": s.token_accuracy,
        "perplexity": s.perplexity,
        "mean_answer_logprob": sum(s.answer_logprob) / len(s.answer_logprob),
        "n": n,
    }


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

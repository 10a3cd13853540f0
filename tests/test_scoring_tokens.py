"""score_examples' per-token correctness: each answer token (then EOS) of each example, in
order, equal to a naive argmax read one example at a time, and consistent with the exact match."""

from __future__ import annotations

import random

import torch
from conftest import make_tiny_model

from abacus_interp.core.scoring import score_examples
from abacus_interp.core.tokens import EOS_ID
from abacus_interp.tasks import get_task


def _naive(model, task, example) -> list[bool]:
    prompt, answer = task.vocab.encode(example.prompt), task.vocab.encode(example.target) + [EOS_ID]
    tokens = torch.tensor([prompt + answer])
    with torch.no_grad():
        logits = model(tokens)[0]
    return [int(logits[len(prompt) - 1 + i].argmax()) == t for i, t in enumerate(answer)]


def test_per_token_correct_equals_a_naive_read_of_each_example():
    task = get_task("addition", max_digits=3)
    model = make_tiny_model(vocab=task.vocab).eval()
    examples = task.sample(24, random.Random(3))
    scores = score_examples(model, examples, batch_size=7, per_token=True)  # batches of several lengths, padded
    assert scores.per_token_correct == [_naive(model, task, e) for e in examples]
    assert [all(c) for c in scores.per_token_correct] == scores.per_example_correct
    assert score_examples(model, examples).per_token_correct is None  # built only when asked for
    n_right = sum(sum(c) for c in scores.per_token_correct)
    assert abs(n_right / sum(len(c) for c in scores.per_token_correct) - scores.token_accuracy) < 1e-9


def test_without_eos_the_last_token_is_the_answer_s():
    task = get_task("addition", max_digits=3)
    model = make_tiny_model(vocab=task.vocab).eval()
    examples = task.sample(10, random.Random(4))
    with_eos = score_examples(model, examples, per_token=True)
    without = score_examples(model, examples, eos=False, per_token=True)
    assert [c[:-1] for c in with_eos.per_token_correct] == without.per_token_correct

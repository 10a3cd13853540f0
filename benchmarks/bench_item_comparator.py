"""What sorting's pairwise answer (`model.item_comparator`) costs; prints one table of ratios, asserts nothing.

The model of the preset `extrap-sort-window` with the list's items kept apart (the sorter the
pairwise answer was trained on), timed against itself with and without a comparator of 128
hidden units (the shipped run's), on the same weights:
(a) a train step on held-out lists of the preset's task (2-5 numbers): the comparison of every
    pair, the mask of written labels and their backward pass, against the unembedding alone.
    Goal: <= 1.15x.
(b) greedy decoding of lists of 10 numbers, cached: the pairwise answer keeps every position's
    final state and reads the whole sequence at each new token (context only).

Repetitions alternate (A, B, A, B, ...) after a warmup and the table reports medians.

    python benchmarks/bench_item_comparator.py [--threads N] [--reps 20] [--warmup 3] [--batch 64]
"""

from __future__ import annotations

import random

import torch
from bench_model import Comparison, Setup, at_most, sorter_bench_main, time_interleaved, train_step

from abacus_interp import LoopedTransformer
from abacus_interp.core.decoding import generate
from abacus_interp.core.tokens import encode_batch
from abacus_interp.training.presets import get_preset


def comparator_cost(batch: int, reps: int, warmup: int, seed: int, setup: Setup) -> list[Comparison]:
    run = get_preset("extrap-sort-window")
    task = run.make_task()
    examples = task.sample_held_out(batch, random.Random(seed))
    tokens = encode_batch(task.vocab, [e.prompt for e in examples], [e.target for e in examples]).tokens
    cfg = run.model.replace(list_items_read_alone=True)
    torch.manual_seed(seed)
    plain = LoopedTransformer(cfg).to(setup.device)
    paired = LoopedTransformer(cfg.replace(item_comparator=128)).to(setup.device)
    loaded = paired.load_state_dict(plain.state_dict(), strict=False)  # the same weights; the comparator fresh
    if loaded.unexpected_keys or any(not key.startswith("comparator.") for key in loaded.missing_keys):
        raise RuntimeError(f"the two models differ beyond the comparator: {loaded}")
    shape = f"sorter d{cfg.d_model} {cfg.n_layers}Lx{cfg.n_loops}R b{batch} s{tokens.shape[1]}"
    step = time_interleaved(train_step(paired, tokens.to(setup.device), setup),
                            train_step(plain, tokens.to(setup.device), setup), reps, warmup, setup.device)
    tens = [e.prompt for e in task.sample(batch, random.Random(seed + 1), min_numbers=10, max_numbers=10)]
    plain.eval()
    paired.eval()
    decode = time_interleaved(lambda: generate(paired, tens, max_new_tokens=11),
                              lambda: generate(plain, tens, max_new_tokens=11), max(reps // 4, 2), 1, setup.device)
    return [Comparison(f"train step, {shape}", "pairwise", "plain", *step, "<= 1.15", at_most(1.15)),
            Comparison(f"decode {batch} lists of 10, cached", "pairwise", "plain", *decode)]


if __name__ == "__main__":
    sorter_bench_main(__doc__, comparator_cost)

"""What the attention sink (`model.attention_sink`) costs; prints one table of ratios, asserts nothing.

The model of the preset `extrap-sort-window` with the scalable softmax (the sorter the sink was
tried on), a train step on held-out sorting lists (their masks: windows, head kinds, the answer
blind), timed against itself:
(a) with the sink against without it, both on SDPA: what one more key per head costs. Goal:
    <= 1.15x.
(b) with the sink on the explicit path against SDPA: what `attend` buys over materialising the
    scores with the sink's column (context only).

Repetitions alternate (A, B, A, B, ...) after a warmup and the table reports medians.

    python benchmarks/bench_attention_sink.py [--threads N] [--reps 20] [--warmup 3] [--batch 64] [--device cpu|cuda]
"""

from __future__ import annotations

import random

import torch
from bench_model import Comparison, Setup, at_most, sorter_bench_main, time_interleaved, train_step

from abacus_interp import LoopedTransformer
from abacus_interp.core.tokens import encode_batch
from abacus_interp.training.presets import get_preset


def sorting_tokens(batch: int, seed: int, device) -> tuple[object, torch.Tensor]:
    """The preset's model config (with the scalable softmax) and a batch of its task's lists."""
    run = get_preset("extrap-sort-window")
    task = run.make_task()
    examples = task.sample_held_out(batch, random.Random(seed))
    tokens = encode_batch(task.vocab, [e.prompt for e in examples], [e.target for e in examples]).tokens
    return run.model.replace(softmax_length_scale=0.3, attention_backend="sdpa"), tokens.to(device)


def sink_cost(batch: int, reps: int, warmup: int, seed: int, setup: Setup) -> list[Comparison]:
    cfg, tokens = sorting_tokens(batch, seed, setup.device)
    torch.manual_seed(seed)
    plain = LoopedTransformer(cfg).to(setup.device)
    sink = LoopedTransformer(cfg.replace(attention_sink=0.0)).to(setup.device)
    sink_explicit = LoopedTransformer(cfg.replace(attention_sink=0.0, attention_backend="explicit")).to(setup.device)
    loaded = sink.load_state_dict(plain.state_dict(), strict=False)  # the same weights; the sink at 0
    if loaded.unexpected_keys or any(not key.endswith("attn.sink") for key in loaded.missing_keys):
        raise RuntimeError(f"the two models differ beyond the sink: {loaded}")
    sink_explicit.load_state_dict(sink.state_dict(), strict=True)
    with torch.no_grad():
        gap = (sink(tokens) - sink_explicit(tokens)).abs().max().item()
    print(f"sink on SDPA vs explicit logits: max |difference| {gap:.2e}")
    shape = f"sorter d{cfg.d_model} {cfg.n_layers}Lx{cfg.n_loops}R b{batch} s{tokens.shape[1]}"
    with_and_without = time_interleaved(train_step(sink, tokens, setup), train_step(plain, tokens, setup),
                                        reps, warmup, setup.device)
    paths = time_interleaved(train_step(sink_explicit, tokens, setup), train_step(sink, tokens, setup),
                             reps, warmup, setup.device)
    return [Comparison(f"train step, {shape}", "sink", "no sink", *with_and_without, "<= 1.15", at_most(1.15)),
            Comparison(f"train step with the sink, {shape}", "explicit", "sdpa", *paths)]


if __name__ == "__main__":
    sorter_bench_main(__doc__, sink_cost)

"""Greedy decoding: `model.generate` (key/value cache per loop and layer) against
`naive_generate` (the full forward re-run for every new token). Prints one table, asserts
nothing. Goal: cached >= 5x faster.

The prompts are the Abacus evaluation grid: operands of 1..20 digits each (a 20x20 grid),
`--per-cell` problems per cell. The model has the small-add shape (d_model 128, 4 heads,
1 layer, 4 loops, max_seq_len 128). With random weights generation rarely stops at EOS,
so both sides generate exactly `--max-new-tokens` tokens (21: the longest answer plus
EOS) and do the same work. After a short warmup on a few prompts, each side decodes the
whole grid `--reps` times (alternating, so drift in machine load hits both alike); the
outputs of the first run are checked to be identical, and the best time is reported.

    python benchmarks/bench_decoding.py [--threads 1] [--per-cell 1] [--max-digits 20]
        [--max-new-tokens 21] [--reps 1] [--checkpoint RUN_OR_FILE] [--device cpu|cuda]

Decoding returns text, so every timed run ends with the device's work done.
"""

from __future__ import annotations

import argparse
import random
import time

import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.core.decoding import naive_generate
from abacus_interp.core.devices import resolve_device
from abacus_interp.tasks import get_task

SMALL_ADD_SHAPE = dict(
    d_model=128, n_heads=4, n_layers=1, n_loops=4, max_seq_len=128, abacus_max_offset=30
)


def grid_prompts(task, max_digits: int, per_cell: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        e.prompt
        for i in range(1, max_digits + 1)
        for j in range(1, max_digits + 1)
        for e in task.sample_cell(per_cell, rng, i, j)
    ]


def build_model(checkpoint: str | None, task, device: torch.device) -> LoopedTransformer:
    if checkpoint:
        from abacus_interp.checkpoints import load_model

        return load_model(checkpoint, device=device)
    torch.manual_seed(0)
    return LoopedTransformer(
        ModelConfig(vocab=task.vocab, positional=task.positional, **SMALL_ADD_SHAPE)
    ).to(device).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (default 1: shared machine)"
    )
    parser.add_argument("--per-cell", type=int, default=1, help="problems per (i, j) digit cell")
    parser.add_argument("--max-digits", type=int, default=20, help="grid of operand lengths 1..N")
    parser.add_argument("--max-new-tokens", type=int, default=21)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument(
        "--reps", type=int, default=1, help="timed repetitions per side (best reported)"
    )
    parser.add_argument(
        "--checkpoint", help="time a trained model (run dir or .safetensors) instead"
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    task = get_task("addition", max_digits=args.max_digits)
    model = build_model(args.checkpoint, task, resolve_device(args.device))
    prompts = grid_prompts(task, args.max_digits, args.per_cell)
    longest = max(len(p) for p in prompts)
    if longest + args.max_new_tokens > model.cfg.max_seq_len:
        raise SystemExit(
            f"prompts of {longest} tokens + {args.max_new_tokens} new exceed max_seq_len"
        )

    def cached(batch=prompts):
        return model.generate(batch, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)

    def naive(batch=prompts):
        return naive_generate(model, batch, max_new_tokens=args.max_new_tokens)

    cached(prompts[::50]), naive(prompts[::50])  # warmup
    outputs: dict[str, list[str]] = {}
    times: dict[str, list[float]] = {"naive": [], "cached": []}
    for _ in range(args.reps):
        for name, fn in (("naive", naive), ("cached", cached)):
            start = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - start)
            outputs.setdefault(name, out)
    naive_s, cached_s = min(times["naive"]), min(times["cached"])
    mismatches = sum(a != b for a, b in zip(outputs["cached"], outputs["naive"], strict=True))
    new_tokens = sum(len(model.cfg.vocab.split(c)) for c in outputs["cached"])

    print(
        f"decoding: {len(prompts)} prompts ({args.max_digits}x{args.max_digits} grid x {args.per_cell}), "
        f"prompt length {min(len(p) for p in prompts)}..{longest}, max_new_tokens={args.max_new_tokens}, "
        f"d_model={model.cfg.d_model} loops={model.cfg.n_loops} layers={model.cfg.n_layers}, "
        f"device={model.device}, threads={torch.get_num_threads()}, best of {args.reps}"
    )
    print(
        f"outputs identical: {mismatches == 0} ({mismatches} of {len(prompts)} differ); "
        f"{new_tokens} non-EOS tokens generated per run"
    )
    print(f"{'method':<28}{'seconds':>10}{'tokens/s':>12}{'ratio':>10}")
    for name, seconds in [
        ("naive_generate (re-forward)", naive_s),
        ("generate (KV cache)", cached_s),
    ]:
        rate = len(prompts) * args.max_new_tokens / seconds
        print(f"{name:<28}{seconds:>10.3f}{rate:>12.0f}{naive_s / seconds:>9.2f}x")
    print(f"speed-up of the cache: {naive_s / cached_s:.2f}x (goal >= 5x)")


if __name__ == "__main__":
    main()

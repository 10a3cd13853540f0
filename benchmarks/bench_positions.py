"""Abacus position indices: vectorised `abacus_indices` (tensor ops, no loop over examples)
against `abacus_indices_reference` (a per-example Python loop). Prints one table, asserts
nothing. Goal: vectorised >= 20x faster at batch 256, sequence 64.

The inputs are real addition sequences (prompt + answer + EOS, right-padded) of up to
`--max-digits`-digit operands, plus a batch of uniformly random tokens (worst case for run
boundaries). Both functions are checked to agree first. The reference is timed on
ready-made Python lists (its native input), and again including the tensor -> list -> tensor
conversion a caller holding a token tensor (the model, the training loop) would pay.
Each figure is the best of `--reps` repetitions of `--number` calls (the minimum is the
least disturbed by other processes on a shared machine).

    python benchmarks/bench_positions.py [--threads 1] [--batch 256] [--seq 64] [--reps 7] [--number 20]
        [--device cpu|cuda]

The vectorised side reads the digits through a prebuilt `digit_table`, as the model does;
with --device cuda its tokens live on the GPU (timed until the device is done) and the
reference side pays the copy back to the host in "ref+convert".
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from _flops import synchronize

from abacus_interp.core.devices import resolve_device
from abacus_interp.core.positions import abacus_indices, abacus_indices_reference, digit_table
from abacus_interp.core.tokens import PAD_ID, encode_batch
from abacus_interp.tasks import get_task


def addition_tokens(batch: int, seq: int, seed: int = 0) -> torch.Tensor:
    """Right-padded addition problems with answers, padded/cropped to exactly `seq`."""
    max_digits = max(1, (seq - 4) // 3)
    task = get_task("addition", max_digits=max_digits)
    examples = task.sample(batch, random.Random(seed))
    tokens = encode_batch(
        task.vocab, [e.prompt for e in examples], [e.target for e in examples]
    ).tokens
    out = torch.full((batch, seq), PAD_ID, dtype=torch.long)
    width = min(seq, tokens.shape[1])
    out[:, :width] = tokens[:, :width]
    return out


def best_time(fn, reps: int, number: int, device: torch.device) -> float:
    """Seconds per call: the best of `reps` repetitions of `number` calls."""
    times = []
    for _ in range(reps):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(number):
            fn()
        synchronize(device)
        times.append((time.perf_counter() - start) / number)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (default 1: shared machine)"
    )
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--number", type=int, default=20, help="calls per repetition")
    parser.add_argument(
        "--offset", type=int, default=7, help="Abacus offset added to every digit index"
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)

    vocab = get_task("addition").vocab
    digit_ids = digit_table(vocab.digit_ids, device)
    digit_set = set(vocab.digit_ids)
    inputs = {
        "addition problems": addition_tokens(args.batch, args.seq).to(device),
        "random tokens": torch.randint(
            0, len(vocab), (args.batch, args.seq), generator=torch.Generator().manual_seed(0)
        ).to(device),
    }

    print(
        f"abacus indices: batch {args.batch} x seq {args.seq}, offset {args.offset}, "
        f"device={device}, threads={torch.get_num_threads()}, best of {args.reps} x {args.number} calls"
    )
    print(
        f"{'input':<20}{'agree':>7}{'vectorised ms':>15}{'reference ms':>14}{'speed-up':>10}"
        f"{'ref+convert ms':>16}{'speed-up':>10}"
    )
    for name, tokens in inputs.items():
        lists = tokens.tolist()
        fast = abacus_indices(tokens, digit_ids, args.offset)
        slow = abacus_indices_reference(lists, digit_set, args.offset)
        agree = fast.tolist() == slow
        for _ in range(3):  # warmup
            abacus_indices(tokens, digit_ids, args.offset)

        def vectorised(tokens=tokens):
            return abacus_indices(tokens, digit_ids, args.offset)

        def reference(lists=lists):
            return abacus_indices_reference(lists, digit_set, args.offset)

        def reference_from_tensor(tokens=tokens):
            return torch.tensor(abacus_indices_reference(tokens.tolist(), digit_set, args.offset))

        vec = best_time(vectorised, args.reps, args.number, device)
        ref = best_time(reference, args.reps, args.number, device)
        conv = best_time(reference_from_tensor, args.reps, args.number, device)
        print(
            f"{name:<20}{str(agree):>7}{vec * 1e3:>15.3f}{ref * 1e3:>14.3f}{ref / vec:>9.1f}x"
            f"{conv * 1e3:>16.3f}{conv / vec:>9.1f}x"
        )
    print("goal: vectorised >= 20x faster")


if __name__ == "__main__":
    main()

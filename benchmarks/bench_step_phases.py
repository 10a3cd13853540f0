"""Where a training step's time goes: batch sampling (Python), encoding, forward with the
configured loss, backward, clipping + AdamW, the loop's per-step bookkeeping (noting a
non-finite loss on the device, counting tokens), and what a logged step adds (reading loss
and gradient norm back from the device). Medians over `--steps` steps of a preset's own
recipe. Prints one table of milliseconds and shares, and the model FLOP/s of forward +
backward; asserts nothing.

On CUDA the device is synchronised after every phase so that each is charged its own time;
the real loop never waits inside a step, so there the phases overlap and the sum is an upper
bound of a step's time.

    python benchmarks/bench_step_phases.py [--preset demo-add] [--threads 2] [--steps 60]
        [--device cpu|cuda] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from contextlib import nullcontext
from functools import partial

import torch
from _flops import device_peak, synchronize, throughput, training_step_flops

from abacus_interp.core.devices import resolve_device
from abacus_interp.core.model import LoopedTransformer
from abacus_interp.core.tokens import encode_batch
from abacus_interp.training import apply_overrides, get_preset
from abacus_interp.training.data import BatchSource, step_seed
from abacus_interp.training.decay import build_optimizer
from abacus_interp.training.losses import training_losses
from abacus_interp.training.run_state import DivergenceWatch

PHASES = ("sample", "encode", "forward", "backward", "clip+adamw", "bookkeeping", "log read")


def mark_time(marks: list[float], device: torch.device) -> None:
    """Close the current phase: wait for the device, then note the time."""
    synchronize(device)
    marks.append(time.perf_counter())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="demo-add")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    cfg = apply_overrides(get_preset(args.preset), args.set)
    task, tcfg = cfg.make_task(), cfg.train
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model).to(device).train()
    if tcfg.compile:
        model.compile_loops()
    optimizer = build_optimizer(model, tcfg, device)  # the training loop's own
    parameters = list(model.parameters())  # listed once, as the loop does: a walk visits every HookPoint
    source = BatchSource(task, tcfg, cfg.model.max_seq_len)
    use_bf16 = tcfg.bf16 and device.type == "cuda"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if use_bf16 else nullcontext()
    divergence = DivergenceWatch()

    phases: dict[str, list[float]] = {name: [] for name in PHASES}
    real_tokens, sequence_lengths = [], []
    for step in range(1, args.steps + 6):
        marks = [time.perf_counter()]
        lap = partial(mark_time, marks, device)
        examples = task.sample(tcfg.batch_size, random.Random(step_seed(tcfg.seed, step)))
        lap()
        batch = encode_batch(task.vocab, [e.prompt for e in examples], [e.target for e in examples],
                             max_len=cfg.model.max_seq_len)
        lap()
        losses = training_losses(model, batch, source.generator(step), cfg, device, autocast)
        loss, full = losses.loss, losses.full
        lap()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        lap()
        grad_norm = torch.nn.utils.clip_grad_norm_(parameters, tcfg.grad_clip or float("inf"))
        optimizer.step()
        lap()
        divergence.note(step, loss, grad_norm)
        tokens = int(batch.valid.sum())
        lap()
        _ = loss.item(), full.item(), float(grad_norm)  # what a logged step reads back
        lap()
        if step > 5:  # warm-up steps are not timed
            for name, start, end in zip(PHASES, marks[:-1], marks[1:], strict=True):
                phases[name].append((end - start) * 1e3)
            real_tokens.append(tokens)
            sequence_lengths.append(tokens / batch.tokens.shape[0])

    medians = {name: statistics.median(times) for name, times in phases.items()}
    step_ms = sum(ms for name, ms in medians.items() if name != "log read")
    model_ms = medians["forward"] + medians["backward"]
    flops = training_step_flops(cfg, statistics.median(real_tokens), statistics.median(sequence_lengths))
    print(f"{args.preset}: {sum(p.numel() for p in model.parameters()):,} parameters, batch {tcfg.batch_size}, "
          f"{cfg.model.n_loops} loops, progressive={tcfg.progressive}, device={device}, "
          f"threads {torch.get_num_threads()}, compile={tcfg.compile}")
    print(f"{'phase':<12}{'ms':>8}{'share':>8}")
    for name, ms in medians.items():
        share = f"{100 * ms / step_ms:>7.1f}%" if name != "log read" else f"  (every {tcfg.log_every} steps)"
        print(f"{name:<12}{ms:>8.2f}{share}")
    print(f"{'step':<12}{step_ms:>8.2f}   -> {1e3 / step_ms:.1f} steps/s")
    print(f"forward + backward: {throughput(flops, model_ms / 1e3, device_peak(device, use_bf16))} (model FLOPs)")


if __name__ == "__main__":
    main()

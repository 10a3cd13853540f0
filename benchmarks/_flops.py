"""Model FLOPs of the looped transformer and model FLOPs utilisation (MFU), for the benchmarks.

Convention (PaLM, Chowdhery et al. 2022; `abacus_interp.core.flops`, shared with the model card
and the comparison): 2 FLOPs per multiply-add of every matmul the model needs, attention scores
and values over the whole sequence (no discount for the causal mask), embeddings and norms not
counted; a training step is its forward pass plus 2x the forward FLOPs of the loops its
backward runs through (3x its forward pass unless train.backprop_loops cuts it). Work a
step does not need (padding positions) is not counted, so MFU reads low when batches
carry much padding. A looped model applies its layers once per loop, so the count is per
layer application, times the loops a step runs with gradient.

MFU is stated against a peak we can name: dense bf16 on H100/H200 (989 TFLOP/s, the SXM
figure without sparsity), or on the CPU the fp32 matmul peak measured on the same machine in
the same run (`cpu_matmul_peak`: the best of square matmuls on one core, times the cores the
training uses). Elsewhere (other GPUs) the benchmarks print the achieved FLOP/s alone.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from abacus_interp.core.flops import forward_flops_per_token, training_flops_per_token

# dense (no 2:4 sparsity) bf16 tensor-core peaks, TFLOP/s
BF16_PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0}


def forward_flops(cfg, tokens: float, seq_len: float, loop_applications: float | None = None, readouts: float = 1) -> float:
    """Forward FLOPs for `tokens` tokens of sequences `seq_len` long, through
    `loop_applications` loops (default: the trained depth) and `readouts` unembeddings
    (`core.flops`, the count the model card and the comparison print too)."""
    return tokens * forward_flops_per_token(cfg, seq_len, loop_applications, readouts)


def training_step_flops(run_cfg, tokens: float, seq_len: float) -> float:
    """Forward and backward FLOPs of one training step over `tokens` real tokens."""
    train = run_cfg.train
    return tokens * training_flops_per_token(run_cfg.model, seq_len, train.progressive, train.mix_depths,
                                              train.backprop_loops)


@dataclass(frozen=True)
class Peak:
    name: str
    tflops: float


def device_peak(device: torch.device, bf16: bool) -> Peak | None:
    """The dense bf16 peak of a known GPU, when the work runs in bf16 on it; else None."""
    if device.type != "cuda" or not bf16:
        return None
    name = torch.cuda.get_device_name(device)
    for model, tflops in BF16_PEAK_TFLOPS.items():
        if model in name:
            return Peak(f"{model} dense bf16", tflops)
    return None


def median_time(fn, reps: int, warmup: int = 3) -> float:
    """Seconds of one call of `fn`: the median of `reps` timed calls after `warmup` untimed."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cpu_matmul_peak(cores: int, sizes: tuple[int, ...] = (256, 384, 512), reps: int = 20) -> Peak:
    """The fp32 matmul FLOP/s of one core of this CPU (torch with one thread, the best median
    over square sizes `sizes`), times `cores`: what a training using `cores` cores could reach
    at best. Measured now, so it reflects this machine's clock and load."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        best = 0.0
        for n in sizes:
            a, b = torch.randn(n, n), torch.randn(n, n)
            best = max(best, 2 * n**3 / median_time(lambda a=a, b=b: a @ b, reps))
    finally:
        torch.set_num_threads(previous)
    return Peak(f"measured fp32 matmul peak of {cores} core{'s' if cores > 1 else ''}", best * cores / 1e12)


def throughput(flops: float, seconds: float, peak: Peak | None) -> str:
    """Achieved FLOP/s, and the fraction of `peak` when there is one."""
    achieved = flops / seconds
    if peak is None:
        return f"{achieved / 1e9:.1f} GFLOP/s"
    if peak.tflops < 10:  # a CPU: GFLOP/s read better
        return f"{achieved / 1e9:.1f} GFLOP/s = {achieved / (peak.tflops * 1e12):.1%} of the {peak.name}"
    return f"{achieved / 1e12:.1f} TFLOP/s = {achieved / (peak.tflops * 1e12):.1%} MFU"


def synchronize(device: torch.device) -> None:
    """Wait for the device, so a wall-clock timer measures the work and not its queueing."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)

"""Model FLOPs of the looped transformer and model FLOPs utilisation (MFU), for the benchmarks.

Convention (PaLM, Chowdhery et al. 2022): 2 FLOPs per multiply-add of every matmul the model
needs, attention scores and values over the whole sequence (no discount for the causal
mask), embeddings and norms not counted; a training step is 3x its forward pass. Work a
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

# dense (no 2:4 sparsity) bf16 tensor-core peaks, TFLOP/s
BF16_PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0}


def layer_flops_per_token(cfg, seq_len: float) -> float:
    """Forward FLOPs of one layer application for one token: the Q, K, V and output
    projections, the MLP, and attention scores and values over `seq_len` keys."""
    d_attn = cfg.n_heads * cfg.d_head
    projections = 4 * cfg.d_model * d_attn + cfg.mlp_matrices * cfg.d_model * cfg.d_mlp  # multiply-adds
    attention = 2 * seq_len * d_attn  # q.k for every key, then the weighted sum of values
    return 2 * (projections + attention)


def forward_flops(cfg, tokens: float, seq_len: float, loop_applications: float | None = None, readouts: float = 1) -> float:
    """Forward FLOPs for `tokens` tokens of sequences `seq_len` long, through
    `loop_applications` loops (default: the trained depth) and `readouts` unembeddings."""
    loops = cfg.n_loops if loop_applications is None else loop_applications
    per_token = loops * cfg.n_layers * layer_flops_per_token(cfg, seq_len) + readouts * 2 * cfg.d_model * cfg.d_vocab
    return tokens * per_token


def training_loop_applications(train_cfg, n_loops: int) -> tuple[float, float]:
    """(loops run with gradient, readouts) per training step, in expectation over the random
    depths of the progressive losses, as `training.loop.training_losses` runs them."""
    if train_cfg.progressive == "mcleish":
        # full depth, then k ~ U{1..R-n} more loops from the state after n ~ U{0..R-1}:
        # E[k] = (R + 3) / 4; the n loops are read off the full-depth pass
        return n_loops + (n_loops + 3) / 4, 2
    if train_cfg.progressive == "mix":
        lo, hi = train_cfg.mix_depths or (1, n_loops)
        depths = range(lo, hi + 1)
        deepest = sum(max(n_loops, r) for r in depths) / len(depths)
        return deepest, 2 - sum(r == n_loops for r in depths) / len(depths)
    return n_loops, 1


def training_step_flops(run_cfg, tokens: float, seq_len: float) -> float:
    loops, readouts = training_loop_applications(run_cfg.train, run_cfg.model.n_loops)
    return 3 * forward_flops(run_cfg.model, tokens, seq_len, loops, readouts)


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

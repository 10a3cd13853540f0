"""How much of a preset's CPU training step its matmuls could fill: the ceiling on its MFU.

Records every matrix product of `--steps` training steps of a preset's own recipe (forward
with its loss, backward: `aten.mm`, `addmm`, `bmm`, `baddbmm`, and SDPA's CPU attention kernels,
forward and backward) with their shapes and strides, then replays each one alone on tensors
of the same layout and times it. Prints, per preset, the mean step against the same steps
reduced to its matmuls and attention kernels, and three FLOP rates against the fp32 matmul
peak of one core measured in the same run:

- the step's model FLOP/s (`_flops.py`'s count, as `bench_training.py` prints it: its MFU);
- the matmuls' own FLOP/s (2 m n k per product, padding included) when replayed alone:
  how close to the peak MKL gets at this model's shapes;
- the ceiling: the model FLOPs over the replayed matmul + attention time, the MFU a step
  would reach if everything else (elementwise ops, norms, the optimizer, Python) cost 0.

One thread, one process: the shares are per core, as the MFU of a run of N processes is
the MFU of one. Asserts nothing.

    python benchmarks/bench_matmul_ceiling.py [--presets loop-add expressions demo-add]
        [--steps 20] [--reps 20] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from contextlib import nullcontext

import torch
from _flops import cpu_matmul_peak, median_time, training_step_flops
from torch.utils._python_dispatch import TorchDispatchMode

from abacus_interp.core.model import LoopedTransformer
from abacus_interp.training import apply_overrides, get_preset
from abacus_interp.training.data import BatchSource
from abacus_interp.training.decay import build_optimizer
from abacus_interp.training.losses import training_losses

aten = torch.ops.aten
GEMMS = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default}
ATTENTION = {
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
}


def layout(arg):
    """What a replay needs to rebuild a tensor argument: shape, strides, dtype."""
    if isinstance(arg, torch.Tensor):
        return ("tensor", tuple(arg.shape), tuple(arg.stride()), arg.dtype, arg.storage_offset())
    if isinstance(arg, (list, tuple)):
        return ("seq", tuple(layout(a) for a in arg))
    return ("value", arg)


def rebuild(spec):
    kind = spec[0]
    if kind == "tensor":
        _, shape, stride, dtype, offset = spec
        size = offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True) if n > 0)
        if dtype == torch.bool:
            storage = torch.ones(size, dtype=dtype)
        elif dtype.is_floating_point:
            storage = torch.randn(size).to(dtype)
        else:
            storage = torch.zeros(size, dtype=dtype)
        return storage.as_strided(shape, stride, offset)
    if kind == "seq":
        return [rebuild(s) for s in spec[1]]
    return spec[1]


class RecordProducts(TorchDispatchMode):
    """Counts every matmul and attention kernel a step dispatches, by op and argument layout."""

    def __init__(self):
        super().__init__()
        self.calls: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in GEMMS or func in ATTENTION:
            self.calls[(func, layout(args), layout(tuple(sorted(kwargs.items()))))] += 1
        return func(*args, **kwargs)


def gemm_flops(func, args) -> float:
    """2 m n k per product (batched: times the batch)."""
    if func in (aten.addmm.default, aten.baddbmm.default):
        args = args[1:]
    a, b = args[0], args[1]
    batch = a.shape[0] if a.dim() == 3 else 1
    return 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]


def measure(preset: str, extra: list[str], steps: int, reps: int) -> dict:
    cfg = apply_overrides(get_preset(preset), ["train.processes=1", *extra])
    task, tcfg = cfg.make_task(), cfg.train
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model).train()
    optimizer = build_optimizer(model, tcfg, torch.device("cpu"))
    source = BatchSource(task, tcfg, cfg.model.max_seq_len)
    device = torch.device("cpu")

    def step(index: int, mode=None) -> None:
        batch = source.batch(index)
        with mode or nullcontext():
            loss, *_ = training_losses(model, batch, source.generator(index), cfg, device, nullcontext())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        optimizer.step()

    # the whole step, sampling and AdamW included, as bench_step_phases times it
    for index in range(1, 4):
        step(index)
    timed = range(4, 4 + steps)
    step_times = []
    for index in timed:
        start = time.perf_counter()
        step(index)
        step_times.append(time.perf_counter() - start)
    # the same steps again, recorded: a step's shapes depend on its batch and its random
    # depths (seeded by the step number), not on the weights
    recorder = RecordProducts()
    for index in timed:
        step(index, recorder)
    gemm_s = attention_s = flops = 0.0
    for (func, arg_spec, kwarg_spec), count in recorder.calls.items():
        args = rebuild(arg_spec)
        kwargs = dict(rebuild(kwarg_spec))
        seconds = median_time(lambda f=func, a=args, k=kwargs: f(*a, **k), reps) * count
        if func in GEMMS:
            gemm_s += seconds
            flops += gemm_flops(func, args) * count
        else:
            attention_s += seconds
    model_flops = 0.0
    for index in timed:
        batch = source.batch(index)
        tokens = float(batch.valid.sum())
        model_flops += training_step_flops(cfg, tokens, tokens / batch.tokens.shape[0])
    n = len(timed)  # everything per step: means over the same steps
    return {
        "step_s": statistics.mean(step_times),
        "gemm_s": gemm_s / n,
        "attention_s": attention_s / n,
        "gemm_flops": flops / n,
        "model_flops": model_flops / n,
        "products": sum(recorder.calls.values()) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["loop-add", "expressions", "demo-add"])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    torch.set_num_threads(1)
    peak = cpu_matmul_peak(1).tflops * 1e12
    print(f"fp32 matmul peak of one core, measured now: {peak / 1e9:.1f} GFLOP/s")
    print(
        f"{'preset':<12} {'step ms':>8} {'matmuls ms':>10} {'attn ms':>8} {'other ms':>8} {'products':>8}"
        f" {'MFU':>6} {'matmul eff.':>11} {'ceiling':>8}"
    )
    for preset in args.presets:
        m = measure(preset, args.set, args.steps, args.reps)
        other = m["step_s"] - m["gemm_s"] - m["attention_s"]
        print(
            f"{preset:<12} {m['step_s'] * 1e3:8.1f} {m['gemm_s'] * 1e3:10.1f} {m['attention_s'] * 1e3:8.1f}"
            f" {other * 1e3:8.1f} {m['products']:8.0f}"
            f" {m['model_flops'] / m['step_s'] / peak:6.1%}"
            f" {m['gemm_flops'] / m['gemm_s'] / peak:11.1%}"
            f" {m['model_flops'] / (m['gemm_s'] + m['attention_s']) / peak:8.1%}"
        )
    print(
        "MFU: the step's model FLOP/s over the peak; matmul eff.: the matmuls' own FLOP/s, replayed alone;"
        " ceiling: the model FLOPs over the matmul + attention time (everything else free)."
    )


if __name__ == "__main__":
    main()

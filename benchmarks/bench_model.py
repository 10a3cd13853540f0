"""Side-by-side timings of LoopedTransformer; prints one table of ratios, asserts nothing.

(a) What the hook machinery costs: the hooked model with no hooks attached against
    `PlainLoopedTransformer`, the same math and the same weights with no HookPoints, for a
    forward pass and for a train step (forward + backward + AdamW step). Goal: <= 1.05x.
(b) What the fast attention path buys: the same train step with attention_backend="explicit"
    against "sdpa" at sequence length 64. Goal: SDPA >= 1.3x faster.
(c) With --compile, what torch.compile buys: the train step and the forward pass of the
    model eager against the same model after `compile_loops()` (compilation happens in the
    warmup; on a CPU it takes a minute or more).

Repetitions of A and B alternate (A, B, A, B, ...) after a warmup, so drift in machine load
hits both sides alike, and the table reports medians, and for each side its model FLOP/s
(see `_flops.py`): on an H100/H200 with --bf16, the model FLOPs utilisation.

    python benchmarks/bench_model.py [--threads N] [--reps 20] [--warmup 3] [--batch 64] [--d-model 256]
        [--device cpu|cuda] [--bf16] [--shape default|paper] [--compile]

`--shape paper` is the paper's adder (d_model 1024, 16 heads, d_mlp 2048, 1 layer x 16 loops)
at batch 256, sequence 64: the shape issue 17 timed on an H100 (eager 82.6 ms per bf16 train
step, compiled 44.2 ms).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from _flops import Peak, device_peak, forward_flops, synchronize, throughput
from torch import Tensor, nn

from abacus_interp import LoopedTransformer, ModelConfig, Vocab
from abacus_interp.core.attention import AttentionContext
from abacus_interp.core.devices import resolve_device
from abacus_interp.core.positions import abacus_indices

ADDITION_VOCAB = Vocab(tuple("0123456789+="))
MODEL_SHAPE = dict(n_heads=4, n_layers=2, n_loops=4, max_seq_len=64)
DEFAULT_D_MODEL = 256
DEFAULT_BATCH = 64
PAPER_SHAPE = dict(d_model=1024, n_heads=16, d_mlp=2048, n_layers=1, n_loops=16, max_seq_len=64)
PAPER_BATCH = 256
SEQ_LEN = 48
ATTENTION_SEQ_LEN = 64
PARITY_TOLERANCE = 1e-5


# --------------------------------------------------------------- the plain model


class PlainLayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d_model))
        self.b = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.w, self.b, self.eps)


class PlainAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        h, d, e = cfg.n_heads, cfg.d_model, cfg.d_head
        self.W_Q = nn.Parameter(torch.empty(h, d, e))
        self.W_K = nn.Parameter(torch.empty(h, d, e))
        self.W_V = nn.Parameter(torch.empty(h, d, e))
        self.W_O = nn.Parameter(torch.empty(h, e, d))
        self.b_Q = nn.Parameter(torch.zeros(h, e))
        self.b_K = nn.Parameter(torch.zeros(h, e))
        self.b_V = nn.Parameter(torch.zeros(h, e))
        self.b_O = nn.Parameter(torch.zeros(d))

    def forward(self, x: Tensor) -> Tensor:
        q = torch.einsum("bpd,hde->bhpe", x, self.W_Q) + self.b_Q[:, None]
        k = torch.einsum("bpd,hde->bhpe", x, self.W_K) + self.b_K[:, None]
        v = torch.einsum("bpd,hde->bhpe", x, self.W_V) + self.b_V[:, None]
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [batch head pos d_head]
        return torch.einsum("bhpe,hed->bpd", z, self.W_O) + self.b_O


class PlainMLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_in = nn.Parameter(torch.empty(cfg.d_model, cfg.d_mlp))
        self.b_in = nn.Parameter(torch.zeros(cfg.d_mlp))
        self.W_out = nn.Parameter(torch.empty(cfg.d_mlp, cfg.d_model))
        self.b_out = nn.Parameter(torch.zeros(cfg.d_model))

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x @ self.W_in + self.b_in) @ self.W_out + self.b_out


class PlainBlock(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = PlainLayerNorm(cfg.d_model, cfg.ln_eps)
        self.attn = PlainAttention(cfg)
        self.ln2 = PlainLayerNorm(cfg.d_model, cfg.ln_eps)
        self.mlp = PlainMLP(cfg)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class PlainLoopedTransformer(nn.Module):
    """The looped transformer with no HookPoints: Abacus positions, pre-LN blocks with SDPA,
    the input added back at the start of every loop. Parameter names match
    LoopedTransformer's, so `load_state_dict` copies the weights across. Supports only the
    configuration benchmarked here (abacus, pre-LN, gelu, untied, input injection)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model))
        self.W_pos = nn.Parameter(torch.empty(cfg.n_abacus_positions, cfg.d_model))
        self.blocks = nn.ModuleList([PlainBlock(cfg) for _ in range(cfg.n_layers)])
        self.ln_final = PlainLayerNorm(cfg.d_model, cfg.ln_eps)
        self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.d_vocab))
        self.b_U = nn.Parameter(torch.zeros(cfg.d_vocab))
        self.register_buffer("digit_ids", torch.tensor(cfg.vocab.digit_ids), persistent=False)

    def forward(self, tokens: Tensor) -> Tensor:
        inputs = self.W_E[tokens] + self.W_pos[abacus_indices(tokens, self.digit_ids)]
        state = inputs
        for loop in range(self.cfg.n_loops):
            if loop > 0:
                state = state + inputs
            for block in self.blocks:
                state = block(state)
        return self.ln_final(state) @ self.W_U + self.b_U


# --------------------------------------------------------------- timing


@dataclass
class Setup:
    """Where and how the timed work runs."""

    device: torch.device
    bf16: bool  # autocast to bfloat16 (CUDA only)
    peak: Peak | None  # the device's dense bf16 peak, when known and used

    def autocast(self):
        return torch.autocast("cuda", dtype=torch.bfloat16) if self.bf16 else nullcontext()


@dataclass
class Comparison:
    case: str
    name_a: str
    name_b: str
    ms_a: float
    ms_b: float
    # None for a row shown for context only
    goal: str | None = None
    goal_met: Callable[[float], bool] | None = None
    flops: float | None = None  # model FLOPs of one repetition (both sides do the same math)

    @property
    def ratio(self) -> float:
        return self.ms_a / self.ms_b


def at_most(limit: float) -> Callable[[float], bool]:
    return lambda ratio: ratio <= limit


def at_least(limit: float) -> Callable[[float], bool]:
    return lambda ratio: ratio >= limit


def time_interleaved(
    run_a: Callable[[], None], run_b: Callable[[], None], reps: int, warmup: int, device: torch.device
) -> tuple[float, float]:
    """Median milliseconds of `run_a` and `run_b`, alternating A, B, A, B, ... after warmup;
    each repetition ends when the device has finished its work."""
    for _ in range(warmup):
        run_a()
        run_b()
    times_a, times_b = [], []
    for _ in range(reps):
        for run, times in ((run_a, times_a), (run_b, times_b)):
            synchronize(device)
            start = time.perf_counter()
            run()
            synchronize(device)
            times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times_a), 1000 * statistics.median(times_b)


def next_token_loss(logits: Tensor, tokens: Tensor) -> Tensor:
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())


def forward_pass(model: nn.Module, tokens: Tensor, setup: Setup) -> Callable[[], None]:
    def run():
        with torch.no_grad(), setup.autocast():
            model(tokens)

    return run


def train_step(model: nn.Module, tokens: Tensor, setup: Setup) -> Callable[[], None]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def run():
        optimizer.zero_grad(set_to_none=True)
        with setup.autocast():
            loss = next_token_loss(model(tokens), tokens)
        loss.backward()
        optimizer.step()

    return run


def attention_layer_step(model: LoopedTransformer, states: Tensor, setup: Setup) -> Callable[[], None]:
    """Forward and backward through the first attention layer of loop 0 only."""
    attention, hooks = model.blocks[0].attn, model.loops[0].blocks[0].attn
    length = states.shape[1]
    # plain causal attention: no window, no rotary (the benchmark's model attends by neither)
    context = AttentionContext.build(model.cfg, length, length, states.device)

    def run():
        attention.zero_grad(set_to_none=True)
        with setup.autocast():
            output, _ = attention(states, hooks, context)
        output.float().square().mean().backward()

    return run


def random_tokens(cfg: ModelConfig, batch: int, length: int, generator: torch.Generator, device) -> Tensor:
    """Digits, '+' and '=' (no padding or EOS), so every position is real."""
    return torch.randint(2, cfg.d_vocab, (batch, length), generator=generator).to(device)


def step_flops(cfg: ModelConfig, batch: int, length: int, training: bool) -> float:
    return (3 if training else 1) * forward_flops(cfg, batch * length, length)


# --------------------------------------------------------------- the comparisons


def hook_overhead(
    cfg: ModelConfig, batch: int, reps: int, warmup: int, generator: torch.Generator, setup: Setup
) -> list[Comparison]:
    hooked = LoopedTransformer(cfg).to(setup.device)
    plain = PlainLoopedTransformer(cfg).to(setup.device)
    plain.load_state_dict(hooked.state_dict(), strict=True)
    tokens = random_tokens(cfg, batch, SEQ_LEN, generator, setup.device)

    with torch.no_grad():
        difference = (hooked(tokens) - plain(tokens)).abs().max().item()
    print(
        f"plain vs hooked logits: max |difference| = {difference:.2e} (tolerance {PARITY_TOLERANCE:.0e})"
    )
    if not difference <= PARITY_TOLERANCE:
        raise SystemExit(
            "the plain re-implementation does not compute the same function; timings would mislead"
        )

    shape = f"d{cfg.d_model} {cfg.n_layers}Lx{cfg.n_loops}R b{batch} s{SEQ_LEN}"
    forward_ms = time_interleaved(
        forward_pass(hooked, tokens, setup), forward_pass(plain, tokens, setup), reps, warmup, setup.device
    )
    train_ms = time_interleaved(
        train_step(hooked, tokens, setup), train_step(plain, tokens, setup), reps, warmup, setup.device
    )
    return [
        Comparison(f"forward, {shape}", "hooked", "plain", *forward_ms, "<= 1.05", at_most(1.05),
                   step_flops(cfg, batch, SEQ_LEN, training=False)),
        Comparison(f"train step, {shape}", "hooked", "plain", *train_ms, "<= 1.05", at_most(1.05),
                   step_flops(cfg, batch, SEQ_LEN, training=True)),
    ]


def attention_speedup(
    cfg: ModelConfig, batch: int, reps: int, warmup: int, generator: torch.Generator, setup: Setup
) -> list[Comparison]:
    fast = LoopedTransformer(cfg).to(setup.device)
    explicit = LoopedTransformer(cfg.replace(attention_backend="explicit")).to(setup.device)
    explicit.load_state_dict(fast.state_dict(), strict=True)
    tokens = random_tokens(cfg, batch, ATTENTION_SEQ_LEN, generator, setup.device)

    shape = f"d{cfg.d_model} {cfg.n_layers}Lx{cfg.n_loops}R b{batch} s{ATTENTION_SEQ_LEN}"
    train_ms = time_interleaved(
        train_step(explicit, tokens, setup), train_step(fast, tokens, setup), reps, warmup, setup.device
    )
    # the attention layer alone: the part of the step the backend choice changes
    states = torch.randn(batch, ATTENTION_SEQ_LEN, cfg.d_model, generator=generator).to(setup.device)
    layer_ms = time_interleaved(
        attention_layer_step(explicit, states, setup), attention_layer_step(fast, states, setup), reps, warmup,
        setup.device,
    )
    return [
        Comparison(
            f"train step, {shape}", "explicit", "sdpa", *train_ms, ">= 1.30", at_least(1.30),
            step_flops(cfg, batch, ATTENTION_SEQ_LEN, training=True),
        ),
        Comparison(
            f"attention layer fwd+bwd, b{batch} s{ATTENTION_SEQ_LEN}",
            "explicit",
            "sdpa",
            *layer_ms,
        ),
    ]


def compile_speedup(
    cfg: ModelConfig, batch: int, length: int, reps: int, warmup: int, generator: torch.Generator, setup: Setup
) -> list[Comparison]:
    eager = LoopedTransformer(cfg).to(setup.device)
    compiled = LoopedTransformer(cfg).to(setup.device)
    compiled.load_state_dict(eager.state_dict(), strict=True)
    compiled.compile_loops()
    tokens = random_tokens(cfg, batch, length, generator, setup.device)
    with torch.no_grad(), setup.autocast():
        difference = (eager(tokens).float() - compiled(tokens).float()).abs().max().item()
    print(f"compiled vs eager logits: max |difference| = {difference:.2e}")

    shape = f"d{cfg.d_model} {cfg.n_layers}Lx{cfg.n_loops}R b{batch} s{length}"
    forward_ms = time_interleaved(
        forward_pass(eager, tokens, setup), forward_pass(compiled, tokens, setup), reps, warmup, setup.device
    )
    train_ms = time_interleaved(
        train_step(eager, tokens, setup), train_step(compiled, tokens, setup), reps, warmup, setup.device
    )
    return [
        Comparison(f"forward, {shape}", "eager", "compiled", *forward_ms,
                   flops=step_flops(cfg, batch, length, training=False)),
        Comparison(f"train step, {shape}", "eager", "compiled", *train_ms,
                   flops=step_flops(cfg, batch, length, training=True)),
    ]


def print_table(comparisons: list[Comparison], setup: Setup) -> None:
    def rate(flops: float | None, ms: float) -> str:
        return "-" if flops is None else throughput(flops, ms / 1e3, setup.peak)

    header = ("case", "A", "B", "time A (ms)", "time B (ms)", "A/B", "goal", "met?", "A model FLOP/s", "B model FLOP/s")
    rows = [
        (
            c.case,
            c.name_a,
            c.name_b,
            f"{c.ms_a:.1f}",
            f"{c.ms_b:.1f}",
            f"{c.ratio:.3f}",
            c.goal or "-",
            "-" if c.goal_met is None else "yes" if c.goal_met(c.ratio) else "NO",
            rate(c.flops, c.ms_a),
            rate(c.flops, c.ms_b),
        )
        for c in comparisons
    ]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    if setup.peak is None:
        print("(no MFU: the stated peak is dense bf16 on an H100/H200, with --bf16; elsewhere the achieved FLOP/s only)")
    else:
        print(f"(MFU against the {setup.peak.name} peak, {setup.peak.tflops:.0f} TFLOP/s)")


def sorter_bench_main(doc: str, cost: Callable[[int, int, int, int, Setup], list[Comparison]]) -> None:
    """The command line of a sorter's one-table benchmark (bench_attention_sink, bench_item_comparator):
    threads, reps, warmup, batch, device and seed parsed, then `cost(batch, reps, warmup, seed, setup)`'s
    comparisons printed as one table."""
    from _flops import device_peak

    from abacus_interp.core.devices import resolve_device

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch intra-op threads (default: all cores)")
    parser.add_argument("--reps", type=int, default=20, help="timed repetitions of each side (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed repetitions of each side first")
    parser.add_argument("--batch", type=int, default=64, help="lists per batch (the preset trains on 64)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    device = resolve_device(args.device)
    setup = Setup(device=device, bf16=False, peak=device_peak(device, False))
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, device {device}, {torch.get_num_threads()} threads, "
          f"{args.reps} reps after {args.warmup} warmup, interleaved, medians")
    comparisons = cost(args.batch, args.reps, args.warmup, args.seed, setup)
    print()
    print_table(comparisons, setup)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count(),
        help="torch intra-op threads (default: all cores)",
    )
    parser.add_argument(
        "--reps", type=int, default=20, help="timed repetitions of each side (median reported)"
    )
    parser.add_argument(
        "--warmup", type=int, default=3, help="untimed repetitions of each side first"
    )
    parser.add_argument("--batch", type=int, help=f"sequences per batch (default {DEFAULT_BATCH}; paper shape {PAPER_BATCH})")
    parser.add_argument(
        "--d-model", type=int, default=DEFAULT_D_MODEL, help="residual width of the default shape (4 heads)"
    )
    parser.add_argument("--shape", choices=("default", "paper"), default="default")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (CUDA only), as training on a GPU")
    parser.add_argument("--compile", action="store_true", help="also time eager against compile_loops()")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    device = resolve_device(args.device)
    if args.bf16 and device.type != "cuda":
        parser.error("--bf16 needs --device cuda")
    setup = Setup(device=device, bf16=args.bf16, peak=device_peak(device, args.bf16))
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    print(
        f"torch {torch.__version__}, device {device}, bf16 {args.bf16}, {torch.get_num_threads()} threads, "
        f"{args.reps} reps after {args.warmup} warmup, interleaved, medians"
    )

    if args.shape == "paper":
        cfg = ModelConfig(vocab=ADDITION_VOCAB, attention_backend="sdpa", **PAPER_SHAPE)
        batch = args.batch or PAPER_BATCH
    else:
        cfg = ModelConfig(vocab=ADDITION_VOCAB, d_model=args.d_model, attention_backend="sdpa", **MODEL_SHAPE)
        batch = args.batch or DEFAULT_BATCH
    comparisons = hook_overhead(cfg, batch, args.reps, args.warmup, generator, setup)
    comparisons += attention_speedup(cfg, batch, args.reps, args.warmup, generator, setup)
    if args.compile:
        comparisons += compile_speedup(cfg, batch, ATTENTION_SEQ_LEN, args.reps, args.warmup, generator, setup)
    print()
    print_table(comparisons, setup)


if __name__ == "__main__":
    main()

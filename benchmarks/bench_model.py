"""Side-by-side timings of LoopedTransformer; prints one table of ratios, asserts nothing.

(a) What the hook machinery costs: the hooked model with no hooks attached against
    `PlainLoopedTransformer`, the same math and the same weights with no HookPoints, for a
    forward pass and for a train step (forward + backward + AdamW step). Goal: <= 1.05x.
(b) What the fast attention path buys: the same train step with attention_backend="explicit"
    against "sdpa" at sequence length 64. Goal: SDPA >= 1.3x faster.

Repetitions of A and B alternate (A, B, A, B, ...) after a warmup, so drift in machine load
hits both sides alike, and the table reports medians.

    python benchmarks/bench_model.py [--threads N] [--reps 20] [--warmup 3] [--batch 64] [--d-model 256]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from abacus_interp import LoopedTransformer, ModelConfig, Vocab
from abacus_interp.positions import abacus_indices

ADDITION_VOCAB = Vocab(tuple("0123456789+="))
MODEL_SHAPE = dict(n_heads=4, n_layers=2, n_loops=4, max_seq_len=64)
DEFAULT_D_MODEL = 256
DEFAULT_BATCH = 64
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
class Comparison:
    case: str
    name_a: str
    name_b: str
    ms_a: float
    ms_b: float
    # None for a row shown for context only
    goal: str | None = None
    goal_met: Callable[[float], bool] | None = None

    @property
    def ratio(self) -> float:
        return self.ms_a / self.ms_b


def at_most(limit: float) -> Callable[[float], bool]:
    return lambda ratio: ratio <= limit


def at_least(limit: float) -> Callable[[float], bool]:
    return lambda ratio: ratio >= limit


def time_interleaved(
    run_a: Callable[[], None], run_b: Callable[[], None], reps: int, warmup: int
) -> tuple[float, float]:
    """Median milliseconds of `run_a` and `run_b`, alternating A, B, A, B, ... after warmup."""
    for _ in range(warmup):
        run_a()
        run_b()
    times_a, times_b = [], []
    for _ in range(reps):
        for run, times in ((run_a, times_a), (run_b, times_b)):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times_a), 1000 * statistics.median(times_b)


def next_token_loss(logits: Tensor, tokens: Tensor) -> Tensor:
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())


def forward_pass(model: nn.Module, tokens: Tensor) -> Callable[[], None]:
    def run():
        with torch.no_grad():
            model(tokens)

    return run


def train_step(model: nn.Module, tokens: Tensor) -> Callable[[], None]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def run():
        optimizer.zero_grad(set_to_none=True)
        next_token_loss(model(tokens), tokens).backward()
        optimizer.step()

    return run


def attention_layer_step(model: LoopedTransformer, states: Tensor) -> Callable[[], None]:
    """Forward and backward through the first attention layer of loop 0 only."""
    attention, hooks = model.blocks[0].attn, model.loops[0].blocks[0].attn

    def run():
        attention.zero_grad(set_to_none=True)
        output, _ = attention(states, hooks)
        output.square().mean().backward()

    return run


def random_tokens(cfg: ModelConfig, batch: int, length: int, generator: torch.Generator) -> Tensor:
    """Digits, '+' and '=' (no padding or EOS), so every position is real."""
    return torch.randint(2, cfg.d_vocab, (batch, length), generator=generator)


# --------------------------------------------------------------- the comparisons


def hook_overhead(
    cfg: ModelConfig, batch: int, reps: int, warmup: int, generator: torch.Generator
) -> list[Comparison]:
    hooked = LoopedTransformer(cfg)
    plain = PlainLoopedTransformer(cfg)
    plain.load_state_dict(hooked.state_dict(), strict=True)
    tokens = random_tokens(cfg, batch, SEQ_LEN, generator)

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
        forward_pass(hooked, tokens), forward_pass(plain, tokens), reps, warmup
    )
    train_ms = time_interleaved(train_step(hooked, tokens), train_step(plain, tokens), reps, warmup)
    return [
        Comparison(f"forward, {shape}", "hooked", "plain", *forward_ms, "<= 1.05", at_most(1.05)),
        Comparison(f"train step, {shape}", "hooked", "plain", *train_ms, "<= 1.05", at_most(1.05)),
    ]


def attention_speedup(
    cfg: ModelConfig, batch: int, reps: int, warmup: int, generator: torch.Generator
) -> list[Comparison]:
    fast = LoopedTransformer(cfg)
    explicit = LoopedTransformer(cfg.replace(attention_backend="explicit"))
    explicit.load_state_dict(fast.state_dict(), strict=True)
    tokens = random_tokens(cfg, batch, ATTENTION_SEQ_LEN, generator)

    shape = f"d{cfg.d_model} {cfg.n_layers}Lx{cfg.n_loops}R b{batch} s{ATTENTION_SEQ_LEN}"
    train_ms = time_interleaved(
        train_step(explicit, tokens), train_step(fast, tokens), reps, warmup
    )
    # the attention layer alone: the part of the step the backend choice changes
    states = torch.randn(batch, ATTENTION_SEQ_LEN, cfg.d_model, generator=generator)
    layer_ms = time_interleaved(
        attention_layer_step(explicit, states), attention_layer_step(fast, states), reps, warmup
    )
    return [
        Comparison(
            f"train step, {shape}", "explicit", "sdpa", *train_ms, ">= 1.30", at_least(1.30)
        ),
        Comparison(
            f"attention layer fwd+bwd, b{batch} s{ATTENTION_SEQ_LEN}",
            "explicit",
            "sdpa",
            *layer_ms,
        ),
    ]


def print_table(comparisons: list[Comparison]) -> None:
    header = ("case", "A", "B", "time A (ms)", "time B (ms)", "A/B", "goal", "met?")
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
        )
        for c in comparisons
    ]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))


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
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="sequences per batch")
    parser.add_argument(
        "--d-model", type=int, default=DEFAULT_D_MODEL, help="residual width (4 heads)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.reps} reps after {args.warmup} warmup, "
        "interleaved, medians"
    )

    cfg = ModelConfig(
        vocab=ADDITION_VOCAB, d_model=args.d_model, attention_backend="sdpa", **MODEL_SHAPE
    )
    comparisons = hook_overhead(cfg, args.batch, args.reps, args.warmup, generator)
    comparisons += attention_speedup(cfg, args.batch, args.reps, args.warmup, generator)
    print()
    print_table(comparisons)


if __name__ == "__main__":
    main()

"""The addition recipes: the demo, the extrapolating adders, the loop-study run and the paper-scale GPU ones."""

from __future__ import annotations

import dataclasses

from ..config import RunConfig, TrainConfig
from .recipe import recipe


def plain_add() -> RunConfig:
    """The plain Abacus adder, trained in about a minute and a half on 2 CPU cores: up-to-4-digit
    addition written token by token, learned Abacus positions, d_model 64, 1 layer looped
    twice, 1,500 steps of batch 64. It does not extrapolate (demo-add does); it is the small
    base the tests and the extrapolation ablation edit with `--set`, and was `make demo`'s
    adder until demo-add became one that extrapolates.

    Two measured choices make it learn in time (exact match on 128 held-out problems, one
    thread on a shared machine, same shape and lr 3e-3):
    * Abacus offset k = 0. Random offsets make the model learn the digit-alignment relation
      for every index separately: k = 8 (one offset per batch) reached 42% at 1,500 steps,
      k = 8 per example 37%, k = 3 per example 20% at 1,300; k = 0 reached 100% at 1,000. The
      price is length extrapolation: operands longer than 4 digits fail (see small-add).
    * No progressive loss: 98% of a CPU step is forward + backward (benchmarks/
      bench_step_phases.py), so McLeish's extra pass would double the step time.
    d_model 128 learned no faster per step (2% vs 2% at 400 steps) at twice the cost.
    """
    return recipe(
        "plain-add",
        "addition",
        {"max_digits": 4},
        # max_seq_len covers 2x-length evaluation (8-digit operands: 3*8+4 tokens)
        dict(d_model=64, n_heads=4, n_layers=1, n_loops=2, max_seq_len=32, abacus_max_offset=0),
        TrainConfig(
            steps=1500, batch_size=64, lr=3e-3, weight_decay=0.01, warmup_steps=100, grad_clip=1.0,
            progressive="none", eval_every=250, eval_problems=128,
            checkpoint_every=250, dense_checkpoints=8, dense_until=250,
        ),
    )


def demo_add() -> RunConfig:
    """The adder `make demo` trains: extrap-add's model and loop recipe on a schedule that
    fits a minute on 2 CPU cores, and it extrapolates. Operands of up to 5 digits in the
    answer-slot format, rotary attention on the Abacus index with a window of +-1, 1 layer
    looped 6 times (adaptive loops at inference), 1,600 steps of batch 32.

    What changed from extrap-add (3,000 steps of batch 64, lr 2e-3, mix depths 6..24, ~5
    minutes), each measured on the idle 2-core machine, `abacus-interp eval RUN --lengths
    5,50,125 --n 100` (uniform digits, adaptive loops):
    * mix depths 6..10 instead of 6..24: a step runs max(6, r) loops, 8 on average instead of
      15, and the deeper targets were not needed for uniform problems of 125 digits (10-13
      loops each);
    * batch 32 instead of 64 and lr 5e-3 instead of 2e-3: more, cheaper steps (35 ms instead of
      59), each moving further.
    1,000 steps of batch 64, lr 4e-3, mix 6..12: 59 s, 98% / 82% / 53% at 5 / 50 / 125 digits;
    1,700 steps of batch 32, lr 4e-3, mix 6..12: 64 s, 100% / 98% / 93%;
    this recipe: 56 s (seed 0) and 55 s (seed 1), 100% / 100% / 100% on both seeds; 52.0-52.7 s
    on the idle machine since the loop lists the model's parameters once (benchmarks/README.md).
    `benchmarks/time_to_criterion.py` times it against extrap-add's recipe side by side: 48 s
    to the criterion against 158 s.

    Truncated backpropagation through the loops (`train.backprop_loops`, the gradient through
    the last N loops of a step's pass) makes a step cheaper but teaches less per step here:
    a step at N = 4 / 6 costs 0.73x / 0.86x of the recipe's (`benchmarks/backprop_loops.py`,
    one process, idle machine), and 1,600 steps reach 97% / 72% / 35% (N = 4)
    and 93% / 25% / 3% (N = 6) at 5 / 50 / 125 digits (one seed each, n=100), against 100% at all
    three; the cut counts back from the deepest loop, so at N = 4 the full-depth readout keeps 2
    loops of gradient on average (benchmarks/README.md).

    The long carries extrap-add gets wrong, it gets right given loops (seed 0): planted chains
    of 48 and 98 columns (`eval --chains 48:50,98:100 --n 40`) 100% and 100%, and runs of
    identical columns x...x + (9-x)...(9-x)(10-x) and x...x + (9-x)...(9-x), x = 1..8, at 10, 20,
    50 and 100 digits, 64 of 64. The carry climbs about one column per 1.7-2.5 loops, so a
    98-column chain converges after 173 loops (median) and a 100-digit run after up to 248:
    hence max_loops 320 (at 128, 5% of the 98-column chains converged in time).
    """
    extrap = extrap_add()
    return dataclasses.replace(
        extrap,
        preset="demo-add",
        # max_seq_len bounds evaluation only (there is no position table): 125-digit operands (25x);
        # max_loops caps adaptive halting: a carry through 100 columns takes up to ~250 loops
        model=extrap.model.replace(max_loops=320, max_seq_len=400),
        train=dataclasses.replace(extrap.train, steps=1600, batch_size=32, lr=5e-3, warmup_steps=100,
                                  mix_depths=(6, 10), eval_every=400, eval_problems=64, checkpoint_every=400),
    )


def small_add() -> RunConfig:
    """The shipped reference run: up to 8-digit addition, extrapolating to 16 digits and
    beyond (offsets up to 20 train the embeddings of digit indices up to 28)."""
    return recipe(
        "small-add",
        "addition",
        {"max_digits": 8},
        dict(d_model=128, n_heads=4, n_layers=1, n_loops=4, max_seq_len=96, abacus_max_offset=20),
        TrainConfig(
            steps=8000, batch_size=64, lr=1.5e-3, weight_decay=0.01, warmup_steps=100, grad_clip=1.0, processes=2,
            progressive="mcleish", progressive_alpha=0.5, eval_every=250, eval_problems=256,
            checkpoint_every=1000, dense_checkpoints=12, dense_until=500,
        ),
    )


def loop_add() -> RunConfig:
    """A run whose loops do the work: addition in the answer-slot format (the model reads "_"
    in every answer position and fills the whole answer in one pass), so no answer digit can
    read its carry from an earlier answer token and long carry chains take more loops.

    Recipe: the "mix" loss at a random depth in 2..24 (Fan et al. 2024): loops past the trained
    depth of 6 keep the answer, and no loss asks for it after a single loop, so the loop
    spends its first loops on the carries; the state LayerNormed before each injection
    ("norm_add"), because with plain "add" a pre-LN loop map has an eigenvalue of exactly 1
    and its state grows every loop; a penalty on the last loop's relative step; half the steps
    start the loop from Gaussian noise instead of the zero state (Geiping et al. 2025), which
    is what makes the loop forget where it started. Abacus offset 0: no length extrapolation
    is asked of this run, and offsets slow learning (see plain-add).

    Measured on the shipped run (step 4,000, 1,000 held-out problems, 5-digit operands):
    exact match 7% at 1 loop, 88% at 2, 98.6% at 3, 100% at 6 (the trained depth) and at 24;
    lock-in median loop 1 for carry chain 0, 2 for chains 1-2 and 3 for chains 3-5 (Spearman
    0.55 over digits); median relative step 3e-4 at loop 10 and below 1e-5 from loop 16;
    spectral radius of the loop map 0.59 at loop 24 (every sampled problem contracts); 100%
    of noise, 4x-noise and other-problem starts reach the same end state (cosine >= 0.99)
    and the same answer.

    What was tried (d_model 64, 1 layer, 5-digit operands, batch 64, held-out problems):
    - usual format (answer least-significant first, read autoregressively): every digit locks
      in at loop 1, 0% of examples contract (checkpoints/small-add shows the same).
    - slots, "add" injection, offset 12: 8.6% exact match at 1,750 steps (offsets slow it).
    - slots, "add", offset 0, mix depths 1..12: lock-in median 1 at chain 0 vs 10 at chain 5
      (Spearman 0.56) at step 1,000, but the state drifts (relative step ~1/t, radius 1.04),
      0% path independence.
    - slots, "norm_add", step penalty 0.5, mix 1..12: 99.2% at 1,500 steps; Spearman 0.61;
      radius 1.07; exact match falls past 7 loops (84% -> 33% at 24).
    - + cascade_fraction 0.5 (planted long carry chains), mix 1..24, penalty 1: every chain
      locks in at loop 1 (Spearman -0.17): with many long chains in training the model learns
      carry look-ahead inside one loop.
    - no planted cascades, mix 1..24, penalty 1, zero start only (4,000 steps): 88% at 1 loop,
      100% at 6 and 24; Spearman 0.49; relative step 1.3e-4 at 24; radius 0.93; but 0-2% of
      noise starts reach the same end state and 0% the same answer (path dependent).
    - penalty 10: 3% train exact match at 700 steps (the penalty wins over the task).
    - + init_state_noise 0.5 (mix 1..24): 49% at 1 loop, 94% at 2, 99.7% at 6 and 24; lock-in
      median 1 for chains 0-1 and 2 for chains 2-5 (Spearman 0.59); radius 0.66; 100% path
      independence. The depth-1 term of the mix loss kept one loop doing most of the work.
    - mix depths 4..24 (+ noise starts): 0% at 1 loop, 25% at 2, 87% at 3, 100% at 6 and 24;
      lock-in median 2 for chains 0-2, 3 for chain 3, 4 for chains 4-5, but Spearman 0.31
      (most digits tie at loop 2: without a loss before loop 4 nothing locks in at loop 1).
    - this recipe (mix depths 2..24 + noise starts): the figures above.
    """
    return recipe(
        "loop-add",
        "addition",
        {"max_digits": 5, "answer_format": "slots", "cascade_fraction": 0.0},
        dict(d_model=64, n_heads=4, n_layers=1, n_loops=6, max_loops=24, max_seq_len=36, abacus_max_offset=0,
             input_injection="norm_add"),
        TrainConfig(
            steps=4000, batch_size=64, lr=2e-3, weight_decay=0.01, warmup_steps=200, grad_clip=1.0, processes=2,
            progressive="mix", mix_depths=(2, 24), step_penalty=1.0, init_state_noise=0.5,
            eval_every=250, eval_problems=256,
            checkpoint_every=1000, dense_checkpoints=8, dense_until=500,
        ),
    )


def extrap_add() -> RunConfig:
    """Length extrapolation by running more loops: addition in the answer-slot format, trained
    on operands of up to 5 digits, solving numbers many times longer.

    Two choices of the attention make it possible on a CPU budget:
    * rotary positions on the Abacus index and no position table (`positional="none"`,
      `rotary="abacus"`): attention sees only index differences, so the aligned digits of
      both operands and the answer slot meet at offset 0 whatever the number's length;
    * a window of +-1 on the Abacus index (`abacus_window=1`): a query sees only its own
      column and the two beside it. A loop can then move a carry by one digit and no
      further, so nothing in the model depends on the number's length, and a carry chain
      longer than any seen in training is solved by running more loops.
    The loop recipe is loop-add's (norm_add injection, mix loss, step penalty, noise starts)
    with the mix depths at 6..24, so every step trains deep loops.
    `halt_tol`: generate, solve and eval stop each problem's loop once its answer has
    converged (up to max_loops = 128), which is what a long carry chain needs.

    Measured on the shipped run (checkpoints/extrap-add, step 3,000; 95 ms a step in two
    processes on an idle 2-core CPU, about 5 minutes),
    `abacus-interp eval checkpoints/extrap-add --lengths 5,10,20,50,100 --chains 5,10,20 --n 100`:
    100% exact match at 5, 10, 20, 50 and 100-digit operands (uniform digits, n=100 each) and
    on planted carry chains of 5, 10 and 20 columns, all with adaptive loops (median 11-14,
    at most 37). Fails on runs of identical columns (5555555555 + 4444444445). One head (L0H0)
    carries: without its read of the answer slot below, planted 20-digit chains fall to 0%.

    Each lever, one at a time (checkpoints/ablation-extrapolation-by-loops): a learned Abacus
    table with offsets does not learn in 3,000 steps; rotary positions without the window
    reach 100% in distribution and 0% at 10 digits (the model attends across the whole
    number, and long index offsets are out of distribution); a window of 2 loses long chains
    (73% at 20); one loop of six layers solves uniform problems but 20% of 20-column chains.
    The window with rotary, looped, is what extrapolates.
    """
    return recipe(
        "extrap-add",
        "addition",
        {"max_digits": 5, "answer_format": "slots", "cascade_fraction": 0.0},
        # max_seq_len bounds evaluation only (there is no position table): 100-digit operands
        dict(d_model=64, n_heads=4, n_layers=1, n_loops=6, max_loops=128, max_seq_len=320, abacus_max_offset=0,
             positional="none", rotary="abacus", abacus_window=1, input_injection="norm_add", halt_tol=1e-3),
        TrainConfig(
            steps=3000, batch_size=64, lr=2e-3, weight_decay=0.01, warmup_steps=200, grad_clip=1.0, processes=2,
            progressive="mix", mix_depths=(6, 24), step_penalty=1.0, init_state_noise=0.5,
            eval_every=250, eval_problems=256,
            checkpoint_every=500, dense_checkpoints=8, dense_until=500,
        ),
    )


def paper_add(name: str, n_layers: int, n_loops: int) -> RunConfig:
    """McLeish et al. (2024) on a GPU: d_model 1024, 16 heads, FFN 2048, <= 20 digits,
    offsets up to k = 100, AdamW lr 1e-4 betas (0.9, 0.98) wd 0.01, clip 0.5."""
    return recipe(
        name,
        "addition",
        {"max_digits": 20},
        dict(d_model=1024, n_heads=16, d_mlp=2048, n_layers=n_layers, n_loops=n_loops, max_seq_len=256,
             abacus_max_offset=100),
        TrainConfig(
            steps=50000, batch_size=512, lr=1e-4, weight_decay=0.01, betas=(0.9, 0.98), warmup_steps=1000,
            grad_clip=0.5, progressive="mcleish", progressive_alpha=0.5, eval_every=1000,
            checkpoint_every=2500, dense_checkpoints=12, dense_until=2500, device="cuda",
        ),
    )

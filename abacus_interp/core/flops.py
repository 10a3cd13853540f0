"""FLOPs per token: the one count the model card, the architecture comparison and the
benchmarks print.

Matrix multiplications only (2 FLOPs per multiply-add); LayerNorms, softmax, activations, the
LSTM's gate nonlinearities and the step penalty's norms are elementwise and left out (a few
percent at these widths). Per token, forward:

* an attention layer: the Q, K, V and O projections, 2 * 4 * d_model * (n_heads * d_head),
  and the scores and their weighted sum, 2 * 2 * n_keys * (n_heads * d_head), every query
  against all n_keys keys of its sequence (a masked dense product computes the masked half
  too, so causal attention is not halved);
* an MLP: 2 * ModelConfig.mlp_matrices * d_model * d_mlp (2 matrices, 3 with a gate);
* an LSTM layer (the lstm family, and ReTran's in place of the MLP): x W_ih and h W_hh,
  2 * 2 * d_model * 4 * d_model;
* a readout (unembedding): 2 * d_model * d_vocab.

Training runs forward and backward, 3x the forward FLOPs (the backward pass is two matmuls
per forward matmul, for the inputs' and the weights' gradients), over the loops a step runs
(`training_depth`, read from `training.losses.training_losses`); with train.backprop_loops the
backward runs through at most that many of them (`backward_depth`).
"""

from __future__ import annotations

from fractions import Fraction

from .config import ModelConfig
from .family_registry import family_class

BACKWARD_FACTOR = 3  # forward + backward = 3x forward: the backward pass is two matmuls per forward one


def attention_flops_per_token(cfg: ModelConfig, n_keys: float) -> float:
    """One attention layer, each query attending to `n_keys` keys (the sequence's length)."""
    inner = cfg.n_heads * cfg.d_head
    return 2 * 4 * cfg.d_model * inner + 2 * 2 * n_keys * inner


def mlp_flops_per_token(cfg: ModelConfig) -> float:
    return 2 * cfg.mlp_matrices * cfg.d_model * cfg.d_mlp


def lstm_flops_per_token(cfg: ModelConfig) -> float:
    return 2 * 2 * cfg.d_model * 4 * cfg.d_model


def layer_flops_per_token(cfg: ModelConfig, n_keys: float) -> float:
    """Forward FLOPs per token of one application of one layer of `cfg`'s family (its
    `layer_flops_per_token`, built from the terms above), each query attending to `n_keys` keys."""
    return family_class(cfg.family).layer_flops_per_token(cfg, n_keys)


def readout_flops_per_token(cfg: ModelConfig) -> float:
    return 2 * cfg.d_model * cfg.d_vocab


def forward_flops_per_token(cfg: ModelConfig, n_keys: float, loops: float | None = None, readouts: float = 1) -> float:
    """Forward FLOPs per token through `loops` loops of the block (default: the trained
    depth; 1 for the single-pass families) and `readouts` unembeddings."""
    loops = cfg.n_loops if loops is None else loops
    return loops * cfg.n_layers * layer_flops_per_token(cfg, n_keys) + readouts * readout_flops_per_token(cfg)


def training_depth(progressive: str, mix_depths: tuple[int, int] | None, n_loops: int) -> tuple[Fraction, Fraction]:
    """(expected loops run, expected readouts) of one training step, exact fractions.

    * "none": n_loops loops, one readout;
    * "mix": a depth r uniform in mix_depths (default 1..n_loops); one pass runs to
      max(n_loops, r) loops and reads out at n_loops and, unless r == n_loops, at r too;
    * "mcleish": the full pass, plus n_progressive more loops from the (detached) state after
      n_prefix loops, n_prefix uniform in 0..n_loops-1 and n_progressive in 1..n_loops-n_prefix
      (E = (n_loops + 3) / 4); two readouts."""
    if progressive == "mix":
        lo, hi = mix_depths or (1, n_loops)
        depths = range(lo, hi + 1)
        loops = Fraction(sum(max(n_loops, r) for r in depths), len(depths))
        return loops, 1 + Fraction(sum(r != n_loops for r in depths), len(depths))
    if progressive == "mcleish":
        return n_loops + Fraction(sum(n_loops - p + 1 for p in range(n_loops)), 2 * n_loops), Fraction(2)
    return Fraction(n_loops), Fraction(1)


def backward_depth(progressive: str, mix_depths: tuple[int, int] | None, n_loops: int,
                   backprop_loops: int | None) -> Fraction:
    """Expected loops the backward pass of one training step runs through: every loop the
    step ran (`training_depth`), or with `backprop_loops` the last that many of its pass
    (min(deepest, backprop_loops)); "mcleish" truncates in its own way and takes none."""
    loops, _ = training_depth(progressive, mix_depths, n_loops)
    if backprop_loops is None:
        return loops
    if progressive == "mix":
        lo, hi = mix_depths or (1, n_loops)
        depths = range(lo, hi + 1)
        return Fraction(sum(min(max(n_loops, r), backprop_loops) for r in depths), len(depths))
    return Fraction(min(n_loops, backprop_loops))


def training_flops_per_token(cfg: ModelConfig, n_keys: float, progressive: str,
                             mix_depths: tuple[int, int] | None, backprop_loops: int | None = None) -> float:
    """Forward and backward FLOPs per token of one training step, in expectation: the forward
    through every loop the step runs, the backward (2x) through `backward_depth` of them."""
    loops, readouts = training_depth(progressive, mix_depths, cfg.n_loops)
    backward = backward_depth(progressive, mix_depths, cfg.n_loops, backprop_loops)
    return (forward_flops_per_token(cfg, n_keys, float(loops), float(readouts))
            + (BACKWARD_FACTOR - 1) * forward_flops_per_token(cfg, n_keys, float(backward), float(readouts)))

"""The names of `train.weight_decay_on`'s rules and the parameter names each one decays.

Apart from `decay.py` (which applies them) because `TrainConfig` checks its field against
these names, and `decay.py` takes a `TrainConfig`: both import this module, neither the other.

Names, not tensor shapes: a rule on rank would decay the per-head attention biases b_Q, b_K
and b_V (stored [head, d_head]) and call them matrices. The patterns match the names
`model.named_parameters()` gives in every family: W_E, W_pos, blocks.0.attn.W_Q,
blocks.0.mlp.b_in, layers.0.lstm.W_ih, ln_final.w, ...
"""

from __future__ import annotations

# the weight matrices: embeddings (W_E, W_pos), attention (W_Q, W_K, W_V, W_O), MLP (W_in,
# W_out), unembedding (W_U) and the LSTM cells' input and recurrent weights (W_ih, W_hh)
_MATRIX = r"(.*\.)?W_[A-Za-z]+"
_QKV_BIAS = r"(.*\.)?attn\.b_[QKV]"

WEIGHT_DECAY_RULES: dict[str, tuple[str, ...]] = {
    "all": (r".*",),
    "matrices": (_MATRIX,),
    "matrices_and_qkv_biases": (_MATRIX, _QKV_BIAS),
}

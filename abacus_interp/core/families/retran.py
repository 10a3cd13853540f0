"""The "retran" family: the recurrent transformer of the architecture comparison. Each layer
is causal self-attention followed by an LSTM over positions (in place of the MLP), each
sub-layer pre-LN with a residual connection:

    x = x + attn(ln1(x))
    x = x + lstm(ln2(x))          an LSTM of width d_model, run left to right

The attention is the looped model's (`Attention`: SDPA / flash / explicit paths, the same
weights and hook names); the LSTM is `HookedLSTM` from the lstm family.

Hook points (l = layer, p = time step = position in the token batch):

    hook_embed / hook_pos_embed / hook_input               [batch pos d_model]
    blocks.{l}.hook_resid_pre / hook_resid_mid / hook_resid_post     [batch pos d_model]
    blocks.{l}.attn.hook_q / hook_k / hook_v / hook_z      [batch pos head d_head]
    blocks.{l}.attn.hook_attn_scores / hook_pattern        [batch head query_pos key_pos]
    blocks.{l}.hook_attn_out / hook_lstm_out               [batch pos d_model]
    blocks.{l}.lstm.hook_gates_in                          [batch pos 4*d_model]
    blocks.{l}.lstm.steps.{p}.hook_hidden / hook_cell      [batch d_model]
    ln_final.hook_normalized                               [batch pos d_model]
"""

from __future__ import annotations

from typing import ClassVar

from jaxtyping import Bool, Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from ..attention import Attention, AttentionContext, AttentionHooks, KVEntry
from ..config import ModelConfig
from ..family_registry import register_family
from ..flops import attention_flops_per_token, lstm_flops_per_token
from ..model_base import LayerNorm
from .base import SinglePassModel
from .lstm import HookedLSTM, LSTMState


class HookedAttention(Attention, AttentionHooks):
    """`Attention` with its hook points (`AttentionHooks`) on itself: a single-pass model
    needs one hook set per layer, so weights and hooks share the name `blocks.{l}.attn`, as
    in TransformerLens. Attention.__init__'s super().__init__() builds the hooks."""


class ReTranBlock(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = LayerNorm(cfg)
        self.attn = HookedAttention(cfg)
        self.ln2 = LayerNorm(cfg)
        self.lstm = HookedLSTM(cfg.d_model, cfg.d_model, cfg.max_seq_len)
        self.hook_resid_pre = HookPoint()  # [batch pos d_model]
        self.hook_attn_out = HookPoint()  # [batch pos d_model]
        self.hook_resid_mid = HookPoint()  # [batch pos d_model]
        self.hook_lstm_out = HookPoint()  # [batch pos d_model]
        self.hook_resid_post = HookPoint()  # [batch pos d_model]

    def forward(
        self,
        x: Float[Tensor, "batch pos d_model"],
        valid: Bool[Tensor, "batch pos"] | None,
        key_valid: Bool[Tensor, "batch key_pos"] | None,
        cache: tuple[KVEntry, LSTMState] | None,
        first_position: int,
    ) -> tuple[Float[Tensor, "batch pos d_model"], tuple[KVEntry, LSTMState]]:
        kv_cache, lstm_state = cache if cache is not None else (None, None)
        x = self.hook_resid_pre(x)
        n_query = x.shape[1]
        n_key = n_query + (kv_cache.k.shape[1] if kv_cache is not None else 0)
        context = AttentionContext.build(self.attn.cfg, n_query, n_key, x.device, key_valid)
        attn_out, kv = self.attn(self.ln1(x), self.attn, context, kv_cache)
        x = self.hook_resid_mid(x + self.hook_attn_out(attn_out))
        lstm_out, lstm_state = self.lstm(self.ln2(x), valid, lstm_state, first_position)
        x = self.hook_resid_post(x + self.hook_lstm_out(lstm_out))
        return x, (kv, lstm_state)


@register_family
class ReTranModel(SinglePassModel):
    """Attention and an LSTM per layer (see the module docstring)."""

    family: ClassVar[str] = "retran"
    label: ClassVar[str] = "ReTran"
    components: ClassVar[tuple[tuple[str, str], ...]] = ((".lstm.", "lstm"),)
    hooks_per_position: ClassVar[bool] = True  # HookedLSTM's step hooks, max_seq_len of them

    @staticmethod
    def layer_flops_per_token(cfg: ModelConfig, n_keys: float) -> float:
        return attention_flops_per_token(cfg, n_keys) + lstm_flops_per_token(cfg)

    def build_layers(self, cfg: ModelConfig) -> None:
        self.blocks = nn.ModuleList([ReTranBlock(cfg) for _ in range(cfg.n_layers)])

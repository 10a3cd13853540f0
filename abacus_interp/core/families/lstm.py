"""The "lstm" family: token embedding, `n_layers` stacked LSTM layers of width d_model, and
the shared final norm and unembedding.

The cell is written out here rather than taken from `nn.LSTM`, for two reasons: hooks see
(and can edit) the hidden and cell state of every time step inside the recurrence, and
padding is skipped (a padded step carries the state through unchanged), so a left-padded
prompt gives the same completion as the bare prompt.

Hook points (l = layer, p = time step = position in the token batch):

    hook_embed / hook_pos_embed / hook_input          [batch pos d_model]
    blocks.{l}.hook_in                                 layer input   [batch pos d_model]
    blocks.{l}.lstm.hook_gates_in                      x W_ih + b    [batch pos 4*d_model]
    blocks.{l}.lstm.steps.{p}.hook_hidden              h_p           [batch d_model]
    blocks.{l}.lstm.steps.{p}.hook_cell                c_p           [batch d_model]
    blocks.{l}.hook_out                                h_0..h_p      [batch pos d_model]
    ln_final.hook_normalized                           [batch pos d_model]

A step's hooks run inside the recurrence, so an edit to h_p or c_p reaches every later step
and layer; `hook_out` stacks the (hooked) hidden states, and an edit there reaches the
layers above only. Step hook sets exist for positions 0..max_seq_len-1.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from jaxtyping import Bool, Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from ...errors import UserError
from ..config import ModelConfig
from ..family_registry import register_family
from ..flops import lstm_flops_per_token
from .base import SinglePassModel

LSTMState = tuple[Tensor, Tensor]  # (hidden, cell), each [batch d_hidden]


class StepHooks(nn.Module):
    """The hook points of one time step of one LSTM layer."""

    def __init__(self):
        super().__init__()
        self.hook_hidden = HookPoint()  # [batch d_hidden]
        self.hook_cell = HookPoint()  # [batch d_hidden]


class HookedLSTM(nn.Module):
    """One LSTM layer over positions, gates in the order input, forget, cell, output:

        i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (x_p W_ih + b + h_(p-1) W_hh)
        c_p = f * c_(p-1) + i * g;   h_p = o * tanh(c_p)
    """

    def __init__(self, d_in: int, d_hidden: int, max_steps: int):
        super().__init__()
        self.d_hidden = d_hidden
        # nn.LSTM's initialisation, U(-1/sqrt(d_hidden), 1/sqrt(d_hidden)), with the forget
        # gate's bias at 1 so the cell starts by keeping what it holds (Jozefowicz et al. 2015)
        bound = 1 / math.sqrt(d_hidden)
        self.W_ih = nn.Parameter(torch.empty(d_in, 4 * d_hidden).uniform_(-bound, bound))
        self.W_hh = nn.Parameter(torch.empty(d_hidden, 4 * d_hidden).uniform_(-bound, bound))
        self.b = nn.Parameter(torch.zeros(4 * d_hidden))
        with torch.no_grad():
            self.b[d_hidden : 2 * d_hidden] = 1.0
        self.hook_gates_in = HookPoint()  # [batch pos 4*d_hidden]
        self.steps = nn.ModuleList([StepHooks() for _ in range(max_steps)])

    def forward(
        self,
        x: Float[Tensor, "batch pos d_in"],
        valid: Bool[Tensor, "batch pos"] | None = None,
        state: LSTMState | None = None,
        first_position: int = 0,
    ) -> tuple[Float[Tensor, "batch pos d_hidden"], LSTMState]:
        """Hidden states of positions first_position.. of a sequence, starting from `state`
        (the state after the earlier positions; None: zeros), and the state after the last."""
        batch, n_pos, _ = x.shape
        last_position = first_position + n_pos
        if last_position > len(self.steps):
            raise UserError(
                f"position {last_position - 1} is past the {len(self.steps)} time steps this LSTM has "
                "hook points for (model.max_seq_len); use shorter inputs or build with a larger max_seq_len"
            )
        if state is None:
            zeros = x.new_zeros(batch, self.d_hidden)
            state = (zeros, zeros)
        hidden, cell = state
        # the input's share of every gate, for all positions at once: the recurrence only adds h W_hh
        gates_in = self.hook_gates_in(x @ self.W_ih + self.b)  # [batch pos 4*d_hidden]
        outputs = []
        for p in range(n_pos):
            gates = gates_in[:, p] + hidden @ self.W_hh  # [batch 4*d_hidden]
            i, f, g, o = gates.chunk(4, dim=-1)
            new_cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
            new_hidden = torch.sigmoid(o) * torch.tanh(new_cell)
            if valid is not None:  # padding leaves the state as it was
                real = valid[:, p, None]  # [batch 1]
                new_cell = torch.where(real, new_cell, cell)
                new_hidden = torch.where(real, new_hidden, hidden)
            step = self.steps[first_position + p]
            cell = step.hook_cell(new_cell)
            hidden = step.hook_hidden(new_hidden)
            outputs.append(hidden)
        return torch.stack(outputs, dim=1), (hidden, cell)


class LSTMLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.hook_in = HookPoint()  # [batch pos d_model]
        self.lstm = HookedLSTM(cfg.d_model, cfg.d_model, cfg.max_seq_len)
        self.hook_out = HookPoint()  # [batch pos d_model]

    def forward(self, x, valid, key_valid, state, first_position):
        # key_valid is for attention layers; a recurrence only needs `valid`
        out, state = self.lstm(self.hook_in(x), valid, state, first_position)
        return self.hook_out(out), state


@register_family
class LSTMModel(SinglePassModel):
    """A multi-layer LSTM language model over the task's tokens (see the module docstring).
    The layers are stacked without residual connections, as in a standard multi-layer LSTM;
    the input embedding may carry positions (cfg.positional), though the recurrence already
    knows where it is."""

    family: ClassVar[str] = "lstm"
    label: ClassVar[str] = "LSTM"
    components: ClassVar[tuple[tuple[str, str], ...]] = ((".lstm.", "lstm"),)
    hooks_per_position: ClassVar[bool] = True  # HookedLSTM's step hooks, max_seq_len of them

    @staticmethod
    def layer_flops_per_token(cfg: ModelConfig, n_keys: float) -> float:
        return lstm_flops_per_token(cfg)

    def build_layers(self, cfg: ModelConfig) -> None:
        self.blocks = nn.ModuleList([LSTMLayer(cfg) for _ in range(cfg.n_layers)])

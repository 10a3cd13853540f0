"""The auxiliary readouts of a model's state: linear maps of every position's final state
(through ln_final, as the unembedding reads it) trained beside the answer by a loss of their
own, and never used to answer. Each shapes the state through every loop, which is why they
exist; the analyses then read them as the run's own probes.

- the running sum (`ModelConfig.running_sum_probe`, `train.running_sum_loss`): each answer
  column's sum plus its carry in, as one magnitude in units of ten;
- the partial products (`partial_product_probe`, `partial_product_loss`): the units and tens
  of each product a_(i-j) * b_j the column adds, as ten classes each;
- the carry (`carry_probe`, `carry_loss`): the carry into the column, as one class per carry;
- the order (`order_probe`, `order_loss`): sorting's items, one score each at its closing
  separator, in order of value within a list.

A readout writes nothing into the state, so a warm start may add one (fresh) and the model
still computes its source's function, and `train.readouts_first` may fit the readouts alone.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn

# every auxiliary readout's parameters, by attribute name
READOUT_PARAMETER_NAMES = ("W_sum", "b_sum", "W_products", "b_products", "W_carry", "b_carry", "W_order")


class AuxiliaryReadouts:
    """Mixed into `ArithmeticModel`, which supplies `cfg` and `ln_final`."""

    def build_auxiliary_readouts(self) -> None:
        """The readouts `cfg` asks for, each decayed like W_U."""
        cfg = self.cfg
        if cfg.running_sum_probe:  # a readout of norm ~2 suffices for sums of ~30 tens
            self.W_sum = nn.Parameter(torch.randn(cfg.d_model) * cfg.init_std)
            self.b_sum = nn.Parameter(torch.zeros(()))
        if cfg.partial_product_probe is not None:  # ten-way classes, as the unembedding's
            k = cfg.partial_product_probe
            self.W_products = nn.Parameter(torch.randn(cfg.d_model, k, 2, 10) * cfg.init_std)
            self.b_products = nn.Parameter(torch.zeros(k, 2, 10))
        if cfg.carry_probe is not None:  # one class per carry
            self.W_carry = nn.Parameter(torch.randn(cfg.d_model, cfg.carry_probe) * cfg.init_std)
            self.b_carry = nn.Parameter(torch.zeros(cfg.carry_probe))
        if cfg.order_probe:  # no bias: the loss reads differences of two scores only
            self.W_order = nn.Parameter(torch.randn(cfg.d_model) * cfg.init_std)

    @property
    def readout_parameters(self) -> dict[str, nn.Parameter]:
        """The readouts' parameters by name: they read the state and write nothing into it, so
        they can be trained alone (`train.readouts_first`)."""
        return {name: getattr(self, name) for name in READOUT_PARAMETER_NAMES if hasattr(self, name)}

    def read_running_sum(self, state: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos"]:
        """The running-sum readout (`cfg.running_sum_probe`) of a state, in units of ten (the
        integer part is the carry out)."""
        if not self.cfg.running_sum_probe:
            raise ValueError("this model has no running-sum readout; build it with running_sum_probe=True")
        return self.ln_final(state) @ self.W_sum + self.b_sum

    def read_partial_products(self, state: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos k 2 10"]:
        """The partial-product readout (`cfg.partial_product_probe`) of a state: per multiplier
        digit j < k, logits over the units (index 0) and tens (index 1) of a_(i-j) * b_j."""
        if self.cfg.partial_product_probe is None:
            raise ValueError("this model has no partial-product readout; build it with partial_product_probe=k")
        return torch.einsum("bpd,dkcv->bpkcv", self.ln_final(state), self.W_products) + self.b_products

    def read_carries(self, state: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos n_classes"]:
        """The carry readout (`cfg.carry_probe`) of a state: logits over the carry into the
        answer column each position predicts, class c meaning a carry of c."""
        if self.cfg.carry_probe is None:
            raise ValueError("this model has no carry readout; build it with carry_probe=n_classes")
        return self.ln_final(state) @ self.W_carry + self.b_carry

    def read_order(self, state: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos"]:
        """The order readout (`cfg.order_probe`) of a state: one score per position, meant to
        rise with the value of the item a closing separator ends."""
        if not self.cfg.order_probe:
            raise ValueError("this model has no order readout; build it with order_probe=True")
        return self.ln_final(state) @ self.W_order

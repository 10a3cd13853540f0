"""Model families beside the looped transformer, selected by `ModelConfig.family` through
the registry (core/family_registry.py: a family is one file plus `@register_family`).

    looped   LoopedTransformer (abacus_interp/core/model.py); with n_loops=1 a GPT-style model
    lstm     LSTMModel: embedding, stacked LSTM layers, unembedding (lstm.py)
    retran   ReTranModel: per layer attention then an LSTM over positions (retran.py)

Every family derives from `ArithmeticModel` (abacus_interp/core/model_base.py): the interface the
training loop, `load_model`, scoring, decoding and the analyses use (embed / run_loops /
unembed / forward / generate), with `is_looped` saying whether there is a loop over depth.
"""

from __future__ import annotations

from ..config import ModelConfig
from ..family_registry import family_class, register_family, registered_families
from ..model import LoopedTransformer
from ..model_base import ArithmeticModel
from .base import SinglePassModel
from .lstm import LSTMModel
from .retran import ReTranModel


def build_model(cfg: ModelConfig) -> ArithmeticModel:
    """A freshly initialised model of the family `cfg.family` names."""
    return family_class(cfg.family)(cfg)


__all__ = ["LSTMModel", "LoopedTransformer", "ReTranModel", "SinglePassModel", "build_model", "family_class",
           "register_family", "registered_families"]

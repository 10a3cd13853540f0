"""abacus_interp: looped transformers with Abacus embeddings, and tools to look inside.

Public API (see DESIGN.md): ModelConfig, LoopedTransformer, act_name, load_model,
list_checkpoints, get_task.
"""

from .config import ModelConfig
from .model import LoopedTransformer, act_name
from .tokens import Vocab

__all__ = ["ModelConfig", "LoopedTransformer", "act_name", "Vocab"]

"""abacus_interp: looped transformers with Abacus embeddings, and tools to look inside.

Public API (DESIGN.md): ModelConfig, LoopedTransformer, act_name, load_model,
list_checkpoints, get_task; `analyses.<name>.run(...)` for the analyses.
"""

from .cache import LoopActivationCache
from .checkpoints import list_checkpoints, load_model
from .config import ModelConfig
from .hooks import act_name
from .model import LoopedTransformer
from .tasks import get_task
from .tokens import Vocab

__all__ = ["LoopActivationCache", "LoopedTransformer", "ModelConfig", "Vocab", "act_name", "get_task", "list_checkpoints", "load_model"]

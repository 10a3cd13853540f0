"""abacus_interp: looped transformers with Abacus embeddings, and tools to look inside.

The names a notebook starts from: ModelConfig, LoopedTransformer, hook_name, act_name,
loop_label and head_label (how loops and heads are named wherever a person reads them),
load_model (load_checkpoint for its step and run too), list_checkpoints, get_task;
`analyses.<name>.run(...)` for the analyses. ARCHITECTURE.md at the repository root says
how the pieces fit together.
"""

from .checkpoints import LoadedCheckpoint, list_checkpoints, load_checkpoint, load_model
from .core import families as _families  # noqa: F401  (the built-in model families register themselves)
from .core.cache import LoopActivationCache
from .core.config import ModelConfig
from .core.hooks import act_name, head_label, hook_name, layer_label, loop_label, neuron_label
from .core.model import LoopedTransformer
from .core.model_base import ArithmeticModel
from .core.tokens import Vocab
from .tasks import get_task

__all__ = ["ArithmeticModel", "LoadedCheckpoint", "LoopActivationCache", "LoopedTransformer", "ModelConfig", "Vocab",
           "act_name", "get_task", "head_label", "hook_name", "layer_label", "list_checkpoints", "load_checkpoint",
           "load_model", "loop_label", "neuron_label"]

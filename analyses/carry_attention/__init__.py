"""Which heads, in which loop, carry the carry? Attention statistics, head ablation,
activation patching on carry counterfactuals and linear probes for carry-in.

    >>> from analyses import carry_attention
    >>> res = carry_attention.run("checkpoints/small-add")
    >>> res.summary()            # headline numbers
    >>> res.to_dict()            # JSON-safe, every number
    >>> res.figures()            # {"staircase": go.Figure, "alignment": ..., "ablation": ..., ...}

Pieces, usable alone: `labels` (digit labels, sub-tasks, balanced problem sets),
`attention_stats`, `ablation`, `patching`, `probes`, `figures`.
"""

from .analysis import run
from .attention_stats import example_pattern
from .config import SECTIONS, CarryAttentionConfig
from .labels import SUBTASKS, balanced_problems, build_problem_set, digit_labels
from .patching import POSITIONS
from .probes import probe_accuracy
from .result import CarryAttentionResult

__all__ = ["run", "CarryAttentionConfig", "CarryAttentionResult", "SECTIONS", "SUBTASKS", "POSITIONS",
           "digit_labels", "balanced_problems", "build_problem_set", "probe_accuracy", "example_pattern"]

"""One converter to JSON-safe Python, used by every `to_dict` and by the report writer."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch


def json_safe(x: Any) -> Any:
    """Tensors, arrays and numpy scalars to plain Python, dict keys to str, tuples to lists,
    NaN and +-inf to None (JSON has neither); anything else unknown to its str()."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if x is None or isinstance(x, (bool, str, int)):  # bool before float: True is an int
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, torch.Tensor):
        return json_safe(x.detach().cpu().tolist())
    if isinstance(x, np.ndarray):
        return json_safe(x.tolist())
    if isinstance(x, np.generic):  # numpy scalars: np.float32, np.int64, np.bool_
        return json_safe(x.item())
    if isinstance(x, Path):
        return str(x)
    return str(x)

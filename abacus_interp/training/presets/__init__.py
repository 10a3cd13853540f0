"""Named recipes, one module per task. Each returns a RunConfig; `--set` edits it before training."""

from __future__ import annotations

from collections.abc import Callable

from ...errors import UserError
from ..config import RunConfig
from .addition import demo_add, extrap_add, loop_add, paper_add, plain_add, small_add
from .expressions import expressions
from .grokking import grok_mod113, grok_mod113_fast
from .multiplication import extrap_mul, extrap_mul_digits, mul
from .sorting import extrap_sort, extrap_sort_pairwise, extrap_sort_window

__all__ = ["PRESETS", "get_preset", "demo_add", "plain_add", "small_add", "loop_add", "extrap_add", "extrap_mul",
           "extrap_mul_digits", "mul", "extrap_sort", "extrap_sort_window", "extrap_sort_pairwise", "grok_mod113", "grok_mod113_fast", "expressions"]


PRESETS: dict[str, Callable[[], RunConfig]] = {
    "demo-add": demo_add,
    "plain-add": plain_add,
    "small-add": small_add,
    "loop-add": loop_add,
    "extrap-add": extrap_add,
    "extrap-mul": extrap_mul,
    "extrap-mul-digits": extrap_mul_digits,
    "extrap-sort": extrap_sort,
    "extrap-sort-window": extrap_sort_window,
    "extrap-sort-pairwise": extrap_sort_pairwise,
    "mul": mul,
    "grok-mod113": grok_mod113,
    "grok-mod113-fast": grok_mod113_fast,
    "expressions": expressions,
    "paper-add-1x16": lambda: paper_add("paper-add-1x16", 1, 16),
    "paper-add-8x2": lambda: paper_add("paper-add-8x2", 8, 2),
}


def get_preset(name: str) -> RunConfig:
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]()

"""The contract between an analysis and whatever runs it (the report, a notebook, a script).

An analysis is registered once in `analyses/registry.py` and declares:

- `key` and `title`: its report section;
- `Config`: a frozen dataclass of its sizes, defaulting to the report's, with `quick()`
  giving the tiny sizes tests use;
- `skip_reason(run)`: None when it applies to the run, else the sentence that says why not;
- `run(run, config)`: a result with `to_dict()` (JSON-safe numbers), `figures()` (plotly
  figures, never shown) and `findings()` (a few sentences, written beside the numbers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import plotly.graph_objects as go

from abacus_interp.checkpoints import list_checkpoints
from abacus_interp.tasks.base import Task


@dataclass
class RunContext:
    """One trained run as the analyses see it."""

    run_dir: Path
    model: Any  # a LoopedTransformer loaded from run_dir
    task: Task
    compare_dir: Path | None = None  # a second run to compare with, if any
    seed: int = 0
    # steps where the representation changed fastest; checkpoint_compare finds them and
    # embedding_evolution marks them on its curves (it runs later in the registry)
    change_steps: list[int] = field(default_factory=list)

    @property
    def n_checkpoints(self) -> int:
        return len(list_checkpoints(self.run_dir))

    @property
    def is_looped(self) -> bool:
        """False for one pass without input injection: extra passes then mean nothing."""
        cfg = self.model.cfg
        return not (cfg.n_loops == 1 and cfg.input_injection == "none")


class Result(Protocol):
    def to_dict(self) -> dict[str, Any]: ...

    def figures(self) -> dict[str, go.Figure]: ...

    def findings(self) -> list[str]: ...


class Analysis(Protocol):
    key: str
    title: str
    Config: type

    def skip_reason(self, run: RunContext) -> str | None: ...

    def run(self, run: RunContext, config: Any) -> Result: ...

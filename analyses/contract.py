"""The contract between an analysis and whatever runs it (the report, a notebook, a script).

An analysis is registered once in `analyses/registry.py` and declares:

- `key` and `title`: its report section;
- `Config`: a frozen dataclass of its sizes, defaulting to the report's, with `quick()`
  giving the tiny sizes tests use;
- `requires`: the keys of the analyses whose results it cannot run without; the report runs
  those first and skips this one, naming the requirement, when one of them did not run;
- `uses`: the keys of the analyses whose results it reads when they ran (and does without
  when they did not); the report runs those first too;
- `skip_reason(run)`: None when it applies to the run, else the sentence that says why not;
- `run(run, config, needs)`: a result with `to_dict()` (JSON-safe numbers), `figures()`
  (plotly figures, never shown) and `findings()` (a few sentences, written beside the
  numbers). `needs` maps the key of each analysis in `requires` (always there) and `uses`
  (there when it ran) to its result: results pass from one analysis to another only this way,
  never through the run context, which is frozen.

The analysis's own `run(model_or_run, ..., config=None, **overrides)` (what a notebook calls)
takes the same config: without one it runs the config's defaults, the report's numbers, and a
keyword naming a field overrides that field (`run(model, config=Config.quick(), n_problems=8)`);
`configure` does that.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import plotly.graph_objects as go

from abacus_interp.checkpoints import list_checkpoints
from abacus_interp.core.model_base import ArithmeticModel
from abacus_interp.tasks.base import Task

C = TypeVar("C")


@dataclass(frozen=True)
class RunContext:
    """One trained run as the analyses see it, with the options the report was given. Frozen:
    what one analysis finds reaches another through `needs`, where the order is declared."""

    run_dir: Path
    model: ArithmeticModel  # loaded from run_dir
    task: Task
    compare_dir: Path | None = None  # a second run to compare with, if any
    seed: int = 0
    run_config: dict[str, Any] | None = None  # the run's config.json, as the report read it
    ablation_dir: Path | None = None  # written by `abacus-interp ablate`, if given
    architectures_dir: Path | None = None  # written by `abacus-interp compare`, if given

    @property
    def n_checkpoints(self) -> int:
        return len(list_checkpoints(self.run_dir))

    @property
    def family(self) -> str:
        """The model family (ModelConfig.family): "looped", "lstm", "retran" or any other
        registered one (abacus_interp.core.family_registry)."""
        return self.model.cfg.family

    @property
    def has_loop_dynamics(self) -> bool:
        """Whether running the block once more changes anything worth reading: a looped family
        (`model.is_looped`, the class flag) that loops more than once or re-injects its input.
        False for one pass without input injection (extra passes then mean nothing) and for
        the families whose recurrence runs over positions rather than a loop."""
        cfg = self.model.cfg
        return self.model.is_looped and not (cfg.n_loops == 1 and cfg.input_injection == "none")


class Result(Protocol):
    def to_dict(self) -> dict[str, Any]: ...

    def figures(self) -> dict[str, go.Figure]: ...

    def findings(self) -> list[str]: ...


class Analysis(Protocol):
    key: str
    title: str
    Config: type
    requires: tuple[str, ...]
    uses: tuple[str, ...]

    def skip_reason(self, run: RunContext) -> str | None: ...

    def run(self, run: RunContext, config: Any, needs: Mapping[str, Result]) -> Result: ...


def configure(config_type: type[C], config: C | None, overrides: dict[str, Any], where: str) -> C:
    """The config a `run` uses: `config` (default `config_type()`, the report's settings) with
    the fields named in `overrides` replaced. A keyword that is no field is a TypeError that
    lists the fields, so a misspelt setting is not silently ignored; replace() re-runs the
    config's own validation on the overridden values."""
    fields = [f.name for f in dataclasses.fields(config_type)]
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise TypeError(f"{where} got unknown keyword(s) {', '.join(unknown)}; the fields of "
                        f"{config_type.__name__} are {', '.join(fields)}")
    if config is None:
        config = config_type()
    elif not isinstance(config, config_type):
        raise TypeError(f"{where}: config must be a {config_type.__name__}, not {type(config).__name__}")
    return dataclasses.replace(config, **overrides)

"""Every analysis of a trained run, in the report's order: one line per analysis.

To add one, give its folder a `plugin.py` with an `ANALYSIS` object that follows
`analyses.contract.Analysis` (key, title, Config, requires, uses, skip_reason, run) and list
it here. The report adds its own sections around these (`analyses.report.sections.SECTIONS`)
and runs the whole list in `dependency_order`: a place in the list is a place on the page, not
a promise about what ran before.
"""

from __future__ import annotations

from collections.abc import Sequence

from analyses import checkpoint_compare, embedding_evolution
from analyses.carry_attention.plugin import ANALYSIS as CARRY_ATTENTION
from analyses.carry_wave.plugin import ANALYSIS as CARRY_WAVE
from analyses.circuit.plugin import ANALYSIS as CIRCUIT
from analyses.comparisons.plugin import ANALYSIS as COMPARISONS
from analyses.contract import Analysis
from analyses.fixed_point.plugin import ANALYSIS as FIXED_POINT
from analyses.fourier.plugin import ANALYSIS as FOURIER
from analyses.multiplication.plugin import ANALYSIS as MULTIPLICATION
from analyses.product_columns.plugin import ANALYSIS as PRODUCT_COLUMNS

ANALYSES: tuple[Analysis, ...] = (
    FIXED_POINT,
    CARRY_WAVE,
    MULTIPLICATION,
    PRODUCT_COLUMNS,
    COMPARISONS,
    CARRY_ATTENTION,
    CIRCUIT,
    checkpoint_compare.ANALYSIS,
    embedding_evolution.ANALYSIS,
    FOURIER,
)


class RegistryError(ValueError):
    """A registry whose declared needs cannot be met: a key required but not registered, or a cycle."""


def dependency_order(analyses: Sequence[Analysis]) -> list[Analysis]:
    """`analyses` in an order where each comes after every analysis it `requires` or `uses`;
    otherwise the given order is kept (each step takes the first one whose needs have run).
    Raises RegistryError naming a need that is not in `analyses`, or the analyses in a cycle."""
    by_key = {a.key: a for a in analyses}
    if len(by_key) != len(analyses):
        keys = [a.key for a in analyses]
        raise RegistryError(f"analysis keys registered twice: {sorted({k for k in keys if keys.count(k) > 1})}")
    for a in analyses:
        missing = [k for k in (*a.requires, *a.uses) if k not in by_key]
        if missing:
            raise RegistryError(f"analysis {a.key!r} needs {', '.join(map(repr, missing))}, which is not registered")
    ordered: list[Analysis] = []
    done: set[str] = set()
    waiting = list(analyses)
    while waiting:
        ready = next((a for a in waiting if set(a.requires) | set(a.uses) <= done), None)
        if ready is None:  # every one left waits on another one left
            raise RegistryError("analyses that need each other in a cycle: "
                                + ", ".join(f"{a.key} (needs {', '.join((*a.requires, *a.uses))})" for a in waiting))
        ordered.append(ready)
        done.add(ready.key)
        waiting.remove(ready)
    return ordered

"""Fixed points of the loop: convergence, lock-in, contraction and adaptive halting.

A looped transformer applies one block R times, re-injecting the input each time:
s_t = f(s_{t-1}) with f(s) = block(s + input). This analysis asks whether s_t settles to
a fixed point, when each answer digit's prediction locks in (and how that depends on the
carry chain reaching the digit), what happens when the loop runs past the trained depth,
how strongly f contracts near the last state, and what an adaptive exit rule (stop when
the relative step is below a tolerance, as in Huginn) buys.

    from analyses import fixed_point
    res = fixed_point.run("checkpoints/small-add")       # or a LoopedTransformer + task=
    res.findings()                                       # a few sentences of findings
    res.figures()["lock_in"]                             # plotly figures, never shown
    res.to_dict()                                        # JSON-safe numbers

The numerics that need only a map `f(state)` (spectrum of the Jacobian by power
iteration, step decay, behaviour classification) live in `dynamics` and work for any map.
"""

from .analysis import FixedPointResult, run
from .config import FixedPointConfig
from .dynamics import BEHAVIOURS, SpectrumEstimate, classify, decay_rate, iterate, spectrum
from .problems import CLASSES, balanced_problems

__all__ = [
    "BEHAVIOURS",
    "CLASSES",
    "FixedPointConfig",
    "FixedPointResult",
    "SpectrumEstimate",
    "balanced_problems",
    "classify",
    "decay_rate",
    "iterate",
    "run",
    "spectrum",
]

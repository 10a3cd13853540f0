"""The carry wave: how a looped adder with a window on the Abacus index solves numbers longer
than any it was trained on by running more loops.

    from analyses import carry_wave
    result = carry_wave.run(model, task)          # a CarryWaveResult
    result.figures(); result.findings()
"""

from .analysis import run
from .config import CarryWaveConfig
from .result import CarryWaveResult, LockInFit, WaveProblem

__all__ = ["CarryWaveConfig", "CarryWaveResult", "LockInFit", "WaveProblem", "run"]

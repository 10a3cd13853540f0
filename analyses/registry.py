"""Every analysis the report runs, in the report's order: one line per analysis.

To add one, give its folder a `plugin.py` with an `ANALYSIS` object that follows
`analyses.contract.Analysis` (key, title, Config, skip_reason, run) and list it here.
"""

from __future__ import annotations

from analyses import checkpoint_compare, embedding_evolution
from analyses.carry_attention.plugin import ANALYSIS as CARRY_ATTENTION
from analyses.carry_wave.plugin import ANALYSIS as CARRY_WAVE
from analyses.contract import Analysis
from analyses.fixed_point.plugin import ANALYSIS as FIXED_POINT
from analyses.fourier.plugin import ANALYSIS as FOURIER

ANALYSES: tuple[Analysis, ...] = (
    FIXED_POINT,
    CARRY_WAVE,
    CARRY_ATTENTION,
    checkpoint_compare.ANALYSIS,  # before embedding_evolution, which marks its change steps
    embedding_evolution.ANALYSIS,
    FOURIER,
)

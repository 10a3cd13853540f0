"""Fourier analysis of grokking (Nanda et al. 2023; Zhong et al. 2023).

    from analyses import fourier
    res = fourier.run("checkpoints/grok-mod113")      # a run directory, checkpoint or model (+ task=)
    res.key_frequencies, res.phases
    res.findings()                                     # verdict and measures beside Nanda et al.'s (PAPER)
    res.details                                        # every measure in a sentence
    res.to_dict()                                      # JSON-safe numbers
    res.figures()["progress_losses"]                   # plotly figures, never shown
    fourier.diagnose("RUN").sentences                  # why a run did not grok, and what to change

On an addition (digit) model, `run` gives the base-10 Fourier view of the digit embeddings.
"""

from .analysis import run
from .basis import (
    KEY_THRESHOLD,
    base10_power,
    fourier_basis,
    frequency_norms,
    frequency_shares,
    gini,
    key_frequencies,
)
from .circuit import (
    SINGLE_FREQ_THRESHOLD,
    distance_irrelevance,
    frequency_ablation,
    gradient_symmetricity,
    key_components,
    logit_fit,
    neuron_fourier,
    neuron_frequency_fractions,
    neuron_summary,
    restricted_and_excluded,
)
from .config import FourierConfig
from .diagnose import Diagnosis, diagnose
from .paper import PAPER
from .progress import detect_phases, progress_measures
from .result import FourierResult

__all__ = [
    "KEY_THRESHOLD",
    "PAPER",
    "SINGLE_FREQ_THRESHOLD",
    "Diagnosis",
    "FourierConfig",
    "FourierResult",
    "base10_power",
    "detect_phases",
    "diagnose",
    "distance_irrelevance",
    "fourier_basis",
    "frequency_norms",
    "frequency_shares",
    "gini",
    "gradient_symmetricity",
    "key_components",
    "key_frequencies",
    "logit_fit",
    "neuron_fourier",
    "neuron_frequency_fractions",
    "neuron_summary",
    "progress_measures",
    "frequency_ablation",
    "restricted_and_excluded",
    "run",
]

"""The Fourier result as a tree of frozen dataclasses: what `to_dict` writes (through
`jsonsafe.to_json`) and what the findings, the details and the figures read.

The measures (`basis`, `circuit`, `progress`) still return dicts, which their own tests
read; `run` types them once with `jsonsafe.from_json`, which refuses a key that is no field
here and a missing field, so a renamed key fails at the source instead of emptying a
sentence. A part that was not measured (no checkpoint series, no run directory) is None.
Two kinds of result share `FourierResult`: the modular-addition analysis (`ModularSummary`)
and the base-10 view of a digit model (`Base10Summary`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from abacus_interp.jsonsafe import to_json

from .diagnose import Diagnosis


@dataclass(frozen=True)
class TaskInfo:
    name: str
    p: int | None = None  # modular tasks only
    train_fraction: float | None = None


@dataclass(frozen=True)
class Phases:
    """Grokking phase boundaries (steps); None where a phase was not reached."""

    memorisation_end: int | None
    circuit_formation_end: int | None
    cleanup_end: int | None
    grokked: bool
    plateau: int | None  # steps from memorisation to 99% test accuracy
    notes: tuple[str, ...]
    source: str | None = None  # "metrics.jsonl" or "checkpoints"; None without curves


@dataclass(frozen=True)
class NeuronsPerLoop:
    loop: int
    layer: int
    hook: str
    n_dead: int
    n_single_frequency: int
    share_single_frequency: float
    cluster_sizes: dict[int, int]


@dataclass(frozen=True)
class Neurons:
    """The MLP neurons at '=' of the last loop and layer, in the 2D Fourier basis."""

    loop: int
    layer: int
    hook: str
    threshold: float  # share of variance from one frequency that makes a neuron single-frequency
    dominant_frequency: tuple[int, ...]
    fraction_explained: tuple[float, ...]
    single_frequency: tuple[bool, ...]
    n_neurons: int
    n_dead: int
    n_single_frequency: int
    share_single_frequency: float  # over all neurons (the paper's denominator)
    share_single_frequency_alive: float
    clusters: dict[int, tuple[int, ...]]  # frequency -> neurons
    cluster_sizes: dict[int, int]
    # share of the layer's activation variance (over all pairs) in single-frequency neurons;
    # None with no live neuron, or in results made before it was measured
    variance_share_single_frequency: float | None = None
    # median share of pairs on which a live neuron that is not single-frequency fires (1.0:
    # always on, so linear in its inputs); None when every live neuron is single-frequency
    others_median_active_share: float | None = None


@dataclass(frozen=True)
class LogitFit:
    coefficients: dict[int, float]  # frequency -> alpha_k of cos(w_k(a+b-c))
    fve_by_frequency: dict[int, float]
    key_frequencies: tuple[int, ...]
    key_coefficients: dict[int, float]
    fraction_explained: float  # by the key frequencies


@dataclass(frozen=True)
class FinalLosses:
    """Losses of the final checkpoint; restricted / excluded on the training pairs."""

    restricted_loss: float
    restricted_accuracy: float
    excluded_loss: float
    excluded_accuracy: float
    full_loss_train: float
    restricted_loss_all: float
    full_loss: float


@dataclass(frozen=True)
class FrequencyAblation:
    frequency: int
    loss_without: float
    accuracy_without: float
    loss_alone: float
    accuracy_alone: float


@dataclass(frozen=True)
class ZhongThresholds:
    symmetricity: float
    irrelevance: float


@dataclass(frozen=True)
class ClockPizza:
    gradient_symmetricity: float
    distance_irrelevance: float  # NaN (null in the JSON) when the correct logit is constant
    n_samples: int
    verdict: str  # "clock", "pizza" or "mixed"
    thresholds: ZhongThresholds


@dataclass(frozen=True)
class ProgressSeries:
    """The progress measures per checkpoint (one value per entry of `step`)."""

    step: tuple[int, ...]
    restricted_loss: tuple[float, ...]
    restricted_accuracy: tuple[float, ...]
    excluded_loss: tuple[float, ...]
    excluded_accuracy: tuple[float, ...]
    full_loss_train: tuple[float, ...]
    restricted_loss_all: tuple[float, ...]
    full_loss: tuple[float, ...]
    train_loss: tuple[float, ...]
    test_loss: tuple[float, ...]  # NaN without test pairs
    train_accuracy: tuple[float, ...]
    test_accuracy: tuple[float, ...]
    gini_embed: tuple[float, ...]
    gini_neuron_logit: tuple[float, ...]
    sum_sq_weights: tuple[float, ...]
    key_frequencies: tuple[int, ...]  # the final checkpoint's, as in the paper
    single_frequency_share: tuple[float, ...] = ()  # the last layer's MLP neurons; () in series made before it


@dataclass(frozen=True)
class RestrictedVsTest:
    """When and how far the restricted loss fell against the test loss. The fall over circuit
    formation needs both phase boundaries, the course after memorisation two checkpoints past
    it: each is None when it could not be measured."""

    restricted_half_fall_step: int | None
    test_half_fall_step: int | None
    restricted_falls_first: bool | None
    circuit_formation_steps: tuple[int, int] | None = None
    restricted_fall_factor: float | None = None
    test_fall_factor: float | None = None
    restricted_peak: float | None = None
    restricted_peak_step: int | None = None
    restricted_min: float | None = None
    restricted_min_step: int | None = None
    restricted_final: float | None = None
    final_step: int | None = None
    restricted_peak_over_final: float | None = None
    excluded_at_peak: float | None = None
    excluded_final: float | None = None


@dataclass(frozen=True)
class Paper:
    """Nanda et al.'s numbers (`paper.PAPER`), carried only when they apply (p = 113)."""

    source: str
    p: int
    key_frequencies: tuple[int, ...]
    n_single_frequency: int
    n_neurons: int
    share_single_frequency: float
    phases: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class ModularSummary:
    kind: str  # "modular"
    task: TaskInfo
    p: int
    key_threshold: float
    key_source: str
    key_frequencies: tuple[int, ...]
    embed_key_frequencies: tuple[int, ...]
    embed_component_norms: tuple[float, ...]
    embed_frequency_norms: tuple[float, ...]
    embed_frequency_shares: tuple[float, ...]
    embed_constant_norm: float
    neuron_logit_frequency_norms: tuple[float, ...]
    neuron_logit_frequency_shares: tuple[float, ...]
    neuron_logit_key_frequencies: tuple[int, ...]
    neurons: Neurons
    neurons_per_loop: tuple[NeuronsPerLoop, ...]  # empty for one loop and layer
    logit_fit: LogitFit
    final_losses: FinalLosses
    frequency_ablation: tuple[FrequencyAblation, ...]
    clock_pizza: ClockPizza
    progress: ProgressSeries | None  # None: no run directory, one checkpoint, or over_checkpoints=False
    phases: Phases | None
    paper: Paper | None
    restricted_vs_test: RestrictedVsTest | None = None  # with a checkpoint series
    diagnosis: Diagnosis | None = None  # with a run directory
    details: tuple[str, ...] = ()  # every measure in a sentence, written from the fields above


@dataclass(frozen=True)
class Base10View:
    """Fourier power of the digit embeddings 0..9 over Z_10."""

    frequencies: tuple[int, ...]
    periods: tuple[float, ...]
    shares: tuple[float, ...]
    norms: tuple[float, ...]
    constant_norm: float
    period_shares: dict[str, float]  # "10", "5", "2"
    share_10_5_2: float
    dominant_period: str


@dataclass(frozen=True)
class Base10Summary:
    kind: str  # "base10"
    task: TaskInfo
    base10: Base10View
    # step and the period shares ("10", "5", "2", "share_10_5_2") per checkpoint; None without a run
    base10_series: dict[str, tuple[float, ...]] | None
    phases: Phases | None  # never detected for a digit model: None
    details: tuple[str, ...] = ()


@dataclass(frozen=True)
class FourierResult:
    """`summary`, the typed numbers (what `to_dict` writes), and `arrays`, the large maps the
    figures draw (mean |2D Fourier coefficient| of the neurons, the correct-logit table)."""

    summary: ModularSummary | Base10Summary
    arrays: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key_frequencies(self) -> list[int]:
        return list(self.summary.key_frequencies) if isinstance(self.summary, ModularSummary) else []

    @property
    def phases(self) -> Phases | None:
        return self.summary.phases

    @property
    def details(self) -> list[str]:
        """Every measure in a sentence (clusters, per-loop neurons, clock vs pizza, the
        diagnosis), for a notebook; `findings()` is the short account the report shows."""
        return list(self.summary.details)

    @property
    def headline(self) -> list[str]:
        """The findings: did it grok and when, and the measures beside Nanda et al.'s."""
        return self.findings()

    def findings(self) -> list[str]:
        from .findings import findings  # the findings read this module: imported on use

        return findings(self.summary)

    def to_dict(self) -> dict[str, Any]:
        return to_json(self.summary)

    def figures(self) -> dict[str, Any]:
        """Plotly figures (never shown); every one carries the detected phase boundaries."""
        from .figures import all_figures

        return all_figures(self.summary, self.arrays)

"""Every setting of the Fourier analysis: one config, whose defaults are the report's."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.errors import UserError

from .basis import KEY_THRESHOLD
from .circuit import SINGLE_FREQ_THRESHOLD

KEY_SOURCES = ("both", "embed", "neuron_logit")


@dataclass(frozen=True)
class FourierConfig:
    """The settings `fourier.run` uses: the defaults (`report()`) are what the report runs, so
    `run(run_dir)` in a notebook computes the report's numbers; `quick()` the tests'.
    `run(run_dir, config=c, max_checkpoints=8)` overrides one field of `c`."""

    # checkpoints of the progress measures, spread evenly over the run (None: all of them)
    max_checkpoints: int | None = 24
    # a frequency is key when it holds at least this share of the non-constant squared Fourier
    # norm of W_E and of the neuron-logit map W_out W_U ("both", Nanda et al.), or of one
    # ("embed", "neuron_logit")
    key_threshold: float = KEY_THRESHOLD
    key_source: str = "both"
    # share of a neuron's variance from one frequency that makes it single-frequency
    neuron_threshold: float = SINGLE_FREQ_THRESHOLD
    # random (a, b, c) triples of the gradient symmetricity (clock vs pizza)
    n_symmetricity: int = 100
    seed: int = 0
    # False: the latest checkpoint only (no progress measures, phases or diagnosis)
    over_checkpoints: bool = True

    def __post_init__(self) -> None:
        if self.key_source not in KEY_SOURCES:
            raise UserError(f"key_source must be one of {KEY_SOURCES}, got {self.key_source!r}")

    @classmethod
    def report(cls) -> FourierConfig:
        """The report's settings (the defaults), named where a caller wants to say so."""
        return cls()

    @classmethod
    def quick(cls) -> FourierConfig:
        return cls(max_checkpoints=6)

"""Training: run configs, presets, the training loop, multi-process support."""

from .config import RunConfig, TrainConfig
from .loop import TrainingDiverged, TrainingInterrupted, TrainResult, train
from .overrides import apply_overrides
from .presets import PRESETS, get_preset

__all__ = [
    "PRESETS", "RunConfig", "TrainConfig", "TrainResult", "TrainingDiverged", "TrainingInterrupted",
    "apply_overrides", "get_preset", "train",
]

"""What every preset builds on: a named RunConfig from a task, a model dict and a TrainConfig."""

from __future__ import annotations

from ...core.config import ModelConfig
from ...tasks import get_task
from ..config import RunConfig, TrainConfig


def recipe(name: str, task_name: str, task_kwargs: dict, model: dict, train: TrainConfig) -> RunConfig:
    """The RunConfig of preset `name`: the task built from its kwargs, the model on its vocabulary."""
    task = get_task(task_name, **task_kwargs)
    # the task's position scheme unless the recipe chooses another (extrap-add: none, rotary)
    cfg = ModelConfig(vocab=task.vocab, **{"positional": task.positional, "answer_slots": task.answer_slots, **model})
    return RunConfig(task=task_name, task_kwargs=task_kwargs, model=cfg, train=train, preset=name)

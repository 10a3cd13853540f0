"""Arithmetic and grokking tasks: each owns its vocabulary, generator and formatting.

    >>> task = get_task("addition", max_digits=3)
    >>> task.make(123, 456).prompt
    '321+654='

`get_task(name, **config)` rebuilds any task from `task.name` and `task.config()`, which is
how a checkpoint's config.json records the task it was trained on.
"""

from __future__ import annotations

import inspect
from typing import Any

from abacus_interp.errors import UserError
from abacus_interp.tasks.addition import AdditionTask
from abacus_interp.tasks.base import Example, Task
from abacus_interp.tasks.expressions import ExpressionTask
from abacus_interp.tasks.modular_addition import ModularAdditionTask
from abacus_interp.tasks.multiplication import MultiplicationTask
from abacus_interp.tasks.sorting import SortingTask

TASKS: dict[str, type[Task]] = {
    cls.name: cls
    for cls in (AdditionTask, MultiplicationTask, SortingTask, ModularAdditionTask, ExpressionTask)
}


def get_task(name: str, **kw: Any) -> Task:
    """Build the task registered as `name` with constructor kwargs `kw`.

    Errors name the alternatives, so a typo in a config file says how to fix it.
    """
    if not isinstance(name, str) or name not in TASKS:
        raise UserError(f"unknown task {name!r}; known tasks: {', '.join(sorted(TASKS))}")
    cls = TASKS[name]
    valid = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(kw) - set(valid))
    if unknown:
        raise UserError(
            f"task {name!r} got unknown option(s) {', '.join(unknown)}; "
            f"valid options: {', '.join(valid)}"
        )
    return cls(**kw)


def task_from_config(config: dict[str, Any]) -> Task:
    """Rebuild a task from its stored form `{"name": ..., **options}` (config.json's "task").
    An option of the wrong type or value (a damaged or hand-edited file) is a UserError, as
    the same option given with `--set` is."""
    options = dict(config)
    try:
        return get_task(options.pop("name", None), **options)
    except UserError:
        raise
    except (TypeError, ValueError) as e:  # the task's constructor comparing "five" with an int
        raise UserError(f"the task {config!r:.100} cannot be built: {e}") from e


__all__ = [
    "TASKS",
    "AdditionTask",
    "Example",
    "ExpressionTask",
    "ModularAdditionTask",
    "MultiplicationTask",
    "SortingTask",
    "Task",
    "get_task",
    "task_from_config",
]

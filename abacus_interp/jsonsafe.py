"""One converter to JSON-safe Python, used by every `to_dict` and by the report writer, and
the way back from such JSON to a typed result (`from_json`)."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

T = TypeVar("T")


def json_safe(x: Any) -> Any:
    """Tensors, arrays and numpy scalars to plain Python, dict keys to str, tuples to lists,
    NaN and +-inf to None (JSON has neither); anything else unknown to its str()."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if x is None or isinstance(x, (bool, str, int)):  # bool before float: True is an int
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, torch.Tensor):
        return json_safe(x.detach().cpu().tolist())
    if isinstance(x, np.ndarray):
        return json_safe(x.tolist())
    if isinstance(x, np.generic):  # numpy scalars: np.float32, np.int64, np.bool_
        return json_safe(x.item())
    if isinstance(x, Path):
        return str(x)
    return str(x)


def to_json(record: Any) -> dict[str, Any]:
    """A result dataclass tree as JSON-safe dicts: `dataclasses.asdict` then `json_safe`."""
    return json_safe(dataclasses.asdict(record))


def from_json(cls: type[T], data: dict[str, Any], *, partial: bool = False) -> T:
    """The dataclass tree `cls` from dicts of its JSON form (what `to_json` wrote, or a section
    builder's dicts before they are typed), converting by the fields' type hints.

    A key that is no field of its dataclass is a TypeError, and so is a missing field without
    a default unless `partial` (then it is None): a builder that renames a key fails here
    instead of a finding silently disappearing later. `partial=True` is for hand-written
    fragments (tests, a figure drawn from part of a report). Leaves are not checked: JSON's
    None stands for NaN in a float field."""
    return _record(cls, data, partial, cls.__name__)


def _record(cls: type, data: Any, partial: bool, where: str) -> Any:
    if not isinstance(data, dict):
        raise TypeError(f"{where}: expected a dict for {cls.__name__}, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise TypeError(f"{where}: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not "
                        f"field(s) of {cls.__name__} ({', '.join(fields)})")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields.items():
        if name in data:
            values[name] = _value(hints[name], data[name], partial, f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            if not partial:
                raise TypeError(f"{where}: missing {name!r}, a field of {cls.__name__} without a default")
            values[name] = None
    return cls(**values)


def _value(hint: Any, value: Any, partial: bool, where: str) -> Any:
    if value is None or hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        records = [a for a in options if dataclasses.is_dataclass(a)]
        if len(options) == 1:
            return _value(options[0], value, partial, where)
        return _record(records[0], value, partial, where) if records and isinstance(value, dict) else value
    if dataclasses.is_dataclass(hint):
        return _record(hint, value, partial, where)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], v, partial, f"{where}[{i}]") for i, v in enumerate(value))
        return tuple(_value(a, v, partial, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
    if origin is list:
        return [_value(args[0], v, partial, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        return {k: _value(args[1], v, partial, f"{where}[{k!r}]") for k, v in value.items()}
    return value

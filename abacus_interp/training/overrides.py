"""`--set key=value` edits of a RunConfig, each value checked against its field's type.

`train.lr=3e-4`, `model.d_model=64`, `task.max_digits=8`, or an unqualified `lr=3e-4` when
the name is unique across sections. A wrong type says which field, what it got and what it
needs; task options are checked by the task's own constructor.
"""

from __future__ import annotations

import dataclasses
import json
import types
from typing import Any, Union, get_args, get_origin, get_type_hints

from ..core.config import ModelConfig
from ..errors import UserError
from ..tasks import get_task
from .config import RunConfig, TrainConfig


def _parse_value(text: str) -> Any:
    """JSON where possible (numbers, true/false, null, lists), else the raw string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _field_types(section: str) -> dict[str, Any]:
    """Annotated types of a section's fields (the modules use postponed annotations, so
    the strings are resolved here)."""
    cls = {"model": ModelConfig, "train": TrainConfig}[section]
    return get_type_hints(cls)


def _describe(hint: Any) -> str:
    """How a type reads in an error message: "a number (float)", "an integer (int) or null"."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        text = " or ".join(_describe(a) for a in inner)
        return f"{text} or null" if type(None) in args else text
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_describe(args[0]).split(' (')[0].removeprefix('a ').removeprefix('an ')}s"
        kinds = {_describe(a).split(" (")[0].removeprefix("a ").removeprefix("an ") for a in args}
        kind = kinds.pop() if len(kinds) == 1 else "value"
        return f"a list of {len(args)} {kind}s"
    return {
        bool: "true or false (bool)",
        int: "an integer (int)",
        float: "a number (float)",
        str: "a string (str)",
    }.get(hint, getattr(hint, "__name__", str(hint)))


_NO_MATCH = object()


def _coerce(value: Any, raw: str, hint: Any) -> Any:
    """`value` (parsed from `raw`) as type `hint`, or _NO_MATCH. An integer is a fine float,
    an integral float (1e4) a fine integer; a bool is neither."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is not type(None) and (out := _coerce(value, raw, arg)) is not _NO_MATCH:
                return out
        return _NO_MATCH
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            return _NO_MATCH
        kinds = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
        if len(kinds) != len(value):
            return _NO_MATCH
        items = [_coerce(v, json.dumps(v), k) for v, k in zip(value, kinds, strict=True)]
        return _NO_MATCH if any(i is _NO_MATCH for i in items) else tuple(items)
    if hint is bool:
        return value if isinstance(value, bool) else _NO_MATCH
    if hint is int:
        if isinstance(value, bool):
            return _NO_MATCH
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return _NO_MATCH
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return _NO_MATCH
        return float(value)
    if hint is str:
        # a string field takes the text as typed, even when it would parse as a number
        return value if isinstance(value, str) else raw.strip()
    return value  # a type this check does not know: the constructor validates it


def _example(hint: Any, current: Any) -> str:
    """A valid right-hand side for the error message: the current value when it has one."""
    if current is not None:
        return json.dumps(list(current) if isinstance(current, tuple) else current)
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _example(inner[0], None) if inner else "null"
    if origin is tuple:
        kinds = [args[0]] if len(args) == 2 and args[1] is Ellipsis else list(args)
        return "[" + ", ".join(_example(k, None) for k in kinds) + "]"
    return {bool: "true", int: "1", float: "0.001", str: "text"}.get(hint, "null")


def _typed_value(assignment: str, section: str, name: str, raw: str, current: Any) -> Any:
    """The value of `section.name=raw`, checked against the field's annotation; a UserError
    naming the field, the value and the expected type otherwise."""
    value = _parse_value(raw)
    if section == "task":  # task options are checked by the task's constructor
        return value
    hint = _field_types(section).get(name)
    if hint is None:
        return value
    out = _coerce(value, raw, hint)
    if out is _NO_MATCH:
        raise UserError(
            f"--set {assignment}: {section}.{name} must be {_describe(hint)}, "
            f"e.g. {section}.{name}={_example(hint, current)}"
        )
    return out


def apply_overrides(cfg: RunConfig, assignments: list[str]) -> RunConfig:
    """Apply `key=value` edits, validated by rebuilding every section. Model fields derived
    from others (d_head, d_mlp, max_loops) are derived again unless set, and the model's
    vocabulary always follows the (possibly edited) task."""
    d = cfg.to_dict()
    # ModelConfig.to_dict leaves some fields out at their defaults (family, rotary, attn_bias,
    # ...); they are still fields to set
    every_model_field = {f.name: getattr(cfg.model, f.name) for f in dataclasses.fields(ModelConfig)}
    # and RunConfig.to_dict leaves training fields added later out while they are off
    every_train_field = dataclasses.asdict(cfg.train)
    sections = {"task": d["task"], "model": {**every_model_field, **d["model"]},
                "train": {**every_train_field, **d["train"]}}
    model_changes: dict[str, Any] = {}
    for assignment in assignments:
        if "=" not in assignment:
            raise UserError(f"--set expects key=value, got {assignment!r}")
        key, raw = assignment.split("=", 1)
        key = key.strip()
        if "." in key:
            section, name = key.split(".", 1)
            if section not in sections:
                raise UserError(f"--set {key}: section must be one of {list(sections)}")
            if name not in sections[section] and section != "task":
                raise UserError(
                    f"--set {key}: {section} has no field {name!r}; fields: {', '.join(sorted(sections[section]))}"
                )
        else:
            owners = [s for s, fields in sections.items() if key in fields and key != "name"]
            if len(owners) != 1:
                where = "no section" if not owners else f"several sections ({', '.join(owners)})"
                raise UserError(
                    f"--set {key}: found in {where}; write it as section.{key} "
                    f"(sections: task, model, train; e.g. train.lr=3e-4)"
                )
            section, name = owners[0], key
        if section == "model" and name == "vocab":
            raise UserError("--set model.vocab: the vocabulary comes from the task; change the task instead")
        value = _typed_value(assignment.strip(), section, name, raw, sections[section].get(name))
        sections[section][name] = value
        if section == "model":
            model_changes[name] = value
    try:
        task_kwargs = {k: v for k, v in sections["task"].items() if k != "name"}
        task = get_task(sections["task"]["name"], **task_kwargs)
        model = cfg.model.replace(**model_changes, vocab=task.vocab.to_dict(), answer_slots=task.answer_slots)
        return RunConfig(
            task=sections["task"]["name"],
            task_kwargs=task_kwargs,
            model=model,
            train=TrainConfig(**sections["train"]),
            preset=cfg.preset,
        )
    except (TypeError, ValueError) as e:
        raise UserError(f"invalid --set: {e}") from e

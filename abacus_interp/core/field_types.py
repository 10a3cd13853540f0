"""Type checks of a config dict read from JSON against a dataclass's annotations, with the
error a user can act on ("train.lr is '3e-4', but it must be a number")."""

from __future__ import annotations

import types
import typing

from ..errors import UserError
from .tokens import Vocab


def check_field_types(cls: type, values: dict, where: str) -> None:
    """A UserError naming the first field of `values` whose value is not of the type its
    annotation in the dataclass `cls` says, as JSON spells types: an integer (not true or
    false), a number, a string, true/false, a list of those, null where None is allowed.
    For dicts read from files (config.json), before the constructor compares a string with
    a number. `where` names the dataclass in the message ("ModelConfig", "train")."""
    hints = typing.get_type_hints(cls)
    for name, value in values.items():
        hint = hints.get(name)
        if hint is not None and not _is_of_type(value, hint):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise UserError(f"{where}.{name} is {shown}, but it must be {_type_in_words(hint)}")


def _is_of_type(value, hint) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_is_of_type(value, arg) for arg in args)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            return False
        kinds = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
        return len(value) == len(kinds) and all(_is_of_type(v, k) for v, k in zip(value, kinds, strict=True))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint is Vocab:  # its own from_dict checks what is inside
        return isinstance(value, (Vocab, dict))
    return True  # a type this check does not know: the constructor validates it


def _type_in_words(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        words = [_type_in_words(a) for a in args if a is not type(None)]
        return " or ".join(words) + (" or null" if type(None) in args else "")
    if origin is tuple:
        count = "" if len(args) == 2 and args[1] is Ellipsis else f"{len(args)} "
        return f"a list of {count}{_type_in_words(args[0]).removeprefix('an ').removeprefix('a ')}s"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string",
            Vocab: "an object with the vocabulary's symbols"}.get(hint, getattr(hint, "__name__", str(hint)))

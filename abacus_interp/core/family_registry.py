"""The model families by name: `ModelConfig.family` -> the class that builds it.

A family is one file: a subclass of `ArithmeticModel` (core/model_base.py) that declares

    family      its name in ModelConfig.family and config.json
    label       how tables and figures name it ("LSTM")
    components  (parameter-name fragment, component) pairs for its own kinds of parameters
                beyond the shared ones (core/summary.py), e.g. ((".lstm.", "lstm"),)
    layer_flops_per_token(cfg, n_keys)
                forward FLOPs per token of one layer application (core/flops.py has the
                shared terms: attention, MLP, LSTM)

marked `@register_family`, which registers it when its module is imported; and one registry
line: that import, in `core/families/__init__.py`, beside the built-in families'. Every
process imports that package (`import abacus_interp` does), so the CLI, `load_model` and the
ranks of a multi-process training know the family too; a family registered only inside a
notebook or a test (as tests/test_family_registry.py does) is known to that process alone,
so train it with train.processes=1. This module imports nothing of the model, so the config,
the FLOPs count and the summary may look a family up without standing above the models.
"""

from __future__ import annotations

from ..errors import UserError

_FAMILIES: dict[str, type] = {}  # family name -> its ArithmeticModel subclass


def register_family(cls: type) -> type:
    """Class decorator: make `cls` the model class of `ModelConfig.family == cls.family`."""
    name = cls.family
    if name in _FAMILIES and _FAMILIES[name] is not cls:
        raise ValueError(f"family {name!r} is already registered by {_FAMILIES[name].__qualname__}")
    _FAMILIES[name] = cls
    return cls


def unregister_family(name: str) -> None:
    """Forget a family (a test's toy family, once the test is done)."""
    _FAMILIES.pop(name, None)


def family_class(name: str) -> type:
    """The model class of family `name`; a UserError naming the registered ones otherwise."""
    if name not in _FAMILIES:
        raise UserError(f"ModelConfig.family={name!r}; choose one of {tuple(_FAMILIES)} "
                        "(a new family registers itself with @register_family when its module is imported)")
    return _FAMILIES[name]


def registered_families() -> tuple[str, ...]:
    return tuple(_FAMILIES)

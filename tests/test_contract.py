"""`analyses.contract.configure`: an analysis's `run` takes its plugin's config dataclass."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from dataclasses import dataclass

import pytest

from analyses.contract import configure
from analyses.registry import ANALYSES


@dataclass(frozen=True)
class SizesConfig:
    n_problems: int = 64
    n_pairs: int = 16

    def __post_init__(self) -> None:
        if self.n_problems < 1:
            raise ValueError(f"n_problems={self.n_problems}; use at least 1")


def toy_run(model, task=None, *, config: SizesConfig | None = None, seed: int = 0, **overrides):
    """An analysis's `run` as every registered one is written: its settings through `configure`."""
    cfg = configure(SizesConfig, config, overrides, "toy_run()")
    return {"model": model, "task": task, "n_problems": cfg.n_problems, "n_pairs": cfg.n_pairs, "seed": seed}


def test_without_a_config_run_uses_the_configs_defaults():
    assert toy_run("m", "t", seed=3) == {"model": "m", "task": "t", "n_problems": 64, "n_pairs": 16, "seed": 3}


def test_a_config_fills_its_fields_and_keywords_override_it():
    assert toy_run("m", config=SizesConfig()) == {"model": "m", "task": None, "n_problems": 64, "n_pairs": 16,
                                                  "seed": 0}
    out = toy_run("m", config=SizesConfig(n_pairs=4), n_problems=8, seed=1)
    assert (out["n_problems"], out["n_pairs"], out["seed"]) == (8, 4, 1)


def test_overrides_pass_the_configs_own_validation():
    with pytest.raises(ValueError, match="n_problems=0"):
        toy_run("m", config=SizesConfig(), n_problems=0)


def test_an_unknown_keyword_names_the_fields():
    with pytest.raises(TypeError, match=r"n_problem\b.*SizesConfig are n_problems, n_pairs"):
        toy_run("m", n_problem=3)
    with pytest.raises(TypeError, match="config must be a SizesConfig"):
        toy_run("m", config={"n_problems": 3})


@pytest.mark.parametrize("analysis", ANALYSES, ids=lambda a: a.key)
def test_every_registered_analysis_run_takes_its_config(analysis):
    module = importlib.import_module(f"analyses.{analysis.key}")
    params = inspect.signature(module.run).parameters
    assert params["config"].kind is inspect.Parameter.KEYWORD_ONLY and params["config"].default is None
    # every run takes the config's fields as **overrides (analyses.contract.configure)
    overrides = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for field in dataclasses.fields(analysis.Config):
        assert overrides or params[field.name].kind is inspect.Parameter.KEYWORD_ONLY

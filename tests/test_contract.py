"""`analyses.contract.takes_config`: an analysis's `run` takes its plugin's config dataclass."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from dataclasses import dataclass

import pytest

from analyses.contract import takes_config
from analyses.registry import ANALYSES


@dataclass(frozen=True)
class SizesConfig:
    n_problems: int = 64
    n_pairs: int = 16

    def __post_init__(self) -> None:
        if self.n_problems < 1:
            raise ValueError(f"n_problems={self.n_problems}; use at least 1")


@takes_config(SizesConfig)
def toy_run(model, task=None, *, n_problems: int = 200, n_pairs: int = 50, seed: int = 0):
    return {"model": model, "task": task, "n_problems": n_problems, "n_pairs": n_pairs, "seed": seed}


def test_without_a_config_run_keeps_its_own_defaults():
    assert toy_run("m", "t", seed=3) == {"model": "m", "task": "t", "n_problems": 200, "n_pairs": 50, "seed": 3}


def test_a_config_fills_its_fields_and_keywords_override_it():
    assert toy_run("m", config=SizesConfig()) == {"model": "m", "task": None, "n_problems": 64, "n_pairs": 16,
                                                  "seed": 0}
    out = toy_run("m", config=SizesConfig(n_pairs=4), n_problems=8, seed=1)
    assert (out["n_problems"], out["n_pairs"], out["seed"]) == (8, 4, 1)


def test_overrides_pass_the_configs_own_validation():
    with pytest.raises(ValueError, match="n_problems=0"):
        toy_run("m", config=SizesConfig(), n_problems=0)


def test_an_unknown_keyword_names_the_fields_and_the_other_parameters():
    with pytest.raises(TypeError, match=r"n_problem\b.*SizesConfig are n_problems, n_pairs.*model, task, seed"):
        toy_run("m", n_problem=3)
    with pytest.raises(TypeError, match="config must be a SizesConfig"):
        toy_run("m", config={"n_problems": 3})


def test_the_signature_shows_config_before_the_keywords():
    params = list(inspect.signature(toy_run).parameters)
    assert params == ["model", "task", "config", "n_problems", "n_pairs", "seed"]


def test_a_field_that_is_not_a_keyword_only_parameter_is_refused_at_definition():
    with pytest.raises(TypeError, match=r"\['n_pairs'\] are not keyword-only"):

        @takes_config(SizesConfig)
        def positional(model, n_pairs=1, *, n_problems=2):
            return model


@pytest.mark.parametrize("analysis", ANALYSES, ids=lambda a: a.key)
def test_every_registered_analysis_run_takes_its_config(analysis):
    module = importlib.import_module(f"analyses.{analysis.key}")
    params = inspect.signature(module.run).parameters
    assert params["config"].kind is inspect.Parameter.KEYWORD_ONLY and params["config"].default is None
    # a converted run takes the config's fields as **overrides (analyses.contract.configure),
    # one not converted yet as keyword-only parameters (takes_config)
    overrides = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for field in dataclasses.fields(analysis.Config):
        assert overrides or params[field.name].kind is inspect.Parameter.KEYWORD_ONLY

"""A new model family is one file plus one registry line (core/family_registry.py): a toy
family defined here, registered with @register_family, trains with the project's `train`,
and `summary`, the report and `compare` run on it with nothing else changed. The built-in
families are found through the same registry."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest
import torch
from jaxtyping import Bool, Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.config import ModelConfig
from abacus_interp.core.families import SinglePassModel, family_class, register_family
from abacus_interp.core.family_registry import registered_families, unregister_family
from abacus_interp.core.flops import forward_flops_per_token, mlp_flops_per_token
from abacus_interp.core.summary import parameter_summary
from abacus_interp.errors import UserError
from abacus_interp.training import apply_overrides, get_preset, train

pytestmark = pytest.mark.slow

MixState = tuple[Tensor, int]  # (sum of the inputs so far [batch d_model], how many)


class PrefixMeanLayer(nn.Module):
    """Each position reads the mean of itself and every position before it, through an MLP:
    a causal layer with a state to carry over in cached decoding, and no attention."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.mixer = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_mlp), nn.GELU(), nn.Linear(cfg.d_mlp, cfg.d_model))
        self.hook_mean = HookPoint()  # [batch pos d_model]

    def forward(self, x: Float[Tensor, "batch pos d_model"], valid: Bool[Tensor, "batch pos"] | None, key_valid,
                state: MixState | None, first_position: int):
        real = torch.ones_like(x[..., 0]) if valid is None else valid.to(x.dtype)  # [batch pos]
        total, count = state if state is not None else (x.new_zeros(x.shape[0], x.shape[2]), x.new_zeros(x.shape[0]))
        sums = total[:, None] + torch.cumsum(x * real[..., None], dim=1)  # [batch pos d_model]
        counts = count[:, None] + torch.cumsum(real, dim=1)  # [batch pos]
        mean = self.hook_mean(sums / counts.clamp(min=1)[..., None])
        return x + self.mixer(mean), (sums[:, -1], counts[:, -1])


class PrefixMeanModel(SinglePassModel):
    family: ClassVar[str] = "prefix-mean"
    label: ClassVar[str] = "PrefixMean"
    components: ClassVar[tuple[tuple[str, str], ...]] = ((".mixer.", "mixer"),)

    @staticmethod
    def layer_flops_per_token(cfg: ModelConfig, n_keys: float) -> float:
        return mlp_flops_per_token(cfg)

    def build_layers(self, cfg: ModelConfig) -> None:
        self.blocks = nn.ModuleList([PrefixMeanLayer(cfg) for _ in range(cfg.n_layers)])


TOY = ("model.family=prefix-mean", "model.n_loops=1", "model.max_loops=1", "model.positional=abacus",
       "model.d_model=32", "model.d_mlp=64", "model.n_layers=2", "model.max_seq_len=24",
       "train.progressive=none", "train.mix_depths=null", "train.step_penalty=null", "train.init_state_noise=0.0",
       "model.input_injection=none", "train.steps=30", "train.batch_size=16", "train.eval_every=30",
       "train.eval_problems=8", "train.checkpoint_every=30", "train.dense_checkpoints=1", "train.dense_until=1",
       "train.device=cpu", "train.processes=1", "task.max_digits=3")


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    # in the project the registry line is the family module's import in core/families/__init__.py;
    # a test registers in its own process (so train.processes=1 above)
    register_family(PrefixMeanModel)
    run_dir = tmp_path_factory.mktemp("toy-family")
    torch.manual_seed(0)
    train(apply_overrides(get_preset("plain-add"), list(TOY)), run_dir, progress=False)
    yield run_dir
    unregister_family("prefix-mean")


def test_built_in_families_come_from_the_registry_and_unknown_ones_are_refused():
    assert registered_families()[:3] == ("looped", "lstm", "retran")
    assert family_class("lstm").label == "LSTM"
    with pytest.raises(UserError, match="choose one of"):
        family_class("no-such-family")
    with pytest.raises(UserError, match="ModelConfig.family='no-such-family'"):
        apply_overrides(get_preset("plain-add"), ["model.family=no-such-family"])


def test_a_registered_toy_family_trains_and_has_a_summary_and_flops(toy_run, capsys):
    model = ckpt.load_model(toy_run, device="cpu")
    assert type(model) is PrefixMeanModel and ckpt.read_run_config(toy_run)["model"]["family"] == "prefix-mean"
    summary = parameter_summary(model)
    assert summary["parameters"]["mixer"] == sum(p.numel() for n, p in model.named_parameters() if ".mixer." in n) > 0
    assert summary["total_parameters"] == sum(p.numel() for p in model.parameters())
    # the card's FLOPs are the family's own count, two layers of its MLP plus the readout
    cfg = model.cfg
    expected = 2 * 2 * (2 * cfg.d_model * cfg.d_mlp) + 2 * cfg.d_model * cfg.d_vocab
    assert forward_flops_per_token(cfg, 10) == expected == summary["forward_flops_per_token"]
    # cached decoding (the layer's carried state) gives what one pass over the whole sequence gives
    prompts = ["12+34=", "999+1="]
    assert model.generate(prompts, use_cache=True) == model.generate(prompts, use_cache=False)
    from abacus_lab.cli import main

    assert main(["summary", str(toy_run)]) == 0
    assert "mixer" in capsys.readouterr().out


def test_the_report_runs_on_a_toy_family(toy_run, tmp_path):
    from analyses.report import ReportSizes, build_report, load_report_json

    build_report(toy_run, tmp_path / "report", sizes=ReportSizes.quick(), progress=False)
    sections = load_report_json(tmp_path / "report")["sections"]
    failed = {key: s["error"] for key, s in sections.items() if s["status"] == "failed"}
    assert failed == {}
    assert sections["model_card"]["status"] == "ok" and sections["evaluation"]["status"] == "ok"
    # what needs a loop says so in its own words
    assert "prefix-mean" in sections["fixed_point"]["reason"]


def test_compare_runs_a_toy_family_cell(toy_run, tmp_path):
    from abacus_lab.experiments.compare import ComparisonSpec, Contender, run_comparison

    spec = ComparisonSpec(
        preset="plain-add", base=tuple(t for t in TOY if not t.startswith("model.family")),
        contenders=(Contender("prefix-mean", "S", ("model.family=prefix-mean",)),),
        lengths=(1, 2, 3, 5), n_per_length=6, n_test=12, description="toy family", length_unit="digits", band=1)
    data = run_comparison(spec, tmp_path / "cmp", progress=False, look_inside=False)
    cell = data["cells"][0]
    assert cell["family"] == "prefix-mean" and cell["params"] > 0
    cfg = ckpt.load_model(tmp_path / "cmp" / "cells" / "prefix-mean-s", device="cpu").cfg
    assert cell["compute"]["forward_flops_per_token"] == pytest.approx(
        forward_flops_per_token(cfg, cell["compute"]["n_ctx"]))
    assert any(line.startswith("PrefixMean-S") for line in data["findings"]), data["findings"]
    assert json.loads((tmp_path / "cmp" / "comparison.json").read_text()) == data

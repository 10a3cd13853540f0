"""Where models run (issue 17): "auto" means CUDA when a GPU is visible, else the CPU, for
`load_model` and the commands that load a model; `--device` overrides it.

CI has no GPU, so the tests that need one pretend: with `torch.cuda.is_available` patched to
True, "auto" must pick CUDA, and `--device cpu` must still load on the CPU (this CPU-only
torch would fail if anything tried CUDA).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.devices import resolve_device
from abacus_lab.cli import main

SHIPPED_ADD = Path(__file__).resolve().parents[1] / "checkpoints" / "small-add"
needs_shipped_add = pytest.mark.skipif(
    not (SHIPPED_ADD / "config.json").exists(), reason="checkpoints/small-add is not in this checkout"
)


@pytest.fixture
def pretend_a_gpu_is_visible(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU, so auto means cuda here")
def test_auto_resolves_to_the_cpu_without_a_gpu():
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device(None) == torch.device("cpu")


def test_auto_resolves_to_cuda_when_a_gpu_is_visible(pretend_a_gpu_is_visible):
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")


def test_asking_for_cuda_without_a_gpu_says_what_to_use(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for asked in ("cuda", "cuda:1", torch.device("cuda")):
        with pytest.raises(ValueError, match="no CUDA device is visible; use cpu or auto"):
            resolve_device(asked)
    with pytest.raises(ValueError, match="unknown device 'gpu'; use auto, cpu, cuda or cuda:N"):
        resolve_device("gpu")


@needs_shipped_add
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU, so auto means cuda here")
def test_load_model_defaults_to_auto_which_is_the_cpu_here():
    assert ckpt.load_model(SHIPPED_ADD).device == torch.device("cpu")


class LoadedModel(Exception):
    """Raised by the load_model spy: the command chose its device, nothing more to run."""


@needs_shipped_add
@pytest.mark.parametrize("command", ["eval", "solve", "summary", "report"])
def test_every_model_command_passes_its_device_flag_to_load_model(command, monkeypatch, tmp_path):
    devices = []

    def spy(path, *args, device="auto", **kwargs):
        devices.append(device)
        raise LoadedModel

    monkeypatch.setattr(ckpt, "load_model", spy)
    extra = {"solve": ["1+2"], "report": ["--out", str(tmp_path / "report")]}.get(command, [])
    for flag in ([], ["--device", "cpu"], ["--device", "cuda:1"]):
        with pytest.raises(LoadedModel):
            main([command, str(SHIPPED_ADD), *extra, *flag])
    assert devices == ["auto", "cpu", "cuda:1"]


@needs_shipped_add
def test_device_cpu_is_honoured_when_a_gpu_is_visible(pretend_a_gpu_is_visible, capsys):
    # auto would now move the model to CUDA, which this CPU-only torch cannot do
    assert main(["solve", str(SHIPPED_ADD), "12345678+87654321", "--device", "cpu"]) == 0
    assert capsys.readouterr().out.strip() == "99999999"
    assert ckpt.load_model(SHIPPED_ADD, device="cpu").device == torch.device("cpu")


@needs_shipped_add
def test_an_unknown_device_flag_exits_2_with_a_helpful_message(capsys):
    assert main(["solve", str(SHIPPED_ADD), "1+2", "--device", "gpu"]) == 2
    assert re.search(r"error: unknown device 'gpu'; use auto, cpu, cuda or cuda:N", capsys.readouterr().err)

"""Where a model runs. "auto", the default of `load_model`, `eval`, `solve`, `summary` and
`report`, puts it on the GPU when one is visible, else on the CPU."""

from __future__ import annotations

import torch

from ..errors import UserError


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """"auto" (or None): the current CUDA device when one is visible, else the CPU. Anything
    else as torch reads it ("cpu", "cuda", "cuda:1"); a CUDA device on a machine without one
    is a UserError that says what to use instead."""
    if isinstance(device, torch.device):
        resolved = device
    elif device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            resolved = torch.device(device)
        except RuntimeError as e:
            raise UserError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N") from e
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {str(device)!r} was asked for, but no CUDA device is visible; use cpu or auto")
    return resolved

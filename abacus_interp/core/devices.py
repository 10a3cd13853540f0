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


def free_memory(device: torch.device) -> int | None:
    """Bytes a new allocation can take on `device` now: the GPU's free memory plus what torch's
    caching allocator holds unused, or the kernel's MemAvailable for the CPU; None where it
    cannot be read (no /proc/meminfo)."""
    if device.type == "cuda":
        cached_unused = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return torch.cuda.mem_get_info(device)[0] + cached_unused
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the kernel reports kB
    except OSError:
        return None
    return None

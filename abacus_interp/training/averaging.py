"""The running mean of a run's weights over its last steps (`train.average_from`).

Stochastic weight averaging (Izmailov et al. 2018): the mean of the weights the optimizer
visits late in a run often generalises better than any one of them, as it sits nearer the
middle of the flat region those steps wander in. On this project's multiplication runs the
mean of a cycle's checkpoints scores 20-digit x 3-digit products about half a point above the
cycle's last step (docs/runs/multiplication.md, "Weight averaging").

The mean never steers training: the optimizer keeps stepping the live weights, and the
average is read only where a run is looked at (the held-out evaluations of the metrics and
the checkpoints). A run with averaging therefore trains the very weights it would train
without, which the tests use: the averaged checkpoint is the mean of the plain run's
checkpoints over the same steps. The resume state keeps the live weights beside the optimizer,
so a resumed run goes on from where it stopped, average included.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


class WeightAverage:
    """The mean of `parameters` after every step from `start` on; `start` None: never."""

    def __init__(self, parameters: list[torch.nn.Parameter], start: int | None):
        self.parameters = parameters
        self.start = start
        self.steps_averaged = 0
        self.mean: list[torch.Tensor] = []

    @property
    def active(self) -> bool:
        return self.steps_averaged > 0

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Fold the weights after `step`'s update into the mean, once `step` reaches `start`."""
        if self.start is None or step < self.start:
            return
        if not self.active:
            self.mean = [p.detach().clone() for p in self.parameters]
        else:  # the running mean, one step at a time: mean += (w - mean) / n
            weight = 1.0 / (self.steps_averaged + 1)
            for mean, p in zip(self.mean, self.parameters, strict=True):
                mean.lerp_(p.detach(), weight)
        self.steps_averaged += 1

    @torch.no_grad()
    def restore(self, steps_averaged: int) -> None:
        """Take the model's current weights as the mean of `steps_averaged` steps (a resume
        loads the averaged checkpoint into the model first, then the live weights)."""
        self.mean = [p.detach().clone() for p in self.parameters]
        self.steps_averaged = steps_averaged

    @contextmanager
    def swapped_in(self):
        """The model holds the averaged weights inside the block, its live weights after; a
        no-op before averaging has begun."""
        if not self.active:
            yield
            return
        with torch.no_grad():
            live = [p.detach().clone() for p in self.parameters]
            for p, mean in zip(self.parameters, self.mean, strict=True):
                p.copy_(mean)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, weights in zip(self.parameters, live, strict=True):
                    p.copy_(weights)

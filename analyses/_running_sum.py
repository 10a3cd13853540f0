"""Shared by the multiplication (N x k) and product-columns (N x N) analyses: how well each answer column's running sum (its column sum plus the carry in: the answer
digit and the carry passed on, `tasks.product_carries.running_sums`) can be read from the
state, loop by loop: the multiplication analogue of a carry bit locking in, for carries of
0..26.

The readout is linear and read through ln_final, as the unembedding reads the state. A run
trained with `train.running_sum_loss` has its own (`ArithmeticModel.read_running_sum`); for
any other run a least-squares readout is fitted per loop on problems of their own, so the
reading says whether the sum is there linearly at all, not what the model does with it. A
column counts as read when the readout is within 0.5 of its running sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from abacus_interp.core.tokens import encode_batch
from abacus_interp.tasks.product_carries import running_sums

# the ridge of the fitted readout, relative to the mean squared feature: enough to keep a fit
# of a few hundred columns on 128 features stable, far below the features' own scale
RIDGE = 1e-3


@dataclass(frozen=True)
class RunningSumReading:
    """Per loop, how often a linear readout of the state gives each column's running sum."""

    label: str  # e.g. "uniform, 5 x 2 digits"
    readout: str  # "trained" (the run's own readout) or "fitted" (least squares, per loop, on other problems)
    n_problems: int  # the problems read (a fitted readout's own problems are not among them)
    n_columns: int  # the answer columns over those problems (several per problem: not independent)
    read: tuple[float, ...]  # per loop (1-based from loop 1): columns read within 0.5 of their running sum
    r2: tuple[float, ...]  # per loop: the readout's R^2 over the columns

    def first_read(self, bar: float = 0.99) -> int | None:
        """The first loop (1-based) at which at least `bar` of the columns are read; None: none."""
        return next((t + 1 for t, r in enumerate(self.read) if r >= bar), None)


def column_states(model, examples, loops: int, batch_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """The normalised state (ln_final) at the position that predicts each answer digit, after
    each loop 1..`loops`, and those columns' running sums: ([loop column d_model], [column]),
    columns of every example in order, units first."""
    states, sums = [], []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        batch = encode_batch(model.cfg.vocab, [e.prompt for e in chunk], [e.target for e in chunk])
        tokens = batch.tokens.to(model.W_E.device)
        inputs, index = model.embed(tokens), model.attention_index(tokens)
        rows, positions = [], []
        for i, example in enumerate(chunk):
            column_sums = running_sums(*example.operands)
            first = int(batch.prompt_lengths[i]) - 1  # logits at position p predict token p + 1
            rows += [i] * len(column_sums)
            positions += range(first, first + len(column_sums))
            sums += column_sums
        per_loop, state = [], None
        for t in range(loops):
            state = model.run_loops(inputs, range(t, t + 1), state=state, index=index)
            per_loop.append(model.ln_final(state)[rows, positions].float().cpu())  # [column d_model]
        states.append(torch.stack(per_loop))
    return torch.cat(states, dim=1), torch.tensor(sums, dtype=torch.float32)


def score_readout(predicted: torch.Tensor, sums: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per loop, the share of columns read within 0.5 and the R^2, of `predicted` [loop column]
    against `sums` [column]."""
    error = predicted.detach().double() - sums.double()
    read = (error.abs() < 0.5).double().mean(1)
    spread = ((sums.double() - sums.double().mean()) ** 2).sum()
    r2 = 1 - (error**2).sum(1) / spread
    return tuple(round(float(x), 4) for x in read), tuple(round(float(x), 4) for x in r2)


def fitted_readout(fit_states: torch.Tensor, fit_sums: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    """Per loop, a ridge least-squares readout (with a constant) fitted on `fit_states`
    [loop column d_model] to `fit_sums`, applied to `states` [loop column' d_model]: [loop column']."""

    def with_constant(x):
        return torch.cat([x.double(), torch.ones(*x.shape[:-1], 1, dtype=torch.float64)], dim=-1)

    a = with_constant(fit_states)  # [loop column d_model+1]
    gram = a.transpose(1, 2) @ a  # [loop d+1 d+1]
    ridge = RIDGE * gram.diagonal(dim1=1, dim2=2).mean(1)[:, None, None] * torch.eye(gram.shape[-1], dtype=torch.float64)
    weights = torch.linalg.solve(gram + ridge, a.transpose(1, 2) @ fit_sums.double()[None, :, None])  # [loop d+1 1]
    return (with_constant(states) @ weights)[..., 0]


@torch.no_grad()
def running_sum_reading(model, examples, loops: int, label: str, fit_examples=None) -> RunningSumReading:
    """Read each answer column's running sum from the state after loops 1..`loops` on
    `examples`: with the run's trained readout when it has one, else with a readout fitted per
    loop on `fit_examples` (needed then)."""
    states, sums = column_states(model, examples, loops)
    if model.cfg.running_sum_probe:
        readout = "trained"
        predicted = 10 * (states @ model.W_sum.detach().float().cpu() + float(model.b_sum))  # in tens: to units
    else:
        if not fit_examples:
            raise ValueError("a model without a trained running-sum readout needs fit_examples to fit one")
        readout = "fitted"
        fit_states, fit_sums = column_states(model, fit_examples, loops)
        predicted = fitted_readout(fit_states, fit_sums, states)
    read, r2 = score_readout(predicted, sums)
    return RunningSumReading(label=label, readout=readout, n_problems=len(examples), n_columns=len(sums),
                             read=read, r2=r2)


def readout_description(reading: RunningSumReading) -> str:
    """How the reading's readout was made, as figures and findings write it."""
    if reading.readout == "trained":
        return "the run's trained readout"
    return "a least-squares readout fitted per loop on other problems"


def running_sum_sentence(readings) -> str:
    """How often a linear readout gives each column's running sum after the last loop read, per
    sample, and the first loop at which it gives 99% of them."""
    r0 = readings[0]
    parts = []
    for r in readings:
        first = r.first_read()
        when = f"99% from loop {first}" if first is not None else "never 99%"
        parts.append(f"{r.label} {r.read[-1]:.0%} (R² {r.r2[-1]:.3f}; {when}; n={r.n_columns} columns)")
    sentence = (f"Each answer column's running sum (column sum + carry in: the digit and the carry it passes on), read "
                f"within 0.5 by {readout_description(r0)}, after {len(r0.read)} loops ({r0.n_problems} problems per "
                f"sample): " + "; ".join(parts) + ".")
    if r0.readout == "fitted" and max(r.read[-1] for r in readings) < 0.5:
        sentence += " The state does not hold the running sum as one linear quantity."
    return sentence

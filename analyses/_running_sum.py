"""How well each answer column's running sum (its column sum plus the carry in: the answer
digit and the carry it passes on, `tasks.product_carries.running_sums`) can be read from the
state, loop by loop: the multiplication analogue of a carry bit locking in, for carries up to
`largest_carry(b)`. Shared by the multiplication (N x k) and product-columns (N x N) analyses.

Readouts are linear and read through ln_final, as the unembedding reads the state. A
least-squares readout is fitted per loop on problems of their own (none of them among the
problems read), so the reading says whether the sum is there linearly at all; the same fit on
the input alone (the injected embedding, before any loop: the column's place and token) is
the baseline it has to beat, since the layout by itself predicts part of a column's sum. A run
trained with `train.running_sum_loss` also has its own readout (`read_running_sum`), read as
it is. A column counts as read when the readout is within 0.5 of its running sum.

For N x k products each partial product a_(i-j) * b_j is read the same way, and its units and
tens digits as ten classes each (a least-squares classifier per loop): whether the state holds
the products as magnitudes or as digits, whose units the answer digit needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from abacus_interp.core.hooks import loop_label
from abacus_interp.core.tokens import encode_batch
from abacus_interp.tasks.product_carries import column_products, partial_product_name, running_sums

# the ridge of the fitted readout, relative to the mean squared feature: enough to keep a fit
# of a thousand or more columns on d_model features stable, far below the features' own scale
RIDGE = 1e-3


@dataclass(frozen=True)
class ReadoutScore:
    """How often one readout gives each column's running sum, per loop (index 0 = loop 1)."""

    read: tuple[float, ...]  # columns read within 0.5 of their running sum
    r2: tuple[float, ...]

    def first_read(self, bar: float = 0.99) -> int | None:
        """The first loop index (0 = loop 1) at which at least `bar` of the columns are read."""
        return next((t for t, r in enumerate(self.read) if r >= bar), None)


@dataclass(frozen=True)
class ProductDigits:
    """How often a ten-way linear classifier, fitted per loop, reads one partial product's units
    and tens digit, in the columns that add all the products (index 0 = loop 1). The tens of a
    product held as one magnitude are intervals of it, which a linear classifier can in principle cut
    apart;
    its units repeat every ten, which one cannot: units read as well as tens say the state holds
    the product as digits."""

    units: tuple[float, ...]
    tens: tuple[float, ...]
    units_from_input: float  # the same classifier fitted on the input alone
    tens_from_input: float

    def best_units_loop(self) -> int:
        """The loop index (0 = loop 1) at which the units are read most often."""
        return max(range(len(self.units)), key=self.units.__getitem__)


@dataclass(frozen=True)
class RunningSumReading:
    """Per loop, how well linear readouts of the state give each column's running sum."""

    label: str  # e.g. "uniform 5 x 2 digits"
    n_problems: int  # the problems read
    n_fit_problems: int  # the other problems the fitted readouts learn on
    n_columns: int  # the answer columns over the problems read (several per problem: not independent)
    fitted: ReadoutScore  # a least-squares readout per loop
    baseline: ReadoutScore  # the same fit on the input alone (one loop-less entry)
    trained: ReadoutScore | None  # the run's own readout (train.running_sum_loss); None without one
    # N x k only: per product a_(i-j) * b_j (j < k), the same fit in the columns that add all k
    # products: whether the state holds each product, linearly, before the sum is formed
    partial_products: tuple[ReadoutScore, ...] = ()
    partial_products_baseline: tuple[ReadoutScore, ...] = ()  # the same fits on the input alone
    # per product, its two digits read as ten classes each: whether the state holds the
    # products as digits, which the answer digit (the units of their sum) needs
    product_digits: tuple[ProductDigits, ...] = ()
    # the same shares from the run's own partial-product readout (model.partial_product_probe)
    # on the same columns; () without one
    product_digits_trained: tuple[ProductDigits, ...] = ()

    def best_partial_product_loop(self, j: int) -> int:
        """The loop index (0 = loop 1) at which product j is read with the highest R²."""
        r2 = self.partial_products[j].r2
        return max(range(len(r2)), key=r2.__getitem__)


def column_states(model, examples, loops: int, batch_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """The normalised (ln_final) input, then state after each loop 1..`loops`, at the position
    that predicts each answer digit, and those columns' running sums: ([1+loop column d_model],
    [column]), columns of every example in order, units first."""
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
        per_loop, state = [model.ln_final(inputs)[rows, positions].float().cpu()], None  # the input, before loop 1
        for t in range(loops):
            state = model.run_loops(inputs, range(t, t + 1), state=state, index=index)
            per_loop.append(model.ln_final(state)[rows, positions].float().cpu())  # [column d_model]
        states.append(torch.stack(per_loop))
    return torch.cat(states, dim=1), torch.tensor(sums, dtype=torch.float32)


def score_readout(predicted: torch.Tensor, sums: torch.Tensor) -> ReadoutScore:
    """Per loop, the share of columns read within 0.5 and the R^2, of `predicted` [loop column]
    against `sums` [column]."""
    error = predicted.detach().double() - sums.double()
    read = (error.abs() < 0.5).double().mean(1)
    spread = ((sums.double() - sums.double().mean()) ** 2).sum()
    r2 = 1 - (error**2).sum(1) / spread
    return ReadoutScore(read=tuple(round(float(x), 4) for x in read), r2=tuple(round(float(x), 4) for x in r2))


def fitted_readout(fit_states: torch.Tensor, fit_targets: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    """Per loop, a ridge least-squares readout (with a constant) fitted on `fit_states`
    [loop column d_model] to `fit_targets` [column] (or several targets, [column target]), applied
    to `states` [loop column' d_model]: [loop column'] (or [loop column' target])."""

    def with_constant(x):
        return torch.cat([x.double(), torch.ones(*x.shape[:-1], 1, dtype=torch.float64)], dim=-1)

    a = with_constant(fit_states)  # [loop column d_model+1]
    gram = a.transpose(1, 2) @ a  # [loop d+1 d+1]
    unpenalised_constant = torch.ones(gram.shape[-1], dtype=torch.float64)
    unpenalised_constant[-1] = 0
    ridge = RIDGE * gram.diagonal(dim1=1, dim2=2).mean(1)[:, None, None] * torch.diag(unpenalised_constant)
    targets = fit_targets.double().reshape(len(fit_targets), -1)  # [column target]: one target, or several
    weights = torch.linalg.solve(gram + ridge, a.transpose(1, 2) @ targets[None])  # [loop d+1 target]
    predicted = with_constant(states) @ weights  # [loop column' target]
    return predicted[..., 0] if fit_targets.dim() == 1 else predicted


def fitted_classes(fit_states: torch.Tensor, fit_labels: torch.Tensor, states: torch.Tensor,
                   n_classes: int = 10) -> torch.Tensor:
    """Per loop, a ridge least-squares classifier (one-hot targets, with a constant) fitted on
    `fit_states` [loop column d_model] to `fit_labels` [column] (0..n_classes-1), applied to
    `states` [loop column' d_model]: the class it scores highest, [loop column']."""
    one_hot = torch.nn.functional.one_hot(fit_labels.long(), n_classes).double()  # [column class]
    return fitted_readout(fit_states, one_hot, states).argmax(-1)


def partial_products(examples, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Over the answer columns of `examples` in `column_states`' order (a * b, b of `k` digits):
    which columns add all k partial products ([column] bool) and, per product j, a_(i-j) * b_j
    in every column ([k column], 0 where a_(i-j) does not exist)."""
    full, values = [], []
    for example in examples:
        full_columns, products = column_products(*example.operands, k)  # one entry per answer column
        full += [i in full_columns for i in range(len(products))]
        values += products
    return torch.tensor(full, dtype=torch.bool), torch.tensor(values, dtype=torch.float32).T


@torch.no_grad()
def running_sum_reading(model, examples, fit_examples, loops: int, label: str,
                        products_of: int | None = None) -> RunningSumReading | None:
    """Read each answer column's running sum from the state after loops 1..`loops` on
    `examples`: readouts fitted per loop on `fit_examples` (those among `examples` left out),
    the same fit on the input alone, and the run's trained readout when it has one. None when
    fewer fit problems than d_model remain (a small cell such as 1 x 1 has too few problems to
    fit on others), so a fit could memorise them. `products_of`: k, when every multiplier has
    k >= 2 digits: each partial product is read too, in the columns that add all k."""
    seen = {e.operands for e in examples}
    fit_examples = [e for e in fit_examples if e.operands not in seen]
    if len(fit_examples) < model.cfg.d_model:
        return None
    states, sums = column_states(model, examples, loops)  # [1+loop column d_model]
    fit_states, fit_sums = column_states(model, fit_examples, loops)
    predicted = fitted_readout(fit_states, fit_sums, states)  # [1+loop column]
    trained = None
    if model.cfg.running_sum_probe:
        w, b = model.W_sum.detach().float().cpu(), float(model.b_sum)
        trained = score_readout(10 * (states[1:] @ w + b), sums)  # the readout gives tens
    products = baselines = digits = trained_digits = ()
    if products_of is not None and products_of >= 2:
        (full, values), (fit_full, fit_values) = (partial_products(e, products_of) for e in (examples, fit_examples))
        if full.any() and fit_full.any():  # none where the multiplicand is shorter than the multiplier
            fit_in, held_in = fit_states[:, fit_full], states[:, full]
            scores = [_product_scores(fit_in, fit_values[j, fit_full], held_in, values[j, full])
                      for j in range(products_of)]
            products, baselines = zip(*scores, strict=True)
            digits = tuple(_product_digits(fit_in, fit_values[j, fit_full], held_in, values[j, full])
                           for j in range(products_of))
            if model.cfg.partial_product_probe is not None:
                trained_digits = _trained_product_digits(model, held_in, values[:, full])
    return RunningSumReading(label=label, n_problems=len(examples), n_fit_problems=len(fit_examples),
                             n_columns=len(sums), fitted=score_readout(predicted[1:], sums),
                             baseline=score_readout(predicted[:1], sums), trained=trained,
                             partial_products=products, partial_products_baseline=baselines, product_digits=digits,
                             product_digits_trained=trained_digits)


def _product_scores(fit_states, fit_values, states, values) -> tuple[ReadoutScore, ReadoutScore]:
    """(per loop, the input alone): one product's fitted readouts, [1+loop column d_model] states."""
    predicted = fitted_readout(fit_states, fit_values, states)  # [1+loop column]
    return score_readout(predicted[1:], values), score_readout(predicted[:1], values)


def _product_digits(fit_states, fit_values, states, values) -> ProductDigits:
    """One product's units and tens read as classes, per loop (index 0: the input alone)."""
    return _digit_shares(fitted_classes(fit_states, fit_values % 10, states),
                         fitted_classes(fit_states, fit_values // 10, states), values)


def _digit_shares(units_guessed: torch.Tensor, tens_guessed: torch.Tensor, values: torch.Tensor) -> ProductDigits:
    """The share of columns whose units and tens digit of `values` [column] are guessed right,
    from guesses [1+loop column] (the input alone first)."""
    units, tens = ([round(float(x), 4) for x in (guessed == digit.long()).double().mean(1)]
                   for guessed, digit in ((units_guessed, values % 10), (tens_guessed, values // 10)))
    return ProductDigits(units=tuple(units[1:]), tens=tuple(tens[1:]), units_from_input=units[0],
                         tens_from_input=tens[0])


def _trained_product_digits(model, states, values) -> tuple[ProductDigits, ...]:
    """The run's own partial-product readout on `states` [1+loop column d_model] (already
    through ln_final, as column_states gives them): per product j of `values` [k column], the
    share of columns whose units and whose tens it gives."""
    k = values.shape[0]
    w, b = model.W_products.detach().float().cpu()[:, :k], model.b_products.detach().float().cpu()[:k]
    guess = (torch.einsum("lcd,dkwv->lckwv", states, w) + b).argmax(-1)  # [1+loop column k 2]
    return tuple(_digit_shares(guess[..., j, 0], guess[..., j, 1], values[j]) for j in range(k))


def running_sum_sentence(readings) -> str:
    """Per sample, how often the fitted readout gives each column's running sum after the last
    loop against the input alone, the run's trained readout beside it, and the first loop at
    which one reads 99% of them."""
    r0 = readings[0]
    parts = []
    for r in readings:
        part = (f"{r.label}: {r.fitted.read[-1]:.0%} (R² {r.fitted.r2[-1]:.3f}; from the input alone "
                f"{r.baseline.read[0]:.0%}, R² {r.baseline.r2[0]:.3f}")
        if r.trained is not None:
            part += f"; the run's trained readout {r.trained.read[-1]:.0%}, R² {r.trained.r2[-1]:.3f}"
        first = min((t for t in (r.fitted.first_read(), r.trained and r.trained.first_read()) if t is not None),
                    default=None)
        part += f"; 99% from {loop_label(first)}" if first is not None else "; never 99%"
        parts.append(part + f"; n={r.n_columns} columns)")
    sentence = (f"Each answer column's running sum (column sum + carry in: the digit and the carry it passes on), "
                f"read within 0.5 by a least-squares readout of the state fitted per loop on {r0.n_fit_problems} other "
                f"problems, after {len(r0.fitted.read)} loops ({r0.n_problems} problems per sample): "
                + "; ".join(parts) + ".")
    if product_parts := [_partial_products_text(r) for r in readings if r.partial_products]:
        sentence += (" Each partial product, read the same way in the columns that add all of them (R² at the loop "
                     "it reads best, then after the last loop, and from the input alone): "
                     + "; ".join(product_parts) + ".")
    if digit_parts := [_product_digits_text(r) for r in readings if r.product_digits]:
        sentence += (" Each product's two digits, read as ten classes by a least-squares classifier fitted per loop "
                     "the same way (units, then tens, at the loop that reads the units best; the input alone in "
                     "brackets): " + "; ".join(digit_parts) + ".")
    return sentence


def _product_digits_text(reading: RunningSumReading) -> str:
    parts = []
    for j, d in enumerate(reading.product_digits):
        best = d.best_units_loop()
        parts.append(f"{partial_product_name(j)} {d.units[best]:.0%} / {d.tens[best]:.0%} ({loop_label(best)}; "
                     f"{d.units_from_input:.0%} / {d.tens_from_input:.0%})")
    text = f"{reading.label}: " + ", ".join(parts)
    if reading.product_digits_trained:
        text += " (the run's trained readout after the last loop: " + ", ".join(
            f"{d.units[-1]:.0%} / {d.tens[-1]:.0%}" for d in reading.product_digits_trained) + ")"
    return text


def _partial_products_text(reading: RunningSumReading) -> str:
    parts = []
    for j, score in enumerate(reading.partial_products):
        best = reading.best_partial_product_loop(j)
        parts.append(f"{partial_product_name(j)} {score.r2[best]:.3f} ({loop_label(best)}), {score.r2[-1]:.3f} "
                     f"(input alone {reading.partial_products_baseline[j].r2[0]:.3f})")
    return f"{reading.label}: " + ", ".join(parts)

"""Where a looped multiplier's wrong answer digits come from: the multiplying or the adding.

A run trained with the partial-product readout (`ModelConfig.partial_product_probe`,
`train.partial_product_loss`; the `extrap-mul-digits` preset) holds, at each answer slot, the
units and tens of every product a_(i-j) * b_j its column adds. Read from the same state as the
answer digit, the readout tells whether the model had that column's products right. A wrong
digit whose products were read right went wrong in the adding (the column sum and the carry into
it); one with a product read wrong went wrong already in the multiplying.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.tasks.product_carries import carries_in
from abacus_interp.training.data import partial_product_targets


@dataclass(frozen=True)
class ErrorSources:
    """Answer digits of `n_problems` products counted by whether they are right (logit lens)
    and whether the readout had all their column's products right (units and tens)."""

    label: str  # the problems, e.g. "uniform, 50 x 3 digits"
    digits: int  # the multiplicand's
    multiplier_digits: int
    loops: int  # the answer digits and the products are both read after this many loops
    n_problems: int
    right: int  # right digits whose products were read right
    right_misread: int  # right digits with a product read wrong (the adding made up for it)
    wrong_in_adding: int  # wrong digits whose products were all read right
    wrong_in_multiplying: int  # wrong digits with a product read wrong
    wrong_large_carry: int  # wrong digits, of either kind, with a carry of LARGE_CARRY or more in

    # the carry from which the by-carry tables show x 3's last errors (CARRY_BINS' 9-12 and 13+)
    LARGE_CARRY: ClassVar[int] = 9

    @property
    def wrong(self) -> int:
        return self.wrong_in_adding + self.wrong_in_multiplying

    @property
    def n_digits(self) -> int:
        return self.right + self.right_misread + self.wrong

    @property
    def adding_share(self) -> float | None:
        """The share of the wrong digits that went wrong in the adding; None when none is wrong."""
        return self.wrong_in_adding / self.wrong if self.wrong else None

    def sentence(self) -> str:
        if not self.wrong:
            return f"{self.label}: no answer digit wrong after {self.loops} loops ({self.n_digits} digits)."
        return (f"{self.label}, after {self.loops} loops: {self.wrong} of {self.n_digits} answer digits wrong; "
                f"at {self.wrong_in_adding} of them the readout had every product of the column right (wrong in "
                f"the adding), at {self.wrong_in_multiplying} a product wrong; {self.wrong_large_carry} of the "
                f"{self.wrong} had a carry of {self.LARGE_CARRY} or more coming in.")


@dataclass(frozen=True)
class ProblemReading:
    """One problem's answer as the logit lens reads it, and per answer digit whether the
    readout, read from the same state, had every product of the digit's column right."""

    answer_read: tuple[int, ...]  # the token read at each answer position (units first)
    products_right: tuple[bool, ...]


def read_answers_and_products(model, task, examples, loops: int, batch_size: int = 32) -> list[ProblemReading]:
    """Per problem of `examples`, its answer digits read greedily by the logit lens and its
    columns' products by the partial-product readout, both after `loops` loops: one pass that
    serves both `count_error_sources` and a `digit_accuracy` of the same problems."""
    if model.cfg.partial_product_probe is None:
        raise UserError("error_sources reads the partial-product readout, which this model lacks: use a run "
                        "trained with model.partial_product_probe (the extrap-mul-digits preset and its cycles)")
    readings = []
    with torch.no_grad():
        for start in range(0, len(examples), batch_size):
            chunk = examples[start : start + batch_size]
            batch = encode_batch(model.cfg.vocab, [e.prompt for e in chunk], [e.target for e in chunk])
            tokens = batch.tokens.to(model.W_E.device)
            state = model.run_loops(model.embed(tokens), range(loops), index=model.attention_index(tokens))
            digits_read = model.unembed(state).float().argmax(-1).cpu()  # [batch pos]
            products_read = model.read_partial_products(state).argmax(-1).cpu()  # [batch pos k 2]
            wanted = partial_product_targets(task, chunk, batch)  # [batch pos k 2], -100 where none
            for row, example in enumerate(chunk):
                # position first + i predicts answer digit i
                first, n_answer = int(batch.prompt_lengths[row]) - 1, len(model.cfg.vocab.encode(example.target))
                here = wanted[row, first : first + n_answer]  # [answer k 2]
                read = products_read[row, first : first + n_answer]
                readings.append(ProblemReading(
                    answer_read=tuple(digits_read[row, first : first + n_answer].tolist()),
                    products_right=tuple(bool((r[h >= 0] == h[h >= 0]).all()) for r, h in zip(read, here, strict=True))))
    return readings


def count_error_sources(model, examples, readings: list[ProblemReading], digits: int, k: int, loops: int,
                        label: str | None = None) -> ErrorSources:
    """`ErrorSources` of `examples` from their `readings` (`read_answers_and_products`)."""
    counts = dict.fromkeys(("right", "right_misread", "wrong_in_adding", "wrong_in_multiplying",
                            "wrong_large_carry"), 0)
    for example, reading in zip(examples, readings, strict=True):
        answer = model.cfg.vocab.encode(example.target)
        for token, read, products_right, carry in zip(answer, reading.answer_read, reading.products_right,
                                                      carries_in(*example.operands), strict=True):
            if read == token:
                counts["right" if products_right else "right_misread"] += 1
                continue
            counts["wrong_in_adding" if products_right else "wrong_in_multiplying"] += 1
            counts["wrong_large_carry"] += carry >= ErrorSources.LARGE_CARRY
    return ErrorSources(label=label or f"{digits} x {k} digits", digits=digits, multiplier_digits=k, loops=loops,
                        n_problems=len(examples), **counts)


def error_sources(model, task, examples, digits: int, k: int, loops: int, label: str | None = None,
                  batch_size: int = 32) -> ErrorSources:
    """Count the answer digits of `examples` (products of a `digits`-digit multiplicand and a
    k-digit multiplier; `ErrorSources`), each read greedily by the logit lens and its column's
    products by the partial-product readout, both after `loops` loops."""
    readings = read_answers_and_products(model, task, examples, loops, batch_size)
    return count_error_sources(model, examples, readings, digits, k, loops, label)

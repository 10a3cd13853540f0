"""Which head reads which digit of a column's partial products, in an N x N multiplier that
writes its answer token by token (LSD-first, `rev(a)*rev(b)=` then the answer).

Answer digit i of a * b is (sum_d a_(i-d) * b_d + carry) mod 10: every pair whose indices
sum to i. The position that predicts digit i holds "=" (i = 0) or the answer digit i - 1
just written. Relative to the digit being predicted its keys split into groups:

* the multiplicand at offset d below the column, a_(i-d), for d = 0 .. N-1 (each pairs with
  b_d), and the rest of the multiplicand, outside the column: digits above it and digits N
  or more below it, which have no partner in the multiplier (they reach digit i through
  carries only);
* the multiplier the same way, b_(i-d) and the rest;
* the answer digit just written (c_(i-1), the query's own token), the lower answer digits
  c_0 .. c_(i-2) (where a carry can be recomputed from), and the symbols "*" and "=".

`run` scores the N x M grid, splits every answer query's attention into these groups per loop
and head, and forbids one head one group in every loop (knockout) to see what it is needed for.
"""

from __future__ import annotations

import random

import torch

from abacus_interp.core.scoring import score_examples
from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.evaluation.common import section_rng
from abacus_interp.evaluation.grid import cell_fits
from analyses._head_groups import GroupReading, group_attention_mass, head_names
from analyses._head_groups import knockout as knock_out_groups
from analyses._running_sum import running_sum_reading
from analyses.common import resolve
from analyses.contract import configure
from analyses.prose import pct

from .config import ProductColumnsConfig
from .result import GridCell, ProductColumnsResult

# groups no other group overlaps with, read as attention mass (they sum to 1 per query)
ANSWER_GROUPS = ("answer digit just written", "lower answer digits", "* and =")
# unions of those, for knockouts only: "all of a" takes a head's whole access to the multiplicand
UNION_GROUPS = ("all of a", "all of b", "all answer digits")


def group_names(n_digits: int) -> tuple[str, ...]:
    """The key groups of a model trained on operands of up to `n_digits` digits, "other" last."""
    return (*(f"a_(i-{d})" if d else "a_i" for d in range(n_digits)), "a outside the column",
            *(f"b_(i-{d})" if d else "b_i" for d in range(n_digits)), "b outside the column",
            *ANSWER_GROUPS, "other")


def skip_reason(model, task) -> str | None:
    """Why the analysis cannot run on `model` (None when it can)."""
    if task.name != "multiplication":
        return f"the product columns are read on multiplication; this run's task is {task.name}"
    if task.answer_slots:
        return ("the product columns are read on a model that writes its answer token by token; this run fills "
                "answer slots (the multiplication section reads it)")
    if getattr(task, "max_multiplier_digits", None) is not None:
        return "the product columns are read on N x N products; this run multiplies by a shorter multiplier"
    return None


def _masks(vocab, examples, n_digits: int, batch_size: int):
    """Per batch: tokens, the (row, position) of every answer query, and its key-group masks
    [query group key]: the groups of `group_names(n_digits)`, then the `UNION_GROUPS`."""
    names = group_names(n_digits)
    star, equals_id = vocab.encode("*")[0], vocab.encode("=")[0]
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        batch = encode_batch(vocab, [e.prompt for e in chunk], [e.target for e in chunk])
        n_pos = batch.tokens.shape[1]
        queries, masks = [], []
        for row, example in enumerate(chunk):
            tokens = batch.tokens[row].tolist()
            op, equals = tokens.index(star), int(batch.prompt_lengths[row]) - 1
            assert tokens[equals] == equals_id
            a_pos, b_pos = range(0, op), range(op + 1, equals)  # digit c of each operand at position start + c
            for i in range(len(vocab.encode(example.target))):  # every answer token, EOS included
                query = equals + i
                groups = torch.zeros(len(names) + len(UNION_GROUPS), n_pos)
                for operand, positions in (("a", a_pos), ("b", b_pos)):
                    first = names.index(f"{operand}_i")
                    for c, p in enumerate(positions):
                        d = i - c
                        groups[first + d if 0 <= d < n_digits else first + n_digits, p] = 1.0
                if i >= 1:
                    groups[names.index(ANSWER_GROUPS[0]), query] = 1.0
                    groups[names.index(ANSWER_GROUPS[1]), equals + 1 : query] = 1.0
                groups[names.index(ANSWER_GROUPS[2]), [op, equals]] = 1.0
                named = groups[: len(names) - 1]
                groups[len(names) - 1, : query + 1] = 1.0 - named[:, : query + 1].sum(0).clamp(max=1.0)
                a_block = groups[names.index("a_i") : names.index("a outside the column") + 1].sum(0)
                b_block = groups[names.index("b_i") : names.index("b outside the column") + 1].sum(0)
                groups[len(names)] = a_block
                groups[len(names) + 1] = b_block
                groups[len(names) + 2] = groups[names.index(ANSWER_GROUPS[0])] + groups[names.index(ANSWER_GROUPS[1])]
                queries.append((row, query))
                masks.append(groups)
        yield batch.tokens, torch.tensor(queries), torch.stack(masks)


def run(model_or_run, task=None, *, config: ProductColumnsConfig | None = None, **overrides) -> ProductColumnsResult:
    """The product columns of an N x N multiplier (a model, a run directory or a checkpoint;
    `task` defaults to the run's). `config`: every setting; overrides: its fields by name."""
    cfg = configure(ProductColumnsConfig, config, overrides, "product_columns.run()")
    subject = resolve(model_or_run, task)
    model, task = subject.model, subject.task
    reason = skip_reason(model, task)
    if reason:
        raise UserError(reason)
    n = task.max_digits
    grid = []
    for i in range(1, n + cfg.beyond + 1):
        for j in range(1, n + cfg.beyond + 1):
            if not cell_fits(task, i, j, model.cfg.max_seq_len):
                continue
            examples = task.sample_cell(cfg.n_per_cell, section_rng(cfg.seed, "product columns grid", i * 100 + j), i, j)
            grid.append(GridCell(i, j, len(examples), score_examples(model, examples).exact_match))
    # the inside is read where the model is right: on the largest trained cell it gets right at
    # least half the time (a knockout of a model that is always wrong says nothing)
    inside = [c for c in grid if c.digits_a <= n and c.digits_b <= n]
    right = [c for c in inside if c.exact_match >= 0.5] or inside
    cell = max(right, key=lambda c: (c.digits_a + c.digits_b, min(c.digits_a, c.digits_b)))
    sample = task.sample_cell(cfg.n_problems, random.Random(cfg.seed), cell.digits_a, cell.digits_b)
    label = f"uniform, {cell.digits_a} x {cell.digits_b} digits"
    names = group_names(n)
    n_loops = model.cfg.n_loops
    batches = list(_masks(task.vocab, sample, n, 64))  # read by the attention split and the knockouts alike
    mean, n_rows = group_attention_mass(model, batches, n_loops, len(names) + len(UNION_GROUPS))
    mass = tuple(tuple(tuple(round(float(v), 4) for v in head[: len(names)]) for head in loop) for loop in mean)
    reading = GroupReading(label=label, n_problems=len(sample), n_rows=n_rows, heads=head_names(model.cfg),
                            groups=names, mass=mass)
    knocked = knock_out_groups(model, batches, len(sample), n_loops, label,
                               ["a_i", "b_i", *UNION_GROUPS], (*names, *UNION_GROUPS))
    why = ("the largest trained cell it gets right at least half the time" if cell.exact_match >= 0.5
           else "no trained cell is right half the time: the largest one")
    fit = task.sample_cell(4 * cfg.n_problems, section_rng(cfg.seed, "product columns running-sum fit"),
                           cell.digits_a, cell.digits_b)
    sums = running_sum_reading(model, sample, fit, n_loops, f"uniform {cell.digits_a} x {cell.digits_b} digits")
    return ProductColumnsResult(trained_digits=n, n_loops=n_loops, grid=tuple(grid),
                                inside=f"{why}, {pct(cell.exact_match)} right",
                                reading=reading, knockout=knocked,
                                running_sum=() if sums is None else (sums,))

"""Sorting read from the inside: accuracy rows past the training, the heads' reading of the
list, knockouts, and the deciding digit (`decide.py`).

A sorting answer is a list of labels (`a:05898,b:1,c:372012=` -> `bac`): answer label k is the
label of the k-th smallest number. Two places can hold the comparison: the digits of a number,
which see the digits of earlier numbers (causal attention) at the same Abacus index, and the
answer queries, which see the whole list. The reading splits each query's attention into the
key groups of `layout.py`, per loop and head; a knockout forbids one head one group at every
answer query in every loop.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from abacus_interp.core.scoring import score_examples
from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.evaluation.common import fits_context, section_rng
from analyses._head_groups import GroupReading, group_attention_mass, head_names
from analyses._head_groups import knockout as knock_out_groups
from analyses.common import resolve
from analyses.contract import configure

from .config import ComparisonsConfig
from .decide import deciding_digit
from .layout import ANSWER_GROUPS, DIGIT_GROUPS, ListLayout, answer_masks, digit_masks
from .result import AccuracyRow, ComparisonsResult

BATCH = 64
KNOCKOUT_GROUPS = ("the answer's label", "the answer's digits", "digits still to write")


def skip_reason(model, task) -> str | None:
    """Why the analysis cannot run on `model` (None when it can)."""
    if task.name != "sorting":
        return f"the comparisons are read on sorting; this run's task is {task.name}"
    if not model.is_looped:
        return "the comparisons are read loop by loop; this model has no loops"
    return None


def hard_lists(task, n: int, count: int, digits: int, rng: random.Random):
    """`n` lists of `count` numbers of `digits` digits that share every digit but the units:
    the deciding digit is the lowest one, the last a top-down comparison reaches."""
    return [task.make(*task.shared_prefix_values(count, digits, 1, rng), labels=task.draw_labels(count, rng))
            for _ in range(n)]


def accuracy_rows(model, task, cfg: ComparisonsConfig) -> tuple[AccuracyRow, ...]:
    """Exact match and each answer place's accuracy (teacher-forced, the trained loops) on
    held-out lists: in distribution, longer numbers, more numbers, both, and hard lists."""
    lo_n, hi_n, lo_d, hi_d = task.min_numbers, task.max_numbers, task.min_digits, task.max_digits
    far_d, far_n = cfg.far_digits, min(cfg.far_numbers, task.max_items)
    specs = [
        ("in distribution", (lo_n, hi_n), (lo_d, hi_d)),
        (f"{far_d}-digit numbers", (lo_n, hi_n), (far_d, far_d)),
        (f"{far_n} numbers", (far_n, far_n), (lo_d, hi_d)),
        (f"{far_n} numbers of {far_d} digits", (far_n, far_n), (far_d, far_d)),
    ]
    rows = []
    for label, (n0, n1), (d0, d1) in specs:
        rng = section_rng(cfg.seed, "comparisons rows", label)
        examples = task.sample_held_out(cfg.n_per_row, rng) if label == "in distribution" else \
            task.sample(cfg.n_per_row, rng, min_numbers=n0, max_numbers=n1, min_digits=d0, max_digits=d1)
        rows.append(accuracy_row(model, task, label, (n0, n1), (d0, d1), examples, label == "in distribution"))
    for digits in (hi_d, far_d):
        rng = section_rng(cfg.seed, "comparisons hard", digits)
        examples = hard_lists(task, cfg.n_per_row, hi_n, digits, rng)
        rows.append(accuracy_row(model, task, f"hard: {hi_n} numbers of {digits} digits, equal but the units",
                         (hi_n, hi_n), (digits, digits), examples, False))
    return tuple(rows)


def accuracy_row(model, task, label, numbers, digits, examples, in_distribution) -> AccuracyRow:
    """The row of `examples` (those that fit the model): exact match, each label's accuracy over
    the lists that have it, and the stop's, teacher-forced in eval mode."""
    fitting = [e for e in examples if fits_context(e, task.vocab, model.cfg.max_seq_len)]
    if not fitting:
        return AccuracyRow(label, numbers, digits, 0, None, in_distribution)
    correct = score_examples(model, fitting, per_token=True).per_token_correct  # per list: each label, then EOS
    exact = [all(c) for c in correct]
    longest = max(len(c) for c in correct) - 1  # labels of the longest list (its last token is EOS)
    by_label = tuple(float(np.mean([bool(c[k]) for c in correct if len(c) - 1 > k])) for k in range(longest))
    return AccuracyRow(label, numbers, digits, len(fitting), float(np.mean(exact)), in_distribution,
                       label_accuracy=by_label, stop_accuracy=float(np.mean([bool(c[-1]) for c in correct])))


def _batches(vocab, examples, masks_of):
    """Per batch of `BATCH` lists: tokens, the (row, position) of every query, its group masks."""
    for start in range(0, len(examples), BATCH):
        chunk = examples[start : start + BATCH]
        batch = encode_batch(vocab, [e.prompt for e in chunk], [e.target for e in chunk])
        n_pos = batch.tokens.shape[1]
        queries, masks = [], []
        for row, example in enumerate(chunk):
            positions, groups = masks_of(example, n_pos)
            queries += [(row, p) for p in positions]
            masks.append(groups)
        yield batch.tokens, torch.tensor(queries), torch.cat(masks)


def _reading(model, batches, n_problems, queries: str, label: str, groups) -> GroupReading:
    mean, n_rows = group_attention_mass(model, batches, model.cfg.n_loops, len(groups))
    mass = tuple(tuple(tuple(round(float(v), 4) for v in head) for head in loop) for loop in mean)
    return GroupReading(queries=queries, label=label, n_problems=n_problems, n_rows=n_rows,
                   heads=head_names(model.cfg), groups=groups, mass=mass)


def run(model_or_run, task=None, *, config: ComparisonsConfig | None = None, **overrides) -> ComparisonsResult:
    """The comparisons of a sorting model (a model, a run directory or a checkpoint; `task`
    defaults to the run's). `config`: every setting; overrides: its fields by name."""
    cfg = configure(ComparisonsConfig, config, overrides, "comparisons.run()")
    subject = resolve(model_or_run, task)
    model, task = subject.model, subject.task
    reason = skip_reason(model, task)
    if reason:
        raise UserError(reason)
    rows = accuracy_rows(model, task, cfg)
    sample = task.sample_held_out(cfg.n_reading, random.Random(cfg.seed))
    label = "held-out lists in distribution"

    def answers(e, n_pos):
        return answer_masks(ListLayout.of(e.prompt), e.target, n_pos)

    def digits(e, n_pos):
        return digit_masks(ListLayout.of(e.prompt), n_pos)

    answer_batches = list(_batches(task.vocab, sample, answers))  # read by the reading and the knockouts
    answer_reading = _reading(model, answer_batches, len(sample), "answer labels", label, ANSWER_GROUPS)
    digit_reading = _reading(model, _batches(task.vocab, sample, digits), len(sample), "digits of the list",
                             label, DIGIT_GROUPS)
    knocked = knock_out_groups(model, answer_batches, len(sample), model.cfg.n_loops, label,
                               KNOCKOUT_GROUPS, ANSWER_GROUPS)
    return ComparisonsResult(
        trained_numbers=(task.min_numbers, task.max_numbers), trained_digits=(task.min_digits, task.max_digits),
        n_loops=model.cfg.n_loops, rows=rows, answer_reading=answer_reading, digit_reading=digit_reading,
        knockout=knocked, deciding=deciding_digit(model, task, cfg))

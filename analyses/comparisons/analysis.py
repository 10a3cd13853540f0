"""Sorting read from the inside: accuracy rows past the training, the heads' reading of the
list, knockouts, the deciding digit (`decide.py`), the choice (`choice.py`) and what each item's
summary holds (`summary.py`).

A sorting answer is a list of labels (`a:05898,b:1,c:372012=` -> `bac`): answer label k is the
label of the k-th smallest number. Two places can hold the comparison: the digits of a number,
which see the digits of earlier numbers (causal attention) at the same Abacus index, and the
answer queries, which see the whole list. The reading splits each query's attention into the
key groups of `layout.py`, per loop and head; a knockout forbids one head one group at every
answer query in every loop.
"""

from __future__ import annotations

import random

import torch

from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.evaluation.lists import ListRow, list_rows
from analyses._head_groups import GroupReading, group_attention_mass, head_names
from analyses._head_groups import knockout as knock_out_groups
from analyses.common import resolve
from analyses.contract import configure

from .choice import choice
from .config import ComparisonsConfig
from .decide import deciding_digit
from .layout import ANSWER_GROUPS, DIGIT_GROUPS, ListLayout, answer_masks, digit_masks
from .pairwise import PairwiseReading, pairwise_reading
from .result import ComparisonsResult
from .summary import item_summary

BATCH = 64
KNOCKOUT_GROUPS = ("the answer's label", "the answer's digits", "digits still to write")


def skip_reason(model, task) -> str | None:
    """Why the analysis cannot run on `model` (None when it can)."""
    if task.name != "sorting":
        return f"the comparisons are read on sorting; this run's task is {task.name}"
    if not model.is_looped:
        return "the comparisons are read loop by loop; this model has no loops"
    if model.cfg.list_items_settle_after is not None:
        return (f"the deciding digit's patching and the item probes read the list loop by loop; with "
                f"list_items_settle_after={model.cfg.list_items_settle_after} its states stop after that loop, "
                "which they do not model")
    return None


def accuracy_rows(model, task, cfg: ComparisonsConfig) -> tuple[ListRow, ...]:
    """Exact match and each answer place's accuracy (teacher-forced, the trained loops) on
    held-out lists: in distribution, numbers all of the trained maximum length (in range, but a
    list of one length is rare in training: each number's length is drawn on its own), longer
    numbers, more numbers, both, and hard lists; the rows `abacus-interp eval RUN --lengths
    MAX_DIGITS,FAR_DIGITS --counts FAR_NUMBERS` prints."""
    far_numbers = min(cfg.far_numbers, task.max_items)
    return list_rows(model, task, lengths=(task.max_digits, cfg.far_digits), counts=(far_numbers,), n=cfg.n_per_row,
                     seed=cfg.seed)


def choice_counts(task, cfg: ComparisonsConfig) -> tuple[int, ...]:
    """The counts the choice is read at: the trained maximum, and the far count of the rows."""
    return tuple(dict.fromkeys((task.max_numbers, min(cfg.far_numbers, task.max_items))))


def pairwise(model, task, cfg: ComparisonsConfig) -> PairwiseReading | None:
    """The pairwise answer's comparisons by length (the trained maximum, twice it, the far length)
    and deciding place; None for a model without one."""
    if model.cfg.item_comparator is None:
        return None
    lengths = tuple(dict.fromkeys((task.max_digits, 2 * task.max_digits, cfg.far_digits)))
    return pairwise_reading(model, task, lengths, range(cfg.pairwise_places), cfg.n_pairwise, cfg.seed)


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
        knockout=knocked, deciding=deciding_digit(model, task, cfg),
        choice=choice(model, task, choice_counts(task, cfg), cfg.n_choice, cfg.seed),
        summary=item_summary(model, task, cfg.n_summary, cfg.seed), pairwise=pairwise(model, task, cfg))

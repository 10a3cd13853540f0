"""Sorting past the training: exact match on held-out lists of longer numbers, of more numbers,
of both, and on hard lists, each answer label's accuracy and the stop's.

`abacus-interp eval RUN --lengths 5,20 --counts 10` prints these rows for a run trained on 1-5
digits, and the report's comparisons section shows the same rows (same problems, same seeds), so
the two never disagree.
Answers are scored teacher-forced at the trained loops: a list is exactly right when every label
and the stop after them is the argmax given the right ones before it, which is when greedy
decoding writes it, so the exact match is greedy decoding's.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from abacus_interp.core.scoring import score_examples
from abacus_interp.errors import UserError
from abacus_interp.evaluation.common import fits_context, section_rng
from abacus_interp.evaluation.list_errors import WrongPicks, describe, wrong_picks


@dataclass(frozen=True)
class ListRow:
    label: str  # what the lists are, in words
    numbers: tuple[int, int]  # how many numbers per list (min, max)
    digits: tuple[int, int]  # how many digits per number (min, max)
    n: int
    exact_match: float | None  # None: no list of this row fits the model
    in_distribution: bool
    # teacher-forced share of lists whose k-th answer label (k = 1, 2, ...) is right, over the
    # lists that have a k-th number; () when no list fits
    label_accuracy: tuple[float, ...] = ()
    # the share whose EOS right after the last label is right (the model stops); None: no list fits
    stop_accuracy: float | None = None
    # what the wrong labels were instead (a label already written, the runner-up, ...); None:
    # no list fits
    wrong_picks: WrongPicks | None = None


def hard_lists(task, n: int, count: int, digits: int, rng: random.Random):
    """`n` lists of `count` numbers of `digits` digits that share every digit but the units:
    the deciding digit is the lowest one, the last a top-down comparison reaches."""
    return [task.make(*task.shared_prefix_values(count, digits, 1, rng), labels=task.draw_labels(count, rng))
            for _ in range(n)]


def list_rows(model, task, *, lengths: Sequence[int], counts: Sequence[int], n: int, seed: int,
              n_loops: int | None = None) -> tuple[ListRow, ...]:
    """The rows, in this order: in distribution (the held-out split); numbers of each of
    `lengths` digits (the trained counts); each of `counts` numbers (the trained digits); each
    count of each length; then hard lists (the trained maximum of numbers, equal but the units)
    of the trained maximum of digits and of each length. `n` lists per row, drawn from the task
    without its plants (`SortingTask.plain`): a planted run is scored on the lists any other is.
    Read at `n_loops` loops (None: the model's own); every loop count reads the same lists."""
    check_counts(task, counts)
    task = task.plain()
    lengths = tuple(dict.fromkeys(lengths))  # a length named twice (or the trained one again) gets one row
    lo_n, hi_n, lo_d, hi_d = task.min_numbers, task.max_numbers, task.min_digits, task.max_digits
    specs = [("in distribution", (lo_n, hi_n), (lo_d, hi_d))]
    specs += [(f"{d}-digit numbers", (lo_n, hi_n), (d, d)) for d in lengths]
    specs += [(f"{c} numbers", (c, c), (lo_d, hi_d)) for c in counts]
    specs += [(f"{c} numbers of {d} digits", (c, c), (d, d)) for c in counts for d in lengths]
    rows = []
    for label, (n0, n1), (d0, d1) in specs:
        rng = section_rng(seed, "comparisons rows", label)  # the report's comparisons rows draw the same lists
        examples = task.sample_held_out(n, rng) if label == "in distribution" else \
            task.sample(n, rng, min_numbers=n0, max_numbers=n1, min_digits=d0, max_digits=d1)
        rows.append(list_row(model, task, label, (n0, n1), (d0, d1), examples, label == "in distribution", n_loops))
    for digits in dict.fromkeys((hi_d, *lengths)):
        rng = section_rng(seed, "comparisons hard", digits)
        examples = hard_lists(task, n, hi_n, digits, rng)
        rows.append(list_row(model, task, f"hard: {hi_n} numbers of {digits} digits, equal but the units",
                             (hi_n, hi_n), (digits, digits), examples, False, n_loops))
    return tuple(rows)


def check_counts(task, counts: Sequence[int]) -> None:
    """UserError for a list the run cannot label: more numbers than its label pool has letters."""
    for count in counts:
        if not 1 <= count <= task.max_items:
            raise UserError(f"--counts {count}: a list of this run holds 1..{task.max_items} numbers (one letter "
                            f"of its label pool each); pick counts in that range")


def list_row(model, task, label, numbers, digits, examples, in_distribution, n_loops: int | None = None) -> ListRow:
    """The row of `examples` (those that fit the model): exact match, each label's accuracy over
    the lists that have it, and the stop's, teacher-forced in eval mode at `n_loops` loops (None:
    the model's own)."""
    fitting = [e for e in examples if fits_context(e, task.vocab, model.cfg.max_seq_len)]
    if not fitting:
        return ListRow(label, numbers, digits, 0, None, in_distribution)
    scores = score_examples(model, fitting, n_loops=n_loops, per_token=True)
    correct = scores.per_token_correct  # per list: each label, then EOS
    exact = [all(c) for c in correct]
    longest = max(len(c) for c in correct) - 1  # labels of the longest list (its last token is EOS)
    by_label = tuple(float(np.mean([bool(c[k]) for c in correct if len(c) - 1 > k])) for k in range(longest))
    return ListRow(label, numbers, digits, len(fitting), float(np.mean(exact)), in_distribution,
                   label_accuracy=by_label, stop_accuracy=float(np.mean([bool(c[-1]) for c in correct])),
                   wrong_picks=wrong_picks(fitting, scores.per_token_predicted, task.vocab))


def format_list_table(rows: Sequence[ListRow], task, n_loops: int, trained_loops: int | None = None) -> str:
    """The rows as the CLI prints them: one line each, the labels' accuracies in answer order.
    `trained_loops`, where it differs from `n_loops`, is named beside it."""
    loops = f"{n_loops} loops" if trained_loops in (None, n_loops) else f"{n_loops} loops (trained at {trained_loops})"
    lines = [f"lists (trained on {task.min_numbers}-{task.max_numbers} numbers of {task.min_digits}-"
             f"{task.max_digits} digits; held-out lists, teacher-forced at {loops} = greedy exact match)",
             f"{'lists':<50} {'n':>4} {'exact':>6} {'stop':>6}  each label, in answer order"]
    for row in rows:
        if row.exact_match is None:
            lines.append(f"{row.label:<50} {0:>4}      -      -  no list fits the model's max_seq_len")
            continue
        labels = " ".join(f"{a:.0%}" for a in row.label_accuracy)
        lines.append(f"{row.label:<50} {row.n:>4} {row.exact_match:>6.0%} {row.stop_accuracy:>6.0%}  {labels}")
    wrong = [r for r in rows if r.wrong_picks is not None and r.wrong_picks.wrong]
    if wrong:
        lines.append("what the wrong labels wrote instead, teacher-forced, and how often a step is wrong by how "
                     "close the two smallest numbers left are:")
        lines += [f"  {r.label}: {describe(r.wrong_picks)}" for r in wrong]
    return "\n".join(lines)

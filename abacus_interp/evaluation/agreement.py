"""The greedy re-check: does `model.generate` + `task.check` agree with teacher forcing?

Every section scores problems teacher-forced (`score_examples`: all answer argmaxes right
counts as exact match). This module owns the cross-check of that shortcut: choosing up to
`AGREEMENT_PROBLEMS` problems (for the digit grid, round robin over cells with both
verdicts represented, `pick_from_cells`), decoding them greedily, and reporting the
fraction of matching verdicts with a few disagreements for `EvalReport.agreement`.
"""

from __future__ import annotations

import logging

from abacus_interp.core.scoring import decode_budget
from abacus_interp.evaluation.result import Agreement, Disagreement
from abacus_interp.tasks.base import Example

logger = logging.getLogger(__name__)

AGREEMENT_PROBLEMS = 64  # greedy re-check of teacher-forced verdicts: problems decoded


def pick_from_cells(
    cell_ex: dict[tuple[int, int], list[Example]],
    cell_verdicts: dict[tuple[int, int], list[bool]],
    fitting: list[tuple[int, int]],
    n_per_cell: int,
) -> list[tuple[Example, bool]]:
    """Round robin over cells (first problem of every cell, then the second, ...), with up
    to half the budget spent on teacher-forced-correct problems so both verdicts are tested
    when the model gets any right."""
    order = [(cell_ex[c][k], cell_verdicts[c][k]) for k in range(n_per_cell) for c in fitting]
    right = [p for p in order if p[1]][: AGREEMENT_PROBLEMS // 2]
    wrong = [p for p in order if not p[1]][: AGREEMENT_PROBLEMS - len(right)]
    picked = right + wrong
    picked += [p for p in order if p[1]][len(right) : len(right) + AGREEMENT_PROBLEMS - len(picked)]
    return picked


def measure_agreement(
    model, task, examples: list[Example], verdicts: list[bool], n_loops: int, eos: bool = True, *, sample: str
) -> Agreement:
    """Re-judge examples with greedy decoding; compare with the teacher-forced verdicts.
    `eos=False` (a run trained without the EOS): decode the answer's length, no EOS.
    `sample` says where the examples come from, for the printed report."""
    if not examples:
        return Agreement(agreement=None, n=0, sample=sample, disagreements=())
    completions = model.generate(
        [e.prompt for e in examples], n_loops=n_loops, max_new_tokens=decode_budget(task, examples, eos)
    )
    disagreements = []
    agree = 0
    for e, c, v in zip(examples, completions, verdicts, strict=True):
        g = task.check(e, c)
        if g == bool(v):
            agree += 1
        elif len(disagreements) < 5:
            disagreements.append(Disagreement(prompt=e.prompt, target=e.target, completion=c,
                                              teacher_forced=bool(v), generate=g))
    if disagreements:
        logger.warning(
            "generate disagrees with teacher-forced scoring on %d of %d problems",
            len(examples) - agree,
            len(examples),
        )
    return Agreement(
        agreement=agree / len(examples),
        n=len(examples),
        sample=sample,
        n_correct=int(sum(map(bool, verdicts))),
        disagreements=tuple(disagreements),
    )

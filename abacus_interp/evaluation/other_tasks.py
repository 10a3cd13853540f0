"""Evaluation of tasks without digit-count operands: modular addition and the rest.

This module owns the two short pipelines `suite.evaluate` runs for non-digit tasks. For the
modular-addition task (`full_split`) it scores the whole train and test splits at every
loop count (`EvalReport.splits`, `loops`, `perplexity`); any other task gets accuracy,
loss and perplexity vs loops on a sampled in-distribution set. Both re-check up to
`AGREEMENT_PROBLEMS` verdicts with greedy decoding and list the digit-only sections
(`DIGIT_SECTIONS`) in `EvalReport.skipped` with the reason.
"""

from __future__ import annotations

from dataclasses import replace

from abacus_interp.errors import UserError
from abacus_interp.evaluation.agreement import AGREEMENT_PROBLEMS, measure_agreement
from abacus_interp.evaluation.common import (
    SectionProgress,
    fits_context,
    scores_summary,
    section_rng,
)
from abacus_interp.evaluation.loops import loops_section, perplexity_section, scored_sets
from abacus_interp.evaluation.report import EvalReport

DIGIT_SECTIONS = ("grid", "lengths", "edge_cases", "carry")


def evaluate_modular(model, task, header: EvalReport, loops, eval_loops, progress, allowed=None,
                     eos=True) -> EvalReport:
    """`header` with the splits, loops, perplexity and agreement of the train and test splits."""
    sets = {"train": task.full_split("train"), "test": task.full_split("test")}
    samples = {"train": "every problem of the train split",
               "test": "every problem of the held-out test split (never trained on)"}
    notes = []
    if not sets["test"]:
        del sets["test"]
        notes.append("the test split is empty (train_fraction=1)")
    bar = SectionProgress(progress, len(sets) * len(set(loops) | {eval_loops}) + 1)
    try:
        scored = scored_sets(model, sets, loops, eval_loops, bar, allowed, eos)
        splits = {name: scores_summary(scored[(name, eval_loops)], len(ex)) for name, ex in sets.items()}
        loops_result = loops_section(sets, scored, loops, model.cfg.n_loops)
        perplexity = perplexity_section(sets, scored, eval_loops)
        bar.section("generate agreement")
        name = "test" if "test" in sets else "train"
        ex = sets[name][:AGREEMENT_PROBLEMS]
        verdicts = scored[(name, eval_loops)].per_example_correct[:AGREEMENT_PROBLEMS]
        agreement = measure_agreement(model, task, ex, verdicts, eval_loops, eos,
                                      sample=f"the first {len(ex)} problems of the {name} split")
        bar.step()
    finally:
        bar.close()
    reason = f"{task.name} has single-token residues, not digit-count operands"
    return replace(header, settings=replace(header.settings, samples=samples), splits=splits, loops=loops_result,
                   perplexity=perplexity, agreement=agreement, notes=(*header.notes, *notes),
                   skipped={**header.skipped, **dict.fromkeys(DIGIT_SECTIONS, reason)})


def evaluate_generic(model, task, header: EvalReport, loops, eval_loops, n_per_set, seed, progress, allowed=None,
                     eos=True) -> EvalReport:
    """`header` with the loops, perplexity and agreement of a sampled in-distribution set."""
    examples = [
        e
        for e in task.sample_held_out(n_per_set, section_rng(seed, "set", "id"))
        if fits_context(e, task.vocab, model.cfg.max_seq_len)
    ]
    if not examples:
        raise UserError(
            f"no {task.name} problem fits the model's max_seq_len={model.cfg.max_seq_len}; "
            "evaluate the model on the task configuration it was trained with"
        )
    sets = {"in_distribution": examples}
    bar = SectionProgress(progress, len(set(loops) | {eval_loops}) + 1)
    try:
        scored = scored_sets(model, sets, loops, eval_loops, bar, allowed, eos)
        ex = examples[:AGREEMENT_PROBLEMS]
        agreement = measure_agreement(
            model,
            task,
            ex,
            scored[("in_distribution", eval_loops)].per_example_correct[:AGREEMENT_PROBLEMS],
            eval_loops,
            eos,
            sample=f"the first {len(ex)} problems of the in_distribution set",
        )
        bar.step()
    finally:
        bar.close()
    reason = f"{task.name} is not a two-operand digit task (addition, multiplication)"
    return replace(header, settings=replace(header.settings, samples={"in_distribution": _generic_sample(task)}),
                   loops=loops_section(sets, scored, loops, model.cfg.n_loops),
                   perplexity=perplexity_section(sets, scored, eval_loops), agreement=agreement,
                   skipped={**header.skipped, **dict.fromkeys(DIGIT_SECTIONS, reason)})


def _generic_sample(task) -> str:
    """Where `evaluate_generic`'s set comes from (`Task.sample_held_out`), in words."""
    where = ("the held-out split (problems training never draws)" if task.has_sampled_split
             else "sampled as in training (the task has no held-out split)")
    if task.length_range is not None:
        where += f", problems of {task.length_range[0]}-{task.length_range[1]} characters"
    return where

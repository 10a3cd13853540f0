"""Evaluation of tasks without digit-count operands: modular addition and the rest.

This module owns the two short pipelines `suite.evaluate` runs for non-digit tasks. For the
modular-addition task (`full_split`) it scores the whole train and test splits at every
loop count (`EvalReport.splits`, `loops`, `perplexity`); any other task gets accuracy,
loss and perplexity vs loops on a sampled in-distribution set. Both re-check up to
`AGREEMENT_PROBLEMS` verdicts with greedy decoding and list the digit-only sections
(`DIGIT_SECTIONS`) in `EvalReport.skipped` with the reason.
"""

from __future__ import annotations

from abacus_interp.evaluation.agreement import AGREEMENT_PROBLEMS, _agreement
from abacus_interp.evaluation.common import _fits, _Progress, _rng, _summary
from abacus_interp.evaluation.loops import _loops_section, _perplexity_section, _scored_sets

DIGIT_SECTIONS = ("grid", "lengths", "edge_cases", "carry")


def _evaluate_modular(model, task, report, loops, eval_loops, progress, allowed=None, eos=True):
    sets = {"train": task.full_split("train"), "test": task.full_split("test")}
    if not sets["test"]:
        del sets["test"]
        report.notes.append("the test split is empty (train_fraction=1)")
    bar = _Progress(progress, len(sets) * len(set(loops) | {eval_loops}) + 1)
    try:
        scored = _scored_sets(model, sets, loops, eval_loops, bar, allowed, eos)
        report.splits = {
            name: _summary(scored[(name, eval_loops)], len(ex)) for name, ex in sets.items()
        }
        report.loops = _loops_section(sets, scored, loops, model.cfg.n_loops)
        report.perplexity = _perplexity_section(sets, scored, eval_loops)
        bar.section("generate agreement")
        name = "test" if "test" in sets else "train"
        ex = sets[name][:AGREEMENT_PROBLEMS]
        verdicts = scored[(name, eval_loops)].per_example_correct[:AGREEMENT_PROBLEMS]
        report.agreement = _agreement(model, task, ex, verdicts, eval_loops, eos)
        report.generate_agreement = report.agreement["agreement"]
        bar.step()
    finally:
        bar.close()
    reason = f"{task.name} has single-token residues, not digit-count operands"
    for section in DIGIT_SECTIONS:
        report.skipped[section] = reason


def _evaluate_generic(model, task, report, loops, eval_loops, n_per_set, seed, progress, allowed=None, eos=True):
    examples = [
        e
        for e in task.sample(n_per_set, _rng(seed, "set", "id"))
        if _fits(e, task.vocab, model.cfg.max_seq_len)
    ]
    if not examples:
        raise ValueError(
            f"no {task.name} problem fits the model's max_seq_len={model.cfg.max_seq_len}; "
            "evaluate the model on the task configuration it was trained with"
        )
    sets = {"in_distribution": examples}
    bar = _Progress(progress, len(set(loops) | {eval_loops}) + 1)
    try:
        scored = _scored_sets(model, sets, loops, eval_loops, bar, allowed, eos)
        report.loops = _loops_section(sets, scored, loops, model.cfg.n_loops)
        report.perplexity = _perplexity_section(sets, scored, eval_loops)
        ex = examples[:AGREEMENT_PROBLEMS]
        report.agreement = _agreement(
            model,
            task,
            ex,
            scored[("in_distribution", eval_loops)].per_example_correct[:AGREEMENT_PROBLEMS],
            eval_loops,
            eos,
        )
        report.generate_agreement = report.agreement["agreement"]
        bar.step()
    finally:
        bar.close()
    reason = f"{task.name} is not a two-operand digit task (addition, multiplication)"
    for section in DIGIT_SECTIONS:
        report.skipped[section] = reason

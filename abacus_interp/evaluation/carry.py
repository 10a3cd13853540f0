"""Exact match by carry complexity (addition only): the `carry` section of the report.

This module owns the carry-cascade buckets' evaluation: for each bucket of longest carry
cascade (0..4, 5+; see `cascades.py`) it plants that many problems with
`sample_with_cascade` at in-distribution lengths, judges them at the run's own decoding, and records
how often the bucket occurs naturally in the in-distribution set, or why a bucket is empty
(operands too short for the cascade, or problems that exceed max_seq_len).
"""

from __future__ import annotations

from abacus_interp.evaluation.answers import AnswerDecoding, judge
from abacus_interp.evaluation.cascades import CASCADE_BUCKETS, cascade_bucket, sample_with_cascade
from abacus_interp.evaluation.common import fits_context, section_rng
from abacus_interp.evaluation.result import Bucket, Carry
from abacus_interp.tasks.carries import longest_cascade


def carry_section(model, task, id_set, n, seed, decoding: AnswerDecoding, bar, max_seq_len) -> Carry:
    """Exact match per bucket under `decoding` (the loss teacher-forced at its fixed depth)."""
    natural = {b: 0 for b in CASCADE_BUCKETS}
    for e in id_set:
        natural[cascade_bucket(longest_cascade(*e.operands))] += 1
    buckets = []
    for bucket in CASCADE_BUCKETS:
        bar.section(f"carry {bucket}")
        buckets.append(_bucket(model, task, bucket, natural[bucket] / max(len(id_set), 1), n, seed, decoding,
                               max_seq_len))
        bar.step()
    return Carry(buckets=tuple(buckets), n_per_bucket=n, n_loops=decoding.n_loops, decoding=decoding.label)


def _bucket(model, task, bucket: str, natural_fraction: float, n, seed, decoding: AnswerDecoding,
            max_seq_len) -> Bucket:
    """One bucket's `n` planted problems, judged, or why it has none."""
    rng = section_rng(seed, "carry", bucket)
    min_len = 5 if bucket == "5+" else int(bucket)
    lo_digits = max(task.min_digits, min_len, 1)
    if lo_digits > task.max_digits:
        return Bucket(bucket=bucket, natural_fraction=natural_fraction, n=0, exact_match=None, loss=None,
                      reason=f"needs operands of >= {lo_digits} digits; the task trains up to {task.max_digits}")
    examples = []
    for _ in range(n):
        d = rng.randint(lo_digits, task.max_digits)
        length = min_len if bucket != "5+" else rng.randint(5, d)
        examples.append(task.make(*sample_with_cascade(length, d, rng)))
    examples = [e for e in examples if fits_context(e, task.vocab, max_seq_len)]
    if not examples:
        return Bucket(bucket=bucket, natural_fraction=natural_fraction, n=0, exact_match=None, loss=None,
                      reason=f"problems exceed max_seq_len={max_seq_len}")
    judged = judge(model, task, examples, decoding)
    return Bucket(bucket=bucket, natural_fraction=natural_fraction, n=len(examples),
                  exact_match=judged.exact_match, loss=judged.teacher_forced.loss)

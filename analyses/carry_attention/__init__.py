"""Which heads, in which loop, carry the carry? Attention statistics, head ablation,
activation patching on carry counterfactuals and linear probes for carry-in.

    >>> from analyses import carry_attention
    >>> res = carry_attention.run("checkpoints/small-add")
    >>> res.summary()            # headline numbers
    >>> res.to_dict()            # JSON-safe, every number
    >>> res.figures()            # {"staircase": go.Figure, "alignment": ..., "ablation": ..., ...}

Pieces, usable alone: `labels` (digit labels, sub-tasks, balanced problem sets),
`attention_stats`, `ablation`, `patching`, `probes`, `figures`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence

import torch
from tqdm.auto import tqdm

from abacus_interp.errors import UserError
from abacus_interp.runtime import torch_threads
from analyses.common import resolve
from analyses.contract import takes_config

from .ablation import KINDS, ablate_heads
from .attention_stats import attention_stats, example_pattern
from .config import CarryAttentionConfig
from .labels import SUBTASKS, balanced_problems, build_problem_set, digit_labels
from .patching import POSITIONS, make_carry_pairs, patch_pairs
from .probes import carry_probes, probe_accuracy
from .result import CarryAttentionResult

logger = logging.getLogger(__name__)

SECTIONS = ("attention", "ablation", "patching", "probes")

__all__ = ["run", "CarryAttentionConfig", "CarryAttentionResult", "SECTIONS", "SUBTASKS", "POSITIONS",
           "digit_labels", "balanced_problems", "build_problem_set", "probe_accuracy", "example_pattern"]


def _max_digits(model, task, max_digits: int | None) -> int:
    fit = (model.cfg.max_seq_len - 4) // 3  # prompt 2d + 2, answer d + 1, EOS
    d = min(task.max_digits, fit) if max_digits is None else max_digits
    if d < 1 or 3 * d + 4 > model.cfg.max_seq_len:
        raise UserError(f"max_digits={d} does not fit max_seq_len={model.cfg.max_seq_len}; use at most {fit}")
    return d


@takes_config(CarryAttentionConfig)
def run(
    model_or_run,
    task=None,
    *,
    n_problems: int = 200,
    n_pairs: int = 64,
    n_probe_problems: int = 400,
    n_loops: int | None = None,
    max_digits: int | None = None,
    sections: Sequence[str] = SECTIONS,
    ablation_kinds: Sequence[str] = KINDS,
    patch_positions: Sequence[str] = POSITIONS,
    patch_heads: bool = True,
    probe_threshold: float = 0.9,
    example: str | None = None,
    seed: int = 0,
    batch_size: int = 256,
    threads: int | None = 1,
    progress: bool = False,
) -> CarryAttentionResult:
    """Carry analysis of an addition model (a LoopedTransformer, a run directory or a
    .safetensors checkpoint; `task` defaults to the run's).

    n_problems: balanced problems for attention statistics and ablation (cost: one pass,
    plus 2 x loops x layers x heads passes for ablation). n_pairs: counterfactual pairs for
    patching (cost: (1 + loops x layers x (1 + heads)) x positions passes). n_probe_problems:
    problems for the probes (one pass). n_loops: depth analysed (default: trained depth).
    max_digits: operand digits (default: the task's, capped to fit the model).
    example: a human-order problem ("1999+1") for the single-problem pattern viewer.
    threads: torch intra-op threads while running on CPU (restored afterwards). The default 1
    is fastest for the many small forward passes here, by far on a busy machine (a 50x
    difference measured on 2 shared cores); None keeps the current setting.
    """
    on_cpu = not isinstance(model_or_run, torch.nn.Module) or model_or_run.W_E.device.type == "cpu"
    with torch_threads(threads if on_cpu else None):
        return _run(model_or_run, task, n_problems=n_problems, n_pairs=n_pairs,
                    n_probe_problems=n_probe_problems, n_loops=n_loops, max_digits=max_digits,
                    sections=sections, ablation_kinds=ablation_kinds, patch_positions=patch_positions,
                    patch_heads=patch_heads, probe_threshold=probe_threshold, example=example, seed=seed,
                    batch_size=batch_size, progress=progress)


def _run(model_or_run, task, *, n_problems, n_pairs, n_probe_problems, n_loops, max_digits, sections,
         ablation_kinds, patch_positions, patch_heads, probe_threshold, example, seed, batch_size,
         progress) -> CarryAttentionResult:
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise UserError(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    bad = set(patch_positions) - set(POSITIONS)
    if bad:
        raise UserError(f"unknown patch positions {sorted(bad)}; choose from {POSITIONS}")
    bad = set(ablation_kinds) - set(KINDS)
    if bad:
        raise UserError(f"unknown ablation kinds {sorted(bad)}; choose from {KINDS}")
    subject = resolve(model_or_run, task)
    if n_loops is not None and n_loops > subject.model.cfg.max_loops and not hasattr(model_or_run, "cfg"):
        subject = resolve(model_or_run, task, max_loops=n_loops)  # rebuild with more hook sets
    model, task = subject.model, subject.task
    if not task.has_carries:
        raise UserError(f"carry_attention analyses addition models; this one was trained on {task!r}")
    n_loops = model.cfg.n_loops if n_loops is None else n_loops
    model.check_loops(n_loops)
    d = _max_digits(model, task, max_digits)
    model.eval()
    vocab = model.cfg.vocab
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = now - clock
        logger.info("carry_attention: %s took %.1fs", name, timings[name])
        clock = now

    ps = build_problem_set(vocab, balanced_problems(task, n_problems, random.Random(f"{seed}-stats"), d), d)
    if example is None:
        from abacus_interp.evaluation.cascades import sample_with_cascade

        ex = task.make(*sample_with_cascade(min(3, d), d, random.Random(f"{seed}-example")))
    else:
        ex = task.from_human(example)
    lap("labels")
    result = CarryAttentionResult(
        model={"n_loops": n_loops, "trained_loops": model.cfg.n_loops, "n_layers": model.cfg.n_layers,
               "n_heads": model.cfg.n_heads, "d_model": model.cfg.d_model,
               "checkpoint": model.checkpoint_path},
        settings={"n_problems": n_problems, "n_pairs": n_pairs, "n_probe_problems": n_probe_problems,
                  "max_digits": d, "sections": list(sections), "ablation_kinds": list(ablation_kinds),
                  "patch_positions": list(patch_positions), "patch_heads": patch_heads,
                  "probe_threshold": probe_threshold, "seed": seed, "subtasks": list(SUBTASKS)},
        labels=ps.summary(),
    )
    if "attention" in sections:
        with tqdm(total=n_problems, desc="carry attention", disable=not progress, leave=False) as bar:
            result.attention = attention_stats(model, ps, n_loops, batch_size, progress=bar)
        result.example = example_pattern(model, ex, n_loops)
        lap("attention")
    if "ablation" in sections:
        total = len(ablation_kinds) * n_loops * model.cfg.n_layers * model.cfg.n_heads
        with tqdm(total=total, desc="head ablation", disable=not progress, leave=False) as bar:
            result.ablation = ablate_heads(model, ps, n_loops, tuple(ablation_kinds), batch_size, progress=bar)
        lap("ablation")
    if "patching" in sections:
        pairs = make_carry_pairs(task, vocab, n_pairs, random.Random(f"{seed}-pairs"), d)
        n_sites = 1 + n_loops * model.cfg.n_layers * (1 + (model.cfg.n_heads if patch_heads else 0))
        with tqdm(total=n_sites * len(patch_positions) * n_pairs, desc="patching", disable=not progress,
                  leave=False) as bar:
            result.patching = patch_pairs(model, pairs, n_loops, tuple(patch_positions), patch_heads,
                                          batch_size, progress=bar)
        lap("patching")
    if "probes" in sections:
        probe_set = build_problem_set(
            vocab, balanced_problems(task, n_probe_problems, random.Random(f"{seed}-probes"), d), d)
        result.probes = carry_probes(model, probe_set, n_loops, seed=seed, threshold=probe_threshold,
                                     batch_size=batch_size)
        lap("probes")
    timings["total"] = sum(timings.values())
    result.timings = timings
    return result

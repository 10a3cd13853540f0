"""`run`: the carry analysis of an addition model, section by section (attention statistics,
head ablation, activation patching, probes), each timed, the builders' dicts typed once at
the end as a `CarryAttentionResult`."""

from __future__ import annotations

import logging
import random
import time

import torch
from tqdm.auto import tqdm

from abacus_interp.core.runtime import torch_threads
from abacus_interp.errors import UserError
from abacus_interp.jsonsafe import from_json
from analyses.common import resolve
from analyses.contract import configure

from .ablation import ablate_heads
from .attention_stats import attention_stats, example_pattern
from .config import CarryAttentionConfig
from .labels import SUBTASKS, balanced_problems, build_problem_set
from .patching import make_carry_pairs, patch_pairs
from .probes import carry_probes
from .result import CarryAttentionResult

logger = logging.getLogger(__name__)


def _max_digits(model, task, max_digits: int | None) -> int:
    fit = (model.cfg.max_seq_len - 4) // 3  # prompt 2d + 2, answer d + 1, EOS
    d = min(task.max_digits, fit) if max_digits is None else max_digits
    if d < 1 or 3 * d + 4 > model.cfg.max_seq_len:
        raise UserError(f"max_digits={d} does not fit max_seq_len={model.cfg.max_seq_len}; use at most {fit}")
    return d


def run(model_or_run, task=None, *, config: CarryAttentionConfig | None = None, progress: bool = False,
        **overrides) -> CarryAttentionResult:
    """Carry analysis of an addition model (a LoopedTransformer, a run directory or a
    .safetensors checkpoint; `task` defaults to the run's).

    config: every setting (`CarryAttentionConfig`, whose field comments say what each does and
        costs); default `CarryAttentionConfig()`, the report's, so this computes its numbers.
    overrides: fields of the config by name, e.g. `n_problems=200, patch_heads=True`.
    """
    cfg = configure(CarryAttentionConfig, config, overrides, "carry_attention.run()")
    on_cpu = not isinstance(model_or_run, torch.nn.Module) or model_or_run.W_E.device.type == "cpu"
    with torch_threads(cfg.threads if on_cpu else None):
        return _run(model_or_run, task, cfg, progress)


def _run(model_or_run, task, cfg: CarryAttentionConfig, progress: bool) -> CarryAttentionResult:
    subject = resolve(model_or_run, task)
    if cfg.n_loops is not None and cfg.n_loops > subject.model.cfg.max_loops and not hasattr(model_or_run, "cfg"):
        subject = resolve(model_or_run, task, max_loops=cfg.n_loops)  # rebuild with more hook sets
    model, task = subject.model, subject.task
    if not task.has_carries:
        raise UserError(f"carry_attention analyses addition models; this one was trained on {task!r}")
    n_loops = model.cfg.n_loops if cfg.n_loops is None else cfg.n_loops
    model.check_loops(n_loops)
    d = _max_digits(model, task, cfg.max_digits)
    model.eval()
    vocab, seed, batch_size, sections = model.cfg.vocab, cfg.seed, cfg.batch_size, cfg.sections
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = now - clock
        logger.info("carry_attention: %s took %.1fs", name, timings[name])
        clock = now

    ps = build_problem_set(vocab, balanced_problems(task, cfg.n_problems, random.Random(f"{seed}-stats"), d), d)
    ex = _example(task, cfg.example, seed, d)
    lap("labels")
    # the builders write dicts; they are typed once, at the end, by from_json
    data = _header(model, cfg, n_loops, d, ps)
    if "attention" in sections:
        with tqdm(total=cfg.n_problems, desc="carry attention", disable=not progress, leave=False) as bar:
            data["attention"] = attention_stats(model, ps, n_loops, batch_size, progress=bar)
        data["example"] = example_pattern(model, ex, n_loops)
        lap("attention")
    if "ablation" in sections:
        total = len(cfg.ablation_kinds) * n_loops * model.cfg.n_layers * model.cfg.n_heads
        with tqdm(total=total, desc="head ablation", disable=not progress, leave=False) as bar:
            data["ablation"] = ablate_heads(model, ps, n_loops, cfg.ablation_kinds, batch_size, progress=bar)
        lap("ablation")
    if "patching" in sections:
        data["patching"] = _patching(model, task, cfg, n_loops, d, progress)
        lap("patching")
    if "probes" in sections:
        probe_set = build_problem_set(
            vocab, balanced_problems(task, cfg.n_probe_problems, random.Random(f"{seed}-probes"), d), d)
        data["probes"] = carry_probes(model, probe_set, n_loops, seed=seed, threshold=cfg.probe_threshold,
                                      batch_size=batch_size)
        lap("probes")
    timings["total"] = sum(timings.values())
    return from_json(CarryAttentionResult, {**data, "timings": timings})


def _example(task, example: str | None, seed: int, d: int):
    """The problem whose attention pattern is drawn: `example` (human order), or one with a
    carry cascade of min(3, d) columns."""
    if example is None:
        from abacus_interp.evaluation.cascades import sample_with_cascade

        return task.make(*sample_with_cascade(min(3, d), d, random.Random(f"{seed}-example")))
    return task.from_human(example)


def _header(model, cfg: CarryAttentionConfig, n_loops: int, d: int, ps) -> dict:
    """The result's model, settings and labels, every section None until it runs."""
    checkpoint = model.checkpoint_path  # None for a model built in memory
    return {
        "model": {"n_loops": n_loops, "trained_loops": model.cfg.n_loops, "n_layers": model.cfg.n_layers,
                  "n_heads": model.cfg.n_heads, "d_model": model.cfg.d_model,
                  "checkpoint": None if checkpoint is None else str(checkpoint)},
        "settings": {"n_problems": cfg.n_problems, "n_pairs": cfg.n_pairs, "n_probe_problems": cfg.n_probe_problems,
                     "max_digits": d, "sections": cfg.sections, "ablation_kinds": cfg.ablation_kinds,
                     "patch_positions": cfg.patch_positions, "patch_heads": cfg.patch_heads,
                     "probe_threshold": cfg.probe_threshold, "seed": cfg.seed, "subtasks": SUBTASKS},
        "labels": ps.summary(),
        "attention": None, "example": None, "ablation": None, "patching": None, "probes": None,
    }


def _patching(model, task, cfg: CarryAttentionConfig, n_loops: int, d: int, progress: bool) -> dict:
    """Activation patching on carry counterfactual pairs, per site and position."""
    pairs = make_carry_pairs(task, model.cfg.vocab, cfg.n_pairs, random.Random(f"{cfg.seed}-pairs"), d)
    n_sites = 1 + n_loops * model.cfg.n_layers * (1 + (model.cfg.n_heads if cfg.patch_heads else 0))
    with tqdm(total=n_sites * len(cfg.patch_positions) * cfg.n_pairs, desc="patching", disable=not progress,
              leave=False) as bar:
        return patch_pairs(model, pairs, n_loops, cfg.patch_positions, cfg.patch_heads, cfg.batch_size, progress=bar)

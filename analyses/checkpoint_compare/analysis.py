"""The scan behind checkpoint_compare: one pass over the checkpoints of a run (and a second
run), the comparison result and `run`. See the package docstring."""

from __future__ import annotations

import logging
import math
import random
import re
from collections import defaultdict

import numpy as np
import torch
from tqdm.auto import tqdm

from abacus_interp.checkpoints import CheckpointError, load_tensors, read_metrics, read_run_config
from abacus_interp.core.config import ModelConfig
from abacus_interp.core.families import build_model
from abacus_interp.core.scoring import run_readout, score_logits
from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.jsonsafe import from_json
from abacus_interp.tasks import task_from_config
from analyses.contract import configure

from .._alignment import checkpoint_series
from .._cka import change_points, cka_matrix, compress, moved_parameters, param_group, rates
from .config import CheckpointCompareConfig
from .result import ChangePoint, CheckpointComparison, Moved, ProblemSet, RunScan

logger = logging.getLogger(__name__)

METRIC_KEY = re.compile(r"(^step$|^loss$|_loss$|exact_match$|accuracy$)")


def run(run_a, run_b=None, *, problems=None, config: CheckpointCompareConfig | None = None,
        progress: bool = True, **overrides) -> CheckpointComparison:
    """Compare the checkpoints of `run_a` (a run directory or a list of (step, path)), and
    with `run_b` (same vocabulary) the two runs.

    problems: Examples (or (prompt, target) pairs in model order, or human strings such as
        "123+456"); default: `n_problems` drawn from the run's task with `seed` (the test
        split for modular addition). The same problems feed every checkpoint and both runs.
    config: every setting (`CheckpointCompareConfig`, whose field comments say what each
        does); default `CheckpointCompareConfig()`, the report's, so this computes its numbers.
    overrides: fields of the config by name, e.g. `steps=(250, 4000), per="log_step"`.
    """
    cfg = configure(CheckpointCompareConfig, config, overrides, "checkpoint_compare.run()")
    n_problems, max_samples, max_checkpoints, seed = cfg.n_problems, cfg.max_samples, cfg.max_checkpoints, cfg.seed
    positions, batch_size, per, n_change_points = cfg.positions, cfg.batch_size, cfg.per, cfg.n_change_points
    dir_a, series_a = checkpoint_series(run_a, max_checkpoints)
    config_a = read_run_config(dir_a)
    cfg_a = ModelConfig.from_dict(config_a["model"])
    examples = _problems(problems, config_a["task"], n_problems, seed)
    notes: list[str] = []
    batch = _encode(cfg_a, examples, notes)
    mask = batch.valid if positions == "all" else batch.loss_mask
    select = _sample_positions(int(mask.sum()), max_samples, seed)
    moved_steps = _moved_steps(cfg.steps, [s for s, _ in series_a])

    scan_a, kept, reps_a = _scan(dir_a, series_a, batch, mask, select, set(moved_steps), n_change_points, per, batch_size, progress)
    moved = from_json(Moved, {**moved_parameters(kept[moved_steps[0]], kept[moved_steps[1]], cfg.top_k, cfg.rank_by),
                              "steps": moved_steps})
    scan_b = cross = matched = matched_steps = None
    if run_b is not None:
        dir_b, series_b = checkpoint_series(run_b, max_checkpoints)
        cfg_b = ModelConfig.from_dict(read_run_config(dir_b)["model"])
        if cfg_b.vocab != cfg_a.vocab:
            raise UserError(f"{dir_a} and {dir_b} use different vocabularies; CKA needs the same inputs on both runs")
        scan_b, _, reps_b = _scan(dir_b, series_b, batch, mask, select, set(), n_change_points, per, batch_size, progress)
        n_common = min(scan_a.n_loops, scan_b.n_loops)
        if scan_a.n_loops != scan_b.n_loops:
            notes.append(f"runs have {scan_a.n_loops} and {scan_b.n_loops} loops; compared loops 0..{n_common - 1}")
        cross = np.stack([cka_matrix(reps_a[t], reps_b[t]) for t in range(n_common)])
        nearest = [int(np.argmin(np.abs(np.array(scan_b.steps) - s))) for s in scan_a.steps]
        matched = cross[:, np.arange(len(scan_a.steps)), nearest]
        matched_steps = [scan_b.steps[j] for j in nearest]
    problem_set = ProblemSet(n_problems=len(examples), n_samples=len(select), positions=positions,
                             examples=tuple(examples[:5]))
    return CheckpointComparison(a=scan_a, b=scan_b, cross_cka=cross, matched_cka=matched,
                                matched_steps_b=matched_steps, moved=moved, signal=cfg.signal, per=per,
                                problems=problem_set, notes=tuple(notes))


def _encode(cfg_a: ModelConfig, examples: list[tuple[str, str]], notes: list[str]):
    """The problems as one batch, with their EOS where it fits (a note in `notes` where not)."""
    prompts, targets = [e[0] for e in examples], [e[1] for e in examples]
    try:
        return encode_batch(cfg_a.vocab, prompts, targets, max_len=cfg_a.max_seq_len)
    except ValueError:  # e.g. grok-mod113: "a b = c" fills max_seq_len=4, EOS does not fit
        batch = encode_batch(cfg_a.vocab, prompts, targets, append_eos=False, max_len=cfg_a.max_seq_len)
        notes.append(f"problems encoded without EOS: with it they exceed max_seq_len={cfg_a.max_seq_len}")
        return batch


def _sample_positions(n_tokens: int, max_samples: int, seed: int) -> torch.Tensor:
    """Which of the `n_tokens` masked positions CKA uses: all, or `max_samples` drawn with `seed`, in order."""
    select = torch.arange(n_tokens)
    if n_tokens > max_samples:
        gen = torch.Generator().manual_seed(seed)
        select = torch.randperm(n_tokens, generator=gen)[:max_samples].sort().values
    return select


def _moved_steps(steps, available: list[int]) -> tuple[int, ...]:
    """The two checkpoints whose parameters are compared: `steps`, or the first and the last."""
    moved_steps = tuple(steps) if steps is not None else (available[0], available[-1])
    missing = [s for s in moved_steps if s not in available]
    if len(moved_steps) != 2 or missing:
        raise UserError(f"steps must be two checkpoint steps of run a; {missing or moved_steps} not among {available}")
    return moved_steps


def _problems(problems, task_cfg: dict, n: int, seed: int) -> list[tuple[str, str]]:
    task = task_from_config(task_cfg)
    if problems is None:
        rng = random.Random(seed)
        problems = task.sample_held_out(n, rng)
    out = []
    for p in problems:
        if isinstance(p, str):
            p = task.from_human(p)
        if hasattr(p, "prompt"):
            out.append((p.prompt, p.target))
        elif isinstance(p, (tuple, list)) and len(p) == 2:
            out.append((str(p[0]), str(p[1])))
        else:
            raise UserError(f"a problem must be an Example, a (prompt, target) pair or a human string, got {p!r}")
    if not out:
        raise UserError("the problem set is empty")
    return out


@torch.no_grad()
def _forward(model, batch, mask, select, batch_size, readout):
    """States after every loop at the selected token positions, loss and exact match, scored
    as the run was trained (`readout`: `run_readout`'s keywords), as its evaluation scores it."""
    L = model.cfg.n_loops
    states: list[list[torch.Tensor]] = [[] for _ in range(L)]
    logits = []
    for start in range(0, len(batch.tokens), batch_size):
        tokens = batch.tokens[start : start + batch_size]
        inputs = model.embed(tokens)
        index = model.attention_index(tokens)
        state = None
        for t in range(L):
            state = model.run_loops(inputs, range(t, t + 1), state, index=index)
            states[t].append(state[mask[start : start + batch_size]])
        logits.append(model.answer_logits(state, tokens))  # as the model answers, a pairwise answer included
    scores = score_logits(torch.cat(logits), batch.tokens, batch.loss_mask, **readout)
    return [torch.cat(s)[select] for s in states], scores.loss, scores.exact_match


def _scan(run_dir, series, batch, mask, select, keep, n_change_points, per, batch_size, progress):
    """One pass over a run's checkpoints `series`: each one's weight norms and moves, its
    loss and exact match on `batch`, its states at the `select`ed positions (and the weights
    of the steps in `keep`); then CKA between checkpoints, speeds and change points. Returns
    the `RunScan`, the kept weights by step and the states per loop [C, samples, width]."""
    config = read_run_config(run_dir)
    cfg = ModelConfig.from_dict(config["model"])
    # a run trained on its answer tokens only (grok-mod113) never learned the EOS: not scored
    readout = run_readout(config.get("train", {}), task_from_config(config["task"]))
    model = build_model(cfg.replace(max_loops=cfg.n_loops)).eval()
    L = cfg.n_loops
    reps: list[list[torch.Tensor]] = [[] for _ in range(L)]
    norms: dict[str, list[float]] = {}
    # per group, the move from each checkpoint to the next ("total" among them once there are two)
    moves: defaultdict[str, list[float]] = defaultdict(list)
    losses, exact, dist = [], [], []
    first = prev = None
    kept = {}
    for k, (step, path) in enumerate(tqdm(series, desc=f"checkpoints {run_dir.name}", disable=not progress, leave=False)):
        state = _load_weights(model, path, run_dir)
        sq_norm, sq_move, sq_dist = _squared_norms(state, prev, first)
        for g, v in sq_norm.items():
            norms.setdefault(g, [math.nan] * k).append(math.sqrt(v))
        for g, v in sq_move.items():  # none at the first checkpoint
            moves[g].append(math.sqrt(v))
        dist.append(math.sqrt(sq_dist))
        first = state if first is None else first
        prev = state
        if step in keep:
            kept[step] = state
        states, loss, em = _forward(model, batch, mask, select, batch_size, readout)
        losses.append(loss)
        exact.append(em)
        for t in range(L):
            reps[t].append(compress(states[t]))
    steps = [s for s, _ in series]
    width = max(r.shape[1] for rr in reps for r in rr)
    reps_t = [torch.stack([torch.nn.functional.pad(r, (0, width - r.shape[1])) for r in rr]) for rr in reps]
    cka = np.stack([cka_matrix(r) for r in reps_t])  # [L, C, C]
    speeds, found = _speeds(steps, cka, moves, losses, per, n_change_points)
    metrics = [{k: v for k, v in row.items() if METRIC_KEY.search(k)} for row in read_metrics(run_dir)]
    scan = RunScan(
        run_dir=str(run_dir), steps=steps, n_loops=L, metrics=tuple(metrics), problem_loss=np.array(losses),
        problem_exact_match=np.array(exact), group_norms={g: np.array(v) for g, v in norms.items()},
        group_speed={g: rates(steps, v, per) for g, v in moves.items()}, distance_from_first=np.array(dist),
        cka=cka, speeds=speeds, change_points=found,
    )
    return scan, kept, reps_t


def _load_weights(model, path, run_dir) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors in float, loaded into `model`; CheckpointError when they are
    not the weights of the run's model."""
    state = {name: t.float() for name, t in load_tensors(path).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise CheckpointError(f"{path} does not match {run_dir}/config.json: missing {missing}, unexpected {unexpected}")
    return state


def _squared_norms(state, prev, first) -> tuple[dict[str, float], dict[str, float], float]:
    """Squared norms and moves summed over each group's tensors ("total" too): the norm of
    `state`, its move from `prev` (none without one) and its squared distance from `first`."""
    sq_norm: defaultdict[str, float] = defaultdict(float)
    sq_move: defaultdict[str, float] = defaultdict(float)
    sq_dist = 0.0
    for name, t in state.items():
        g = param_group(name)
        sq_norm[g] += float(t.double().square().sum())
        if prev is not None:
            sq_move[g] += float((t - prev[name]).double().square().sum())
            sq_dist += float((t - first[name]).double().square().sum())
    sq_norm["total"] = sum(sq_norm.values())
    if prev is not None:
        sq_move["total"] = sum(sq_move.values())
    return sq_norm, sq_move, sq_dist


def _speeds(steps, cka, moves, losses, per, n_change_points):
    """The three speeds per interval (representation, parameters, loss; empty but the loss
    with one checkpoint) and each one's change points."""
    C = len(steps)
    speeds = {
        "representation": rates(steps, np.mean([1.0 - np.diagonal(c, 1) for c in cka], axis=0), per) if C > 1 else np.zeros(0),
        "parameters": rates(steps, moves["total"], per) if C > 1 else np.zeros(0),
        "loss": rates(steps, np.abs(np.diff(losses)), per),
    }
    found = {name: tuple(ChangePoint(**p) for p in change_points(steps, v, n_change_points)) if C > 1 else ()
             for name, v in speeds.items()}
    return speeds, found

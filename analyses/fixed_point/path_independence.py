"""Path independence (Anil et al. 2022): does the loop reach the same end state, and the
same answer, whatever state it starts from?

The model's own start is the zero state (loop 0 reads the injected input alone). Here the
same input is injected but the loop starts from another state, and after `horizon` loops
the end state is compared with the reference run's end state:

* "noise": Gaussian noise with the per-position norm of the reference end state;
* "noise_x4": the same, four times larger (far from anything seen in training);
* "other": the end state of a different problem of the batch (a plausible but wrong state).

A path-independent loop forgets where it started: its end state is an attractor of the
input alone. `agreement` reports how often the end states agree (cosine >= `threshold` over
the real positions) and how often the answer read out there equals the reference answer,
also among the problems the reference run gets wrong: a wrong answer that every start reaches
again is a wrong fixed point of the loop's map, one that another start leaves depends on where
the loop began (ft12's last 20 x 3 errors are the first kind, docs/runs/multiplication.md).
The generic part takes any step function, so tests can plant a contractive or a bistable map.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.tasks import Example

STARTS = ("noise", "noise_x4", "other")

# step(state, t) -> state after loop t, the input being fixed inside the closure
StepFn = Callable[[Tensor, int], Tensor]


def masked_cosine(a: Tensor, b: Tensor, mask: Tensor) -> Tensor:
    """Per-example cosine between `a` and `b` ([batch pos d]) over the positions in `mask`."""
    a, b = (x.double() * mask[..., None] for x in (a, b))
    num = (a * b).flatten(1).sum(1)
    den = a.flatten(1).norm(dim=1) * b.flatten(1).norm(dim=1)
    return num / den.clamp_min(1e-30)


def start_states(reference_end: Tensor, mask: Tensor, starts: Sequence[str], generator: torch.Generator) -> dict[str, Tensor]:
    """Alternative initial states shaped like `reference_end` [batch pos d]."""
    out = {}
    per_position = reference_end.norm(dim=-1, keepdim=True)  # [batch pos 1]
    for name in starts:
        if name in ("noise", "noise_x4"):
            noise = torch.randn(reference_end.shape, generator=generator).to(reference_end)
            noise = noise / noise.norm(dim=-1, keepdim=True) * per_position
            out[name] = noise * (4.0 if name == "noise_x4" else 1.0)
        elif name == "other":
            if reference_end.shape[0] < 2:
                raise UserError("the 'other' start needs at least 2 examples in a batch")
            out[name] = reference_end.roll(1, dims=0) * mask.roll(1, dims=0)[..., None]
        else:
            raise UserError(f"unknown start {name!r}; choose from {STARTS}")
    return out


def trajectories_agree(
    step: StepFn,
    reference_start: Tensor | None,
    alternative_starts: dict[str, Tensor],
    horizon: int,
    mask: Tensor,
) -> tuple[Tensor, dict[str, Tensor], dict[str, Tensor]]:
    """Run the reference and every alternative start for `horizon` steps.

    Returns the reference end state, each alternative's end state, and each alternative's
    per-example cosine to the reference after every step ([batch horizon])."""
    reference = [reference_start]
    s = reference_start
    for t in range(horizon):
        s = step(s, t)
        reference.append(s)
    ends, cosines = {}, {}
    for name, s in alternative_starts.items():
        curve = []
        for t in range(horizon):
            s = step(s, t)
            curve.append(masked_cosine(s, reference[t + 1], mask))
        ends[name], cosines[name] = s, torch.stack(curve, dim=1)
    return reference[-1], ends, cosines


def _chunks(items: list, size: int) -> list[list]:
    """Batches of `size`, the last one never a single example (the "other" start needs a
    second problem in its batch): a lone remainder joins the batch before it."""
    if len(items) < 2:
        raise UserError(f"path independence needs at least 2 problems, got {len(items)}")
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    if len(chunks) > 1 and len(chunks[-1]) == 1:
        chunks[-2].extend(chunks.pop())
    return chunks


@torch.no_grad()
def path_independence(
    model,
    examples: Sequence[Example],
    horizon: int,
    starts: Sequence[str] = STARTS,
    threshold: float = 0.99,
    seed: int = 0,
    batch_size: int = 256,
) -> dict[str, Any]:
    """Start the loop of `model` from other states and compare, after `horizon` loops, the
    end state (cosine over real positions) and the teacher-forced answer with the run
    from the model's own start. JSON-safe summary per start."""
    generator = torch.Generator().manual_seed(seed)
    per_start: dict[str, dict[str, list]] = {name: {"cos": [], "same_state": [], "same_answer": [], "correct": []}
                                             for name in starts}
    reference_correct: list[np.ndarray] = []
    for chunk in _chunks(list(examples), max(batch_size, 2)):
        reference_correct.append(_compare_chunk(model, chunk, horizon, starts, threshold, generator, per_start))
    reference_right = np.concatenate(reference_correct)
    out: dict[str, Any] = {
        "horizon": horizon,
        "threshold": threshold,
        "n_problems": len(examples),
        "reference_exact_match": float(reference_right.mean()),
        "reference_wrong": int((~reference_right).sum()),
        "starts": {name: _start_summary(parts, reference_right) for name, parts in per_start.items()},
    }
    out["headline"] = headline(out)
    return out


def _compare_chunk(model, chunk: list[Example], horizon: int, starts: Sequence[str], threshold: float,
                   generator: torch.Generator, per_start: dict[str, dict[str, list]]) -> np.ndarray:
    """Run one batch from the model's own start and from each of `starts`, appending each
    start's per-example numbers to `per_start`; returns whether the reference run's answer
    is right, per example."""
    device = model.W_E.device
    batch = encode_batch(model.cfg.vocab, [e.prompt for e in chunk], [e.target for e in chunk],
                         max_len=model.cfg.max_seq_len)
    tokens, valid = batch.tokens.to(device), batch.valid.to(device)
    readout = batch.loss_mask.to(device)[:, :-1]
    inputs = model.embed(tokens)  # [batch pos d_model]
    index = model.attention_index(tokens)

    def step(state, t, inputs=inputs, index=index):
        return model.run_loops(inputs, range(t, t + 1), state=state, index=index)

    reference_end = model.run_loops(inputs, range(horizon), index=index)
    alternatives = start_states(reference_end, valid, starts, generator)
    # the reference starts from the model's own zero state (state=None)
    _, ends, cosines = trajectories_agree(step, None, alternatives, horizon, valid)

    def answers(state):
        return model.answer_logits(state, tokens)[:, :-1].argmax(-1)  # [batch pos-1]

    ref_answer = answers(reference_end)
    target = tokens[:, 1:]
    reference_right = ((ref_answer == target) | ~readout).all(-1).cpu().numpy()
    for name in starts:
        answer = answers(ends[name])
        cos_end = cosines[name][:, -1]
        per_start[name]["cos"].append(cosines[name].cpu().numpy())
        per_start[name]["same_state"].append((cos_end >= threshold).cpu().numpy())
        per_start[name]["same_answer"].append(((answer == ref_answer) | ~readout).all(-1).cpu().numpy())
        per_start[name]["correct"].append(((answer == target) | ~readout).all(-1).cpu().numpy())
    return reference_right


def _start_summary(parts: dict[str, list], reference_right: np.ndarray) -> dict[str, Any]:
    """One start's agreement over every batch: shares of the same end state, the same answer
    (among every problem, and among those the reference run gets wrong, `reference_right` False:
    None when it gets none wrong) and the right answer, and the cosine to the reference run loop
    by loop."""
    cos = np.concatenate(parts["cos"])  # [N horizon]
    same_answer, wrong = np.concatenate(parts["same_answer"]), ~reference_right
    return {
        "same_state_fraction": float(np.concatenate(parts["same_state"]).mean()),
        "same_answer_fraction": float(same_answer.mean()),
        "same_wrong_answer_fraction": float(same_answer[wrong].mean()) if wrong.any() else None,
        "exact_match": float(np.concatenate(parts["correct"]).mean()),
        "end_cosine_median": float(np.median(cos[:, -1])),
        "cosine_median_by_loop": np.median(cos, axis=0).tolist(),
        "cosine_q25_by_loop": np.quantile(cos, 0.25, axis=0).tolist(),
    }


def headline(d: dict[str, Any]) -> str:
    parts = [
        f"{name} {100 * s['same_state_fraction']:.0f}% / {100 * s['same_answer_fraction']:.0f}%"
        for name, s in d["starts"].items()
    ]
    return (
        f"Path independence after {d['horizon']} loops (same end state at cosine >= {d['threshold']} / same "
        f"answer as the model's own start, {d['n_problems']} problems): " + ", ".join(parts) + "."
    )

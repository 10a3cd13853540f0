"""Zero and mean ablation of each head's output (`hook_z`) in each loop.

A head is ablated in one loop only (the weights are shared, so "head h" in loop t and in loop
t+1 are separate interventions). Mean ablation replaces z at a token by the mean of z over all
tokens of the same semantic slot (a_3, '+', answer digit 2, ...; see `labels.slot_names`)
in the clean run, so a problem of any length gets the mean of its own kind of token.

Effects are read teacher-forced: exact match (every answer token and EOS argmax-correct) and
the mean cross-entropy of the answer digits of each sub-task.
"""

from __future__ import annotations

import numpy as np
import torch

from abacus_interp.core.model import act_name
from abacus_interp.core.tokens import PAD_ID
from abacus_interp.errors import UserError

from .labels import SUBTASKS, ProblemSet, slot_names
from .runner import LoopRunner, trim

KINDS = ("zero", "mean")


def _batches(ps: ProblemSet, batch_size: int, device):
    n = len(ps.examples)
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        tokens = trim(ps.tokens[start:stop], device)
        yield start, stop, tokens, ps.slots[start:stop, : tokens.shape[1]].to(device)


class _Scorer:
    """Teacher-forced per-problem exact match and per-row (answer digit) log-prob and
    correctness, filled batch by batch."""

    def __init__(self, ps: ProblemSet):
        self.ps = ps
        self.exact = np.zeros(len(ps.examples), dtype=bool)
        self.row_logprob = np.zeros(ps.n_rows)
        self.row_correct = np.zeros(ps.n_rows, dtype=bool)

    def add(self, logits: torch.Tensor, tokens: torch.Tensor, start: int) -> None:
        ps, device = self.ps, tokens.device
        stop = start + tokens.shape[0]
        logprobs = logits.float().log_softmax(-1)[:, :-1]  # predicts token pos+1
        target = tokens[:, 1:]
        correct = logprobs.argmax(-1) == target
        pos = torch.arange(target.shape[1], device=device)[None, :]
        plen = ps.prompt_lengths[start:stop].to(device)[:, None]
        row_len = (tokens != PAD_ID).sum(1, keepdim=True)
        scored = (pos >= plen - 1) & (pos < row_len - 1)
        self.exact[start:stop] = (correct | ~scored).all(1).cpu().numpy()
        rows = np.nonzero((ps.rows["problem"] >= start) & (ps.rows["problem"] < stop))[0]
        local = torch.as_tensor(ps.rows["problem"][rows] - start, device=device)
        query = torch.as_tensor(ps.rows["pred"][rows], device=device)
        tgt = torch.as_tensor(ps.rows["target"][rows], device=device)
        self.row_logprob[rows] = logprobs[local, query, tgt].cpu().numpy()
        self.row_correct[rows] = (logprobs[local, query].argmax(-1) == tgt).cpu().numpy()

    def summary(self) -> dict:
        return summarize_scores(self.ps, {"exact": self.exact, "row_logprob": self.row_logprob,
                                          "row_correct": self.row_correct})


def summarize_scores(ps: ProblemSet, s: dict) -> dict:
    sub = ps.rows["subtask"]
    loss, acc = {}, {}
    for k, name in enumerate(SUBTASKS):
        sel = sub == k
        loss[name] = float(-s["row_logprob"][sel].mean()) if sel.any() else None
        acc[name] = float(s["row_correct"][sel].mean()) if sel.any() else None
    return {"exact_match": float(s["exact"].mean()), "loss": float(-s["row_logprob"].mean()),
            "digit_accuracy": float(s["row_correct"].mean()),
            "loss_by_subtask": loss, "digit_accuracy_by_subtask": acc}


def slot_means(model, ps: ProblemSet, n_loops: int, batch_size: int = 256) -> dict[str, torch.Tensor]:
    """Mean hook_z per semantic slot for every loop/layer: name -> [slot head d_head]."""
    cfg = model.cfg
    n_slots = len(slot_names(ps.max_digits))
    device = model.W_E.device
    names = [act_name("z", layer, loop=t) for t in range(n_loops) for layer in range(cfg.n_layers)]
    sums = {n: torch.zeros(n_slots, cfg.n_heads, cfg.d_head, device=device) for n in names}
    counts = torch.zeros(n_slots, device=device)
    for _, _, tokens, slots in _batches(ps, batch_size, device):
        valid = slots >= 0
        idx = slots[valid]
        counts.index_add_(0, idx, torch.ones_like(idx, dtype=torch.float))

        def add(z, hook, idx=idx, valid=valid):
            sums[hook.name].index_add_(0, idx, z.detach().float()[valid])
            return z

        with torch.inference_mode():
            model.run_with_hooks(tokens, n_loops=n_loops, fwd_hooks=[(n, add) for n in names])
    return {n: s / counts.clamp(min=1)[:, None, None] for n, s in sums.items()}


def _ablation_hook(kind: str, h: int, mean: torch.Tensor | None, slots: torch.Tensor):
    def hook(z, hook):
        z = z.clone()
        z[:, :, h] = 0.0 if kind == "zero" else mean[slots.clamp(min=0), h].to(z.dtype)
        return z
    return hook


def ablate_heads(model, ps: ProblemSet, n_loops: int, kinds=KINDS, batch_size: int = 256,
                 progress=None) -> dict:
    """Ablate every (loop, layer, head) in turn with each kind; table + arrays of effects."""
    cfg = model.cfg
    for kind in kinds:
        if kind not in KINDS:
            raise UserError(f"unknown ablation kind {kind!r}; choose from {KINDS}")
    device = model.W_E.device
    specs = [(kind, t, layer, h) for kind in kinds for t in range(n_loops)
             for layer in range(cfg.n_layers) for h in range(cfg.n_heads)]
    means = slot_means(model, ps, n_loops, batch_size) if "mean" in kinds else {}
    base = _Scorer(ps)
    scorers = {spec: _Scorer(ps) for spec in specs}
    for start, _stop, tokens, slots in _batches(ps, batch_size, device):
        runner = LoopRunner(model, tokens, n_loops)
        base.add(runner.logits, tokens, start)
        for kind, t, layer, h in specs:
            name = act_name("z", layer, loop=t)
            hook = _ablation_hook(kind, h, means.get(name), slots)
            scorers[(kind, t, layer, h)].add(runner.from_loop(t, [(name, hook)]), tokens, start)
            if progress is not None:
                progress.update(tokens.shape[0] / len(ps.examples))
    baseline = base.summary()
    shape = (n_loops, cfg.n_layers, cfg.n_heads)
    arrays = {kind: {"exact_match": np.zeros(shape), "loss": np.zeros(shape),
                     "loss_by_subtask": {s: np.full(shape, np.nan) for s in SUBTASKS}} for kind in kinds}
    table = []
    for (kind, t, layer, h), scorer in scorers.items():
        s = scorer.summary()
        a = arrays[kind]
        a["exact_match"][t, layer, h] = s["exact_match"]
        a["loss"][t, layer, h] = s["loss"]
        for sub, v in s["loss_by_subtask"].items():
            if v is not None:
                a["loss_by_subtask"][sub][t, layer, h] = v
        table.append({"kind": kind, "loop": t, "layer": layer, "head": h, **s,
                      "delta_exact_match": s["exact_match"] - baseline["exact_match"],
                      "delta_loss": s["loss"] - baseline["loss"],
                      "delta_loss_by_subtask": {
                          k: (None if v is None or baseline["loss_by_subtask"][k] is None
                              else v - baseline["loss_by_subtask"][k])
                          for k, v in s["loss_by_subtask"].items()}})
    return {"baseline": baseline, "kinds": list(kinds), "table": table, "arrays": arrays,
            "most_harmful": _most_harmful(table)}


def _most_harmful(table: list[dict], k: int = 5) -> dict:
    """Per kind, the k ablations that cost the most exact match (ties: most loss)."""
    out = {}
    for kind in {r["kind"] for r in table}:
        rows = sorted((r for r in table if r["kind"] == kind),
                      key=lambda r: (r["delta_exact_match"], -r["delta_loss"]))[:k]
        out[kind] = [{key: r[key] for key in ("loop", "layer", "head", "delta_exact_match", "delta_loss",
                                               "delta_loss_by_subtask")} for r in rows]
    return out

"""Where each head looks when the model predicts answer digit i, per loop and layer.

For every (problem, answer digit i) row, the attention pattern at the predicting position is
split into the mass on a_i, b_i (aligned digits), a_{i-1}, b_{i-1} (the carry source), earlier
answer digits (the tokens from the first answer digit up to the query itself) and the rest.
Statistics are reduced inside the hooks batch by batch, so no full pattern is ever stored.

alignment score of a head = mean mass on {a_i, b_i} over rows that have at least one of them;
its chance level is the same mean for a uniform causal head, n_aligned / (query + 1).
"""

from __future__ import annotations

import numpy as np
import torch

from abacus_interp.core.model import act_name
from abacus_interp.core.tokens import EOS_ID

from .labels import GROUPS, ProblemSet, slot_names

CATEGORIES = ("a_i", "b_i", "a_prev", "b_prev", "answer", "other")


def _key_masks(ps: ProblemSet, rows: np.ndarray, length: int) -> torch.Tensor:
    """[rows category key] float masks of the CATEGORIES (other = visible and none of them)."""
    r = ps.rows
    keys = torch.arange(length)[None, :]
    q = torch.as_tensor(r["pred"][rows])[:, None]
    masks = []
    for name in ("a_i", "b_i", "a_prev", "b_prev"):
        pos = torch.as_tensor(r[name][rows])[:, None]
        masks.append((keys == pos) & (pos >= 0))
    start = torch.as_tensor(r["answer_start"][rows])[:, None]
    masks.append((keys >= start) & (keys <= q))
    named = torch.stack(masks, 1).any(1)
    masks.append((keys <= q) & ~named)
    return torch.stack(masks, 1).float()


def attention_stats(model, ps: ProblemSet, n_loops: int, batch_size: int = 256,
                    fwd_hooks=(), progress=None) -> dict:
    """Attention-mass statistics per loop x layer x head (see module docstring).

    `fwd_hooks` run before the statistics hooks (e.g. to plant a pattern in a test)."""
    cfg = model.cfg
    n_layers, n_heads, d = cfg.n_layers, cfg.n_heads, ps.max_digits
    n_slots, n_rows = len(slot_names(d)), ps.n_rows
    masses = np.zeros((n_loops, n_layers, n_rows, n_heads, len(CATEGORIES)))
    stair_sum = np.zeros((n_loops, n_layers, n_heads, d + 1, n_slots))
    stair_n = np.zeros(d + 1)
    device = model.W_E.device
    n_problems = len(ps.examples)
    for start in range(0, n_problems, batch_size):
        stop = min(start + batch_size, n_problems)
        rows = np.nonzero((ps.rows["problem"] >= start) & (ps.rows["problem"] < stop))[0]
        tokens = ps.tokens[start:stop]
        length = int((tokens != 0).sum(1).max())
        tokens = tokens[:, :length].to(device)
        local = torch.as_tensor(ps.rows["problem"][rows] - start)
        query = torch.as_tensor(ps.rows["pred"][rows])
        digit = ps.rows["digit"][rows]
        cat = _key_masks(ps, rows, length)  # [r c k]
        slots = ps.slots[start:stop, :length][local]  # [r k]
        visible = torch.arange(length)[None, :] <= query[:, None]
        onehot = torch.zeros(len(rows), length, n_slots)
        onehot.scatter_(2, slots.clamp(min=0)[..., None], (visible & (slots >= 0)).float()[..., None])
        np.add.at(stair_n, digit, 1)

        def make_hook(t, layer, local=local, query=query, rows=rows, cat=cat, onehot=onehot, digit=digit):
            def hook(pattern, hook):
                p = pattern.detach().float().cpu()[local, :, query, :]  # [r head key]
                masses[t, layer, rows] = torch.einsum("rhk,rck->rhc", p, cat).numpy()
                per_slot = torch.einsum("rhk,rks->rhs", p, onehot).numpy()  # [r head slot]
                np.add.at(stair_sum[t, layer].transpose(1, 0, 2), digit, per_slot)
                return pattern
            return hook

        hooks = [(act_name("pattern", layer, loop=t), make_hook(t, layer))
                 for t in range(n_loops) for layer in range(n_layers)]
        with torch.inference_mode():
            model.run_with_hooks(tokens, n_loops=n_loops, fwd_hooks=list(fwd_hooks) + hooks)
        if progress is not None:
            progress.update(stop - start)
    return summarize(ps, masses, stair_sum, stair_n)


def _chance(ps: ProblemSet, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    r = ps.rows
    count = sum((r[n] >= 0).astype(float) for n in names)
    return count > 0, count / (r["pred"] + 1)


def summarize(ps: ProblemSet, masses: np.ndarray, stair_sum: np.ndarray, stair_n: np.ndarray) -> dict:
    """Group means, alignment / carry-source scores with chance levels, staircase."""
    out: dict = {"categories": list(CATEGORIES), "groups": list(GROUPS), "mass": {}, "n_rows": {}}
    scores: dict = {}
    for target, names in (("aligned", ("a_i", "b_i")), ("carry_source", ("a_prev", "b_prev"))):
        has, chance_row = _chance(ps, names)
        idx = [CATEGORIES.index(n) for n in names]
        row_score = masses[..., idx].sum(-1)  # [loop layer row head]
        scores[target] = {}
        for group in GROUPS:
            sel = has & ps.group_mask(group)
            if not sel.any():
                scores[target][group] = None
                continue
            score = row_score[:, :, sel].mean(2)
            chance = float(chance_row[sel].mean())
            scores[target][group] = {"score": score, "chance": chance,
                                     "lift": (score - chance) / max(1.0 - chance, 1e-9),
                                     "n": int(sel.sum())}
    for group in GROUPS:
        sel = ps.group_mask(group)
        out["n_rows"][group] = int(sel.sum())
        out["mass"][group] = masses[:, :, sel].mean(2) if sel.any() else None  # [loop layer head cat]
    out["alignment"] = scores["aligned"]
    out["carry_source"] = scores["carry_source"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["staircase"] = stair_sum / stair_n[None, None, None, :, None]
    out["staircase_rows"] = [f"c{i}" for i in range(len(stair_n))]
    out["staircase_cols"] = slot_names(ps.max_digits)
    out["top_heads"] = top_heads(out)
    return out


def top_heads(stats: dict, k: int = 5) -> dict:
    """The k (loop, layer, head) with the highest aligned / carry-source lift (group all)."""
    best = {}
    for target in ("alignment", "carry_source"):
        entry = stats[target]["all"]
        if entry is None:
            best[target] = []
            continue
        lift, score = entry["lift"], entry["score"]
        order = np.argsort(-lift, axis=None)[:k]
        best[target] = [{"loop": int(t), "layer": int(layer), "head": int(h),
                         "score": float(score[t, layer, h]), "chance": entry["chance"],
                         "lift": float(lift[t, layer, h])}
                        for t, layer, h in zip(*np.unravel_index(order, lift.shape), strict=True)]
    return best


def example_pattern(model, example, n_loops: int, fwd_hooks=()) -> dict:
    """The full attention pattern of one problem (prompt + answer + EOS), every loop/layer/head:
    {"tokens": [str], "pattern": [loop][layer][head][query][key]}."""
    tokens = model.to_tokens(example.prompt + example.target)
    eos = torch.tensor([[EOS_ID]], device=tokens.device)
    tokens = torch.cat([tokens, eos], 1)
    store = {}

    def keep(pattern, hook):
        store[hook.name] = pattern.detach().float().cpu()[0]
        return pattern

    names = [act_name("pattern", layer, loop=t) for t in range(n_loops) for layer in range(model.cfg.n_layers)]
    with torch.inference_mode():
        model.run_with_hooks(tokens, n_loops=n_loops, fwd_hooks=list(fwd_hooks) + [(n, keep) for n in names])
    pattern = np.stack([np.stack([store[act_name("pattern", layer, loop=t)].numpy()
                                  for layer in range(model.cfg.n_layers)]) for t in range(n_loops)])
    labels = model.cfg.vocab.split(example.prompt + example.target) + ["<eos>"]
    return {"problem": example.prompt + example.target, "tokens": labels, "pattern": pattern}


def circuitsvis_view(model, example, loop: int, layer: int = 0):
    """CircuitsVis attention view of one problem (optional dependency; renders offline only
    where its JS bundle is installed locally)."""
    try:
        import circuitsvis as cv
    except ImportError as e:  # pragma: no cover - optional
        raise ImportError("circuitsvis is not installed: pip install circuitsvis, or use "
                          "analyses.carry_attention.figures.pattern_figure (plotly)") from e
    data = example_pattern(model, example, loop + 1)
    return cv.attention.attention_patterns(tokens=data["tokens"], attention=data["pattern"][loop, layer])

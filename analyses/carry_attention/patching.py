"""Activation patching on counterfactual pairs that differ in whether a carry reaches digit i.

A pair is a clean problem and a corrupted one made by changing a single lower operand digit
j < i, so that the carry into answer digit i flips while both sequences keep the same length
(`direct`: j = i - 1, the carry source itself; `cascade`: j < i - 1, the carry travels through
digits with a + b == 9). The correct answer digit i then differs by one between the two.

Metric at the position predicting digit i: LD = logit[clean digit] - logit[corrupt digit].
We run the corrupted input, copy one clean activation in (denoising), and report
    fraction restored = sum(LD_patched - LD_corrupt) / sum(LD_clean - LD_corrupt)
over the pairs where the patched position exists (a ratio of sums, so pairs on which the
model barely separates the two digits do not blow up the mean).

Sites: `hook_input` (the injected embedding, one row), `resid_post` per loop x layer, and
each head's `hook_z` per loop x layer. Positions are named per pair (see POSITIONS).

Reading the maps: the sequences are teacher-forced, so the two sides also differ in the answer
digits j..i-1, and the token at the predicting position (answer digit i-1) already tells the
carry given a_{i-1} and b_{i-1} (for a cascade pair, 0 versus 9 decides it outright). The
`input` row measures how much of the effect that token carries; `carry_present` is the first
loop/layer where patching the residual at the predicting position restores >= threshold.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

from abacus_interp.core.model import act_name
from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.tasks.carries import carry_in

from .labels import balanced_problems, digit_positions
from .runner import LoopRunner, trim

POSITIONS = ("a_i", "b_i", "a_prev", "b_prev", "changed", "prev_answer", "pred")
PAIR_KINDS = ("direct", "cascade")


@dataclass
class PairSet:
    clean_tokens: torch.Tensor  # [n pos]
    corrupt_tokens: torch.Tensor  # [n pos], same length per pair
    pred: np.ndarray  # [n] position predicting digit i
    clean_target: np.ndarray  # [n] token id of the clean answer digit i
    corrupt_target: np.ndarray  # [n]
    positions: dict[str, np.ndarray]  # name -> [n] position or -1
    kind: np.ndarray  # [n] "direct" / "cascade" / other
    digit: np.ndarray  # [n]
    problems: list[tuple[str, str]]  # (clean, corrupt) text, for inspection

    def __len__(self) -> int:
        return len(self.pred)


def _candidates(a: int, b: int, i: int) -> dict[str, list[tuple[int, int, int]]]:
    """Single-digit edits (operand, j, value) that flip the carry into digit i and keep both
    the operand lengths and the answer length."""
    ops, base_c, base_len = (a, b), carry_in(a, b)[i], len(str(a + b))
    out = {"direct": [], "cascade": []}
    for which, x in enumerate(ops):
        width = len(str(x))
        for j in range(min(i, width)):
            old = (x // 10**j) % 10
            for v in range(10):
                if v == old or (v == 0 and j == width - 1 and width > 1):
                    continue
                new = x + (v - old) * 10**j
                na, nb = (new, b) if which == 0 else (a, new)
                if len(str(na + nb)) == base_len and carry_in(na, nb)[i] != base_c:
                    out["direct" if j == i - 1 else "cascade"].append((which, j, v))
    return out


def make_carry_pairs(task, vocab, n_pairs: int, rng: random.Random, max_digits: int | None = None) -> PairSet:
    """`n_pairs` counterfactual pairs, alternating direct / cascade edits when the problem
    allows, clean side carrying or not at random."""
    clean, corrupt, digits, changed, kinds = [], [], [], [], []
    attempts = misses = 0
    while len(clean) < n_pairs:
        attempts += 1
        if attempts > 100 * n_pairs + 100:
            raise UserError("could not build carry pairs: use problems of at least 2 digits (max_digits >= 2)")
        (ex,) = balanced_problems(task, 1, rng, max_digits, uniform_fraction=0.0)
        a, b = ex.operands
        top = max(len(str(a)), len(str(b)))
        if top < 2:
            continue
        want = PAIR_KINDS[len(clean) % 2]
        other = PAIR_KINDS[1 - len(clean) % 2]
        found = None
        for i in rng.sample(range(1, top), top - 1):
            cands = _candidates(a, b, i)
            if cands[want]:
                found = (i, rng.choice(cands[want]), want)
                break
            if found is None and cands[other]:
                found = (i, rng.choice(cands[other]), other)
        # cascades need a run of 9-sums: look at a few more problems before settling
        if found is None or (found[2] != want and misses < 20):
            misses += 1
            continue
        misses = 0
        i, (which, j, v), kind = found
        x = (a, b)[which]
        new = x + (v - (x // 10**j) % 10) * 10**j
        other = task.make(*((new, b) if which == 0 else (a, new)))
        pair = (ex, other) if rng.random() < 0.5 else (other, ex)
        clean.append(pair[0])
        corrupt.append(pair[1])
        digits.append(i)
        changed.append(j if which == 0 else len(str(a)) + 1 + j)
        kinds.append(kind)
    return pairs_from_examples(vocab, clean, corrupt, digits, changed, kinds)


def pairs_from_examples(vocab, clean, corrupt, digits, changed, kinds) -> PairSet:
    """A PairSet from clean/corrupt Examples with equal operand lengths and the digit i studied."""
    cb = encode_batch(vocab, [e.prompt for e in clean], [e.target for e in clean])
    rb = encode_batch(vocab, [e.prompt for e in corrupt], [e.target for e in corrupt])
    if cb.tokens.shape != rb.tokens.shape or not torch.equal(cb.valid, rb.valid):
        raise ValueError("clean and corrupted problems must have the same operand and answer lengths")
    positions = {name: [] for name in POSITIONS}
    pred, ct, rt = [], [], []
    for e, r, i, j in zip(clean, corrupt, digits, changed, strict=True):
        a, b = e.operands
        pos = digit_positions(len(str(a)), len(str(b)), i)
        for name in POSITIONS:
            positions[name].append(j if name == "changed" else pos[name])
        pred.append(pos["pred"])
        ct.append(vocab.encode(e.target[i])[0])
        rt.append(vocab.encode(r.target[i])[0])
    return PairSet(cb.tokens, rb.tokens, np.array(pred), np.array(ct), np.array(rt),
                   {k: np.array(v) for k, v in positions.items()}, np.array(kinds), np.array(digits),
                   [(e.prompt + e.target, r.prompt + r.target) for e, r in zip(clean, corrupt, strict=True)])


def _logit_diff(logits, idx, pred, ct, rt) -> torch.Tensor:
    at = logits[idx, pred].float()  # [n d_vocab]
    return at[idx, ct] - at[idx, rt]


def patch_pairs(model, pairs: PairSet, n_loops: int, positions=POSITIONS, heads: bool = True,
                batch_size: int = 256, progress=None) -> dict:
    """Denoising patches of every site x named position; per-pair logit differences are
    kept so results can be split by pair kind."""
    cfg = model.cfg
    device = model.W_E.device
    sites = [("input", None, None, "hook_input")]
    for t in range(n_loops):
        for layer in range(cfg.n_layers):
            sites.append(("resid", t, layer, act_name("resid_post", layer, loop=t)))
            if heads:
                sites += [("head", t, layer, (act_name("z", layer, loop=t), h)) for h in range(cfg.n_heads)]
    n = len(pairs)
    ld_clean, ld_corrupt = np.zeros(n), np.zeros(n)
    ld_patch = np.full((len(sites), len(positions), n), np.nan)
    both_right = np.zeros(n, dtype=bool)
    names = sorted({s[3] if s[0] != "head" else s[3][0] for s in sites})
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        clean = trim(pairs.clean_tokens[start:stop], device)
        corrupt = pairs.corrupt_tokens[start:stop, : clean.shape[1]].to(device)
        idx = torch.arange(stop - start, device=device)
        pred = torch.as_tensor(pairs.pred[start:stop], device=device)
        ct = torch.as_tensor(pairs.clean_target[start:stop], device=device)
        rt = torch.as_tensor(pairs.corrupt_target[start:stop], device=device)
        with torch.inference_mode():
            clean_logits, cache = model.run_with_cache(clean, n_loops=n_loops, names_filter=lambda x: x in names)
        runner = LoopRunner(model, corrupt, n_loops)
        corrupt_logits = runner.logits
        ld_clean[start:stop] = _logit_diff(clean_logits, idx, pred, ct, rt).cpu().numpy()
        ld_corrupt[start:stop] = _logit_diff(corrupt_logits, idx, pred, ct, rt).cpu().numpy()
        both_right[start:stop] = ((clean_logits[idx, pred].argmax(-1) == ct)
                                  & (corrupt_logits[idx, pred].argmax(-1) == rt)).cpu().numpy()
        for s, (kind, t, _layer, target) in enumerate(sites):
            name, head = target if kind == "head" else (target, None)
            for p, pname in enumerate(positions):
                pos = torch.as_tensor(pairs.positions[pname][start:stop], device=device)
                sel = pos >= 0
                if not bool(sel.any()):
                    continue
                rows, cols = idx[sel], pos[sel]

                def hook(act, hook, rows=rows, cols=cols, name=name, head=head, cache=cache):
                    act = act.clone()
                    if head is None:
                        act[rows, cols] = cache[name][rows, cols].to(act.dtype)
                    else:
                        act[rows, cols, head] = cache[name][rows, cols, head].to(act.dtype)
                    return act

                logits = runner.from_loop(0 if t is None else t, [(name, hook)])
                ld = _logit_diff(logits, idx, pred, ct, rt).cpu().numpy()
                ld_patch[s, p, start:stop] = np.where(sel.cpu().numpy(), ld, np.nan)
                if progress is not None:
                    progress.update(stop - start)
    return summarize(pairs, sites, list(positions), ld_clean, ld_corrupt, ld_patch, both_right, n_loops, cfg)


def _fraction(ld_patch, ld_clean, ld_corrupt, sel):
    """Ratio of sums over the pairs in `sel` where the patch position exists."""
    ok = sel & ~np.isnan(ld_patch)
    denom = (ld_clean[ok] - ld_corrupt[ok]).sum()
    if not ok.any() or abs(denom) < 1e-9:
        return np.nan
    return float((ld_patch[ok] - ld_corrupt[ok]).sum() / denom)


def summarize(pairs, sites, positions, ld_clean, ld_corrupt, ld_patch, both_right, n_loops, cfg,
              threshold: float = 0.5) -> dict:
    groups = {"all": np.ones(len(pairs), dtype=bool)}
    groups.update({k: pairs.kind == k for k in PAIR_KINDS if (pairs.kind == k).any()})
    by_group = {}
    for g, sel in groups.items():
        resid = np.full((n_loops, cfg.n_layers, len(positions)), np.nan)
        head = np.full((n_loops, cfg.n_layers, cfg.n_heads, len(positions)), np.nan)
        inp = np.full(len(positions), np.nan)
        for s, (kind, t, layer, target) in enumerate(sites):
            for p in range(len(positions)):
                f = _fraction(ld_patch[s, p], ld_clean, ld_corrupt, sel)
                if kind == "input":
                    inp[p] = f
                elif kind == "resid":
                    resid[t, layer, p] = f
                else:
                    head[t, layer, target[1], p] = f
        present = None
        if "pred" in positions:
            curve = resid[:, :, positions.index("pred")]
            hits = np.argwhere(np.nan_to_num(curve, nan=-np.inf) >= threshold)
            if len(hits):
                present = {"loop": int(hits[0][0]), "layer": int(hits[0][1])}
        by_group[g] = {"n_pairs": int(sel.sum()), "input": inp, "resid": resid, "heads": head,
                       "carry_present": present,
                       "mean_ld_clean": float(ld_clean[sel].mean()), "mean_ld_corrupt": float(ld_corrupt[sel].mean())}
    return {"positions": positions, "threshold": threshold, "groups": by_group,
            "first_loop_carry_present": by_group["all"]["carry_present"],
            "both_correct_fraction": float(both_right.mean()),
            "examples": [list(p) for p in pairs.problems[:8]]}

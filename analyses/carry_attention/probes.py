"""Linear probes for the carry into answer digit i, read at the position that predicts it.

One logistic-regression probe per site (the injected input, then `resid_post` of every loop x
layer), pooled over answer digits. Train/test split is by problem (digits of one problem never
straddle the split) and both halves are class-balanced by subsampling, so chance is 0.5. The
control refits on labels permuted within each half: a probe that reads a real feature scores
well above it, one that memorises noise does not. The `input` baseline (the embedding at
the predicting position, i.e. the token of answer digit i-1) is often well above chance:
that token partly reveals the carry, so compare loops with it as well as with 0.5.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from abacus_interp.core.model import act_name
from abacus_interp.core.tokens import PAD_ID

from .labels import ProblemSet


def collect_states(model, ps: ProblemSet, n_loops: int, fwd_hooks=(), batch_size: int = 256) -> dict:
    """Residual vectors at each row's predicting position: {"input": [R d], (t, l): [R d]}."""
    cfg = model.cfg
    device = model.W_E.device
    sites = {"input": "hook_input"}
    sites.update({(t, layer): act_name("resid_post", layer, loop=t)
                  for t in range(n_loops) for layer in range(cfg.n_layers)})
    out = {key: np.zeros((ps.n_rows, cfg.d_model), dtype=np.float32) for key in sites}
    n = len(ps.examples)
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        rows = np.nonzero((ps.rows["problem"] >= start) & (ps.rows["problem"] < stop))[0]
        tokens = ps.tokens[start:stop]
        tokens = tokens[:, : int((tokens != PAD_ID).sum(1).max())].to(device)
        local = torch.as_tensor(ps.rows["problem"][rows] - start, device=device)
        query = torch.as_tensor(ps.rows["pred"][rows], device=device)

        def make_hook(key, rows=rows, local=local, query=query):
            def hook(act, hook):
                out[key][rows] = act.detach()[local, query].float().cpu().numpy()
                return act
            return hook

        hooks = list(fwd_hooks) + [(name, make_hook(key)) for key, name in sites.items()]
        with torch.inference_mode():
            model.run_with_hooks(tokens, n_loops=n_loops, fwd_hooks=hooks)
    return out


def split_rows(y: np.ndarray, groups: np.ndarray, rng: np.random.Generator,
               test_fraction: float = 0.3, balance: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Train / test row indices, split by group (problem) and class-balanced by subsampling."""
    ids = np.unique(groups)
    test_ids = rng.choice(ids, size=max(1, int(round(test_fraction * len(ids)))), replace=False)
    is_test = np.isin(groups, test_ids)
    halves = []
    for part in (~is_test, is_test):
        idx = np.nonzero(part)[0]
        if balance:
            pos, neg = idx[y[idx] == 1], idx[y[idx] == 0]
            k = min(len(pos), len(neg))
            idx = np.concatenate([rng.choice(pos, k, replace=False), rng.choice(neg, k, replace=False)])
        halves.append(np.sort(idx))
    return halves[0], halves[1]


def fit_probe(X: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray, C: float = 1.0):
    """Held-out accuracy and test predictions of a standardised logistic-regression probe."""
    if len(np.unique(y[train])) < 2 or len(test) == 0:
        return None, None
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000))
    with threadpool_limits(limits=1):  # BLAS threads only contend on a small problem
        probe.fit(X[train], y[train])
        pred = probe.predict(X[test])
    return float((pred == y[test]).mean()), pred


def probe_accuracy(X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None, seed: int = 0,
                   test_fraction: float = 0.3, balance: bool = True, C: float = 1.0) -> dict:
    """Held-out accuracy of a probe for binary `y` from `X`, and of the shuffled-label control."""
    rng = np.random.default_rng(seed)
    groups = np.arange(len(y)) if groups is None else groups
    train, test = split_rows(y, groups, rng, test_fraction, balance)
    acc, pred = fit_probe(X, y, train, test, C)
    y_shuffled = y.copy()
    y_shuffled[train] = rng.permutation(y[train])
    y_shuffled[test] = rng.permutation(y[test])
    shuffled, _ = fit_probe(X, y_shuffled, train, test, C)
    majority = float(max(y[test].mean(), 1 - y[test].mean())) if len(test) else None
    return {"accuracy": acc, "shuffled_accuracy": shuffled, "majority": majority,
            "n_train": int(len(train)), "n_test": int(len(test)), "test": test, "pred": pred}


def carry_probes(model, ps: ProblemSet, n_loops: int, seed: int = 0, test_fraction: float = 0.3,
                 threshold: float = 0.9, C: float = 1.0, fwd_hooks=(), batch_size: int = 256) -> dict:
    """Probe map (loop x layer) for carry-in, with shuffled control, the input baseline,
    accuracy on cascade digits (chain >= 2) and the first site reaching `threshold`."""
    states = collect_states(model, ps, n_loops, fwd_hooks, batch_size)
    y = ps.rows["carry_in"].astype(int)
    groups, chain = ps.rows["problem"], ps.rows["chain_length"]
    shape = (n_loops, model.cfg.n_layers)
    acc, shuf, casc = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    result: dict = {}
    for key, X in states.items():
        r = probe_accuracy(X, y, groups, seed, test_fraction, True, C)
        cascade_acc = None
        if r["pred"] is not None:
            sel = chain[r["test"]] >= 2
            cascade_acc = float((r["pred"][sel] == y[r["test"]][sel]).mean()) if sel.any() else None
        if key == "input":
            result["input"] = {k: r[k] for k in ("accuracy", "shuffled_accuracy", "majority")}
            result["input"]["cascade_accuracy"] = cascade_acc
            result["n_train"], result["n_test"] = r["n_train"], r["n_test"]
            continue
        t, layer = key
        acc[t, layer] = np.nan if r["accuracy"] is None else r["accuracy"]
        shuf[t, layer] = np.nan if r["shuffled_accuracy"] is None else r["shuffled_accuracy"]
        casc[t, layer] = np.nan if cascade_acc is None else cascade_acc
    hits = np.argwhere(np.nan_to_num(acc, nan=-1.0) >= threshold)
    first = {"loop": int(hits[0][0]), "layer": int(hits[0][1]),
             "accuracy": float(acc[tuple(hits[0])])} if len(hits) else None
    result.update({"accuracy": acc, "shuffled_accuracy": shuf, "cascade_accuracy": casc,
                   "threshold": threshold, "first_decodable": first, "chance": 0.5,
                   "carry_in_fraction": float(y.mean())})
    return result

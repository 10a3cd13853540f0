"""The grokked circuit of a modular-addition model, read in the Fourier basis.

Everything works on the full p x p grid of prompts "a b =" and reads the '=' position (the
last prompt token, whose logits predict c). Logits are restricted to the p residue outputs
(as Nanda et al. drop the '=' output), so "loss" here is the answer-token cross-entropy over
the residues, in float64.
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from .basis import fourier_basis, frequencies, frequency_rows

SINGLE_FREQ_THRESHOLD = 0.85  # a neuron is "single-frequency" above this fraction (Nanda et al.)


# --------------------------------------------------------------------------- the grid


def residue_ids(vocab, p: int) -> Int[Tensor, " p"]:
    """Vocabulary ids of the residue tokens "0".."p-1"."""
    return torch.tensor([vocab.encode(str(r))[0] for r in range(p)], dtype=torch.long)


def grid_tokens(vocab, p: int) -> Int[Tensor, "pairs 3"]:
    """Prompt tokens [a, b, '='] for every pair, row-major (index a * p + b)."""
    ids = residue_ids(vocab, p)
    eq = vocab.encode("=")[0]
    a = ids.repeat_interleave(p)
    b = ids.repeat(p)
    return torch.stack([a, b, torch.full_like(a, eq)], dim=1)


def grid_labels(p: int) -> Int[Tensor, " pairs"]:
    a = torch.arange(p).repeat_interleave(p)
    b = torch.arange(p).repeat(p)
    return (a + b) % p


def pair_index(pairs, p: int) -> Int[Tensor, " n"]:
    return torch.tensor([a * p + b for a, b in pairs], dtype=torch.long)


@torch.no_grad()
def grid_forward(model, vocab, p: int, hook_names: list[str] | None = None, batch_size: int = 4096):
    """Residue logits at '=' for every pair [p*p p] (float64), and the named activations at
    '=' ({name: [p*p d]}) when `hook_names` is given."""
    tokens = grid_tokens(vocab, p).to(model.W_E.device)
    cols = residue_ids(vocab, p).to(model.W_E.device)
    logits, acts = [], {n: [] for n in hook_names or []}
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(tokens), batch_size):
            chunk = tokens[start : start + batch_size]
            if hook_names:
                out, cache = model.run_with_cache(chunk, names_filter=lambda n: n in acts)
                for name in acts:
                    acts[name].append(cache[name][:, -1].double().cpu())
            else:
                out = model(chunk)
            logits.append(out[:, -1][:, cols].double().cpu())
    finally:
        model.train(was_training)
    return torch.cat(logits), {n: torch.cat(v) for n, v in acts.items()}


def answer_loss(logits: Float[Tensor, "n p"], labels: Int[Tensor, " n"]) -> float:
    return float(F.cross_entropy(logits.double(), labels))


def accuracy(logits: Float[Tensor, "n p"], labels: Int[Tensor, " n"]) -> float:
    return float((logits.argmax(-1) == labels).double().mean())


# --------------------------------------------------------------------------- neurons


def neuron_fourier(acts: Float[Tensor, "pairs d_mlp"], p: int) -> Float[Tensor, "p p d_mlp"]:
    """2D Fourier coefficients of every neuron's activation over (a, b): F A F^T."""
    basis, _ = fourier_basis(p)
    grid = acts.double().reshape(p, p, -1)
    return torch.einsum("ia,abn,jb->ijn", basis, grid, basis)


def neuron_frequency_fractions(coef: Float[Tensor, "p p d_mlp"]) -> Float[Tensor, "n_freq d_mlp"]:
    """Fraction of each neuron's variance (all terms but the constant) explained by frequency
    k: its linear terms (cos/sin of w_k a, of w_k b) and its products (cos w_k a cos w_k b, ...)."""
    p = coef.shape[0]
    energy = coef.pow(2)
    total = energy.sum((0, 1)) - energy[0, 0]  # [d_mlp]
    out = []
    for k in frequencies(p):
        rows = [0, *frequency_rows(p, k)]
        part = energy[rows][:, rows].sum((0, 1)) - energy[0, 0]
        out.append(torch.where(total > 0, part / total.clamp_min(1e-300), torch.zeros_like(total)))
    return torch.stack(out)


def neuron_summary(acts: Float[Tensor, "pairs d_mlp"], p: int, threshold: float = SINGLE_FREQ_THRESHOLD) -> dict:
    """Dominant frequency and its explained fraction per neuron, clusters of single-frequency
    neurons (fraction >= threshold), their share of the layer's activation variance, the
    median share of pairs on which the other live neurons fire, and the mean |coefficient|
    map over neurons."""
    coef = neuron_fourier(acts, p)
    fractions = neuron_frequency_fractions(coef)  # [n_freq d_mlp]
    best, arg = fractions.max(0)
    dominant = arg + 1
    dead = (coef.pow(2).sum((0, 1)) - coef[0, 0].pow(2)) <= 1e-20
    single = (best >= threshold) & ~dead
    clusters: dict[int, list[int]] = {}
    for n in torch.nonzero(single).flatten().tolist():
        clusters.setdefault(int(dominant[n]), []).append(n)
    n_alive = int((~dead).sum())
    variance = acts.double().var(0)  # [d_mlp]
    others = ~single & ~dead
    active = (acts > 0).double().mean(0)  # [d_mlp] share of pairs where the neuron fires
    return {
        "threshold": threshold,
        "dominant_frequency": dominant.tolist(),
        "fraction_explained": best.tolist(),
        "single_frequency": single.tolist(),
        "n_neurons": int(acts.shape[1]),
        "n_dead": int(dead.sum()),
        "n_single_frequency": int(single.sum()),
        "share_single_frequency": float(single.sum()) / max(1, acts.shape[1]),
        "share_single_frequency_alive": float(single.sum()) / max(1, n_alive),
        # how much of the layer's computation the single-frequency neurons carry, and what the
        # others are: a neuron that fires on every pair is linear in its inputs there
        "variance_share_single_frequency": float(variance[single].sum() / variance.sum()) if n_alive else None,
        "others_median_active_share": float(active[others].quantile(0.5)) if others.any() else None,
        "clusters": {k: clusters[k] for k in sorted(clusters)},
        "cluster_sizes": {k: len(clusters[k]) for k in sorted(clusters)},
        "mean_abs_coefficients": coef.abs().mean(-1),  # [p p], for the heatmap
    }


# --------------------------------------------------------------------------- logits


def _sum_grid(logits: Float[Tensor, "pairs p"], p: int) -> Float[Tensor, "p p"]:
    """G[s, c] = sum over pairs with a + b = s (mod p) of logit c."""
    s = grid_labels(p)
    g = torch.zeros(p, p, dtype=torch.float64)
    return g.index_add_(0, s, logits.double())


def logit_fit(logits: Float[Tensor, "pairs p"], p: int, key: list[int]) -> dict:
    """Fit the logits (centred over c) to sum_k alpha_k cos(w_k (a + b - c)).

    The directions cos(w_k(a+b-c)) are orthogonal over the grid for distinct k, so each
    alpha_k is a projection and the fraction of logit variance explained adds up."""
    centred = logits.double() - logits.double().mean(-1, keepdim=True)
    g = _sum_grid(centred, p)
    diff = (torch.arange(p)[:, None] - torch.arange(p)[None, :]).double()  # s - c
    total = float(centred.pow(2).sum())
    coefs, fve = {}, {}
    for k in frequencies(p):
        d = torch.cos(2 * math.pi * k / p * diff)  # [s c]
        # each (s, c) cell holds p pairs, so ||direction||^2 = p * sum d^2
        norm2 = p * float(d.pow(2).sum())
        alpha = float((g * d).sum()) / norm2
        coefs[k] = alpha
        fve[k] = alpha**2 * norm2 / total if total > 0 else 0.0
    return {
        "coefficients": coefs,
        "fve_by_frequency": fve,
        "key_frequencies": list(key),
        "key_coefficients": {k: coefs[k] for k in key},
        "fraction_explained": sum(fve[k] for k in key),
    }


def key_components(logits: Float[Tensor, "pairs p"], p: int, key: list[int]) -> Float[Tensor, "pairs p"]:
    """Projection of every output column (a function of (a, b) over the grid) onto
    cos(w_k (a + b)) and sin(w_k (a + b)) for the key frequencies."""
    s = grid_labels(p).double()
    out = torch.zeros_like(logits, dtype=torch.float64)
    for k in key:
        w = 2 * math.pi * k / p
        for u in (torch.cos(w * s), torch.sin(w * s)):
            norm2 = float(u.pow(2).sum())
            if norm2 < 1e-9:  # sin at the Nyquist frequency vanishes
                continue
            out += u[:, None] * (u @ logits.double())[None, :] / norm2
    return out


def restricted_and_excluded(
    logits: Float[Tensor, "pairs p"], p: int, key: list[int], train_index: Int[Tensor, " n"]
) -> dict:
    """Nanda et al.'s measures, both evaluated on the training pairs as in the paper.

    Restricted loss keeps only the key-frequency components of the logits (per output c, the
    projections on cos(w_k(a+b)) and sin(w_k(a+b))) plus the constant term (the mean of each
    output over the pairs); excluded loss removes the key components. The components are
    fitted over the whole p x p grid, which the 2D Fourier transform needs. Also returned:
    `full_loss_train` (the unablated loss on the same pairs, the yardstick for both),
    `full_loss` and `restricted_loss_all` (every pair)."""
    logits = logits.double()
    labels = grid_labels(p)
    comps = key_components(logits, p, key)
    restricted = logits.mean(0, keepdim=True) + comps
    excluded = logits - comps
    train, train_labels = train_index, labels[train_index]
    return {
        "restricted_loss": answer_loss(restricted[train], train_labels),
        "restricted_accuracy": accuracy(restricted[train], train_labels),
        "excluded_loss": answer_loss(excluded[train], train_labels),
        "excluded_accuracy": accuracy(excluded[train], train_labels),
        "full_loss_train": answer_loss(logits[train], train_labels),
        "restricted_loss_all": answer_loss(restricted, labels),
        "full_loss": answer_loss(logits, labels),
    }


def frequency_ablation(
    logits: Float[Tensor, "pairs p"], p: int, key: list[int], train_index: Int[Tensor, " n"]
) -> list[dict]:
    """Each key frequency's function: the loss and accuracy on the training pairs when only
    its components (cos and sin of w_k (a + b), per output) are removed from the logits, and
    when only it and the constant term are kept. A frequency the circuit relies on alone
    costs loss when removed; one the others can stand in for costs little."""
    logits = logits.double()
    labels = grid_labels(p)[train_index]
    mean = logits.mean(0, keepdim=True)
    out = []
    for k in key:
        comps = key_components(logits, p, [k])
        out.append({
            "frequency": k,
            "loss_without": answer_loss((logits - comps)[train_index], labels),
            "accuracy_without": accuracy((logits - comps)[train_index], labels),
            "loss_alone": answer_loss((mean + comps)[train_index], labels),
            "accuracy_alone": accuracy((mean + comps)[train_index], labels),
        })
    return out


# --------------------------------------------------------------------------- clock vs pizza


def gradient_symmetricity(model, vocab, p: int, n_samples: int = 100, seed: int = 0, n_loops: int | None = None) -> float:
    """Zhong et al.: mean cosine similarity between d logit_c / d E_a and d logit_c / d E_b
    over random triples (a, b, c) (c not required to be the answer). Pizza ~ 1, clock lower."""
    rng = random.Random(seed)
    triples = [(rng.randrange(p), rng.randrange(p), rng.randrange(p)) for _ in range(n_samples)]
    ids = residue_ids(vocab, p)
    eq = vocab.encode("=")[0]
    device = model.W_E.device
    tokens = torch.tensor([[int(ids[a]), int(ids[b]), eq] for a, b, _ in triples], device=device)
    cols = ids[[c for _, _, c in triples]].to(device)
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            inputs = model.embed(tokens).detach().requires_grad_(True)
            state = model.run_loops(inputs, range(n_loops or model.cfg.n_loops), index=model.attention_index(tokens))
            logits = model.unembed(state)[:, -1]
            logits.gather(1, cols[:, None]).sum().backward()
    finally:
        model.train(was_training)
    g = inputs.grad.double()
    return float(F.cosine_similarity(g[:, 0], g[:, 1], dim=-1).mean())


def distance_irrelevance(logits: Float[Tensor, "pairs p"], p: int) -> dict:
    """Zhong et al.: arrange the correct logit by (a + b, a - b); the mean over differences of
    the std over sums, over the overall std. Clock ~ 1 (the logit ignores a - b), pizza lower."""
    labels = grid_labels(p)
    correct = logits.double().gather(1, labels[:, None])[:, 0]
    a = torch.arange(p).repeat_interleave(p)
    b = torch.arange(p).repeat(p)
    table = torch.zeros(p, p, dtype=torch.float64)
    table[(a + b) % p, (a - b) % p] = correct
    total = float(table.std(unbiased=False))
    value = float(table.std(0, unbiased=False).mean()) / total if total > 0 else float("nan")
    return {"distance_irrelevance": value, "correct_logit_table": table}

"""The Fourier basis of Z_p and the statistics built on it: per-frequency norms, key
frequencies, the Gini coefficient, and the base-10 view of digit embeddings.

Basis layout (rows of `fourier_basis(p)`, orthonormal over x = 0..p-1):

    0        constant            1/sqrt(p)
    2k-1     cos_k(x)            sqrt(2/p) cos(w_k x),   w_k = 2 pi k / p,  k = 1..(p-1)//2
    2k       sin_k(x)            sqrt(2/p) sin(w_k x)
    p-1      cos_{p/2}(x)        (-1)^x / sqrt(p)        (even p only: the Nyquist term)
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

# A frequency is "key" when it holds at least this share of the non-constant squared norm
# (uniform spread over the 56 frequencies of p = 113 would give each 1.8%), and at least twice
# the uniform share 1/n_freq (which only matters for small p).
KEY_THRESHOLD = 0.05


def fourier_basis(p: int) -> tuple[Float[Tensor, "p p"], list[str]]:
    """Orthonormal real Fourier basis of Z_p (float64) and a name for each row."""
    if p < 2:
        raise ValueError(f"the Fourier basis needs p >= 2, got {p}")
    x = torch.arange(p, dtype=torch.float64)
    rows, names = [torch.ones(p, dtype=torch.float64)], ["const"]
    for k in range(1, (p - 1) // 2 + 1):
        w = 2 * math.pi * k / p
        rows += [torch.cos(w * x), torch.sin(w * x)]
        names += [f"cos {k}", f"sin {k}"]
    if p % 2 == 0:
        rows.append(torch.cos(math.pi * x))
        names.append(f"cos {p // 2}")
    basis = torch.stack(rows)
    return basis / basis.norm(dim=1, keepdim=True), names


def frequencies(p: int) -> list[int]:
    """The frequencies k = 1 .. p//2 that `frequency_norms` reports."""
    return list(range(1, p // 2 + 1))


def frequency_rows(p: int, k: int) -> list[int]:
    """Rows of the basis that belong to frequency k (cos and sin; cos alone at Nyquist)."""
    if not 1 <= k <= p // 2:
        raise ValueError(f"frequency {k} is outside 1..{p // 2} for p={p}")
    return [2 * k - 1] if 2 * k == p else [2 * k - 1, 2 * k]


def component_norms(x: Float[Tensor, "p ..."]) -> Float[Tensor, " p"]:
    """Norm of each basis component of `x` (its first axis is the residue): ||F x|| per row."""
    p = x.shape[0]
    basis, _ = fourier_basis(p)
    coef = basis @ x.detach().reshape(p, -1).to(torch.float64).cpu()  # [p rest]
    return coef.norm(dim=1)


def frequency_norms(x: Float[Tensor, "p ..."]) -> tuple[Float[Tensor, " n_freq"], float]:
    """Per-frequency norm sqrt(||cos_k part||^2 + ||sin_k part||^2), and the constant's norm."""
    comp = component_norms(x)
    p = x.shape[0]
    norms = torch.stack([comp[frequency_rows(p, k)].pow(2).sum().sqrt() for k in frequencies(p)])
    return norms, float(comp[0])


def frequency_shares(norms: Float[Tensor, " n_freq"]) -> Float[Tensor, " n_freq"]:
    """Share of the non-constant squared norm held by each frequency (sums to 1)."""
    energy = norms.to(torch.float64).pow(2)
    total = energy.sum()
    return energy / total if total > 0 else torch.zeros_like(energy)


def key_frequencies(x_or_norms: Tensor, threshold: float = KEY_THRESHOLD, is_norms: bool = False) -> list[int]:
    """Frequencies whose share of the non-constant squared norm is >= `threshold` (and >= twice
    the uniform share, so that a small p with few frequencies does not call them all key).

    Pass a matrix whose first axis is the residue (W_E rows of the residues), or per-frequency
    norms with `is_norms=True`."""
    norms = x_or_norms if is_norms else frequency_norms(x_or_norms)[0]
    shares = frequency_shares(norms)
    level = max(threshold, 2.0 / max(1, len(shares)))
    return [i + 1 for i in range(len(shares)) if float(shares[i]) >= level]


def gini(values: Tensor) -> float:
    """Gini coefficient of non-negative values: 0 when all are equal, (n-1)/n for one-hot."""
    v = torch.as_tensor(values, dtype=torch.float64).flatten().abs().sort().values
    n, total = v.numel(), float(v.sum())
    if n == 0 or total == 0:
        return 0.0
    index = torch.arange(1, n + 1, dtype=torch.float64)
    return float(((2 * index - n - 1) * v).sum() / (n * total))


# --------------------------------------------------------------------------- base 10


def base10_power(digit_embeddings: Float[Tensor, "10 d_model"]) -> dict:
    """Fourier power of the digit embeddings 0..9 over Z_10: share of the non-constant
    energy at each frequency k = 1..5 (periods 10, 5, 10/3, 2.5, 2), with the periods the
    brief asks about (10, 5, 2 <-> k = 1, 2, 5) singled out."""
    if digit_embeddings.shape[0] != 10:
        raise ValueError(f"expected the 10 digit embeddings, got {digit_embeddings.shape[0]} rows")
    norms, const = frequency_norms(digit_embeddings)
    shares = frequency_shares(norms)
    by_k = {k: float(shares[k - 1]) for k in frequencies(10)}
    periods = {"10": by_k[1], "5": by_k[2], "2": by_k[5]}
    return {
        "frequencies": list(by_k),
        "periods": [10 / k for k in by_k],
        "shares": list(by_k.values()),
        "norms": norms.tolist(),
        "constant_norm": const,
        "period_shares": periods,
        "share_10_5_2": sum(periods.values()),
        "dominant_period": max(periods, key=periods.get),
    }

"""Nanda et al. (2023)'s numbers for their mainline run, quoted beside ours in findings.

"Progress measures for grokking via mechanistic interpretability" (ICLR 2023): a 1-layer
transformer (d_model 128, 4 heads, d_mlp 512, ReLU, no LayerNorm) on (a + b) mod 113, 30% of
the pairs as training data, full-batch AdamW lr 1e-3, weight decay 1, betas (0.9, 0.98), loss
on the answer token over all 114 logits (the residues and '='). Their steps are full-batch epochs, so they compare
with our steps one to one. Which frequencies are key depends on the seed; their number and
the sparsity are what a replication can match.
"""

from __future__ import annotations

PAPER_P = 113

PAPER = {
    "source": "Nanda et al. 2023, mainline run",
    "p": PAPER_P,
    "key_frequencies": [14, 35, 41, 42, 52],
    "n_single_frequency": 433,
    "n_neurons": 512,
    "share_single_frequency": 433 / 512,
    # phase boundaries in steps (full-batch epochs)
    "phases": {"memorisation": [0, 1400], "circuit_formation": [1400, 9400], "cleanup": [9400, 13300]},
}


def applies(p: int | None) -> bool:
    """The paper's numbers are a yardstick only for its modulus (p = 113)."""
    return p == PAPER_P


def phase_ranges_text(phases: dict | None = None) -> str:
    ph = phases or PAPER["phases"]

    def k(v: int) -> str:
        return f"{v / 1000:g}k" if v else "0"

    return ", ".join(f"{name.replace('_', ' ')} {k(a)}-{k(b)}" for name, (a, b) in ph.items())

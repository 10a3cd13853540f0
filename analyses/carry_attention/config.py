"""Every setting of the carry analysis: one config, whose defaults are the report's."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.errors import UserError

from .ablation import KINDS
from .patching import POSITIONS

SECTIONS = ("attention", "ablation", "patching", "probes")


@dataclass(frozen=True)
class CarryAttentionConfig:
    """The settings `carry_attention.run` uses: the defaults (`report()`) are what the report
    runs, so `run(model)` in a notebook computes the report's numbers; `quick()` the tests'.
    `run(model, config=c, n_problems=8)` overrides one field of `c`."""

    # balanced problems for attention statistics and ablation (cost: one pass, plus
    # 2 x loops x layers x heads passes for ablation)
    n_problems: int = 64
    # counterfactual pairs for patching (cost: (1 + loops x layers x (1 + heads)) x positions passes)
    n_pairs: int = 16
    # problems for the carry-in probes (one pass)
    n_probe_problems: int = 128
    # per-head patching multiplies the patching cost by the number of heads
    patch_heads: bool = False
    # depth analysed (None: the trained depth) and operand digits (None: the task's, capped to
    # fit the model's positions)
    n_loops: int | None = None
    max_digits: int | None = None
    # which parts run (of SECTIONS), which ablations (of ablation.KINDS) and which positions are
    # patched (of patching.POSITIONS)
    sections: tuple[str, ...] = SECTIONS
    ablation_kinds: tuple[str, ...] = KINDS
    patch_positions: tuple[str, ...] = POSITIONS
    # probe accuracy at which the carry-in counts as linearly decodable
    probe_threshold: float = 0.9
    # a human-order problem ("1999+1") for the single-problem pattern (None: a seeded cascade)
    example: str | None = None
    seed: int = 0
    batch_size: int = 256
    # torch intra-op threads while running on CPU (restored afterwards): 1 is fastest for the
    # many small forward passes here, by far on a busy machine (a 50x difference measured on
    # 2 shared cores); None keeps the current setting
    threads: int | None = 1

    def __post_init__(self) -> None:
        # lists are accepted from callers; tuples keep the frozen config hashable
        for name in ("sections", "ablation_kinds", "patch_positions"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name, allowed, what in (("sections", SECTIONS, "sections"), ("patch_positions", POSITIONS, "patch positions"),
                                    ("ablation_kinds", KINDS, "ablation kinds")):
            unknown = set(getattr(self, name)) - set(allowed)
            if unknown:
                raise UserError(f"unknown {what} {sorted(unknown)}; choose from {allowed}")

    @classmethod
    def report(cls) -> CarryAttentionConfig:
        """The report's settings (the defaults), named where a caller wants to say so."""
        return cls()

    @classmethod
    def quick(cls) -> CarryAttentionConfig:
        return cls(n_problems=12, n_pairs=4, n_probe_problems=24)

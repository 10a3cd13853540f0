"""The result object of `analyses.carry_attention.run`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from abacus_interp.jsonsafe import json_safe

from . import figures as F
from .findings import findings


@dataclass
class CarryAttentionResult:
    """Every number of one carry-attention analysis; a section not run is None.

    model:     n_loops analysed, n_layers, n_heads, d_model, checkpoint
    settings:  the arguments of `run` (sizes, seed, positions)
    labels:    summary of the balanced problem set (complexity 0..5+, sub-task counts, ...)
    attention: per group (all / no_carry_in / carry_in / cascade): mass [loop layer head
               category]; alignment and carry_source {score [loop layer head], chance, lift, n};
               staircase [loop layer head answer_digit slot]; top_heads
    example:   one problem's full pattern [loop layer head q k] and its tokens
    ablation:  baseline, table (one row per kind x loop x layer x head with deltas), arrays
    patching:  positions, groups {all, direct, cascade} x {input [pos], resid [loop layer pos],
               heads [loop layer head pos], carry_present}, first_loop_carry_present
    probes:    accuracy / shuffled_accuracy / cascade_accuracy [loop layer], input baseline,
               first_decodable
    timings:   seconds per section
    """

    model: dict[str, Any]
    settings: dict[str, Any]
    labels: dict[str, Any]
    attention: dict[str, Any] | None = None
    example: dict[str, Any] | None = None
    ablation: dict[str, Any] | None = None
    patching: dict[str, Any] | None = None
    probes: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: plain lists/dicts, NaN as None."""
        return json_safe({name: getattr(self, name) for name in (
            "model", "settings", "labels", "attention", "example", "ablation", "patching", "probes", "timings")})

    def findings(self) -> list[str]:
        return findings(self.to_dict())

    def figures(self) -> dict[str, Any]:
        """Plotly figures keyed by name (never shown)."""
        out: dict[str, Any] = {}
        n_layers = self.model["n_layers"]
        if self.attention is not None:
            for layer in range(n_layers):
                out[f"staircase_layer{layer}" if n_layers > 1 else "staircase"] = F.staircase_figure(self.attention, layer)
            out["alignment"] = F.alignment_figure(self.attention)
            out["attention_mass"] = F.mass_figure(self.attention)
        if self.example is not None:
            for layer in range(n_layers):
                out[f"example_pattern_layer{layer}" if n_layers > 1 else "example_pattern"] = F.pattern_figure(
                    self.example, layer)
        if self.ablation is not None:
            out["ablation"] = F.ablation_figure(self.ablation)
            out["ablation_subtasks"] = F.ablation_subtask_figure(self.ablation)
        if self.patching is not None:
            out["patching"] = F.patching_figure(self.patching)
            out["carry_presence"] = F.carry_presence_figure(self.patching)
        if self.probes is not None:
            out["probes"] = F.probes_figure(self.probes)
        return out

    def summary(self) -> dict[str, Any]:
        """The headline numbers: best aligned / carry-source heads, most harmful ablations,
        first loop with the carry present (patching) and linearly decodable (probes)."""
        out: dict[str, Any] = {}
        if self.attention is not None:
            out["top_heads"] = self.attention["top_heads"]
        if self.ablation is not None:
            out["baseline"] = self.ablation["baseline"]
            out["most_harmful"] = self.ablation["most_harmful"]
        if self.patching is not None:
            out["carry_present"] = {g: v["carry_present"] for g, v in self.patching["groups"].items()}
        if self.probes is not None:
            out["first_decodable"] = self.probes["first_decodable"]
        return json_safe(out)

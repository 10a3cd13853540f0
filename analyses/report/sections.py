"""The report's sections: one registry of analyses, the sizes each runs at, and how one runs.

`SECTIONS` is every section the report shows, in the page's order: the report's own analyses
(the model card, the evaluation; the ablation and the architecture comparison when given their
directories) around the registered ones of `analyses.registry.ANALYSES`. All follow the same
protocol (`analyses.contract.Analysis`): `build_report` runs them in `dependency_order`, hands
each the results it `requires` or `uses`, and omits one whose `skip_reason` says it does not
apply, or one whose requirement did not run.

Sizes are chosen so the whole report of `checkpoints/small-add` takes well under three
minutes on two CPU cores; `ReportSizes.quick()` is smaller still, for tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from abacus_interp.jsonsafe import json_safe
from analyses.contract import Analysis, Result, RunContext
from analyses.registry import ANALYSES

from .card import ANALYSIS as MODEL_CARD
from .evaluation import ANALYSIS as EVALUATION
from .evaluation import EvaluationSizes, notes_html
from .grids import ABLATION, ARCHITECTURES
from .result import Built

SECTIONS: tuple[Analysis, ...] = (MODEL_CARD, EVALUATION, *ANALYSES, ABLATION, ARCHITECTURES)


class Omitted(Exception):
    """Raised for a section that does not apply to this run; the message is the reason."""


@dataclass
class ReportSizes:
    """Problem counts and loop ranges: keyword arguments of `evaluate`, and one typed config
    per registered analysis (its `Config()`, the report's default sizes)."""

    evaluation: dict[str, Any] = field(default_factory=lambda: dict(EvaluationSizes().settings))
    # the largest loop count in accuracy-vs-loops (None: the model's max_loops)
    max_eval_loops: int | None = None
    analyses: dict[str, Any] = field(default_factory=lambda: {a.key: a.Config() for a in ANALYSES})

    @classmethod
    def quick(cls) -> ReportSizes:
        """Tiny sizes for tests: every section runs, in seconds, on a tiny model."""
        evaluation = EvaluationSizes.quick()
        return cls(evaluation=dict(evaluation.settings), max_eval_loops=evaluation.max_loops,
                   analyses={a.key: a.Config.quick() for a in ANALYSES})

    @classmethod
    def fast(cls) -> ReportSizes:
        """The two slowest analyses at a smaller sample, for a first look (`make demo`,
        `abacus-interp report --fast`); each finding still states its n, and the evaluation,
        whose numbers open the page, keeps its sizes. Measured on demo-add's report (2 cores):
        87 s at the default sizes, the circuit 36 s and the carry wave 29 s of it; with these
        the carry wave took 9 s and the circuit 21 s (its node check, one patched pass per
        node, costs 14 s at any number of pairs: `--skip circuit` leaves it out)."""
        analyses = {a.key: a.Config() for a in ANALYSES}
        smaller = {
            "circuit": dict(n_pairs=32, n_patch_pairs=8, n_held_out=32, edge_effects=False),
            "carry_wave": dict(n_problems=24, length_multiples=(1, 2, 4, 10), path_multiples=(1, 4)),
        }
        for key, fields in smaller.items():
            analyses[key] = dataclasses.replace(analyses[key], **fields)
        return cls(analyses=analyses)

    def config_for(self, analysis: Analysis) -> Any:
        """The config `analysis` runs with: a registered analysis's from `analyses`, the
        evaluation's from `evaluation` and `max_eval_loops` (the names report.json records),
        and the default of the others, which have no sizes."""
        if analysis.key in self.analyses:
            return self.analyses[analysis.key]
        if analysis.key == EVALUATION.key:
            return EvaluationSizes(settings=dict(self.evaluation), max_loops=self.max_eval_loops)
        return analysis.Config()

    def to_dict(self) -> dict[str, Any]:
        return {"evaluation": dict(self.evaluation), "max_eval_loops": self.max_eval_loops,
                **{key: dataclasses.asdict(config) for key, config in self.analyses.items()}}


@dataclass(frozen=True)
class Context:
    """What the report was asked for: the run as every analysis sees it (the frozen
    `RunContext`, the report's options included) and the sizes each analysis runs at."""

    run: RunContext
    sizes: ReportSizes


@dataclass(frozen=True)
class Section:
    """One analysis as a report section: `build` runs it for a context and returns the result
    with its JSON-safe data and extra HTML (the report's own tables, or the caveats a result
    carries as `notes`)."""

    analysis: Analysis

    @property
    def key(self) -> str:
        return self.analysis.key

    @property
    def title(self) -> str:
        return self.analysis.title

    def build(self, ctx: Context, needs: Mapping[str, Result] | None = None) -> tuple[Result, dict[str, Any], str]:
        """Raises Omitted with the analysis's `skip_reason` when it does not apply; `needs`
        holds the results of the analyses it requires and uses (see `analyses.contract`)."""
        needs = dict(needs or {})
        reason = self.analysis.skip_reason(ctx.run)
        if reason is not None:
            raise Omitted(reason)
        missing = [k for k in self.analysis.requires if k not in needs]
        if missing:  # build_report omits such a section first, saying why; this guards direct calls
            raise Omitted(f"needs the result of {', '.join(missing)}, which did not run")
        result = self.analysis.run(ctx.run, ctx.sizes.config_for(self.analysis), needs)
        data = json_safe(result.to_dict())
        if isinstance(result, Built):
            return result, data, result.tables
        # caveats, for the results that carry them (checkpoint_compare, embedding_evolution)
        return result, data, notes_html([n for n in getattr(result, "notes", ()) if isinstance(n, str)])


def analysis_section(analysis: Analysis) -> Section:
    """`analysis` as the report builds it: `analysis_section(a).build(ctx)`."""
    return Section(analysis)

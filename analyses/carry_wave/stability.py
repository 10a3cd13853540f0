"""Path independence at every operand length (Anil et al. 2022): does the loop of a length
extrapolator reach the same answer from any start state, beyond the trained length too?"""

from __future__ import annotations

from dataclasses import dataclass

from analyses.fixed_point.path_independence import path_independence


@dataclass(frozen=True)
class StartAgreement:
    start: str  # "noise", "noise_x4" (four times the state's norm) or "other" (another problem's end state)
    same_state: float  # share of problems whose end state has cosine >= `threshold` to the reference's
    same_answer: float  # share whose read-out answer equals the reference's
    exact_match: float


@dataclass(frozen=True)
class PathIndependenceAtLength:
    digits: int
    n_problems: int
    horizon: int
    threshold: float  # the cosine at which two end states count as the same
    reference_exact_match: float  # from the model's own (zero) start
    starts: tuple[StartAgreement, ...]

    def worst_same_answer(self) -> float:
        return min(s.same_answer for s in self.starts)


def path_independence_by_length(model, samples: dict[int, list], horizon: int, seed: int) -> tuple[PathIndependenceAtLength, ...]:
    """`samples` maps an operand length to its problems (the caller names the sampler)."""
    out = []
    for digits, examples in samples.items():
        d = path_independence(model, examples, horizon, seed=seed, batch_size=64)
        out.append(PathIndependenceAtLength(
            digits=digits, n_problems=len(examples), horizon=horizon, threshold=d["threshold"],
            reference_exact_match=d["reference_exact_match"],
            starts=tuple(StartAgreement(start=name, same_state=s["same_state_fraction"],
                                        same_answer=s["same_answer_fraction"], exact_match=s["exact_match"])
                         for name, s in d["starts"].items())))
    return tuple(out)

"""Circuits across loops: attribution patching (checked against activation patching), edge
attribution between loop iterations, and the smallest circuit that keeps the behaviour,
checked by real ablation on held-out problems.

    from analyses import circuit
    result = circuit.run("checkpoints/extrap-add")          # a CircuitResult
    result.circuit(); result.figures(); result.findings()

Node-level attribution of any family is the library's: `abacus_interp.core.attribution`.
"""

from .analysis import circuit_reason, run
from .config import CircuitConfig
from .graph import LoopGraph, Node
from .result import CircuitResult, EdgeRecord, NodeCheck

__all__ = ["CircuitConfig", "CircuitResult", "EdgeRecord", "LoopGraph", "Node", "NodeCheck", "circuit_reason", "run"]

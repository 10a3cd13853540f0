"""Multiplication by looping: how a looped N x k multiplier with multiplier heads reads the
multiplier and moves its carries, and how far past its trained length it stays right.

    from analyses import multiplication
    result = multiplication.run(model, task)      # a MultiplicationResult
    result.figures(); result.findings()
"""

from .analysis import run
from .config import MultiplicationConfig
from .result import MultiplicationResult

__all__ = ["MultiplicationConfig", "MultiplicationResult", "run"]

"""Evaluation: exact-match grids, accuracy vs loops, edge cases, carry complexity."""

"""Analyses of looped arithmetic transformers; each module has run(...) -> result."""

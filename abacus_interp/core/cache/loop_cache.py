"""`LoopActivationCache`: what `LoopedTransformer.run_with_cache` returns.

The methods live in the layers it is built from (see `abacus_interp.core.cache`); this module
only puts them together under the public name.
"""

from __future__ import annotations

from .components import HeadsAndNeurons


class LoopActivationCache(HeadsAndNeurons):
    """TransformerLens' ActivationCache for a `LoopedTransformer` run; see the docstring of
    `abacus_interp.core.cache`.

    `n_loops` is how many loops the run used (`run_with_cache` passes it; otherwise it is read
    off the cached names)."""

    def __repr__(self) -> str:
        return f"LoopActivationCache({self.n_loops} loops, {len(self.cache_dict)} activations)"

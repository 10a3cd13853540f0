"""The architecture comparison's presentation: what comparison.json says in sentences and its
figures. The comparison itself (specs, cells, training, evaluation, learning curves) is the
library's `abacus_interp.experiments.compare`; `abacus-interp compare` hands `findings` to its
`run_comparison`, and the report's architectures section draws the figures.

    summary.py   accuracy and loss, equal parameters, length bands; accuracy figures
    curves.py    learning curves against training FLOPs: equal compute, compute to reach, still rising
    seeds.py     cells trained at more than one seed
"""

from .summary import findings

__all__ = ["findings"]

"""The architecture comparison's presentation: what comparison.json says in sentences and its
figures. The comparison itself (specs, cells, training, evaluation, learning curves) is the
experiment driver `abacus_lab.experiments.compare`, which writes these findings into
comparison.json; the report's architectures section recomputes them from the cells and draws
the figures.

    common.py    family labels and colours, a cell's label, the significance rule (shared by the rest)
    summary.py   accuracy and loss, equal parameters, length bands; accuracy figures; every finding
    curves.py    learning curves against training FLOPs: equal compute, compute to reach, still rising
    seeds.py     cells trained at more than one seed
    inside.py    what the report's sections found inside the winners (the rows, in sentences)
"""

from .summary import findings

__all__ = ["findings"]

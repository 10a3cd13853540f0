"""Experiment drivers: one real training run per cell, each evaluated and stored beside its run,
resumable (a finished directory is only read).

    ablation         one factor of a recipe at a time; exact match against operand length
    compare          one run per model family and size; accuracy against parameters, length and compute
    compare_cells    where a comparison's evaluated cells are stored, and reading their evaluations
    compare_eval     how a comparison cell is evaluated (held-out problems, by length, carry-balanced)
    compare_inside   which cells are a comparison's winners, and what was found inside them

They stand above the report: their findings (sentences) and figures are the report's
(`analyses.report.ablation`, `analyses.report.architectures`), which these drivers call, and
the report shows a finished grid again from its JSON (`--ablation`, `--architectures`). A
cell's training compute and learning curve are the library's (`abacus_interp.training.compute`).
"""

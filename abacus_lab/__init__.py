"""abacus_lab: the top of the house. What trains and reads many runs (`experiments/`: the
ablation and the architecture comparison, which call the report's findings writers and sections)
and the `abacus-interp` command line (`cli/`). It stands on `analyses` (and its report) and on
the library `abacus_interp`; nothing below imports it."""

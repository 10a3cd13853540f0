"""`python -m abacus_lab.cli ARGS`: the `abacus-interp` command, as torchrun starts each rank
(`torchrun --nproc_per_node=N -m abacus_lab.cli train ...`)."""

import os
import sys

from abacus_interp.training.worker import exit_rank

from . import main

status = main()
if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # a rank of a multi-process training
    exit_rank(status)
sys.exit(status)

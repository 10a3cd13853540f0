"""One process of a training: what `abacus-interp train` runs in its own process, and what
each rank that `launch` starts runs (`python -m abacus_interp.training.worker RUN_DIR
CONFIG_JSON`).

The rank receives the run's whole config as JSON, already resolved from the preset and
every `--set` edit by the command that launched it, so the edits are parsed once and the
library starts no command line. A rank is a process entry point like a command: it prints
its outcome (one rank of several: rank 0), an expected error on one line, and ends with an
exit status the launcher passes on.
"""

from __future__ import annotations

import json
import logging
import os
import sys

from ..errors import UserError, one_line_error
from .config import RunConfig
from .loop import TrainingInterrupted, train
from .run_state import TrainingDiverged

INTERRUPTED_STATUS = 130  # as a shell reports a command stopped by Ctrl-C
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"  # the CLI's too


def train_and_print_outcome(cfg: RunConfig, run_dir) -> int:
    """Train (or resume) `cfg` into `run_dir` in this process and print the outcome; returns
    the exit status (0 done, 130 interrupted and saved, 1 diverged). A UserError propagates
    to the caller, which says it once (a non-lead rank returns 2 silently)."""
    lead = os.environ.get("RANK", "0") == "0"  # under several processes, one reports
    try:
        result = train(cfg, run_dir)
    except TrainingInterrupted as e:
        if lead:
            print(f"interrupted: {e}")
        return INTERRUPTED_STATUS
    except TrainingDiverged as e:
        if lead:
            print(f"training diverged: {e}")
        return 1
    except UserError:
        if not lead:
            return 2
        raise
    if result.is_writer:
        metrics = {k: round(v, 4) if isinstance(v, float) else v for k, v in result.last_metrics.items()}
        print(f"trained {run_dir} to step {result.final_step}: {json.dumps(metrics)}")
    return 0


def exit_rank(code: int) -> None:
    """Leave a training rank without the interpreter's and the C++ runtime's teardown.

    The process group is already destroyed (`training.distributed.teardown`) and every file
    written atomically; what is left at exit is destructors, and in a gloo rank one of them
    aborts now and then ("terminate called without an active exception", exit -6): 2 of 30
    torchrun runs of `benchmarks/stress_training.py processes` on a busy machine, after the
    rank had trained and saved. So a rank flushes its output and ends with its exit status
    at once, as torch's own multiprocessing workers do."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    run_dir, config_json = argv
    try:
        return train_and_print_outcome(RunConfig.from_dict(json.loads(config_json)), run_dir)
    except (UserError, OSError) as e:  # anything else is a bug: its traceback shows where
        print(one_line_error(e), file=sys.stderr)
        return 2


if __name__ == "__main__":
    exit_rank(main(sys.argv[1:]))

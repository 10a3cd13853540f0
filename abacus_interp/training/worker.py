"""One process of a training: what `abacus-interp train` runs in its own process, and what
each rank that `launch` starts runs (`python -m abacus_interp.training.worker RUN_DIR
CONFIG_JSON`).

The rank receives the run's whole config as JSON, already resolved from the preset and
every `--set` edit by the command that launched it, so the edits are parsed once and the
library starts no command line. A rank says its outcome (one rank of several: rank 0) and an
expected error on one line, through a logger that writes bare lines as a command would, and
ends with an exit status the launcher passes on. `train_outcome` is the part the CLI shares.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass

from ..errors import UserError, one_line_error
from .config import RunConfig
from .loop import TrainingInterrupted, train
from .run_state import TrainingDiverged

INTERRUPTED_STATUS = 130  # as a shell reports a command stopped by Ctrl-C
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"  # the CLI's too


@dataclass(frozen=True)
class TrainOutcome:
    """How a training process ended, for its entry point to say and exit with."""

    status: int  # the exit status: 0 done, 130 interrupted and saved, 1 diverged, 2 a user error
    message: str | None  # the one line to show; None in a rank other than the lead, which stays quiet


def train_outcome(cfg: RunConfig, run_dir) -> TrainOutcome:
    """Train (or resume) `cfg` into `run_dir` in this process. A UserError propagates in the
    lead process, whose entry point says it once; another rank returns status 2 quietly."""
    lead = os.environ.get("RANK", "0") == "0"  # under several processes, one reports

    def said(status: int, message: str) -> TrainOutcome:
        return TrainOutcome(status, message if lead else None)

    try:
        result = train(cfg, run_dir)
    except TrainingInterrupted as e:
        return said(INTERRUPTED_STATUS, f"interrupted: {e}")
    except TrainingDiverged as e:
        return said(1, f"training diverged: {e}")
    except UserError:
        if not lead:
            return TrainOutcome(2, None)
        raise
    metrics = {k: round(v, 4) if isinstance(v, float) else v for k, v in result.last_metrics.items()}
    done = f"trained {run_dir} to step {result.final_step}: {json.dumps(metrics)}"
    return TrainOutcome(0, done if result.is_writer else None)


def _rank_voice() -> logging.Logger:
    """The rank's own lines, bare as a command writes them: its outcome on stdout, an error
    on stderr (the library's other log records keep LOG_FORMAT)."""
    voice = logging.getLogger(f"{__name__}.rank")
    voice.propagate = False
    voice.setLevel(logging.INFO)
    voice.handlers.clear()  # one entry point per process; a test may call main again
    out, err = logging.StreamHandler(sys.stdout), logging.StreamHandler(sys.stderr)
    out.addFilter(lambda record: record.levelno < logging.ERROR)
    err.setLevel(logging.ERROR)
    for handler in (out, err):
        handler.setFormatter(logging.Formatter("%(message)s"))
        voice.addHandler(handler)
    return voice


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
    voice = _rank_voice()
    run_dir, config_json = argv
    try:
        outcome = train_outcome(RunConfig.from_dict(json.loads(config_json)), run_dir)
    except (UserError, OSError) as e:  # anything else is a bug: its traceback shows where
        voice.error(one_line_error(e))
        return 2
    if outcome.message is not None:
        voice.info(outcome.message)
    return outcome.status


if __name__ == "__main__":
    exit_rank(main(sys.argv[1:]))

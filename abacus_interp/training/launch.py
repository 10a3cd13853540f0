"""Start a training run in several processes on this machine (`train.processes`), the way
`torchrun --standalone` would, without the user running torchrun: one process per rank with
the torch.distributed environment set, signals passed on (every rank saves and stops after the
same step), and the first failure's exit status returned. If one rank fails, the others get a
grace period to notice, then are stopped.

The rendezvous store lives here, in the launcher, as torchrun's agent hosts it: with the
default env:// rendezvous rank 0 hosts the TCPStore server inside its own process, so when
rank 0 is done first and exits, a rank still tearing its process group down loses the store
under its feet, and the process could abort at exit ("terminate called without an active
exception", about 1 run in 10 of the test suite's two-process training; torchrun, whose
ranks are all clients, never did). Here every rank is a client of a store that outlives them
all, on a port the operating system picks (no window between finding a free port and binding it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from .config import RunConfig, TrainConfig
from .distributed import pick_device

# A rank whose peer died learns it at its next collective (gloo closes the connection), which
# is at most one step away; after this long it is stopped.
GRACE_SECONDS = 30.0


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def processes_to_start(cfg: TrainConfig) -> int:
    """How many processes `abacus-interp train` starts for `cfg`: `train.processes`, at most
    one per core on the CPU (one per GPU on CUDA), and 1 inside a process a launcher
    (torchrun, or this module) already started."""
    if "WORLD_SIZE" in os.environ:
        return 1
    import torch

    device = pick_device(cfg.device, 0)
    limit = torch.cuda.device_count() if device.type == "cuda" else available_cores()
    return max(1, min(cfg.processes, limit))


def launch(cfg: RunConfig, run_dir, processes: int) -> int:
    """Train `cfg` into `run_dir` in `processes` ranks (`training.worker`); returns 0, or the
    exit status of the first rank that failed (rank 0's when several did)."""
    from torch.distributed import TCPStore

    # port 0: the OS picks a free one; held until every rank has exited
    store = TCPStore("127.0.0.1", 0, world_size=processes, is_master=True, wait_for_workers=False)
    threads = max(1, available_cores() // processes)  # one core each: threads would fight over them
    ranks = []
    for rank in range(processes):
        env = {
            **os.environ,
            "RANK": str(rank), "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(processes), "LOCAL_WORLD_SIZE": str(processes),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(store.port), "TORCHELASTIC_USE_AGENT_STORE": "True",
            "OMP_NUM_THREADS": str(threads),
        }
        worker = [sys.executable, "-m", "abacus_interp.training.worker", str(run_dir), json.dumps(cfg.to_dict())]
        ranks.append(subprocess.Popen(worker, env=env))

    def pass_on(signum, frame):  # Ctrl-C reaches the ranks from the terminal too; twice is harmless
        for process in ranks:
            if process.poll() is None:
                process.send_signal(signum)

    previous = {s: signal.signal(s, pass_on) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _wait(ranks)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        del store  # every rank has exited: nobody reads the store any more


def _wait(ranks: list[subprocess.Popen]) -> int:
    failed_at = None
    while any(process.poll() is None for process in ranks):
        if failed_at is None and any(process.returncode for process in ranks):
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > GRACE_SECONDS:
            for process in ranks:
                if process.poll() is None:
                    process.kill()
        time.sleep(0.1)
    codes = [process.returncode for process in ranks]
    return next((code for code in codes if code), 0)


def train_run(cfg: RunConfig, run_dir, progress: bool = True) -> None:
    """Train (or resume) the run `cfg` into `run_dir` as `abacus-interp train` does: in
    `train.processes` processes (started here), or in this process when that is one. For
    commands that train many runs (ablate, compare)."""
    from .loop import train

    processes = processes_to_start(cfg.train)
    if processes == 1:
        train(cfg, run_dir, progress=progress)
        return
    status = launch(cfg, run_dir, processes)
    if status:
        raise RuntimeError(f"training {run_dir} failed (exit status {status}); run the same command again to resume")

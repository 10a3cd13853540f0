"""Stress the training command: repeated multi-process runs, random kills, same-seed reruns.

    python benchmarks/stress_training.py processes --runs 50                  # train.processes=2
    python benchmarks/stress_training.py processes --runs 50 --launcher torchrun
    python benchmarks/stress_training.py kill --kills 20                      # SIGKILL, resume, compare
    python benchmarks/stress_training.py reproduce --preset extrap-add --steps 300
    python benchmarks/stress_training.py reproduce --preset plain-add --steps 300 --processes 2

Every run is a real `abacus-interp train` in subprocesses, so each mode tests what a user
runs. `processes` counts the runs that did not exit 0 (and names the first lines of their
error output); `kill` trains once without interruption, then again while killing the whole
process group with SIGKILL at random moments (during steps, evaluations and checkpoint
writes alike) and resuming after each kill, and compares every tensor of the final
checkpoint and of the resume state; `reproduce` trains twice with the same seed at the
default thread count and compares every tensor of every checkpoint. Exit status 1 when
anything failed or differed.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from abacus_interp import checkpoints as ckpt

REPO = Path(__file__).resolve().parents[1]
# small and quick, but with evaluations and checkpoints every few steps, so that a kill lands
# in every phase of the loop
QUICK = [
    "model.d_model=32", "model.d_head=8", "model.d_mlp=128", "task.max_digits=3", "model.max_seq_len=24",
    "train.batch_size=16", "train.eval_every=10", "train.eval_problems=32", "train.checkpoint_every=10",
    "train.dense_until=4", "train.dense_checkpoints=3", "train.log_every=1", "train.warmup_steps=3",
]


def _sets(edits: list[str]) -> list[str]:
    return [arg for edit in edits for arg in ("--set", edit)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train_command(out: Path, preset: str, edits: list[str], launcher: str = "train") -> list[str]:
    cli = ["-m", "abacus_lab.cli", "train", "--preset", preset, *_sets(edits), "--out", str(out)]
    if launcher == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--nnodes=1",
                f"--master_port={_free_port()}", *cli]
    return [sys.executable, *cli]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def _tensors_differing(a: Path, b: Path) -> list[str]:
    ta, tb = ckpt.load_tensors(a), ckpt.load_tensors(b)
    if ta.keys() != tb.keys():
        return sorted(ta.keys() ^ tb.keys())
    return [name for name in ta if not torch.equal(ta[name], tb[name])]


def stress_processes(runs: int, launcher: str, steps: int, errors_to: Path | None = None) -> int:
    failures = []
    edits = [*QUICK, f"train.steps={steps}", "train.processes=2"]
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            out = Path(tmp) / f"run{i}"
            env = _env(OMP_NUM_THREADS="1") if launcher == "torchrun" else _env()
            proc = subprocess.run(_train_command(out, "plain-add", edits, launcher), cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=600)
            ok = proc.returncode == 0 and ckpt.step_path(out, steps).exists()
            if not ok:
                lines = [line for line in proc.stderr.splitlines() if line.strip()]
                # the C++ runtime's own words first ("terminate called ..."), then the last lines
                cause = [line for line in lines if "terminate called" in line or "what():" in line]
                failures.append((i, proc.returncode, cause + lines[-3:]))
                if errors_to is not None:
                    errors_to.mkdir(parents=True, exist_ok=True)
                    (errors_to / f"run{i + 1}.stderr").write_text(proc.stderr)
            print(f"run {i + 1:3d}/{runs}: exit {proc.returncode}{'' if ok else '  FAILED'}", flush=True)
    print(f"\n{launcher}, 2 processes, {steps} steps each: {len(failures)} of {runs} runs failed")
    for i, code, tail in failures[:5]:
        print(f"  run {i + 1}: exit {code}: " + " | ".join(tail))
    return 1 if failures else 0


def stress_kills(kills: int, steps: int, processes: int, seed: int) -> int:
    rng = random.Random(seed)
    edits = [*QUICK, f"train.steps={steps}", f"train.processes={processes}"]
    with tempfile.TemporaryDirectory() as tmp:
        reference, killed = Path(tmp) / "reference", Path(tmp) / "killed"
        started = time.monotonic()
        subprocess.run(_train_command(reference, "plain-add", edits), cwd=REPO, env=_env(), check=True,
                       capture_output=True)
        full_time = time.monotonic() - started
        done, attempts = 0, 0
        while done < kills:
            attempts += 1
            proc = subprocess.Popen(_train_command(killed, "plain-add", edits), cwd=REPO, env=_env(),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
            # anywhere in a run's life: start-up, steps, evaluations, checkpoint writes
            time.sleep(rng.uniform(0.5, full_time))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the launcher and its ranks alike
                done += 1
            proc.wait()
            if ckpt.step_path(killed, steps).exists():  # finished before the kill: start over
                for path in sorted(killed.rglob("*"), reverse=True):
                    path.unlink() if path.is_file() else path.rmdir()
                killed.rmdir()
            print(f"kill {done}/{kills} (attempt {attempts})", flush=True)
        proc = subprocess.run(_train_command(killed, "plain-add", edits), cwd=REPO, env=_env(),
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"the final resume failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
            return 1
        differing = _tensors_differing(ckpt.step_path(reference, steps), ckpt.step_path(killed, steps))
        resume_differing = _tensors_differing(reference / "resume" / "state.safetensors",
                                              killed / "resume" / "state.safetensors")
    print(f"\n{kills} SIGKILLs at random moments of a {steps}-step run ({processes} process(es)), resumed "
          f"after each: final weights {'identical' if not differing else 'DIFFER: ' + ', '.join(differing)}, "
          f"optimizer state {'identical' if not resume_differing else 'DIFFERS'}")
    return 1 if differing or resume_differing else 0


def reproduce(preset: str, steps: int, processes: int) -> int:
    edits = [f"train.steps={steps}", f"train.processes={processes}"]
    with tempfile.TemporaryDirectory() as tmp:
        runs = [Path(tmp) / "first", Path(tmp) / "second"]
        for run in runs:
            started = time.monotonic()
            subprocess.run(_train_command(run, preset, edits), cwd=REPO, env=_env(), check=True, capture_output=True)
            print(f"{run.name}: {time.monotonic() - started:.0f} s", flush=True)
        first, second = (ckpt.list_checkpoints(run) for run in runs)
        if [s for s, _ in first] != [s for s, _ in second]:
            print("the two runs wrote different checkpoint steps")
            return 1
        differing = {s: _tensors_differing(a, b) for (s, a), (_, b) in zip(first, second, strict=True)}
        differing = {s: names for s, names in differing.items() if names}
    threads = os.environ.get("OMP_NUM_THREADS", f"default ({torch.get_num_threads()})")
    print(f"\n{preset}, {steps} steps, {processes} process(es), OMP_NUM_THREADS {threads}: "
          f"{len(first)} checkpoints, " + ("every tensor identical" if not differing else
                                           f"{len(differing)} differ, first at step {min(differing)}: "
                                           + ", ".join(differing[min(differing)])))
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    p = modes.add_parser("processes", help="repeated two-process trainings; count failures")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--launcher", choices=["train", "torchrun"], default="train")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--errors-to", type=Path, help="write the whole error output of each failed run here")
    p = modes.add_parser("kill", help="SIGKILL at random moments, resume, compare with an uninterrupted run")
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p = modes.add_parser("reproduce", help="two trainings with the same seed; compare every tensor")
    p.add_argument("--preset", default="plain-add")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--processes", type=int, default=1)
    args = parser.parse_args()
    if args.mode == "processes":
        return stress_processes(args.runs, args.launcher, args.steps, args.errors_to)
    if args.mode == "kill":
        return stress_kills(args.kills, args.steps, args.processes, args.seed)
    return reproduce(args.preset, args.steps, args.processes)


if __name__ == "__main__":
    sys.exit(main())

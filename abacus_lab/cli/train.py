"""`abacus-interp train`: a preset, edited by --set, trained (or resumed) into a run directory,
in one process or in `train.processes` ranks this command starts."""

from __future__ import annotations

from abacus_interp.errors import UserError, check_output_dir

from .args import WholeWordsHelp


def cmd_train(args) -> int:
    from abacus_interp.training import apply_overrides, get_preset
    from abacus_interp.training.launch import launch, processes_to_start
    from abacus_interp.training.worker import train_outcome

    out = check_output_dir(args.out)
    if (out / "resume" / "state.json").exists() and args.preset is None:
        from abacus_interp.checkpoints import read_run_config
        from abacus_interp.training.config import RunConfig

        cfg = RunConfig.from_dict(read_run_config(out))
    elif args.preset is None:
        raise UserError("train needs --preset NAME for a new run (or --out pointing at a run to resume)")
    else:
        cfg = get_preset(args.preset)
    cfg = apply_overrides(cfg, args.set or [])
    processes = processes_to_start(cfg.train)
    if processes > 1:
        print(f"training in {processes} processes, one per core (train.processes={cfg.train.processes})")
        return launch(cfg, out, processes)
    outcome = train_outcome(cfg, out)
    if outcome.message is not None:  # under torchrun, one rank says it
        print(outcome.message)
    return outcome.status


def add_commands(sub) -> None:
    from abacus_interp.training.presets import PRESETS

    p = sub.add_parser("train", help="train a preset into a run directory (resumes if it has resume/)",
                       formatter_class=WholeWordsHelp)
    p.add_argument("--preset", help=", ".join(PRESETS))
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field, e.g. train.lr=3e-4")
    p.add_argument("--out", required=True, help="run directory")
    p.set_defaults(func=cmd_train)

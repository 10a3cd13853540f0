"""Run configuration: task + model + training, stored as RUN/config.json.

`--set key=value` on the command line edits it: `train.lr=3e-4`, `model.d_model=64`,
`task.max_digits=8`, or an unqualified `lr=3e-4` when the name is unique across sections.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from ..config import ModelConfig
from ..tasks import get_task

SCHEDULES = ("cosine", "linear", "constant")
PROGRESSIVE = ("none", "mcleish", "mix")
LOSS_POSITIONS = ("answer", "all")
LOSS_DTYPES = ("float32", "float64")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 2000
    # None: full batch, the whole training split every step (grokking).
    batch_size: int | None = 128
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    warmup_steps: int = 100
    schedule: str = "cosine"
    # the cosine/linear schedule decays to lr * min_lr_ratio
    min_lr_ratio: float = 0.1
    # None: no clipping. McLeish et al. clip at 0.5 for stability of deep loops.
    grad_clip: float | None = 1.0
    # "answer": loss on answer tokens (and EOS) only, the default for every task.
    loss_positions: str = "answer"
    # "mcleish": (1-alpha)*full-depth loss + alpha*loss after n loops without gradient and k
    # with (McLeish et al.), which teaches the loop to improve any state, not only the one
    # it sees at a fixed depth; "mix": 0.5*(full + a random depth); "none".
    progressive: str = "none"
    progressive_alpha: float = 0.5
    loss_dtype: str = "float32"
    seed: int = 0
    log_every: int = 10
    eval_every: int = 100
    eval_problems: int = 256
    # Checkpoints: `dense_checkpoints` log-spaced steps within the first `dense_until` steps
    # (the fast early phase evolution analyses need), then one every `checkpoint_every`.
    dense_checkpoints: int = 10
    dense_until: int | None = None
    checkpoint_every: int = 500
    device: str = "auto"
    # bf16 autocast on CUDA (ignored on CPU).
    bf16: bool = True

    def __post_init__(self):
        if isinstance(self.betas, list):
            object.__setattr__(self, "betas", tuple(self.betas))
        for name, value, allowed in [
            ("schedule", self.schedule, SCHEDULES),
            ("progressive", self.progressive, PROGRESSIVE),
            ("loss_positions", self.loss_positions, LOSS_POSITIONS),
            ("loss_dtype", self.loss_dtype, LOSS_DTYPES),
            ("device", self.device, DEVICES),
        ]:
            if value not in allowed:
                raise ValueError(f"train.{name}={value!r}; choose one of {allowed}")
        if self.steps < 1 or self.lr <= 0:
            raise ValueError("train.steps must be >= 1 and train.lr > 0")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("train.batch_size must be >= 1, or null for full batch")
        if not 0 <= self.progressive_alpha <= 1:
            raise ValueError("train.progressive_alpha must be in [0, 1]")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ValueError("train.grad_clip must be > 0, or null for no clipping")
        for name in ("log_every", "eval_every", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"train.{name} must be >= 1")


@dataclass(frozen=True)
class RunConfig:
    task: str
    model: ModelConfig
    train: TrainConfig
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    preset: str | None = None

    def make_task(self):
        return get_task(self.task, **self.task_kwargs)

    def to_dict(self) -> dict:
        return {
            "preset": self.preset,
            "task": {"name": self.task, **self.task_kwargs},
            "model": self.model.to_dict(),
            "train": dataclasses.asdict(self.train),
        }

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        task = dict(d["task"])
        name = task.pop("name")
        train_fields = {f.name for f in dataclasses.fields(TrainConfig)}
        unknown = set(d["train"]) - train_fields
        if unknown:
            raise ValueError(f"unknown train fields {sorted(unknown)}; known: {sorted(train_fields)}")
        return cls(
            task=name,
            task_kwargs=task,
            model=ModelConfig.from_dict(d["model"]),
            train=TrainConfig(**d["train"]),
            preset=d.get("preset"),
        )


def _parse_value(text: str) -> Any:
    """JSON where possible (numbers, true/false, null, lists), else the raw string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def apply_overrides(cfg: RunConfig, assignments: list[str]) -> RunConfig:
    """Apply `key=value` edits, validated by rebuilding every section. Model fields derived
    from others (d_head, d_mlp, max_loops) are derived again unless set, and the model's
    vocabulary always follows the (possibly edited) task."""
    d = cfg.to_dict()
    sections = {"task": d["task"], "model": d["model"], "train": d["train"]}
    model_changes: dict[str, Any] = {}
    for assignment in assignments:
        if "=" not in assignment:
            raise ValueError(f"--set expects key=value, got {assignment!r}")
        key, raw = assignment.split("=", 1)
        key = key.strip()
        if "." in key:
            section, name = key.split(".", 1)
            if section not in sections:
                raise ValueError(f"--set {key}: section must be one of {list(sections)}")
            if name not in sections[section] and section != "task":
                raise ValueError(
                    f"--set {key}: {section} has no field {name!r}; fields: {', '.join(sorted(sections[section]))}"
                )
        else:
            owners = [s for s, fields in sections.items() if key in fields and key != "name"]
            if len(owners) != 1:
                where = "no section" if not owners else f"several sections ({', '.join(owners)})"
                raise ValueError(
                    f"--set {key}: found in {where}; write it as section.{key} "
                    f"(sections: task, model, train; e.g. train.lr=3e-4)"
                )
            section, name = owners[0], key
        if section == "model" and name == "vocab":
            raise ValueError("--set model.vocab: the vocabulary comes from the task; change the task instead")
        value = _parse_value(raw)
        sections[section][name] = value
        if section == "model":
            model_changes[name] = value
    try:
        task_kwargs = {k: v for k, v in sections["task"].items() if k != "name"}
        task = get_task(sections["task"]["name"], **task_kwargs)
        model = cfg.model.replace(**model_changes, vocab=task.vocab.to_dict())
        return RunConfig(
            task=sections["task"]["name"],
            task_kwargs=task_kwargs,
            model=model,
            train=TrainConfig(**sections["train"]),
            preset=cfg.preset,
        )
    except (TypeError, ValueError) as e:
        raise ValueError(f"invalid --set: {e}") from e

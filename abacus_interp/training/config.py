"""Run configuration: task + model + training, stored as RUN/config.json.

`--set key=value` on the command line edits it (see `overrides.apply_overrides`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..core.config import ModelConfig
from ..core.field_types import check_field_types
from ..errors import UserError
from ..tasks import get_task
from ..tasks.base import Task
from .decay_rules import WEIGHT_DECAY_RULES

SCHEDULES = ("cosine", "linear", "constant")
PROGRESSIVE = ("none", "mcleish", "mix")
LOSS_POSITIONS = ("answer", "answer_tokens", "all")
READOUTS = ("all", "answer_symbols", "symbols")
LOSS_DTYPES = ("float32", "float64")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 2000
    # None: full batch, the whole training split every step (grokking).
    batch_size: int | None = 128
    lr: float = 1e-3
    weight_decay: float = 0.01
    # Which parameters weight decay acts on, chosen by name (training/decay_rules.py lists the
    # names of each): "all" (Nanda et al.: AdamW over every parameter, biases included);
    # "matrices" (the W_* weights only: no bias, no LayerNorm); "matrices_and_qkv_biases",
    # the default: the W_* and attention's b_Q, b_K, b_V. That is what every run before this
    # option decayed (its rule, "tensors of rank >= 2", also caught the per-head biases,
    # stored [head, d_head]), kept so those runs resume with the same optimizer groups.
    weight_decay_on: str = "matrices_and_qkv_biases"
    betas: tuple[float, float] = (0.9, 0.98)
    warmup_steps: int = 100
    # True: step s trains at lr * (s - 1) / warmup_steps during warmup, so the first update has
    # lr 0 and only fills Adam's moments: a LambdaLR(min(step / warmup, 1)) stepped after each
    # update, as Nanda et al. ran it. False: step s at lr * s / warmup_steps.
    warmup_starts_at_zero: bool = False
    schedule: str = "cosine"
    # the cosine/linear schedule decays to lr * min_lr_ratio
    min_lr_ratio: float = 0.1
    # None: no clipping. McLeish et al. clip at 0.5 for stability of deep loops.
    grad_clip: float | None = 1.0
    # "answer": loss on answer tokens (and EOS) only, the default for every task;
    # "answer_tokens": the answer tokens without the EOS (Nanda et al.'s loss); "all": every
    # position whose next token is real.
    loss_positions: str = "answer"
    # "all": softmax over the whole vocabulary (PAD and EOS included); "answer_symbols": over
    # the token ids the task declares as answers (`Task.answer_token_ids`: the p residues for
    # modular addition); "symbols": over every token but PAD and EOS (for modular addition
    # the p residues and "=", the p + 1 logits of Nanda et al.'s unembedding). Both restricted
    # readouts leave EOS out, so they need loss_positions="answer_tokens". Evaluation during
    # training reads out the same way.
    readout: str = "all"
    # "mcleish": (1-alpha)*full-depth loss + alpha*loss after n loops without gradient and k
    # with (McLeish et al.), which teaches the loop to improve any state, not only the one
    # it sees at a fixed depth; "mix": 0.5*(full + a random depth); "none".
    progressive: str = "none"
    progressive_alpha: float = 0.5
    # "mix" draws its random depth from U{lo..hi}; None: U{1..n_loops}. A hi above n_loops
    # trains loops past the trained depth to keep the answer (Fan et al. 2024), which is what
    # makes the loop settle instead of drift; the model's max_loops must reach hi.
    mix_depths: tuple[int, int] | None = None
    # Adds step_penalty * ||s_t - s_(t-1)|| / ||s_t|| at the deepest loop of the step: it
    # pulls the loop toward a fixed point (a cheap stand-in for the Jacobian regularisation
    # of Bai et al. 2021). None or 0: off.
    step_penalty: float | None = None
    # The probability that a step's loop starts from Gaussian noise (std 1 per coordinate, the
    # scale of a LayerNormed state) instead of the zero state (Geiping et al. 2025): a loop
    # trained from many starts learns an attractor of the input alone (path independence).
    init_state_noise: float = 0.0
    # Gradient flows through the last this many loops of a step's pass only; the loops before
    # them run without autograd (truncated backpropagation through the recurrence, as Geiping
    # et al. 2025 train a recurrent-depth model), so a step's backward costs at most this many
    # loops whatever depth the step ran. The cut is counted back from the deepest loop the step
    # runs: with "mix" depths above n_loops the full-depth readout gets fewer loops of gradient
    # (demo-add at 4: 2 on average), and a readout before the cut trains only the unembedding.
    # None: through every loop.
    backprop_loops: int | None = None
    # A weight: adds running_sum_loss * the mean squared error of the model's running-sum
    # readout (model.running_sum_probe) at the full depth, against each answer column's running
    # sum in units of ten (`Task.running_sums`: for multiplication the column's sum of digit
    # products plus its carry in); metrics.jsonl logs the error itself as running_sum_loss.
    # Bai et al. 2025 found that a transformer fine-tuned on multiplication settles in a local
    # optimum without the long-range partial products, and that this auxiliary target lets it
    # learn them. Read at the full depth only; its gradient reaches every loop, which is the
    # point: it shapes the state, not only the readout. None: off.
    running_sum_loss: float | None = None
    # A weight: adds partial_product_loss * the cross-entropy of the model's partial-product
    # readout (model.partial_product_probe) at the full depth, against the units and tens of
    # each partial product its answer column adds (`Task.partial_products`); metrics.jsonl logs
    # the cross-entropy itself as partial_product_loss. Like running_sum_loss it shapes the
    # state, through every loop, but asks for the products as digits, not one magnitude. None: off.
    partial_product_loss: float | None = None
    # A weight: adds carry_loss * the cross-entropy of the model's carry readout
    # (model.carry_probe) at the full depth, against the carry into each answer column
    # (`Task.carries_in`) as a class; metrics.jsonl logs the cross-entropy itself as carry_loss.
    # It asks the state for the carry the running sum holds as a magnitude: a carry of 12
    # read as 11 costs as much as one read as 0. None: off.
    carry_loss: float | None = None
    # A weight: adds order_loss * the order readout's (model.order_probe) pairwise logistic
    # loss at the full depth: softplus(score of the smaller - score of the larger) over every
    # two items of a sorting list with different values, read at their closing commas (the
    # last item, closed by "=", left out; `Task.item_closers`); metrics.jsonl logs it as
    # order_loss. Close pairs weigh as much as any, but uniform lists rarely hold them. None: off.
    order_loss: float | None = None
    # Focal loss (Lin et al. 2017): each answer token's cross-entropy times (1 - p)^focal_gamma, p its
    # target's probability: tokens already right weigh less, the data stay as they are. The logged
    # loss is then focal; the readout terms above are not, so weigh more beside it. None: plain.
    focal_gamma: float | None = None
    # Start from another run's weights instead of a fresh initialisation: a run directory (its
    # latest checkpoint) or a .safetensors checkpoint. The model may add what the checkpoint
    # lacks (a lever such as model.running_sum_probe keeps its fresh initialisation) but must
    # hold every tensor of the checkpoint at its shape, or grown so that step 0 computes the
    # same (a wider MLP, more layers, more heads: growth.py). The optimizer, the schedule and the
    # step count start afresh; the data stream is train.seed's, so a different seed than the
    # source run's shows the model problems it has not drawn. config.json records the file
    # read. A resume continues from the run's own state and never reads this again. None: a
    # fresh model.
    init_from: str | None = None
    # From this step on, the held-out evaluations and the checkpoints read the mean of the
    # weights after every step since (stochastic weight averaging, Izmailov et al. 2018:
    # `averaging.py`); the optimizer steps the live weights, which the resume state keeps. On a
    # cycle from extrap-mul-digits-ft10 the mean of its checkpoints from 2,500 on scored 20 x 3
    # products at 98.1% against 97.6% for its last step. None: off.
    average_from: int | None = None
    # For steps 1..readouts_first only the auxiliary readouts (running sum, partial products,
    # carry, order) are updated; the model's own weights wait. Why: a readout that a warm start adds
    # fresh sends its errors into a trained state from the first step (the partial-product
    # readout added to extrap-mul-ft16 cost it 20 x 3 ten points); fitted first, it pulls the
    # state only where the state does not hold what it asks. None: every weight from step 1.
    readouts_first: int | None = None
    loss_dtype: str = "float32"
    seed: int = 0
    log_every: int = 10
    eval_every: int = 100
    eval_problems: int = 256
    # `dense_checkpoints` log-spaced checkpoints within the first `dense_until` steps (the fast
    # early phase evolution analyses need), then one every `checkpoint_every`.
    dense_checkpoints: int = 10
    dense_until: int | None = None
    checkpoint_every: int = 500
    device: str = "auto"
    bf16: bool = True  # bf16 autocast on CUDA (ignored on CPU)
    # torch.compile the looped block's layers (`LoopedTransformer.compile_loops`): 1.87x faster
    # bf16 steps for paper-add-1x16 on an H100. Off by default: compiling takes tens of seconds
    # on a GPU and minutes on a small CPU, which a short CPU run never earns back.
    compile: bool = False
    # Processes that share each batch (each takes its rows, gradients averaged): on a CPU a
    # small model keeps one core busy with one process, and a second process uses the second
    # core nearly twice as well as a second thread (benchmarks/README.md). `abacus-interp
    # train` starts them (torchrun, gloo) and caps them at the cores it may use; the training
    # is the same as on one process up to the order of floating-point sums.
    processes: int = 1

    def __post_init__(self):
        for name in ("betas", "mix_depths"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        for name, value, allowed in [
            ("schedule", self.schedule, SCHEDULES),
            ("progressive", self.progressive, PROGRESSIVE),
            ("loss_positions", self.loss_positions, LOSS_POSITIONS),
            ("readout", self.readout, READOUTS),
            ("loss_dtype", self.loss_dtype, LOSS_DTYPES),
            ("device", self.device, DEVICES),
            ("weight_decay_on", self.weight_decay_on, tuple(WEIGHT_DECAY_RULES)),
        ]:
            if value not in allowed:
                raise UserError(f"train.{name}={value!r}; choose one of {allowed}")
        if self.readout != "all" and self.loss_positions != "answer_tokens":
            raise UserError(
                f"train.readout={self.readout!r} leaves EOS out of the softmax, but train.loss_positions="
                f"{self.loss_positions!r} also scores {'EOS' if self.loss_positions == 'answer' else 'prompt tokens and EOS'}; "
                "set train.loss_positions=answer_tokens, or train.readout=all"
            )
        if self.steps < 1 or self.lr <= 0:
            raise UserError("train.steps must be >= 1 and train.lr > 0")
        if self.batch_size is not None and self.batch_size < 1:
            raise UserError("train.batch_size must be >= 1, or null for full batch")
        if self.mix_depths is not None:
            lo, hi = self.mix_depths
            if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
                raise UserError(f"train.mix_depths must be [lo, hi] integers with 1 <= lo <= hi, got {list(self.mix_depths)}")
        if not 0.0 <= self.init_state_noise <= 1.0:
            raise UserError(f"train.init_state_noise={self.init_state_noise} is a probability; use a value in [0, 1]")
        if self.backprop_loops is not None and (isinstance(self.backprop_loops, bool)
                                                or not isinstance(self.backprop_loops, int) or self.backprop_loops < 1):
            raise UserError(f"train.backprop_loops={self.backprop_loops!r}: a number of loops >= 1, or null for all")
        if self.backprop_loops is not None and self.progressive == "mcleish":
            raise UserError("train.backprop_loops truncates the gradient of a \"none\" or \"mix\" step; \"mcleish\" "
                            "already runs its prefix without gradient: set one of them")
        if self.init_from is not None and not str(self.init_from).strip():
            raise UserError("train.init_from is empty; name a run directory or a checkpoint file, or null for a fresh model")
        for name in ("running_sum_loss", "partial_product_loss", "carry_loss", "order_loss", "focal_gamma"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise UserError(f"train.{name} must be >= 0, or null for none")
        if self.step_penalty is not None and self.step_penalty < 0:
            raise UserError("train.step_penalty must be >= 0, or null for none")
        if not 0 <= self.progressive_alpha <= 1:
            raise UserError("train.progressive_alpha must be in [0, 1]")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise UserError("train.grad_clip must be > 0, or null for no clipping")
        if self.processes < 1:
            raise UserError("train.processes must be >= 1")
        if not -(2**63) <= self.seed < 2**64:  # what torch.manual_seed takes
            raise UserError(f"train.seed={self.seed} is out of range; use an integer in [0, 2**63), e.g. 0")
        for name in ("log_every", "eval_every", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise UserError(f"train.{name} must be >= 1")
        self._check_step_options()

    def _check_step_options(self) -> None:
        """The options that name a step: averaging from it, the readouts alone up to it."""
        if self.average_from is not None and (isinstance(self.average_from, bool) or not isinstance(self.average_from, int)
                                              or not 1 <= self.average_from <= self.steps):
            raise UserError(f"train.average_from={self.average_from!r}: the step from which checkpoints hold the "
                            f"averaged weights, an integer in [1, train.steps={self.steps}], or null for none")
        if self.readouts_first is None:
            return
        # past train.steps it fits the readouts of a frozen model, a linear probe of its state
        if isinstance(self.readouts_first, bool) or not isinstance(self.readouts_first, int) \
                or self.readouts_first < 1:
            raise UserError(f"train.readouts_first={self.readouts_first!r}: how many steps train the readouts "
                            f"alone, an integer >= 1, or null for none")
        if not (self.running_sum_loss or self.partial_product_loss or self.carry_loss or self.order_loss):
            raise UserError("train.readouts_first trains the auxiliary readouts alone, but no readout loss is on: "
                            "set train.carry_loss, train.partial_product_loss, train.running_sum_loss or "
                            "train.order_loss")


# Training fields added after runs were saved: left out of to_dict while off (None), so those
# runs' configs read, resume and compare as the same run.
_TRAIN_OMITTED_WHEN_OFF = ("partial_product_loss", "carry_loss", "order_loss", "focal_gamma", "average_from",
                           "readouts_first")


@dataclass(frozen=True)
class RunConfig:
    task: str
    model: ModelConfig
    train: TrainConfig
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    preset: str | None = None

    def __post_init__(self):
        if self.train.mix_depths is not None and self.train.mix_depths[1] > self.model.max_loops:
            raise UserError(
                f"train.mix_depths reaches {self.train.mix_depths[1]} loops but model.max_loops is "
                f"{self.model.max_loops}; raise model.max_loops or lower the depth range"
            )

        # now, not at the first batch (whose encoding refuses it) after sampling problems of
        # the task's sizes, which for task.max_digits=10**30 never ends
        longest = self.make_task().max_sequence_length()
        if longest > self.model.max_seq_len:
            raise UserError(
                f"the {self.task} task's longest problem is {longest} tokens (prompt, answer and EOS), more than "
                f"model.max_seq_len={self.model.max_seq_len}; raise model.max_seq_len or make the task's problems shorter"
            )

        if self.model.multiplier_heads and self.model.multiplier_select == "fixed":
            longest = _longest_multiplier(self.make_task())
            if longest is not None and longest > self.model.multiplier_heads:
                raise UserError(
                    f"the task's multipliers have up to {longest} digits but the model has "
                    f"{self.model.multiplier_heads} multiplier heads, each reading one digit "
                    f"(multiplier_select='fixed'): set model.multiplier_heads={longest} or "
                    f"task.max_multiplier_digits={self.model.multiplier_heads}"
                )

        if self.train.running_sum_loss or self.model.running_sum_probe:
            self._check_running_sum()
        if self.train.partial_product_loss or self.model.partial_product_probe is not None:
            self._check_partial_products()
        if self.train.carry_loss or self.model.carry_probe is not None:
            self._check_carries()
        if self.train.order_loss or self.model.order_probe:
            self._check_order()

        if self.train.readout == "answer_symbols" and self.make_task().answer_token_ids is None:
            raise UserError(
                f"train.readout='answer_symbols' needs a task that declares its answer tokens "
                f"(Task.answer_token_ids); {self.task!r} does not, so use train.readout=all"
            )

    def _check_running_sum(self) -> None:
        """The readout and its loss come together: a readout never trained would be read by the
        analyses as the run's own."""
        if not self.model.running_sum_probe:
            raise UserError("train.running_sum_loss trains the model's running-sum readout; "
                            "set model.running_sum_probe=true as well")
        if not self.train.running_sum_loss:
            raise UserError("model.running_sum_probe=true adds a readout that only train.running_sum_loss trains; "
                            "set train.running_sum_loss (e.g. 0.5), or leave the readout out")
        if type(self.make_task()).running_sums is Task.running_sums:
            raise UserError(f"train.running_sum_loss needs a task with a running sum per answer digit "
                            f"(Task.running_sums, e.g. multiplication); {self.task!r} has none: leave it null")

    def _check_partial_products(self) -> None:
        """As the running sum's: the readout and its loss come together, on a task with partial
        products, and the readout covers every multiplier digit the task draws."""
        k = self.model.partial_product_probe
        if k is None:
            raise UserError("train.partial_product_loss trains the model's partial-product readout; "
                            "set model.partial_product_probe=k as well (k: the multiplier's most digits)")
        if not self.train.partial_product_loss:
            raise UserError("model.partial_product_probe adds a readout that only train.partial_product_loss trains; "
                            "set train.partial_product_loss (e.g. 0.5), or leave the readout out")
        most = self.make_task().max_partial_products
        if most is None:
            raise UserError(f"train.partial_product_loss needs a task whose answer digits add partial products "
                            f"(Task.partial_products, e.g. multiplication); {self.task!r} has none: leave it null")
        if most > k:
            raise UserError(f"the task's multipliers have up to {most} digits but model.partial_product_probe={k} "
                            f"reads {k} partial products per column: set model.partial_product_probe={most}")

    def _check_carries(self) -> None:
        """As the running sum's: the readout and its loss come together, on a task with carries,
        and the readout has a class for every carry the task makes."""
        classes = self.model.carry_probe
        if classes is None:
            raise UserError("train.carry_loss trains the model's carry readout; set model.carry_probe=n as well "
                            "(n: one more than the task's largest carry, e.g. 28 for multipliers of up to 3 digits)")
        if not self.train.carry_loss:
            raise UserError("model.carry_probe adds a readout that only train.carry_loss trains; "
                            "set train.carry_loss (e.g. 0.5), or leave the readout out")
        largest = self.make_task().max_carry
        if largest is None:
            raise UserError(f"train.carry_loss needs a task with a carry into each answer column (Task.carries_in, "
                            f"e.g. multiplication); {self.task!r} has none: leave it null")
        if largest >= classes:
            raise UserError(f"the task's carries reach {largest} but model.carry_probe={classes} gives classes "
                            f"0..{classes - 1}: set model.carry_probe={largest + 1}")

    def _check_order(self) -> None:
        """The order readout and its loss come together (a readout never trained would be read as
        the run's own), on a task whose prompt is a list of items."""
        if not self.model.order_probe:
            raise UserError("train.order_loss trains the model's order readout; set model.order_probe=true as well")
        if not self.train.order_loss:
            raise UserError("model.order_probe=true adds a readout that only train.order_loss trains; "
                            "set train.order_loss (e.g. 0.5), or leave the readout out")
        if type(self.make_task()).item_closers is Task.item_closers:
            raise UserError(f"train.order_loss needs a task whose prompt is a list of items (Task.item_closers, "
                            f"e.g. sorting); {self.task!r} has none: leave it null")

    def make_task(self):
        return get_task(self.task, **self.task_kwargs)

    def to_dict(self) -> dict:
        train = dataclasses.asdict(self.train)
        for name in _TRAIN_OMITTED_WHEN_OFF:
            if train[name] is None:
                del train[name]
        return {
            "preset": self.preset,
            "task": {"name": self.task, **self.task_kwargs},
            "model": self.model.to_dict(),
            "train": train,
        }

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        """The config of a dict as `to_dict` writes it (config.json); missing sections,
        unknown fields and values of the wrong type are UserErrors naming the field."""
        missing = [section for section in ("task", "model", "train") if not isinstance(d.get(section), dict)]
        if missing:
            raise UserError(f"a run config needs the sections task, model and train as objects; "
                            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing or not objects")
        task = dict(d["task"])
        name = task.pop("name", None)
        train_fields = {f.name for f in dataclasses.fields(TrainConfig)}
        unknown = set(d["train"]) - train_fields
        if unknown:
            raise UserError(f"unknown train fields {sorted(unknown)}; known: {sorted(train_fields)}")
        check_field_types(TrainConfig, d["train"], "train")
        return cls(
            task=name,
            task_kwargs=task,
            model=ModelConfig.from_dict(d["model"]),
            train=TrainConfig(**d["train"]),
            preset=d.get("preset"),
        )


def _longest_multiplier(task) -> int | None:
    """The most digits the second operand of the task's problems has (the multiplier of a*b);
    None for a task whose problems are not two numbers of a digit range."""
    digits = getattr(task, "multiplier_range", None) or getattr(task, "digit_range", None)
    return None if digits is None else digits[1]

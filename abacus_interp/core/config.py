"""The model configuration: a frozen dataclass stored in every checkpoint."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..errors import UserError
from .family_registry import family_class
from .field_types import check_field_types
from .tokens import Vocab

ACTIVATIONS = ("gelu", "relu", "swiglu")
NORMS = ("pre", "none")
INJECTIONS = ("add", "norm_add", "none")
POSITIONALS = ("abacus", "learned", "none")
ROTARIES = ("none", "abacus")
OFFSET_MODES = ("batch", "example")
MULTIPLIER_SELECTS = ("fixed", "learned")
BACKENDS = ("auto", "explicit", "sdpa", "flash")
# The families are the registry's (core/family_registry.py). "gpt" is not a family of its
# own: it is the looped family with n_loops=1 and as many layers as the looped model it is
# compared with (n_layers * n_loops), weights unshared.
# Layers and loops are built one module at a time (a block per layer, a set of hook points
# per loop: 1.3 ms each on extrap-add), so 10,000 take seconds; a count far beyond (a typo,
# a damaged config.json, --loops 1000000000) would build for hours instead of failing.
MAX_LAYERS_AND_LOOPS = 10_000
# No tensor dimension beyond int32 can be allocated (a [64, 2**31] float matrix is 512 GiB),
# and torch refuses sizes past int64 with an overflow deep inside rather than a message.
MAX_DIMENSION = 2**31 - 1


@dataclass(frozen=True)
class ModelConfig:
    vocab: Vocab
    # Which architecture (abacus_interp/core/families): "looped" (LoopedTransformer; with n_loops=1
    # it is a plain GPT-style transformer), "lstm" (token embedding, n_layers stacked LSTM
    # layers of width d_model, unembedding) or "retran" (per layer: causal self-attention,
    # then an LSTM over positions, each pre-LN with a residual). The recurrent families run
    # once: they need n_loops=1, and max_loops defaults to 1.
    family: str = "looped"
    d_model: int = 128
    n_heads: int = 4
    # None: d_model // n_heads, the usual split of the residual width across heads.
    d_head: int | None = None
    # None: 4 * d_model, the standard MLP expansion.
    d_mlp: int | None = None
    # Layers inside the looped block (K); the block is applied n_loops times (R).
    n_layers: int = 1
    # Trained depth: how many times the block runs by default.
    n_loops: int = 4
    # Hook capacity: HookPoint sets exist for loops 0..max_loops-1, so a user can run (and
    # cache) deeper than training. None: 4 * n_loops.
    max_loops: int | None = None
    # The MLP's nonlinearity. "swiglu": a gated MLP, silu(x W_gate) * (x W_in) (Shazeer 2020),
    # one more d_model x d_mlp matrix. A gate multiplies two linear readings of the state, so
    # one unit can form a product such as a_i * b_j outright, where a GELU MLP has to tabulate
    # it; answer digit i of N x k multiplication needs the sum of k such products. Measured
    # on extrap-mul (with offset heads): 26.6% in distribution at step 1,000 against 19.1% with
    # GELU, 60% against 54% at 9,000; N x 2 still fails where two products are summed.
    activation: str = "gelu"
    # "pre": LayerNorm before attention and MLP and before the unembedding (McLeish et al.);
    # "none": no normalisation at all (Nanda et al.'s grokking model).
    norm: str = "pre"
    # "add": the embedded input is added to the state at the start of every loop, so later
    # loops can still read the operands (the recall mechanism of Bansal et al.).
    # "norm_add": the state is LayerNormed first (one norm shared by every loop). With "add"
    # and pre-LN blocks the loop map cannot contract: LN hides the state's mean and scale
    # from the blocks, so both pass through unchanged (a Jacobian eigenvalue of exactly 1)
    # and the state's norm grows with every injection. Normalising it bounds the state.
    input_injection: str = "add"
    # "abacus": each digit gets offset + its 1-based index inside its number (McLeish et al.);
    # "learned": one vector per absolute position; "none": no positional signal.
    positional: str = "abacus"
    # Training draws the Abacus offset from U{0..k}, so positions past the training
    # lengths have been seen and the model extrapolates; evaluation uses offset 0. Rotary
    # positions read it too (a digit's distance to a label or "=", which sit at index 0).
    abacus_max_offset: int = 100
    # "batch": one offset per batch (McLeish et al.); "example": one per sequence.
    abacus_offset_mode: str = "batch"
    # "abacus": queries and keys rotated by each token's Abacus index (RoPE on the digit's
    # index inside its number). Attention then depends on index differences only, so the
    # aligned digits of operands and answer meet at offset 0 whatever the number's length,
    # and no random offset is needed to train high indices. "none": no rotation.
    rotary: str = "none"
    # RoPE's base: channel pair i turns by index * base^(-2i/d_head). 1000 gives the slowest
    # pair a period of thousands of digits, far beyond any number this model meets.
    rotary_base: float = 1000.0
    # A query sees only keys whose Abacus index is within +-w of its own (and itself). With
    # w = 1 a loop can move a carry by one digit and no further, so a long carry chain needs
    # more loops, and a longer number needs no attention offset it never saw in training:
    # the model extrapolates by running more loops. None: no window.
    abacus_window: int | None = None
    # Heads of two kinds, for a*b with a short multiplier b: the last `multiplier_heads`
    # heads of every layer see only the digits of the second number of the prompt (the
    # multiplier), at any distance, so every answer digit reads b_0..b_(k-1) the same way at
    # any length. The other heads keep the window and do not see the multiplier, so the
    # carry stays local. Needs rotary="abacus". 0: every head is of the one kind.
    multiplier_heads: int = 0
    # How a multiplier head picks its digit. "fixed": multiplier head j sees only the
    # multiplier's digit j (units = 0), so each head hands the MLP one clean digit; a run then
    # reads multipliers of up to multiplier_heads digits. "learned": every multiplier head
    # which to read. Measured on extrap-mul's recipe: "learned" heads still spread 30-34% over
    # each of b_0..b_2 after 3,750 steps, yet that run was no worse (52% exact match in
    # distribution at step 4,000, against 39-46% for "fixed" around then, on a schedule that
    # differed after step 2,000): the clean read is not what limits learning N x 2 and N x 3.
    multiplier_select: str = "fixed"
    # Offset heads: the first len(offset_heads) heads of every layer each read one fixed
    # distance on the Abacus index, head h only the digits (and answer slots) exactly
    # offset_heads[h] below its query, and nothing else but itself. In N x k multiplication
    # answer digit i needs a_i, a_(i-1), ..., a_(i-k+1) and the carry from slot i-1 at once;
    # a windowed head spreads over them (29-72% on its main key after 9,000 steps on
    # extrap-mul), an offset head hands the MLP one of them whole, at any length. The windowed
    # heads come after them, the multiplier heads last. (): no offset heads. With answer slots
    # the position predicting digit i sits at index i (the slot of digit i - 1), so a_i is at
    # offset -1: extrap-mul uses (-1, 0, 1, 1). Measured there, alone they did not speed
    # learning (19.1% against 19.5% in distribution at step 1,000); with a gated MLP, 26.6%.
    offset_heads: tuple[int, ...] = ()
    # Which number each offset head reads (1 the first operand, 2 the second, 3 the answer of
    # `a*b=`; one per offset head, () any digit at its distance). In the answer-slot format
    # a_(i-2) and the carry slot share an Abacus index; (1, 1, 1, 3) gives each a head. A
    # number the sequence lacks leaves the head only itself. Measured: no gain (extrap-mul's docs).
    offset_head_numbers: tuple[int, ...] = ()
    # An offset head sees itself only where its column holds no digit, so with
    # offset_head_numbers it copies that one digit whole. Measured: extrapolates worse.
    offset_heads_exclusive: bool = False
    # Symbol heads: this many heads of every layer (after the windowed heads, before the
    # multiplier heads) see only the tokens that are not digits (index 0: sorting's labels and
    # separators, "=", the answer written so far) and themselves. A head that must find every
    # label of a list shares its softmax with the digits otherwise, and more or longer numbers
    # dilute it: on extrap-sort's 20-digit lists the head that reads the labels at the stop
    # query put 22% of its attention on them instead of 47%. 0: none.
    symbol_heads: int = 0
    # Number heads: this many heads of every layer (after the symbol heads, before the
    # multiplier heads) see only their query's own item: its number's digits, the label and
    # separator before them and the one that closes it (sorting's "b:1204,"), so a number's
    # digits read its label, and its closing separator the whole item, the same way in a list
    # of 2 numbers or of 20. Without a position table a head tells its own number from the
    # others' only by the causal order, which more numbers blur. A sorting answer's labels form
    # one more group; answer digits form groups of their own. In a model with multiplier heads
    # the multiplier's digits stay hidden from every other kind, number heads too. 0: none.
    number_heads: int = 0
    # Scalable softmax (Nakanishi 2025): each head multiplies its scores by s_h * ln(n), n the
    # keys its query may see, s_h learned per head and started at this value (0.3 makes the
    # factor ~1 at 28 keys). A plain softmax flattens as the keys grow in number, so a head
    # trained on short sequences reads its one key more weakly in a long one; with the factor
    # the peak keeps its height. A head that sees a fixed few keys (an offset head: itself and
    # one digit) starts with its scores scaled down (0.3 * ln 2 = 0.2) and learns s_h up.
    # None: the plain softmax.
    softmax_length_scale: float | None = None
    # Sorting: no head at an answer query (a label after the list) reads the labels written
    # before it; each still reads what its kind allows of the list (a number head: itself only).
    # The label at the query is the one just written, so the next is the smallest number above
    # it (an equal one with a later letter first): one search whatever the count, where a query
    # that must leave out every number written so far reads more of them the longer the list.
    answer_hides_earlier_answer: bool = False
    max_seq_len: int = 64
    # Tied: the unembedding is the transpose of the token embedding (fewer parameters).
    tie_unembed: bool = False
    # "auto": SDPA (or flash-attn on CUDA in half precision) unless a hook needs the
    # attention scores/pattern, then the explicit path. The others force one path.
    attention_backend: str = "auto"
    # None: generate, solve and eval run n_loops loops unless told otherwise. A number: they
    # run each problem's loop until the relative step of its answer positions' state,
    # ||s_t - s_(t-1)|| / ||s_t||, falls below it (at most max_loops), so a harder problem
    # gets more loops. Needs answer_slots: the whole answer is computed in one pass, so one
    # loop count per problem decides it.
    halt_tol: float | None = None
    init_std: float = 0.02
    # The std of W_U's initialisation; None: init_std. Nanda et al.'s grokking model draws
    # W_U with std 1/sqrt(d_vocab) and every other weight with 1/sqrt(d_model).
    unembed_init_std: float | None = None
    # Biases of attention (b_Q, b_K, b_V, b_O) and of the unembedding (b_U). False: the
    # parameter does not exist (Nanda et al.'s grokking model has neither); a zero buffer of
    # the same name and shape, never saved or trained, stands in for it, so the forward pass,
    # the hook shapes and every analysis that reads `attn.b_O` or `b_U` are unchanged.
    attn_bias: bool = True
    unembed_bias: bool = True
    ln_eps: float = 1e-5
    # True: every token after the first "=" is read as the placeholder "_", so the model fills
    # the whole answer in one forward pass and carries travel through depth (loops), not
    # through earlier answer tokens. Follows the task's answer_format="slots".
    answer_slots: bool = False
    # A linear readout of every position's final state (through ln_final, as the unembedding
    # reads it), W_sum [d_model] and b_sum, trained by train.running_sum_loss to give the
    # running sum of the answer column the position predicts (Bai et al. 2025: a transformer
    # fine-tuned on multiplication settles without the long-range partial products, and this
    # auxiliary target is what let theirs learn it). Not used to answer.
    running_sum_probe: bool = False

    def __post_init__(self):
        if isinstance(self.vocab, dict):
            object.__setattr__(self, "vocab", Vocab.from_dict(self.vocab))
        self._check_choices_and_sizes()
        d_head = self._check_widths()
        self._check_attention(d_head)
        max_loops = self._check_loops()
        # None fields are resolved once here, so downstream code always sees integers;
        # `replace` re-derives the ones that were left unset.
        derived = {name for name in ("d_head", "d_mlp", "max_loops") if getattr(self, name) is None}
        object.__setattr__(self, "_derived", frozenset(derived))
        object.__setattr__(self, "d_head", d_head)
        object.__setattr__(self, "d_mlp", self.d_mlp if self.d_mlp is not None else 4 * self.d_model)
        object.__setattr__(self, "max_loops", max_loops)
        object.__setattr__(self, "offset_heads", tuple(self.offset_heads))  # a list read from JSON
        object.__setattr__(self, "offset_head_numbers", tuple(self.offset_head_numbers))

    def _check_choices_and_sizes(self) -> None:
        """Every named option is one of its choices; every size is positive and fits a tensor."""
        for name, value, allowed in [
            ("activation", self.activation, ACTIVATIONS),
            ("norm", self.norm, NORMS),
            ("input_injection", self.input_injection, INJECTIONS),
            ("positional", self.positional, POSITIONALS),
            ("abacus_offset_mode", self.abacus_offset_mode, OFFSET_MODES),
            ("rotary", self.rotary, ROTARIES),
            ("attention_backend", self.attention_backend, BACKENDS),
            ("multiplier_select", self.multiplier_select, MULTIPLIER_SELECTS),
        ]:
            if value not in allowed:
                raise UserError(f"ModelConfig.{name}={value!r}; choose one of {allowed}")
        family_class(self.family)  # a UserError naming the registered families when unknown
        for name in ("d_model", "n_heads", "n_layers", "n_loops", "max_seq_len"):
            if getattr(self, name) < 1:
                raise UserError(f"ModelConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("d_model", "n_heads", "d_head", "d_mlp", "max_seq_len", "abacus_max_offset"):
            if getattr(self, name) is not None and getattr(self, name) > MAX_DIMENSION:
                raise UserError(f"ModelConfig.{name}={getattr(self, name)} is larger than any tensor can be "
                                f"(at most {MAX_DIMENSION:,})")
        if self.n_layers > MAX_LAYERS_AND_LOOPS:
            raise UserError(f"ModelConfig.n_layers={self.n_layers}: at most {MAX_LAYERS_AND_LOOPS:,} layers")
        if self.input_injection == "norm_add" and self.norm == "none":
            raise UserError("input_injection='norm_add' normalises the state with LayerNorm; it needs norm='pre'")
        if self.answer_slots and not {"=", "_"} <= set(self.vocab.symbols):
            raise UserError(
                "ModelConfig.answer_slots needs '=' and the placeholder '_' in the vocabulary; "
                "build the model from a task with answer_format='slots'"
            )
        if self.abacus_max_offset < 0:
            raise UserError("ModelConfig.abacus_max_offset must be >= 0")
        if self.halt_tol is not None and not (self.halt_tol > 0 and self.answer_slots):
            raise UserError(
                f"ModelConfig.halt_tol={self.halt_tol}: adaptive halting needs a positive tolerance and "
                "answer_slots (a task with answer_format='slots'); leave it null otherwise"
            )
        if self.unembed_init_std is not None and not self.unembed_init_std > 0:
            raise ValueError(f"ModelConfig.unembed_init_std={self.unembed_init_std} must be > 0, or null for init_std")
        if self.unembed_init_std is not None and self.tie_unembed:
            raise ValueError("ModelConfig.unembed_init_std sets W_U's init, but tie_unembed=true has no W_U; leave it null")

    def _check_widths(self) -> int:
        """The head width (d_head, derived when unset), after checking the widths agree."""
        d_head = self.d_head if self.d_head is not None else self.d_model // self.n_heads
        if d_head < 1:
            raise UserError(f"d_head={d_head}: set d_head or use fewer heads than d_model")
        if self.d_mlp is not None and self.d_mlp < 1:
            raise UserError(f"ModelConfig.d_mlp must be >= 1, or null for 4 * d_model; got {self.d_mlp}")
        if self.d_head is None and self.d_model % self.n_heads:
            raise UserError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                "set d_head explicitly or change n_heads"
            )
        return d_head

    def _check_attention(self, d_head: int) -> None:
        """Rotary positions, the window and the heads of several kinds: consistent, and only
        where the family has them."""
        if self.abacus_window is not None and (isinstance(self.abacus_window, bool) or self.abacus_window < 0):
            raise UserError(f"ModelConfig.abacus_window={self.abacus_window!r}; use an integer >= 0, or null for no window")
        if self.rotary != "none" and d_head % 2:
            raise UserError(f"rotary positions turn pairs of channels: d_head={d_head} must be even")
        if isinstance(self.multiplier_heads, bool) or not 0 <= self.multiplier_heads < self.n_heads:
            raise UserError(
                f"ModelConfig.multiplier_heads={self.multiplier_heads!r}: use an integer in 0..n_heads-1 "
                f"(n_heads={self.n_heads}); at least one head must read the multiplicand and the carry"
            )
        self._check_offset_heads()
        if isinstance(self.symbol_heads, bool) or not isinstance(self.symbol_heads, int) or self.symbol_heads < 0:
            raise UserError(f"ModelConfig.symbol_heads={self.symbol_heads!r}: use an integer >= 0")
        if isinstance(self.number_heads, bool) or not isinstance(self.number_heads, int) or self.number_heads < 0:
            raise UserError(f"ModelConfig.number_heads={self.number_heads!r}: use an integer >= 0")
        if len(self.offset_heads) + self.symbol_heads + self.number_heads + self.multiplier_heads > self.n_heads:
            raise UserError(
                f"ModelConfig: {len(self.offset_heads)} offset heads, {self.symbol_heads} symbol heads, "
                f"{self.number_heads} number heads and {self.multiplier_heads} multiplier heads are more than "
                f"n_heads={self.n_heads}; give fewer special heads or a larger n_heads"
            )
        scale = self.softmax_length_scale
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                                  or not 0 < scale < math.inf):
            raise UserError(f"ModelConfig.softmax_length_scale={scale!r}: use a finite number > 0 "
                            "(each head's starting s in s * ln(keys)), or null for the plain softmax")
        if scale is not None and self.family != "looped":
            raise UserError(f"softmax_length_scale is an option of the looped family's attention; "
                            f"family={self.family!r}: leave it unset")
        if self.multiplier_heads and self.rotary != "abacus":
            raise UserError(
                "ModelConfig.multiplier_heads tells the multiplier's digits apart by rotating their keys: "
                "set rotary='abacus' too"
            )
        if self.rotary_base <= 1:
            raise UserError(f"ModelConfig.rotary_base={self.rotary_base} must be > 1")
        if self.attends_by_index and self.family != "looped":
            raise UserError(
                f"rotary, abacus_window and the head kinds are options of the looped family's attention; "
                f"family={self.family!r} has none of them: leave them unset"
            )

    def _check_offset_heads(self) -> None:
        """Offset heads: integer distances, at most one number each, exclusive only with them."""
        if not isinstance(self.offset_heads, (tuple, list)) or any(
                isinstance(d, bool) or not isinstance(d, int) for d in self.offset_heads):
            raise UserError(f"ModelConfig.offset_heads={self.offset_heads!r}: use a list of integers "
                            "(how far below its query, on the Abacus index, each such head reads)")
        numbers = self.offset_head_numbers
        if not isinstance(numbers, (tuple, list)) or any(
                isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in numbers) or (
                numbers and len(numbers) != len(self.offset_heads)):
            raise UserError(f"ModelConfig.offset_head_numbers={numbers!r}: use () or one integer >= 1 per offset "
                            f"head ({len(self.offset_heads)} here): which number of the sequence each reads, "
                            "1 the first operand, 2 the second, 3 the answer")
        if self.multiplier_heads and 2 in numbers:
            raise UserError(f"ModelConfig.offset_head_numbers={numbers!r}: number 2, the multiplier, is hidden from "
                            "every head but the multiplier heads here; read it with multiplier_heads")
        if not isinstance(self.offset_heads_exclusive, bool) or (self.offset_heads_exclusive and not self.offset_heads):
            raise UserError(f"ModelConfig.offset_heads_exclusive={self.offset_heads_exclusive!r}: use true or false, "
                            "and true only with offset_heads")

    def _check_loops(self) -> int:
        """max_loops (derived when unset: 4 x n_loops for a loop, 1 for a single pass), checked."""
        looped = self.family == "looped"
        if not looped and (self.n_loops != 1 or self.max_loops not in (None, 1)):
            raise UserError(
                f"family={self.family!r} runs once (its recurrence is over positions, not a loop); "
                f"set n_loops=1 and leave max_loops unset (got n_loops={self.n_loops}, max_loops={self.max_loops})"
            )
        max_loops = self.max_loops if self.max_loops is not None else (4 * self.n_loops if looped else 1)
        if max_loops < self.n_loops:
            raise UserError(f"max_loops={max_loops} is below the trained depth n_loops={self.n_loops}")
        if max_loops > MAX_LAYERS_AND_LOOPS:
            raise UserError(
                f"max_loops={max_loops}: a model runs at most {MAX_LAYERS_AND_LOOPS:,} loops (it builds a set of "
                "hook points for every loop it can run, about a millisecond each); ask for fewer loops"
            )
        return max_loops

    @property
    def device(self) -> str | None:
        """The device of the model last built or moved with this config (not a field, never
        saved); TransformerLens helpers read `model.cfg.device`."""
        return self.__dict__.get("_device")

    def attach_device(self, device) -> None:
        object.__setattr__(self, "_device", str(device))

    @property
    def gated_mlp(self) -> bool:
        """True when the MLP has a gate (W_gate) beside W_in."""
        return self.activation == "swiglu"

    @property
    def mlp_matrices(self) -> int:
        """How many d_model x d_mlp matrices one MLP applies per token (FLOPs count them)."""
        return 3 if self.gated_mlp else 2

    @property
    def attends_by_index(self) -> bool:
        """True when attention reads each token's Abacus index (rotary positions or a window)."""
        return (self.rotary != "none" or self.abacus_window is not None or self.multiplier_heads > 0
                or bool(self.offset_heads) or self.symbol_heads > 0 or self.number_heads > 0
                or self.answer_hides_earlier_answer)

    @property
    def d_vocab(self) -> int:
        return len(self.vocab)

    @property
    def n_abacus_positions(self) -> int:
        # index 0 is "not a digit"; a digit index never exceeds the sequence length
        return self.abacus_max_offset + self.max_seq_len + 1

    def to_dict(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            out[f.name] = getattr(self, f.name)
        if self.family == "looped":
            # left out, so a looped config is written exactly as before the field existed and
            # resuming a run started then still finds the same model config
            del out["family"]
        for name in _OMITTED_AT_DEFAULT:
            # at their defaults, left out for the same reason: older runs resume unchanged
            if out[name] == _DEFAULTS[name]:
                del out[name]
        out["vocab"] = self.vocab.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        """The config of a dict as `to_dict` writes it (config.json's "model"): unknown
        fields and values of the wrong type are UserErrors naming the field."""
        if not isinstance(d, dict):
            raise UserError(f"a model config is an object of fields, got {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise UserError(f"unknown ModelConfig fields {sorted(unknown)}; known: {sorted(known)}")
        check_field_types(cls, d, "ModelConfig")
        return cls(**d)

    def replace(self, **changes) -> ModelConfig:
        """A copy with `changes`; fields that were derived (left None) are derived again."""
        base = self.to_dict()
        for name in getattr(self, "_derived", ()):
            base[name] = None
        return ModelConfig.from_dict({**base, **changes})


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
# Fields added after runs were saved: left out of to_dict at their defaults, so those runs'
# configs read (and resume) as the same model.
_OMITTED_AT_DEFAULT = ("rotary", "rotary_base", "abacus_window", "halt_tol", "unembed_init_std", "attn_bias",
                       "unembed_bias", "multiplier_heads", "multiplier_select", "offset_heads", "offset_head_numbers",
                       "offset_heads_exclusive",
                       "symbol_heads", "number_heads", "running_sum_probe", "softmax_length_scale",
                       "answer_hides_earlier_answer")

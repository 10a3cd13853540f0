"""The model configuration: a frozen dataclass stored in every checkpoint. The rules its fields
must satisfy, checked as it is built, are in config_rules.py."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import UserError
from .config_rules import (
    MAX_LAYERS_AND_LOOPS,
    check_attention,
    check_choices_and_sizes,
    check_loops,
    check_widths,
)
from .field_types import check_field_types
from .tokens import Vocab

# MAX_LAYERS_AND_LOOPS stays importable from here, where the CLI has always found it
__all__ = ["MAX_LAYERS_AND_LOOPS", "ModelConfig"]


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
    # and no random offset is needed to train high indices. "abacus_closers": the same, and
    # the token that closes a number (the separator or "=" right after its last digit) turns
    # as the digit past its last, index L + 1, so it reads the number's leading digits at
    # distances 1, 2, ... at any length L; masks still see it as a non-digit (index 0).
    # "none": no rotation.
    rotary: str = "none"
    # RoPE's base: channel pair i turns by index * base^(-2i/d_head). 1000 gives the slowest
    # pair a period of thousands of digits, far beyond any number this model meets.
    rotary_base: float = 1000.0
    # A query sees only keys whose Abacus index is within +-w of its own (and itself). With
    # w = 1 a loop can move a carry by one digit and no further, so a long carry chain needs
    # more loops, and a longer number needs no attention offset it never saw in training:
    # the model extrapolates by running more loops. None: no window.
    abacus_window: int | None = None
    # Sorting's window: a digit, or the token that closes a number (at the index past its last
    # digit, whatever `rotary`), sees only the digits within +-w of its index, and every token
    # that is not a digit; other tokens (a list's labels, a sorting answer) see everything.
    # Comparing numbers needs digits of one height to meet; a query that could read digits far
    # below it meets distances that longer numbers than any in training put there. None: no
    # such window.
    digit_window: int | None = None
    # Heads of two kinds, for a*b with a short multiplier b: the last `multiplier_heads`
    # heads of every layer see only the digits of the second number of the prompt (the
    # multiplier), at any distance, so every answer digit reads b_0..b_(k-1) the same way at
    # any length. The other heads keep the window and do not see the multiplier, so the
    # carry stays local. Needs rotary="abacus" (or "abacus_closers"). 0: every head is of the one kind.
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
    # Attention sink (softmax off by one, as in Miller 2023 and gpt-oss's learned sinks): every
    # query of head h also sees a key that holds nothing at a learned logit started at this value,
    # so a head can put less than all its weight on real keys. Then a head that reads many keys
    # weakly gets each at e^score / (e^sink + ...), about e^(score - sink) while the sink dominates:
    # a sum that does not thin as the keys grow in number, where a plain softmax averages them.
    # Why: the sorter's symbol heads spread their weight over every symbol of the list, twice as
    # many in a list of 10, and the answers after the first need what they read (docs/runs/sorting.md).
    # A warm start from a run without a sink starts it at this value: 0 (the softmax off by one)
    # moves a trained model's output at step 0; far below the scores (-20) keeps it but gets next
    # to no gradient, its gradient being its own weight's size. From nothing at 4 the heads keep it
    # high and read their keys as a sum, which lists longer than training's push past what they
    # saw (10 numbers 1%, docs/runs/sorting.md). None: no sink.
    attention_sink: float | None = None
    # Sorting: no head at an answer query (a label after the list) reads the labels written
    # before it; each still reads what its kind allows of the list (a number head: itself only).
    # The label at the query is the one just written, so the next is the smallest number above
    # it (an equal one with a later letter first): one search whatever the count, where a query
    # that must leave out every number written so far reads more of them the longer the list.
    answer_hides_earlier_answer: bool = False
    # With the blind, the symbol heads (`symbol_heads`) still read the labels written before an
    # answer query. The blinded query cannot tell how many labels it has written, so it must stop
    # when the label just written is the largest number: with 10-digit numbers extrap-sort-blind
    # writes the EOS after the last label 34% of the time (teacher-forced), extrap-sort 96%. A
    # head that reads only labels, separators and the answer can count them, while the other
    # heads keep the one search.
    answer_blind_spares_symbol_heads: bool = False
    # At an answer query the symbol heads read only the answer: the labels written and the query
    # itself, not the list's labels, separators and colons. extrap-sort-window-scaled2's symbol
    # head spreads its weight over the list's symbols in about the same shares with 5 or 10
    # numbers, so its read of the labels written shares the softmax with a list twice as long;
    # read this way, a label written weighs what it weighs however long the list. It did not help
    # the count; trained from nothing it sorts longer numbers (extrap-sort-window-answer: 20-digit
    # lists 84.75% against 66.75%; a second seed 70.75%) and counts less: docs/runs/sorting.md.
    answer_symbol_heads_read_only_answer: bool = False
    # Sorting: every token of the list but its closing "=" reads, at every head, only its own
    # item (its label, colon, digits and separator); the "=" and the answer read as before. Why:
    # extrap-sort-window-scaled2 picks the list's last items wrongly about twice as often as its
    # first three with 10 numbers, and a late item's tokens have read up to nine items before
    # them where training showed four at most. Kept apart, an item's tokens hold the same
    # whatever the count, and the comparing is left to the queries that write the answer.
    # checkpoints/extrap-sort-apart (one 7,000-step schedule) counts 53.5% with 10 numbers, and
    # 64% trained on 4,500 steps more (checkpoints/extrap-sort-apart-ft, 57 minutes from nothing).
    list_items_read_alone: bool = False
    # With list_items_read_alone: a digit or a closer still reads the digits of the other items
    # (with digit_window, those at its height), so only the symbols are kept apart. It splits
    # extrap-sort-apart's trade (more count, less length than the window preset): trained from
    # nothing (checkpoints/extrap-sort-meet) it gets most of the length back and loses most of the
    # count, so the digits' reads across items carry both (docs/runs/sorting.md).
    list_digits_read_across_items: bool = False
    # With list_digits_read_across_items: a digit or a closer reads the digits of only this many
    # items just before its own. Why: extrap-sort-meet's list digits spread their reads over every
    # earlier item, each one's share falling as 1/count, and cut back at test time to the four
    # items training showed they drop 10-number lists from 15.5 to 3%: the far reads are used.
    # Trained in, a read that does not grow with the count leaves the far items to the loops
    # (each loop passes what an item read one step further down the list). Trained from nothing
    # with 1 it lands between extrap-sort-apart and -meet on both sides of their trade (10 numbers
    # 28-37% on two seeds, 20-digit lists 33-36%); with 2 no better than every item (3 and
    # 15% on two seeds; docs/runs/sorting.md). None: every item.
    list_digits_read_items_back: int | None = None
    # With list_items_read_alone: the list's tokens keep the state they have after this many
    # loops, so the answer queries of later loops read each item as it stood then (n_loops - 1
    # or more changes no answer at the trained loops). Why: a
    # linear probe on extrap-sort-apart-ft's closers reads the digit one below the leading one
    # 99.7% of the time after loop 1 and 72.6% after loop 4 (its own item's later loops
    # overwrite it), while the answer queries need the loops (2 loops count far less than 4).
    # Held after loop 1 on apart-ft's continuation it counts less (10 numbers 38 / 42% against
    # 64 / 65%): the later loops carry the comparison (docs/runs/sorting.md). None: every loop.
    list_items_settle_after: int | None = None
    # Sorting: the answer adds, to each remaining item's label logit, the sum over the other
    # remaining items of log P(it is smaller), read by a pairwise MLP of this many hidden units
    # from the two items' summaries (each item's most significant digit's final state), and a
    # label written is not written again (core/comparator.py). Why: an answer query picks with one
    # score per item, and on every sorting run here that single line fails between numbers
    # sharing their leading digit (a step decided one digit below it wrong about a quarter of the
    # time among 10 numbers); a pair is compared the same way however long the list. With 128 and
    # item_comparator_alone on extrap-sort-apart's weights, 2,500 steps: 10 numbers 96.25% against
    # apart-ft's 64% (checkpoints/extrap-sort-apart-pairwise, docs/runs/sorting.md). None: off.
    item_comparator: int | None = None
    # With item_comparator: the answer's label logits are the comparison's only (the
    # unembedding's label logits are dropped at the "=" and the answer, a letter no item carries
    # is never written), so every pick is the pairwise one: trained beside the unembedding's,
    # the comparison may be left a small part of a pick that then fails with the count as before.
    item_comparator_alone: bool = False
    # Sorting: each number's leading this-many digits and its closer read no digit below them
    # (core/masks.py hide_deep_digits), so an item's summary is a function of its leading digits
    # at any length. Why: on extrap-sort-pairwise a pair of 20-digit numbers decided one digit
    # below the leading one is ordered 67% of the time against 97% at 5 digits, and the place two
    # below reads 91% after loop 2 and 42% after loop 4: the later loops carry the lower digits of
    # a long number, which training never showed, into its summary. At the trained 5 digits and
    # leading_digits=5 nothing is hidden: training is unchanged (the weights come out byte-identical)
    # and 20-digit lists read 96.5% against 80% (checkpoints/extrap-sort-apart-pairwise). None: off.
    leading_digits: int | None = None
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
    # A linear readout of every position's final state (through ln_final), W_products
    # [d_model k 2 10] and b_products, trained by train.partial_product_loss to give, as two
    # digit classes each (units, tens), the k partial products a_(i-j) * b_j the column the
    # position predicts adds. Why classes: a run that adds the products as magnitudes holds
    # the tens of every product (a magnitude's tens are linear in it) but not the units of
    # the products it learned last, and an answer digit is the units of their sum. The
    # value is k, the most multiplier digits the readout covers. Not used to answer.
    partial_product_probe: int | None = None
    # A linear readout of every position's final state (through ln_final), W_carry
    # [d_model n_classes] and b_carry, trained by train.carry_loss to give the carry into the
    # answer column the position predicts as one class out of n_classes (0..n_classes - 1).
    # Why classes: an N x 3 run's last errors are large carries (9 and up) taken one too
    # small, which a carry held as a magnitude blurs and a class does not; the running-sum
    # readout asks for that magnitude. The value is n_classes, one more than the largest
    # carry the task makes (28 for multipliers of up to 3 digits). Not used to answer. Added
    # to a cycle from extrap-mul-digits-ft11 it cost 20 x 3 18 points and the loop its
    # settling (docs/runs/multiplication.md); from nothing it is untried.
    carry_probe: int | None = None
    # Sorting: a linear readout of every position's final state (through ln_final), W_order
    # [d_model], trained by train.order_loss to put the items of one list in order of value
    # where each item's closing separator reads it (a pairwise loss: only the order counts).
    # Why: an answer query picks the next number through a linear key on the items' states,
    # and extrap-sort-apart-ft's summaries hold the digits below the leading one but not
    # lined up along the value, so the steps between numbers that share their leading digit
    # fail most. Not used to answer. Tried on extrap-sort-apart-ft's continuation: it lines the
    # items up but not the close ones, and the answers gain nothing (docs/runs/sorting.md).
    order_probe: bool = False

    def __post_init__(self):
        if isinstance(self.vocab, dict):
            object.__setattr__(self, "vocab", Vocab.from_dict(self.vocab))
        check_choices_and_sizes(self)
        d_head = check_widths(self)
        check_attention(self, d_head)
        max_loops = check_loops(self)
        # None fields are resolved once here, so downstream code always sees integers;
        # `replace` re-derives the ones that were left unset.
        derived = {name for name in ("d_head", "d_mlp", "max_loops") if getattr(self, name) is None}
        object.__setattr__(self, "_derived", frozenset(derived))
        object.__setattr__(self, "d_head", d_head)
        object.__setattr__(self, "d_mlp", self.d_mlp if self.d_mlp is not None else 4 * self.d_model)
        object.__setattr__(self, "max_loops", max_loops)
        object.__setattr__(self, "offset_heads", tuple(self.offset_heads))  # a list read from JSON
        object.__setattr__(self, "offset_head_numbers", tuple(self.offset_head_numbers))

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
        return (self.rotary != "none" or self.abacus_window is not None or self.digit_window is not None
                or self.multiplier_heads > 0
                or bool(self.offset_heads) or self.symbol_heads > 0 or self.number_heads > 0
                or self.answer_hides_earlier_answer or self.answer_symbol_heads_read_only_answer
                or self.list_items_read_alone or self.leading_digits is not None)

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
_OMITTED_AT_DEFAULT = ("rotary", "rotary_base", "abacus_window", "digit_window", "halt_tol", "unembed_init_std", "attn_bias",
                       "unembed_bias", "multiplier_heads", "multiplier_select", "offset_heads", "offset_head_numbers",
                       "offset_heads_exclusive",
                       "symbol_heads", "number_heads", "running_sum_probe", "partial_product_probe", "carry_probe", "order_probe", "softmax_length_scale", "attention_sink",
                       "answer_hides_earlier_answer", "answer_blind_spares_symbol_heads",
                       "answer_symbol_heads_read_only_answer", "list_items_read_alone",
                       "list_digits_read_across_items", "list_digits_read_items_back", "list_items_settle_after", "item_comparator", "item_comparator_alone", "leading_digits")

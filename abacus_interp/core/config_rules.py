"""The rules a `ModelConfig` must satisfy, checked when one is built: every named option one of
its choices, sizes that fit a tensor, widths that agree, attention options only where the family
has them and the heads of several kinds no more than the heads there are. Each rule fails with a
UserError that names the field and what to set instead. Each rule takes the ModelConfig being
built (`cfg`, from its __post_init__); this module does not import config.py, which imports it."""

from __future__ import annotations

import math

from ..errors import UserError
from .family_registry import family_class

ACTIVATIONS = ("gelu", "relu", "swiglu")
NORMS = ("pre", "none")
INJECTIONS = ("add", "norm_add", "none")
POSITIONALS = ("abacus", "learned", "none")
ROTARIES = ("none", "abacus", "abacus_closers")
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


def check_choices_and_sizes(cfg) -> None:
    """Every named option is one of its choices; every size is positive and fits a tensor."""
    for name, value, allowed in [
        ("activation", cfg.activation, ACTIVATIONS),
        ("norm", cfg.norm, NORMS),
        ("input_injection", cfg.input_injection, INJECTIONS),
        ("positional", cfg.positional, POSITIONALS),
        ("abacus_offset_mode", cfg.abacus_offset_mode, OFFSET_MODES),
        ("rotary", cfg.rotary, ROTARIES),
        ("attention_backend", cfg.attention_backend, BACKENDS),
        ("multiplier_select", cfg.multiplier_select, MULTIPLIER_SELECTS),
    ]:
        if value not in allowed:
            raise UserError(f"ModelConfig.{name}={value!r}; choose one of {allowed}")
    family_class(cfg.family)  # a UserError naming the registered families when unknown
    for name in ("d_model", "n_heads", "n_layers", "n_loops", "max_seq_len"):
        if getattr(cfg, name) < 1:
            raise UserError(f"ModelConfig.{name} must be >= 1, got {getattr(cfg, name)}")
    for name in ("d_model", "n_heads", "d_head", "d_mlp", "max_seq_len", "abacus_max_offset"):
        if getattr(cfg, name) is not None and getattr(cfg, name) > MAX_DIMENSION:
            raise UserError(f"ModelConfig.{name}={getattr(cfg, name)} is larger than any tensor can be "
                            f"(at most {MAX_DIMENSION:,})")
    if cfg.n_layers > MAX_LAYERS_AND_LOOPS:
        raise UserError(f"ModelConfig.n_layers={cfg.n_layers}: at most {MAX_LAYERS_AND_LOOPS:,} layers")
    if cfg.input_injection == "norm_add" and cfg.norm == "none":
        raise UserError("input_injection='norm_add' normalises the state with LayerNorm; it needs norm='pre'")
    if cfg.answer_slots and not {"=", "_"} <= set(cfg.vocab.symbols):
        raise UserError(
            "ModelConfig.answer_slots needs '=' and the placeholder '_' in the vocabulary; "
            "build the model from a task with answer_format='slots'"
        )
    if cfg.abacus_max_offset < 0:
        raise UserError("ModelConfig.abacus_max_offset must be >= 0")
    probe = cfg.partial_product_probe
    if probe is not None and not _is_whole(probe, 1, MAX_DIMENSION):
        raise UserError(f"ModelConfig.partial_product_probe={probe!r}: the most multiplier digits the readout "
                        "covers, a whole number >= 1 (e.g. 3 for multipliers of up to 3 digits), or null for none")
    classes = cfg.carry_probe
    if classes is not None and not _is_whole(classes, 2, MAX_DIMENSION):
        raise UserError(f"ModelConfig.carry_probe={classes!r}: the number of carry classes the readout gives, a "
                        "whole number >= 2 (one more than the largest carry, e.g. 28 for multipliers of up to 3 "
                        "digits), or null for none")
    if cfg.halt_tol is not None and not (cfg.halt_tol > 0 and cfg.answer_slots):
        raise UserError(
            f"ModelConfig.halt_tol={cfg.halt_tol}: adaptive halting needs a positive tolerance and "
            "answer_slots (a task with answer_format='slots'); leave it null otherwise"
        )
    if cfg.unembed_init_std is not None and not cfg.unembed_init_std > 0:
        raise ValueError(f"ModelConfig.unembed_init_std={cfg.unembed_init_std} must be > 0, or null for init_std")
    if cfg.unembed_init_std is not None and cfg.tie_unembed:
        raise ValueError("ModelConfig.unembed_init_std sets W_U's init, but tie_unembed=true has no W_U; leave it null")


def check_widths(cfg) -> int:
    """The head width (d_head, derived when unset), after checking the widths agree."""
    d_head = cfg.d_head if cfg.d_head is not None else cfg.d_model // cfg.n_heads
    if d_head < 1:
        raise UserError(f"d_head={d_head}: set d_head or use fewer heads than d_model")
    if cfg.d_mlp is not None and cfg.d_mlp < 1:
        raise UserError(f"ModelConfig.d_mlp must be >= 1, or null for 4 * d_model; got {cfg.d_mlp}")
    if cfg.d_head is None and cfg.d_model % cfg.n_heads:
        raise UserError(
            f"d_model={cfg.d_model} is not divisible by n_heads={cfg.n_heads}; "
            "set d_head explicitly or change n_heads"
        )
    return d_head


def check_attention(cfg, d_head: int) -> None:
    """Rotary positions, the window and the heads of several kinds: consistent, and only
    where the family has them."""
    for name in ("abacus_window", "digit_window"):
        window = getattr(cfg, name)
        if window is not None and (isinstance(window, bool) or window < 0):
            raise UserError(f"ModelConfig.{name}={window!r}; use an integer >= 0, or null for no window")
    if cfg.rotary != "none" and d_head % 2:
        raise UserError(f"rotary positions turn pairs of channels: d_head={d_head} must be even")
    if isinstance(cfg.multiplier_heads, bool) or not 0 <= cfg.multiplier_heads < cfg.n_heads:
        raise UserError(
            f"ModelConfig.multiplier_heads={cfg.multiplier_heads!r}: use an integer in 0..n_heads-1 "
            f"(n_heads={cfg.n_heads}); at least one head must read the multiplicand and the carry"
        )
    _check_offset_heads(cfg)
    if isinstance(cfg.symbol_heads, bool) or not isinstance(cfg.symbol_heads, int) or cfg.symbol_heads < 0:
        raise UserError(f"ModelConfig.symbol_heads={cfg.symbol_heads!r}: use an integer >= 0")
    if isinstance(cfg.number_heads, bool) or not isinstance(cfg.number_heads, int) or cfg.number_heads < 0:
        raise UserError(f"ModelConfig.number_heads={cfg.number_heads!r}: use an integer >= 0")
    if len(cfg.offset_heads) + cfg.symbol_heads + cfg.number_heads + cfg.multiplier_heads > cfg.n_heads:
        raise UserError(
            f"ModelConfig: {len(cfg.offset_heads)} offset heads, {cfg.symbol_heads} symbol heads, "
            f"{cfg.number_heads} number heads and {cfg.multiplier_heads} multiplier heads are more than "
            f"n_heads={cfg.n_heads}; give fewer special heads or a larger n_heads"
        )
    scale = cfg.softmax_length_scale
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                              or not 0 < scale < math.inf):
        raise UserError(f"ModelConfig.softmax_length_scale={scale!r}: use a finite number > 0 "
                        "(each head's starting s in s * ln(keys)), or null for the plain softmax")
    if scale is not None and cfg.family != "looped":
        raise UserError(f"softmax_length_scale is an option of the looped family's attention; "
                        f"family={cfg.family!r}: leave it unset")
    sink = cfg.attention_sink
    if sink is not None and (isinstance(sink, bool) or not isinstance(sink, (int, float)) or not math.isfinite(sink)):
        raise UserError(f"ModelConfig.attention_sink={sink!r}: use a finite number (each head's starting sink "
                        "logit, e.g. 0.0), or null for no sink")
    if sink is not None and cfg.family != "looped":
        raise UserError(f"attention_sink is an option of the looped family's attention; family={cfg.family!r}: "
                        "leave it unset")
    if cfg.multiplier_heads and cfg.rotary == "none":
        raise UserError(
            "ModelConfig.multiplier_heads tells the multiplier's digits apart by rotating their keys: "
            "set rotary='abacus' (or 'abacus_closers') too"
        )
    _check_answer_masks(cfg)
    if cfg.rotary_base <= 1:
        raise UserError(f"ModelConfig.rotary_base={cfg.rotary_base} must be > 1")
    if cfg.attends_by_index and cfg.family != "looped":
        raise UserError(
            f"rotary, abacus_window, digit_window and the head kinds are options of the looped family's attention; "
            f"family={cfg.family!r} has none of them: leave them unset"
        )


def _check_answer_masks(cfg) -> None:
    """The sorting answer's masks: the blind's spared symbol heads and the symbol heads that read
    only the answer, each a bool that needs the heads it acts on; the list's items kept apart."""
    for name in ("answer_blind_spares_symbol_heads", "answer_symbol_heads_read_only_answer", "list_items_read_alone",
                 "list_digits_read_across_items"):
        if not isinstance(getattr(cfg, name), bool):
            raise UserError(f"ModelConfig.{name}={getattr(cfg, name)!r}: use true or false")
    _check_list_items_apart(cfg)
    _check_item_comparator(cfg)
    _check_leading_digits(cfg)
    if cfg.answer_blind_spares_symbol_heads and not (cfg.answer_hides_earlier_answer and cfg.symbol_heads):
        raise UserError("ModelConfig.answer_blind_spares_symbol_heads=true spares the symbol heads from the blind: "
                        "it needs answer_hides_earlier_answer=true and symbol_heads >= 1")
    if cfg.answer_symbol_heads_read_only_answer and not cfg.symbol_heads:
        raise UserError("ModelConfig.answer_symbol_heads_read_only_answer=true narrows the symbol heads: "
                        "it needs symbol_heads >= 1")
    if cfg.answer_symbol_heads_read_only_answer and cfg.answer_hides_earlier_answer \
            and not cfg.answer_blind_spares_symbol_heads:
        raise UserError("ModelConfig.answer_symbol_heads_read_only_answer=true with answer_hides_earlier_answer=true "
                        "needs answer_blind_spares_symbol_heads=true: a blinded symbol head would read only itself")


def _check_list_items_apart(cfg) -> None:
    """The list's items kept apart: the digits meeting across items needs the items apart, and
    how many items back they meet needs the digits meeting; their state held after a loop needs
    them apart too."""
    if cfg.list_digits_read_across_items and not cfg.list_items_read_alone:
        raise UserError("ModelConfig.list_digits_read_across_items=true lets digits read other items where "
                        "list_items_read_alone=true keeps them apart: set list_items_read_alone=true too")
    back = cfg.list_digits_read_items_back
    if back is not None and not _is_whole(back, 1):
        raise UserError(f"ModelConfig.list_digits_read_items_back={back!r}: use a whole number >= 1 "
                        "(how many items before its own a list digit reads), or leave it unset")
    if back is not None and not cfg.list_digits_read_across_items:
        raise UserError("ModelConfig.list_digits_read_items_back narrows the digits' reads across items: "
                        "set list_digits_read_across_items=true too")
    settle = cfg.list_items_settle_after
    if settle is not None and not _is_whole(settle, 1):
        raise UserError(f"ModelConfig.list_items_settle_after={settle!r}: use a whole number >= 1 (the loops after "
                        "which the list's tokens keep their state), or leave it unset")
    if settle is not None and not cfg.list_items_read_alone:
        raise UserError("ModelConfig.list_items_settle_after holds each list item's state, which is its own only "
                        "where list_items_read_alone=true keeps the items apart: set list_items_read_alone=true too")


def _check_item_comparator(cfg) -> None:
    """Sorting's pairwise answer: a width, a vocabulary of labelled items, and `alone` only with it."""
    width = cfg.item_comparator
    if width is not None and not _is_whole(width, 1):
        raise UserError(f"ModelConfig.item_comparator={width!r}: use a whole number >= 1 (the pairwise comparison's "
                        "hidden units), or leave it unset")
    if width is not None and not _is_sorting_vocab(cfg):
        raise UserError("ModelConfig.item_comparator compares a sorting list's labelled items before its \"=\", and this vocabulary "
                        "has no letter labels or no \"=\": use it with the sorting task only")
    if not isinstance(cfg.item_comparator_alone, bool):
        raise UserError(f"ModelConfig.item_comparator_alone={cfg.item_comparator_alone!r}: use true or false")
    if cfg.item_comparator_alone and width is None:
        raise UserError("ModelConfig.item_comparator_alone=true answers with the pairwise comparison only: "
                        "set item_comparator (its hidden units) too")


def _check_leading_digits(cfg) -> None:
    """Leading digits kept from the deep ones: a whole number, on a sorting list only."""
    leading = cfg.leading_digits
    if leading is None:
        return
    if not _is_whole(leading, 1):
        raise UserError(f"ModelConfig.leading_digits={leading!r}: use a whole number >= 1 (the leading digits of each "
                        "number that read only one another), or leave it unset")
    if not _is_sorting_vocab(cfg):
        raise UserError("ModelConfig.leading_digits reads each number's length off the whole prompt, which a sorting "
                        "list gives and an answer written digit by digit does not: use it with the sorting task only")


def _is_sorting_vocab(cfg) -> bool:
    """Whether the vocabulary is a sorting list's: letter labels and the "=" that closes the list."""
    return bool(cfg.vocab.label_ids) and "=" in cfg.vocab.symbols


def _is_whole(value, least: int, most: int | None = None) -> bool:
    """Whether `value` is an int (not a bool) in least..most (no upper bound with most None)."""
    return (isinstance(value, int) and not isinstance(value, bool) and value >= least
            and (most is None or value <= most))


def _check_offset_heads(cfg) -> None:
    """Offset heads: integer distances, at most one number each, exclusive only with them."""
    if not isinstance(cfg.offset_heads, (tuple, list)) or any(
            isinstance(d, bool) or not isinstance(d, int) for d in cfg.offset_heads):
        raise UserError(f"ModelConfig.offset_heads={cfg.offset_heads!r}: use a list of integers "
                        "(how far below its query, on the Abacus index, each such head reads)")
    numbers = cfg.offset_head_numbers
    if not isinstance(numbers, (tuple, list)) or any(
            isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in numbers) or (
            numbers and len(numbers) != len(cfg.offset_heads)):
        raise UserError(f"ModelConfig.offset_head_numbers={numbers!r}: use () or one integer >= 1 per offset "
                        f"head ({len(cfg.offset_heads)} here): which number of the sequence each reads, "
                        "1 the first operand, 2 the second, 3 the answer")
    if cfg.multiplier_heads and 2 in numbers:
        raise UserError(f"ModelConfig.offset_head_numbers={numbers!r}: number 2, the multiplier, is hidden from "
                        "every head but the multiplier heads here; read it with multiplier_heads")
    if not isinstance(cfg.offset_heads_exclusive, bool) or (cfg.offset_heads_exclusive and not cfg.offset_heads):
        raise UserError(f"ModelConfig.offset_heads_exclusive={cfg.offset_heads_exclusive!r}: use true or false, "
                        "and true only with offset_heads")


def check_loops(cfg) -> int:
    """max_loops (derived when unset: 4 x n_loops for a loop, 1 for a single pass), checked."""
    looped = cfg.family == "looped"
    if not looped and (cfg.n_loops != 1 or cfg.max_loops not in (None, 1)):
        raise UserError(
            f"family={cfg.family!r} runs once (its recurrence is over positions, not a loop); "
            f"set n_loops=1 and leave max_loops unset (got n_loops={cfg.n_loops}, max_loops={cfg.max_loops})"
        )
    max_loops = cfg.max_loops if cfg.max_loops is not None else (4 * cfg.n_loops if looped else 1)
    if max_loops < cfg.n_loops:
        raise UserError(f"max_loops={max_loops} is below the trained depth n_loops={cfg.n_loops}")
    if max_loops > MAX_LAYERS_AND_LOOPS:
        raise UserError(
            f"max_loops={max_loops}: a model runs at most {MAX_LAYERS_AND_LOOPS:,} loops (it builds a set of "
            "hook points for every loop it can run, about a millisecond each); ask for fewer loops"
        )
    return max_loops

"""Which keys each query may see: the causal mask with padding, the window on the Abacus index,
heads of several kinds (`HeadKinds`: offset, windowed, symbol, number and multiplier heads), and
the sorting answer's blind to the labels written before it (`hide_earlier_answer`), its symbol
heads narrowed to the answer (`symbol_heads_read_only_answer`), the list's items kept apart
(`keep_list_items_apart`), the
window that keeps digits and closers to nearby digits (`hide_far_digits`) and the leading digits
kept from the deep ones (`hide_deep_digits`). Each is read off the Abacus index alone, so cached
decoding rebuilds the same rows from the index of every position. `AttentionContext.build` (attention.py) applies them once per forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from .config import ModelConfig
from .positions import closer_indices


@dataclass(frozen=True)
class HeadKinds:
    """Which keys each head of a layer may see, where heads differ (`ModelConfig.offset_heads`,
    `multiplier_heads`, `symbol_heads`, `number_heads`). Heads are ordered by kind: first the
    offset heads (head h sees only the digits exactly `offsets[h]` below its query on the Abacus
    index), then the windowed heads (the window, as every head of a one-kind model), then the
    symbol heads (only the tokens that are not digits), then the number heads (only the query's
    own number and what is written just before it, `number_group`), then the multiplier heads (only the
    multiplier of `a*b`; with `fixed_multiplier`, multiplier head j only its digit j)."""

    n_heads: int
    offsets: tuple[int, ...] = ()
    multiplier_heads: int = 0
    fixed_multiplier: bool = True
    symbol_heads: int = 0
    number_heads: int = 0
    offset_numbers: tuple[int, ...] = ()  # the number each offset head reads, () any (`number_ordinal`)
    offset_exclusive: bool = False  # an offset head sees itself only where its column is absent

    @classmethod
    def of(cls, cfg: ModelConfig) -> HeadKinds | None:
        """The kinds of `cfg`'s heads, or None when every head is of the one kind."""
        if not cfg.offset_heads and not cfg.multiplier_heads and not cfg.symbol_heads and not cfg.number_heads:
            return None
        return cls(cfg.n_heads, tuple(cfg.offset_heads), cfg.multiplier_heads, cfg.multiplier_select == "fixed",
                   cfg.symbol_heads, cfg.number_heads, tuple(cfg.offset_head_numbers), cfg.offset_heads_exclusive)

    @property
    def windowed_heads(self) -> int:
        return self.n_heads - len(self.offsets) - self.symbol_heads - self.number_heads - self.multiplier_heads

    @property
    def symbol_head_range(self) -> range:
        """Which heads of a layer are symbol heads (after the offset and the windowed heads)."""
        first = len(self.offsets) + self.windowed_heads
        return range(first, first + self.symbol_heads)

    def kind_of(self, head: int) -> str:
        """Head `head`'s kind in words: "offset +1" (reads the digits one index below its
        query; "offset -1": one above; "offset +1 of number 3": only the third number's digit
        there), "windowed", "symbol", "number" or "multiplier"."""
        if head < len(self.offsets):
            of_number = f" of number {self.offset_numbers[head]}" if self.offset_numbers else ""
            return f"offset {self.offsets[head]:+d}{of_number}"
        from_the_end = self.n_heads - head  # 1 for the last head
        for kind, count in (("multiplier", self.multiplier_heads), ("number", self.number_heads),
                            ("symbol", self.symbol_heads)):
            if from_the_end <= count:
                return kind
            from_the_end -= count
        return "windowed"


def head_kinds(cfg: ModelConfig) -> list[str]:
    """The keys each head of a layer of `cfg`'s model reads, in words: its kind
    (`HeadKinds.kind_of`; "windowed" for every head of a one-kind model), and ", multiplier
    hidden" for every other head where the model has multiplier heads, as they then hide the
    multiplier's digits from the rest. Two heads of equal words in one config see the same keys
    (the sorting answer's masks, `answer_hides_earlier_answer` and its kin, are not in the words)."""
    kinds = HeadKinds.of(cfg)
    if kinds is None:
        return ["windowed"] * cfg.n_heads
    hidden = ", multiplier hidden" if kinds.multiplier_heads else ""
    return [kind if kind == "multiplier" else kind + hidden for kind in map(kinds.kind_of, range(cfg.n_heads))]


def attention_mask(
    key_valid: Bool[Tensor, "batch key_pos"] | None,
    n_query: int,
    n_key: int,
    device,
    index: Int[Tensor, "batch key_pos"] | None = None,
    window: int | None = None,
    heads: HeadKinds | None = None,
) -> Bool[Tensor, "batch head_or_1 query_pos key_pos"] | None:
    """Causal mask for queries that are the last `n_query` of `n_key` positions, also hiding
    padding keys and, with `window`, every key whose Abacus `index` differs from the query's
    by more than `window`. A query always sees itself, so no softmax row is empty (no NaN).
    None means "plain causal with no padding", which SDPA handles without a mask.

    With `heads` (heads of several kinds, `HeadKinds`) the mask is per head: the windowed
    heads see what is described above (minus the multiplier's digits where there are
    multiplier heads), offset, symbol and multiplier heads see only their own keys."""
    if heads is None and key_valid is None and window is None and n_query == n_key:
        return None
    itself, causal = _itself_and_causal(n_query, n_key, device)
    visible = causal[None]  # [1 or batch, query key]
    if key_valid is not None:
        visible = visible & key_valid[:, None, :]
    near = None
    if window is not None:
        if index is None:
            raise ValueError("a window on the Abacus index needs the index of every position")
        query_index = index[:, -n_query:, None]  # [batch query 1]
        near = (query_index - index[:, None, :]).abs() <= window  # [batch query key]
    if heads is not None:
        return _per_head_mask(visible, near, itself[None], index, heads)
    if key_valid is None and window is None:
        return causal[None, None]
    if near is not None:
        visible = visible & near
    return (visible | itself[None])[:, None]  # [batch 1 query key]


def number_ordinal(index: Int[Tensor, "batch pos"]) -> Int[Tensor, "batch pos"]:
    """Which number of the sequence each digit belongs to (1 for the first, 2 for the second,
    ...), 0 for every other token. The Abacus index returns to 0 between numbers, so a number
    is a run of nonzero indices: in `rev(a)*rev(b)=answer`, a is 1, the multiplier b is 2."""
    started = _numbers_started(index)
    return torch.where(index > 0, started, torch.zeros_like(index))


def number_group(index: Int[Tensor, "batch pos"]) -> Int[Tensor, "batch pos"]:
    """The number each token is read with by a number head: a digit's own number (as
    `number_ordinal`); a token right after a digit the number it closes; every other token the
    number written after it. So each item of a list is one group, its label, its digits and the
    separator that ends it ("a:05898," of `a:05898,b:1=`), and the closing separator sees the
    whole item; the tokens after the last number's closing "=" (a sorting answer's labels) are
    one group more; answer digits, being digits, are numbers of their own."""
    started = _numbers_started(index)
    is_digit = index > 0
    closes = torch.nn.functional.pad(is_digit[:, :-1], (1, 0), value=False)  # [batch pos]: a digit just before
    return torch.where(is_digit | closes, started, started + 1)


def answer_positions(index: Int[Tensor, "batch pos"]) -> Bool[Tensor, "batch pos"]:
    """The tokens after the closing separator of the sequence's last number: a sorting answer's
    labels (and the EOS and padding after them), the group `number_group` puts after the last item.
    Read off the index alone, "last" means last in the sequence given: a digit written into the
    answer (which a sorting answer, letters only, never holds when right) starts a number, and the
    labels before it then count as the list's, so a cached pass and a fresh one over such a
    sequence differ after it (tests/test_answer_blind.py pins this down)."""
    group = number_group(index)
    return group > _numbers_started(index)[:, -1:]


def hide_earlier_answer(
    mask: Bool[Tensor, "batch head_or_1 query_pos key_pos"] | None,
    index: Int[Tensor, "batch key_pos"],
    n_query: int,
    n_key: int,
    device,
    spared: range = range(0),
) -> Bool[Tensor, "batch head_or_1 query_pos key_pos"]:
    """`mask` (None: plain causal) with every answer query's earlier answer tokens hidden from
    every head but the `spared` ones (`ModelConfig.answer_hides_earlier_answer`,
    `answer_blind_spares_symbol_heads`; sparing a head needs a per-head `mask`); the query still
    sees itself."""
    if spared and (mask is None or mask.shape[1] == 1 or mask.shape[1] <= max(spared)):
        raise ValueError(f"sparing heads {list(spared)} from the blind needs a per-head mask, one row per head")
    itself, causal = _itself_and_causal(n_query, n_key, device)
    if mask is None:
        mask = causal[None, None]  # [1 1 query key]
    answer = answer_positions(index)  # [batch key]
    earlier = answer[:, -n_query:, None] & answer[:, None, :] & ~itself[None]  # [batch query key]
    hidden = earlier[:, None]  # [batch 1 query key]
    if spared:
        blinded = torch.ones(mask.shape[1], dtype=torch.bool, device=device)  # [head]
        blinded[list(spared)] = False
        hidden = hidden & blinded[None, :, None, None]  # [batch head query key]
    return mask & ~hidden


def symbol_heads_read_only_answer(
    mask: Bool[Tensor, "batch head query_pos key_pos"],
    index: Int[Tensor, "batch key_pos"],
    n_query: int,
    device,
    symbol_heads: range,
) -> Bool[Tensor, "batch head query_pos key_pos"]:
    """`mask` (per head) with the `symbol_heads` of every answer query narrowed to the answer's
    tokens before it and itself (`ModelConfig.answer_symbol_heads_read_only_answer`): the labels
    written, not the list's symbols. Queries before the answer (the list, its closing "=") keep
    what their kind reads."""
    if not symbol_heads or mask.shape[1] == 1 or mask.shape[1] <= max(symbol_heads):
        raise ValueError(f"narrowing symbol heads {list(symbol_heads)} needs some and a per-head mask, one row per head")
    answer = answer_positions(index)  # [batch key]
    # an answer query is an answer position itself, so it keeps itself
    outside = answer[:, -n_query:, None] & ~answer[:, None, :]  # [batch query key]
    narrowed = torch.zeros(mask.shape[1], dtype=torch.bool, device=device)  # [head]
    narrowed[symbol_heads.start:symbol_heads.stop] = True
    return mask & ~(outside[:, None] & narrowed[None, :, None, None])


def keep_list_items_apart(
    mask: Bool[Tensor, "batch head_or_1 query_pos key_pos"] | None,
    index: Int[Tensor, "batch key_pos"],
    n_query: int,
    n_key: int,
    device,
    digits_meet: bool = False,
    items_back: int | None = None,
) -> Bool[Tensor, "batch head_or_1 query_pos key_pos"]:
    """`mask` (None: plain causal) with every query of the list but its closing "=" narrowed, at
    every head, to its own item (`number_group`: label, colon, digits and the separator that
    ends it; `ModelConfig.list_items_read_alone`). The "=" and the answer after it read as
    `mask` lets them. So what the list's tokens hold of an item is the same whatever comes
    before it, however many items: the comparing is left to the queries that write the answer.
    With `digits_meet` (`ModelConfig.list_digits_read_across_items`) a digit or a closer still
    reads the other items' digits that `mask` lets it: only the symbols are kept apart. With
    `items_back` (`ModelConfig.list_digits_read_items_back`) only those of the `items_back` items
    just before its own: what a digit reads no longer grows with the count."""
    if mask is None:
        mask = _itself_and_causal(n_query, n_key, device)[1][None, None]  # [1 1 query key]
    group = number_group(index)  # [batch key]
    in_list = list_positions(index)  # [batch key]
    query_group, query_in_list = group[:, -n_query:, None], in_list[:, -n_query:, None]  # [batch query 1]
    other_item = query_in_list & (query_group != group[:, None, :])  # [batch query key]
    if digits_meet:
        digit_query = closer_indices(index)[:, -n_query:, None] > 0  # [batch query 1]: a digit or a closer
        meets = digit_query & (index > 0)[:, None, :]  # [batch query key]
        if items_back is not None:
            meets = meets & (query_group - group[:, None, :] <= items_back)
        other_item = other_item & ~meets
    return mask & ~other_item[:, None]


def list_positions(index: Int[Tensor, "batch pos"]) -> Bool[Tensor, "batch pos"]:
    """The tokens of a sorting list but its closing "=": each item's label, colon, digits and
    separator. The "=" closes the last number and is the first answer query; the answer
    follows it (`answer_positions` marks those after it). Left padding counts with the first
    item (no query reads a padding key); as for `answer_positions`, a digit written into the
    answer starts a number, and the labels before it then count as the list's."""
    group = number_group(index)
    started = _numbers_started(index)
    last = started[:, -1:]  # [batch 1]: the sequence's last number
    closes_last = (group == started) & (index == 0) & (started == last)  # [batch pos]
    return (group <= last) & ~closes_last


def _numbers_started(index: Int[Tensor, "batch pos"]) -> Int[Tensor, "batch pos"]:
    """How many numbers (runs of nonzero Abacus index) have begun at or before each position."""
    is_digit = index > 0
    starts = is_digit & ~torch.nn.functional.pad(is_digit[:, :-1], (1, 0), value=False)
    return starts.long().cumsum(dim=1)


def _per_head_mask(visible, near, itself, index, heads: HeadKinds):
    """The per-head mask of `attention_mask(..., heads=...)`, from its causal-and-valid keys
    `visible` [1 or batch, query key], the window `near` (None: no window) and `itself`."""
    if index is None:
        raise ValueError("heads of several kinds need the Abacus index of every position")
    batch, n_query = index.shape[0], itself.shape[-2]
    multiplier = (number_ordinal(index) == 2)[:, None, :] if heads.multiplier_heads else None  # [batch 1 key]
    readable = visible & ~multiplier if multiplier is not None else visible.expand(batch, -1, -1)
    windowed = readable if near is None else readable & near
    kinds = []
    if heads.offsets:
        # offset head h: the digits (and answer slots) whose index is exactly offsets[h] below
        # the query's, so it hands the MLP one column (a_(i-d), say) at any number length
        distance = index[:, -n_query:, None] - index[:, None, :]  # [batch query key]
        digit = (index > 0)[:, None, :]  # [batch 1 key]
        columns = [readable & digit & (distance == d) for d in heads.offsets]  # [batch query key] each
        if heads.offset_numbers:  # head h: only number offset_numbers[h]'s digit at that distance
            ordinal = number_ordinal(index)[:, None, :]  # [batch 1 key]
            columns = [column & (ordinal == n) for column, n in zip(columns, heads.offset_numbers, strict=True)]
        for column in columns:
            sees_itself = _itself_where_nothing_else(column, itself) if heads.offset_exclusive else itself
            kinds.append((column | sees_itself)[:, None])
    kinds.append((windowed | itself)[:, None].expand(-1, heads.windowed_heads, -1, -1))
    if heads.symbol_heads:  # the tokens that are not digits (index 0), at any distance
        symbols = (readable & (index == 0)[:, None, :]) | itself  # [batch query key]
        kinds.append(symbols[:, None].expand(-1, heads.symbol_heads, -1, -1))
    if heads.number_heads:  # the query's own number, at any distance and any count of numbers
        group = number_group(index)  # [batch key]
        own = (readable & (group[:, -n_query:, None] == group[:, None, :])) | itself  # [batch query key]
        kinds.append(own[:, None].expand(-1, heads.number_heads, -1, -1))
    if heads.multiplier_heads:
        kinds.append(_multiplier_mask(visible, multiplier, itself, index, heads))
    return torch.cat(kinds, dim=1)  # [batch head query key]


def _itself_where_nothing_else(reads: Tensor, itself: Tensor) -> Tensor:
    """The query itself only where `reads` leaves its softmax row empty: a head that copies one
    key whole where that key exists, and still has a key to read where it does not."""
    return itself & ~reads.any(-1, keepdim=True)


def _multiplier_mask(visible, multiplier, itself, index, heads: HeadKinds):
    """The multiplier heads' part of the per-head mask: [batch multiplier_heads query key]."""
    reads_multiplier = (visible & multiplier)[:, None]  # [batch 1 query key]
    if heads.fixed_multiplier:  # multiplier head j: the multiplier's digit j (units = 0) only
        # every number of a sequence starts at the same index (offset + 1): subtract it
        first = index.masked_fill(index == 0, torch.iinfo(index.dtype).max).amin(dim=1, keepdim=True)  # [batch 1]
        digit = (index - first)[:, None, None, :]  # [batch 1 1 key]: 0 for b_0
        head_digit = torch.arange(heads.multiplier_heads, device=index.device)[None, :, None, None]  # [1 head 1 1]
        reads_multiplier = reads_multiplier & (digit == head_digit)  # [batch head query key]
        # the query itself only where the head's digit is absent (a shorter multiplier): where
        # it is present the head copies it whole, instead of learning to ignore its own query
        # (measured: a head that could see itself still put 68% there after 1,500 steps)
        fallback = _itself_where_nothing_else(reads_multiplier, itself[:, None])  # [batch head query key]
    else:
        fallback = itself[:, None]
    return (reads_multiplier | fallback).expand(index.shape[0], heads.multiplier_heads, -1, -1)


def hide_far_digits(
    mask: Bool[Tensor, "batch head_or_1 query_pos key_pos"] | None,
    index: Int[Tensor, "batch key_pos"],
    n_query: int,
    n_key: int,
    device,
    window: int,
) -> Bool[Tensor, "batch head_or_1 query_pos key_pos"]:
    """`mask` (None: plain causal) with every digit more than `window` away on the Abacus index
    hidden from each digit query and each number's closer (`ModelConfig.digit_window`). A closer
    counts at the index past its number's last digit (`closer_indices`), so it reads its
    number's leading digits and the digits of other numbers at the same height, whatever the
    model's rotary. Tokens that are neither digits nor closers (a list's labels, a sorting
    answer) and every key that is not a digit are untouched, so no relative distance grows
    with the numbers' length where digits meet digits. No row is left empty."""
    # a closer measures from the index past its number's last digit, where its rotation puts it
    query = closer_indices(index)[:, -n_query:, None]  # [batch query 1]
    key = index[:, None, :]  # [batch 1 key]
    far = (query > 0) & (key > 0) & ((query - key).abs() > window)  # [batch query key]
    return _hide(mask, far, n_query, n_key, device)


def digit_depth(index: Int[Tensor, "batch pos"]) -> Int[Tensor, "batch pos"]:
    """Each digit's place below its number's leading digit (0 for the leading digit itself), read
    off the whole sequence: a number's length is known once its last (most significant) digit is
    written, which comes after its lower digits. Every other token 0."""
    run = number_ordinal(index)  # [batch pos]: 0 off the digits
    lead = torch.zeros(index.shape[0], int(run.max()) + 1, dtype=index.dtype, device=index.device)
    lead = lead.scatter_reduce(1, run, index, reduce="amax")  # [batch number]: the leading digit's index
    return torch.where(run > 0, lead.gather(1, run) - index, torch.zeros_like(index))


def hide_deep_digits(
    mask: Bool[Tensor, "batch head_or_1 query_pos key_pos"] | None,
    index: Int[Tensor, "batch key_pos"],
    n_query: int,
    n_key: int,
    device,
    leading: int,
) -> Bool[Tensor, "batch head_or_1 query_pos key_pos"]:
    """`mask` (None: plain causal) with every digit `leading` or more places below its number's
    leading digit (`digit_depth`) hidden from each digit above that depth and from each number's
    closer (`ModelConfig.leading_digits`). So the leading digits and the closer read only one
    another, the symbols and what else `mask` lets them: their states, and an item's summary
    read there, are the same for any number that shares those digits, however long. Numbers of
    at most `leading` digits lose nothing. The depth is read off the whole sequence (a number's
    length comes with its last digit), so a prompt is masked as a whole; digits written one at
    a time would not know theirs, which is why this is a sorting list's option."""
    deep = (index > 0) & (digit_depth(index) >= leading)  # [batch key]
    reader = (closer_indices(index) > 0) & ~deep  # [batch key]: a closer, or a digit above the depth
    return _hide(mask, reader[:, -n_query:, None] & deep[:, None, :], n_query, n_key, device)


def _hide(mask, hidden: Bool[Tensor, "batch query key"], n_query: int, n_key: int, device):
    """`mask` (None: plain causal) at every head with the `hidden` keys taken away. A head that
    reads one digit and not itself (exclusive offset heads, a fixed multiplier head) can be left
    with nothing: it reads itself, as where that digit does not exist."""
    itself, causal = _itself_and_causal(n_query, n_key, device)
    if mask is None:
        mask = causal[None, None]  # [1 1 query key]
    narrowed = mask & ~hidden[:, None]
    return narrowed | _itself_where_nothing_else(narrowed, itself)


def _itself_and_causal(n_query: int, n_key: int, device) -> tuple[Tensor, Tensor]:
    """For queries that are the last `n_query` of `n_key` positions: where each key is the query
    itself, and where it is at or before it (causal). Both [query key]."""
    key_pos = torch.arange(n_key, device=device)
    query_pos = torch.arange(n_key - n_query, n_key, device=device)
    return key_pos[None, :] == query_pos[:, None], key_pos[None, :] <= query_pos[:, None]

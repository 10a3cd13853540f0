"""Vocabularies and batch encoding.

Every task owns a `Vocab`: its symbols plus two specials, `<pad>` (id 0) and `<eos>` (id 1).
Text is split into tokens one character at a time (`separator=""`, arithmetic tasks) or on
whitespace (`separator=" "`, the modular-addition task whose residues are tokens like "112").
Prompts and targets are encoded separately and concatenated as ids, so a target is never
re-split together with its prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..errors import UserError

PAD = "<pad>"
EOS = "<eos>"
PAD_ID = 0
EOS_ID = 1
DIGITS = tuple("0123456789")


@dataclass(frozen=True)
class Vocab:
    symbols: tuple[str, ...]
    # "" splits text into characters; " " splits on whitespace (multi-character tokens).
    separator: str = ""
    tokens: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        if len(set(self.symbols)) != len(self.symbols):
            raise ValueError(f"vocabulary has duplicate symbols: {self.symbols}")
        if self.separator not in ("", " "):
            raise ValueError(f"separator must be '' or ' ', got {self.separator!r}")
        if self.separator == "" and any(len(s) != 1 for s in self.symbols):
            raise ValueError("a character-level vocabulary needs single-character symbols")
        object.__setattr__(self, "tokens", (PAD, EOS, *self.symbols))
        object.__setattr__(self, "_index", {t: i for i, t in enumerate(self.tokens)})

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def digit_ids(self) -> list[int]:
        """Ids of the tokens 0..9 (the ones Abacus positions count)."""
        return [self._index[d] for d in DIGITS if d in self._index]

    @property
    def label_ids(self) -> list[int]:
        """Ids of the single lower-case letters: a sorting list's item labels."""
        return [i for i, t in enumerate(self.tokens) if len(t) == 1 and "a" <= t <= "z"]

    def split(self, text: str) -> list[str]:
        return list(text) if self.separator == "" else text.split()

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in self.split(text):
            if piece not in self._index:
                known = " ".join(self.symbols) if len(self.symbols) < 40 else f"{len(self.symbols)} symbols"
                raise UserError(f"token {piece!r} in {text!r} is not in the vocabulary ({known})")
            ids.append(self._index[piece])
        return ids

    def decode(self, ids: Sequence[int], stop_at_eos: bool = True) -> str:
        """Ids to text; padding is dropped and decoding stops at the first EOS."""
        pieces = []
        for i in ids:
            i = int(i)
            if i == EOS_ID and stop_at_eos:
                break
            if i in (PAD_ID, EOS_ID):
                continue
            pieces.append(self.tokens[i])
        return self.separator.join(pieces)

    def to_dict(self) -> dict:
        return {"symbols": list(self.symbols), "separator": self.separator}

    @classmethod
    def from_dict(cls, d: dict) -> Vocab:
        """The vocabulary of `to_dict`'s form (config.json's model.vocab); anything else, or
        symbols the constructor refuses, is a UserError."""
        symbols, separator = d.get("symbols"), d.get("separator", "")
        if not (isinstance(symbols, (list, tuple)) and all(isinstance(s, str) for s in symbols)
                and isinstance(separator, str)):
            raise UserError(f"a vocabulary is {{\"symbols\": [strings], \"separator\": \"\" or \" \"}}, got {d!r:.80}")
        try:
            return cls(symbols=tuple(symbols), separator=separator)
        except ValueError as e:  # duplicate or multi-character symbols, an unknown separator
            raise UserError(f"vocabulary {d!r:.80}: {e}") from e


@dataclass
class Batch:
    """A right-padded batch of prompt+target sequences for training and scoring."""

    tokens: Int[Tensor, "batch pos"]
    # True at positions whose *next* token is part of the target (answer digits and EOS):
    # the logits there are the ones the loss reads.
    loss_mask: Bool[Tensor, "batch pos"]
    # True at every real (non-pad) token.
    valid: Bool[Tensor, "batch pos"]
    prompt_lengths: Int[Tensor, " batch"]
    # Training with train.running_sum_loss only: at each position that predicts an answer
    # digit, that column's running sum (`Task.running_sums`) in units of ten; NaN elsewhere.
    running_sum: Float[Tensor, "batch pos"] | None = None
    # Training with train.partial_product_loss only: at each position that predicts an answer
    # digit, the units and tens of each partial product its column adds (`Task.partial_products`);
    # -100 (cross_entropy's ignore_index) elsewhere and for multiplier digits the problem lacks.
    partial_products: Int[Tensor, "batch pos k 2"] | None = None
    # Training with train.carry_loss only: at each position that predicts an answer digit, the
    # carry into its column (`Task.carries_in`); -100 (cross_entropy's ignore_index) elsewhere.
    carries: Int[Tensor, "batch pos"] | None = None
    # Training with train.order_loss only: at the separator that closes each item of a sorting
    # list but the last (`Task.item_closers`), that item's value; NaN elsewhere.
    item_values: Float[Tensor, "batch pos"] | None = None


def encode_batch(
    vocab: Vocab,
    prompts: Sequence[str],
    targets: Sequence[str],
    append_eos: bool = True,
    max_len: int | None = None,
) -> Batch:
    """Encode prompt+target pairs, right-padded. Right padding keeps causal attention exact
    without a mask (pads only ever follow real tokens)."""
    if len(prompts) != len(targets):
        raise ValueError(f"{len(prompts)} prompts but {len(targets)} targets")
    rows, prompt_lens = [], []
    for p, t in zip(prompts, targets, strict=True):
        p_ids, t_ids = vocab.encode(p), vocab.encode(t)
        rows.append(p_ids + t_ids + ([EOS_ID] if append_eos else []))
        prompt_lens.append(len(p_ids))
    length = max(len(r) for r in rows)
    if max_len is not None and length > max_len:
        raise UserError(
            f"a sequence has {length} tokens but the model's max_seq_len is {max_len}; "
            "use shorter problems or a model with a larger max_seq_len"
        )
    # one tensor from padded lists: a tensor per row costs ~10 us each, most of a batch's encoding
    tokens = torch.tensor([r + [PAD_ID] * (length - len(r)) for r in rows], dtype=torch.long)  # [batch pos]
    valid = tokens != PAD_ID
    pos = torch.arange(length)[None, :]
    plen = torch.tensor(prompt_lens)[:, None]
    row_len = valid.sum(1, keepdim=True)
    # logits at position i predict token i+1; the target spans [plen, row_len)
    loss_mask = (pos >= plen - 1) & (pos < row_len - 1)
    return Batch(tokens=tokens, loss_mask=loss_mask, valid=valid, prompt_lengths=plen[:, 0])


def left_pad(
    token_lists: Sequence[Sequence[int]],
) -> tuple[Int[Tensor, "batch pos"], Bool[Tensor, "batch pos"]]:
    """Left-pad ragged prompts so every row's last token sits at the same index (decoding)."""
    length = max(len(t) for t in token_lists)
    tokens = torch.tensor([[PAD_ID] * (length - len(t)) + list(t) for t in token_lists], dtype=torch.long)
    return tokens, tokens != PAD_ID

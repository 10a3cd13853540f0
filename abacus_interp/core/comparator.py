"""Sorting's pairwise answer (`ModelConfig.item_comparator`): each remaining item's label
scored by how surely it is smaller than every other remaining item.

A plain answer query picks the next number with one score per item, a linear key on the
items' states, and on every sorting run here that one line fails between numbers that share
their leading digit: among 10 numbers a step decided one digit below the leading one is
wrong about a quarter of the time, whatever the lever (docs/runs/sorting.md). Here a small MLP
reads two items' summaries side by side and says which is smaller, and the answer adds, to
each remaining item's label logit, the sum over the other remaining items of log P(it is
smaller). A pair is compared the same way however long the list, so the count changes how
many comparisons are summed, not what any of them sees; and a label written is not written
again (the mask of pointer networks, Vinyals et al. 2015).

An item's summary is its most significant digit's final state (numbers are written least
significant digit first, so its last digit), read through `ln_final` as the unembedding
reads a state. With `list_items_read_alone` it holds its own item whatever else the list
holds, and unlike the closing separator it is a list token for the last item too (that
item's closer is the "=", which reads every item).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

# A written label's addend: finite, so that a step with every label written (the EOS's)
# stays an ordinary softmax over the other tokens.
WRITTEN = -1e4


@dataclass(frozen=True)
class ListItems:
    """Where each item of a batch of sorting lists sits, in list order; shorter lists padded."""

    summary: Int[Tensor, "batch item"]  # position of the item's most significant digit
    label: Int[Tensor, "batch item"]  # token id of its label
    valid: Bool[Tensor, "batch item"]  # False past a shorter list's last item


def list_items(
    tokens: Int[Tensor, "batch pos"], index: Int[Tensor, "batch pos"], is_label: Bool[Tensor, " d_vocab"],
    in_list: Bool[Tensor, "batch pos"],
) -> ListItems:
    """The items of each row's list (the tokens `in_list`), read off its tokens and Abacus
    `index` (a digit is an index > 0): one label token and one number each."""
    next_index = F.pad(index[:, 1:], (0, 1))  # [batch pos]
    last_digit = (index > 0) & (next_index == 0) & in_list  # [batch pos]
    labels = is_label[tokens] & in_list  # [batch pos]
    n_items = last_digit.sum(1)  # [batch]
    if not torch.equal(n_items, labels.sum(1)):
        raise ValueError("the pairwise answer reads sorting lists, one label and one number per item "
                         "(`a:05898,b:1=`); this batch has a row whose labels and numbers do not pair up")
    width = max(int(n_items.max()), 1) if n_items.numel() else 1
    summary = _ordered_positions(last_digit, width)
    label = tokens.gather(1, _ordered_positions(labels, width))
    valid = torch.arange(width, device=tokens.device)[None, :] < n_items[:, None]
    return ListItems(summary, label, valid)


def _ordered_positions(marked: Bool[Tensor, "batch pos"], width: int) -> Int[Tensor, "batch width"]:
    """The positions of each row's marked tokens in order, 0 past its last one."""
    batch, n_pos = marked.shape
    slot = torch.where(marked, marked.long().cumsum(1) - 1, width)  # unmarked go to a spill column
    positions = torch.arange(n_pos, device=marked.device).expand(batch, n_pos)
    out = torch.zeros(batch, width + 1, dtype=torch.long, device=marked.device)
    return out.scatter(1, slot, positions)[:, :width]


class ItemComparator(nn.Module):
    """c(i, j) = m(h_i, h_j) - m(h_j, h_i) + tie * sign(j - i), the log-odds that item i is
    smaller than item j: antisymmetric, so each pair has one answer. m is one hidden layer
    of `width` units over the two summaries; `tie` lets equal numbers keep list order (the
    task's stable sort) without m having to read the labels. `alone`: the answer's label
    logits are the comparison's only (`ModelConfig.item_comparator_alone`)."""

    def __init__(
        self, d_model: int, width: int, init_std: float, label_ids: list[int], equals_id: int, d_vocab: int,
        alone: bool = False,
    ):
        super().__init__()
        self.alone = alone
        is_label = torch.zeros(d_vocab, dtype=torch.bool)
        is_label[label_ids] = True
        self.register_buffer("is_label", is_label, persistent=False)
        self.register_buffer("equals_id", torch.tensor(equals_id), persistent=False)
        self.W_first = nn.Parameter(torch.randn(d_model, width) * init_std)  # the first item's side
        self.W_second = nn.Parameter(torch.randn(d_model, width) * init_std)
        self.b_hidden = nn.Parameter(torch.zeros(width))
        self.w_out = nn.Parameter(torch.randn(width) * width**-0.5)
        self.tie = nn.Parameter(torch.zeros(()))

    def log_odds(self, summaries: Float[Tensor, "batch item d_model"]) -> Float[Tensor, "batch item item"]:
        first = summaries @ self.W_first  # [batch item width]
        second = summaries @ self.W_second  # [batch item width]
        # m(h_i, h_j) for every pair: the first layer is linear in each side, so added per pair
        ordered = F.gelu(first[:, :, None] + second[:, None, :] + self.b_hidden) @ self.w_out  # [batch i j]
        n = summaries.shape[1]
        order = torch.arange(n, device=summaries.device)
        later = torch.sign(order[None, :] - order[:, None]).to(summaries.dtype)  # [i j]: +1 where j after i
        return ordered - ordered.transpose(1, 2) + self.tie * later

    def item_log_odds(
        self, normed: Float[Tensor, "batch pos d_model"], tokens: Int[Tensor, "batch pos"], index: Int[Tensor, "batch pos"],
    ) -> tuple[ListItems, Float[Tensor, "batch item item"]]:
        """The list's items (what comes before the first "=") and `log_odds` of their summaries
        in `normed` (a state through `ln_final`; any loop's, for a lens of the comparison)."""
        in_list = (tokens == self.equals_id).long().cumsum(1) == 0  # [batch pos]
        items = list_items(tokens, index, self.is_label, in_list)
        summaries = normed.gather(1, items.summary[..., None].expand(-1, -1, normed.shape[-1]))  # [batch item d_model]
        return items, self.log_odds(summaries)

    def forward(
        self,
        logits: Float[Tensor, "batch pos d_vocab"],
        normed: Float[Tensor, "batch pos d_model"],
        tokens: Int[Tensor, "batch pos"],
        index: Int[Tensor, "batch pos"],
    ) -> Float[Tensor, "batch pos d_vocab"]:
        """The unembedding's `logits` with the comparison: at the "=" and each answer token,
        each remaining item's label gets the sum of log P(smaller) over the other remaining
        items, each written label WRITTEN; elsewhere nothing changes. With `alone`, those label
        logits are the comparison's only (the unembedding's are dropped there, and a letter no
        item carries is WRITTEN). The list is what comes before the first "=" (not the index's
        reading of it, which a digit written into the answer would move), the answer after it."""
        equals = (tokens == self.equals_id).long().cumsum(1)  # [batch pos]
        in_list, answer = equals == 0, (equals - (tokens == self.equals_id).long()) > 0  # [batch pos]
        items, odds = self.item_log_odds(normed, tokens, index)
        n = items.summary.shape[1]
        others = ~torch.eye(n, dtype=torch.bool, device=tokens.device)  # [i j]
        log_smaller = F.logsigmoid(odds) * others  # [batch i j]
        writes = (tokens[:, :, None] == items.label[:, None, :]) & answer[:, :, None] & items.valid[:, None, :]
        written = writes.long().cumsum(1) > 0  # [batch pos item]: written at or before the position
        remaining = items.valid[:, None, :] & ~written  # [batch pos item]
        score = torch.einsum("bij,bpj->bpi", log_smaller, remaining.to(log_smaller.dtype))  # [batch pos item]
        score = torch.where(written, torch.full_like(score, WRITTEN), score)
        score = score * (~in_list[:, :, None] & items.valid[:, None, :])  # the "=" and the answer only
        labels = items.label[:, None, :].expand_as(score)  # [batch pos item]
        added = torch.zeros_like(logits).scatter_add(2, labels, score)  # [batch pos d_vocab]
        if not self.alone:
            return logits + added
        picks = ~in_list[:, :, None] & self.is_label  # [batch pos d_vocab]: the answer's label logits
        # added up, not written: a shorter list's padding items point at its first label too
        carried = torch.zeros(picks.shape, dtype=torch.long, device=tokens.device)
        listed = carried.scatter_add(2, labels, items.valid[:, None, :].expand_as(labels).long()) > 0
        return torch.where(picks, torch.where(listed, added, torch.full_like(added, WRITTEN)), logits)

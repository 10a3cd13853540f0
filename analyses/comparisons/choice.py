"""The choice of each answer label: how sure it is among more numbers, and what the answer query
must see to make it.

A sorter writes the label of the smallest number not yet written. Lists of more numbers than
trained fail at that choice even where the two smallest left are easy to tell apart
(`evaluation/list_errors.py`). Two measurements say more about how the choice is made:

* Margin: the right label's logit minus the highest logit of another label of the list, at
  each answer step (teacher-forced, the trained loops), by the list's count and the numbers
  still left. At equal numbers left a margin that still falls with the count says the numbers
  already written weigh on the choice.
* Blinds: at every answer query, in every loop, every head's scores on one set of keys (the
  label and digits of some numbers) are set to -inf: the keys hidden, its attention
  renormalised over the rest (the scalable softmax's ln(keys) is left as it was). Hiding the
  numbers already written tests whether the choice is made among the numbers left alone;
  hiding, besides them, all numbers left but the smallest and the runner-up tests whether
  fewer candidates make it easier, as they would a pick by attention among the candidates.
  A blind reads only what the answer queries see directly: the list's other positions (the
  hidden numbers' separators, the digits of later numbers, which read earlier ones) still hold
  what they read of the hidden numbers, so a blind bounds the answer query's direct reading,
  not all that reaches it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from abacus_interp.core.model import act_name
from abacus_interp.core.tokens import encode_batch
from abacus_interp.evaluation.common import fits_context, section_rng
from abacus_interp.evaluation.list_errors import WrongPicks, wrong_picks

from .layout import ListLayout

BATCH = 64
# what the answer query may not see (every head, every loop)
BLINDS = ("nothing", "the numbers already written", "all but the two smallest left")


@dataclass(frozen=True)
class MarginCell:
    """The answer steps of lists of `count` numbers with `left` numbers still to write."""

    count: int
    left: int
    n: int  # steps
    accuracy: float  # share of steps whose argmax is the right label
    median_margin: float  # right label's logit minus the best other label of the list


@dataclass(frozen=True)
class BlindRow:
    hidden: str  # one of BLINDS
    count: int
    picks: WrongPicks  # every label step of the lists, under the blind

    @property
    def accuracy(self) -> float:
        return 1 - self.picks.wrong / self.picks.n_steps


@dataclass(frozen=True)
class Choice:
    label: str  # the sample
    counts: tuple[int, ...]  # the counts read (lists of them fit the model)
    n_lists: int  # lists drawn per count
    cells: tuple[MarginCell, ...]  # nothing hidden
    blinds: tuple[BlindRow, ...]  # per count, in BLINDS order

    def cell(self, count: int, left: int) -> MarginCell | None:
        return next((c for c in self.cells if (c.count, c.left) == (count, left)), None)

    def blind(self, hidden: str, count: int) -> BlindRow | None:
        return next((b for b in self.blinds if (b.hidden, b.count) == (hidden, count)), None)


def hidden_keys(prompt: str, target: str, hidden: str, n_pos: int) -> tuple[list[int], torch.Tensor]:
    """The answer-label queries of one list and, per query, the keys `hidden` hides from it
    [query key] (True: hidden): the label and digits of the numbers it names."""
    if hidden not in BLINDS:
        raise ValueError(f"hidden={hidden!r}: pick one of {BLINDS}")
    layout = ListLayout.of(prompt)
    queries, masks = [], []
    for k in range(len(target)):
        left = target[k:]  # labels still to write, smallest first
        mask = torch.zeros(n_pos, dtype=torch.bool)
        for number in layout.numbers:
            written = number.label not in left
            beyond_the_two_smallest = not written and number.label not in left[:2]
            if (hidden != "nothing" and written) or (hidden == BLINDS[2] and beyond_the_two_smallest):
                mask[[number.label_pos, *number.digit_pos]] = True
        queries.append(layout.equals + k)
        masks.append(mask)
    return queries, torch.stack(masks)


@torch.no_grad()
def answer_logits(model, vocab, examples: Sequence, hidden: str) -> list[torch.Tensor]:
    """Per list, the logits of its answer-label queries [label vocab] after the trained loops,
    teacher-forced, with `hidden` hidden from every head at those queries in every loop."""
    cfg, out = model.cfg, []
    for start in range(0, len(examples), BATCH):
        chunk = examples[start : start + BATCH]
        tokens = encode_batch(vocab, [e.prompt for e in chunk], [e.target for e in chunk]).tokens
        n_pos = tokens.shape[1]
        blocked = torch.zeros(len(chunk), n_pos, n_pos, dtype=torch.bool)  # [batch query key]
        rows = []
        for row, example in enumerate(chunk):
            queries, masks = hidden_keys(example.prompt, example.target, hidden, n_pos)
            blocked[row, queries] = masks
            rows.append(queries)
        blocked = blocked.to(tokens.device)

        def hide(scores, hook, blocked=blocked):  # [batch head query key]
            return scores.masked_fill(blocked[:, None], float("-inf"))

        # nothing hidden: no hook, so the model keeps its fast attention path
        hooks = [] if hidden == "nothing" else [(act_name("attn_scores", layer, loop=t), hide)
                                                for t in range(cfg.n_loops) for layer in range(cfg.n_layers)]
        logits = model.run_with_hooks(tokens, n_loops=cfg.n_loops, fwd_hooks=hooks).float().cpu()
        out += [logits[row, queries] for row, queries in enumerate(rows)]
    return out


def margins(vocab, example, logits: torch.Tensor) -> list[float]:
    """Per answer step: the right label's logit minus the highest logit of another label of the list."""
    labels = [number.label for number in ListLayout.of(example.prompt).numbers]
    ids = {label: vocab.encode(label)[0] for label in labels}
    out = []
    for k, right in enumerate(example.target):
        rivals = [ids[label] for label in labels if label != right]
        out.append(float(logits[k, ids[right]] - logits[k, rivals].max()))
    return out


def choice(model, task, counts: Sequence[int], n: int, seed: int) -> Choice:
    """The margins by count and numbers left, and each blind's wrong picks, on `n` held-out lists
    of each of `counts` numbers of the trained digits (those that fit the model: a count none of
    whose lists fits has no cells and no blinds)."""
    cells, blinds = [], []
    for count in counts:
        sampled = task.sample(n, section_rng(seed, "comparisons choice", count), min_numbers=count,
                              max_numbers=count, min_digits=task.min_digits, max_digits=task.max_digits)
        examples = [e for e in sampled if fits_context(e, task.vocab, model.cfg.max_seq_len)]
        if not examples:
            continue
        for hidden in BLINDS:
            logits = answer_logits(model, task.vocab, examples, hidden)
            blinds.append(BlindRow(hidden, count, wrong_picks(examples, [x.argmax(-1).tolist() for x in logits],
                                                              task.vocab)))
            if hidden == "nothing":
                cells += _cells(task.vocab, count, examples, logits)
    return Choice(label=f"held-out lists of {task.min_digits}-{task.max_digits}-digit numbers, teacher-forced",
                  counts=tuple(dict.fromkeys(b.count for b in blinds)), n_lists=n, cells=tuple(cells), blinds=tuple(blinds))


def _cells(vocab, count: int, examples, logits) -> list[MarginCell]:
    by_left: dict[int, list[tuple[bool, float]]] = {}
    for example, x in zip(examples, logits, strict=True):
        right = vocab.encode(example.target)
        for k, margin in enumerate(margins(vocab, example, x)):
            by_left.setdefault(count - k, []).append((int(x[k].argmax()) == right[k], margin))
    return [MarginCell(count, left, len(steps), float(np.mean([ok for ok, _ in steps])),
                       float(np.median([m for _, m in steps])))
            for left, steps in sorted(by_left.items(), reverse=True) if left >= 2]

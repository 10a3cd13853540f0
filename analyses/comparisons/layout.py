"""Where each part of a sorting prompt sits: `a:05898,b:1=` read back into labels and digits.

The task's vocabulary spells one token per character, so a character's place in the prompt is
its token position (`encode_batch` adds nothing in front).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Number:
    label: str
    label_pos: int
    digit_pos: tuple[int, ...]  # LSD first: digit_pos[c] holds the digit of index c + 1


@dataclass(frozen=True)
class ListLayout:
    numbers: tuple[Number, ...]
    equals: int  # the "=" position, which predicts the first answer label

    @classmethod
    def of(cls, prompt: str) -> ListLayout:
        numbers, pos = [], 0
        for part in prompt[:-1].split(","):
            numbers.append(Number(part[0], pos, tuple(range(pos + 2, pos + len(part)))))
            pos += len(part) + 1
        return cls(tuple(numbers), len(prompt) - 1)

    def number(self, label: str) -> Number:
        return next(n for n in self.numbers if n.label == label)

    @property
    def separators(self) -> list[int]:
        """Every ":" and "," and the "="."""
        return [n.label_pos + 1 for n in self.numbers] + [n.digit_pos[-1] + 1 for n in self.numbers]


# key groups of an answer query (the position that predicts answer label k), "other" last
ANSWER_GROUPS = ("the answer's label", "the answer's digits", "labels still to write", "digits still to write",
                 "numbers already written", "answer so far", ": , =", "other")
# key groups of a digit query in the prompt, "other" last
DIGIT_GROUPS = ("same index, earlier numbers", "own number", "other digits", "labels and separators", "other")


def answer_masks(layout: ListLayout, target: str, n_pos: int) -> tuple[list[int], torch.Tensor]:
    """The answer queries of one list (every answer label, not the EOS) and their key-group
    masks [query group key] over `ANSWER_GROUPS`."""
    queries, masks = [], []
    for k, label in enumerate(target):
        query = layout.equals + k
        groups = torch.zeros(len(ANSWER_GROUPS), n_pos)
        for number in layout.numbers:
            digits = list(number.digit_pos)
            if number.label == label:
                groups[0, number.label_pos], groups[1, digits] = 1.0, 1.0
            elif number.label in target[k:]:
                groups[2, number.label_pos], groups[3, digits] = 1.0, 1.0
            else:
                groups[4, [number.label_pos, *digits]] = 1.0
        groups[5, layout.equals + 1 : query + 1] = 1.0
        groups[6, layout.separators] = 1.0
        named = groups[:-1, : query + 1].sum(0).clamp(max=1.0)
        groups[-1, : query + 1] = 1.0 - named
        queries.append(query)
        masks.append(groups)
    return queries, torch.stack(masks)


def digit_masks(layout: ListLayout, n_pos: int) -> tuple[list[int], torch.Tensor]:
    """Every digit query of the prompt and its key-group masks [query group key] over
    `DIGIT_GROUPS` (causal: a query's groups hold only positions up to its own)."""
    queries, masks = [], []
    labels_and_separators = [n.label_pos for n in layout.numbers] + layout.separators
    for i, number in enumerate(layout.numbers):
        for c, query in enumerate(number.digit_pos):
            groups = torch.zeros(len(DIGIT_GROUPS), n_pos)
            for other in layout.numbers[:i]:
                if c < len(other.digit_pos):
                    groups[0, other.digit_pos[c]] = 1.0
                groups[2, [p for j, p in enumerate(other.digit_pos) if j != c]] = 1.0
            groups[1, list(number.digit_pos[: c + 1])] = 1.0
            groups[3, [p for p in labels_and_separators if p <= query]] = 1.0
            groups[-1, : query + 1] = 1.0 - groups[:-1, : query + 1].sum(0).clamp(max=1.0)
            queries.append(query)
            masks.append(groups)
    return queries, torch.stack(masks)

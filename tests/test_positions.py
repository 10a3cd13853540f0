"""Abacus indices without host reads: the same indices as before, and one compiled graph.

`abacus_indices_before_issue_17` is the implementation the model used until issue 17 (it
sized its lookup table with `int(digit_ids.max())`, a host read that breaks a compiled
graph); every test compares against it.
"""

from __future__ import annotations

import random

import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.core.positions import abacus_indices, digit_mask, digit_table
from abacus_interp.core.tokens import encode_batch
from abacus_interp.tasks import get_task


def abacus_indices_before_issue_17(tokens, digit_ids, offset=0):
    size = (int(digit_ids.max()) if digit_ids.numel() else 0) + 2
    table = torch.zeros(size, dtype=torch.bool, device=tokens.device)
    table[digit_ids.to(tokens.device)] = True
    is_digit = table[tokens.clamp(max=size - 1)]
    pos = torch.arange(tokens.shape[1], device=tokens.device).expand_as(tokens)
    left_is_digit = torch.nn.functional.pad(is_digit[:, :-1], (1, 0), value=False)
    run_start = is_digit & ~left_is_digit
    start_index = torch.where(run_start, pos, torch.zeros_like(pos)).cummax(dim=1).values
    index_in_run = pos - start_index + 1
    if isinstance(offset, torch.Tensor):
        offset = offset.to(tokens.device).view(-1, 1)
    return torch.where(is_digit, index_in_run + offset, torch.zeros_like(pos))


# Tasks whose vocabularies place digits differently: characters with an operator between
# operands, answer slots ("_" after "="), sorting labels and separators, parentheses, and
# whitespace-separated residues 0..112 where only "0".."9" count as digits and every larger
# id is clamped onto the table's False entry.
TASKS = [
    ("addition", dict(max_digits=6)),
    ("addition", dict(max_digits=6, answer_format="slots")),
    ("multiplication", dict(max_digits=3)),
    ("sorting", dict()),
    ("expressions", dict(max_depth=2, max_digits=3)),
    ("modular_addition", dict(p=113)),
]


def task_batch(name: str, options: dict, n: int = 24):
    task = get_task(name, **options)
    examples = task.sample(n, random.Random(0))
    batch = encode_batch(task.vocab, [e.prompt for e in examples], [e.target for e in examples])
    return task, batch.tokens


@pytest.mark.parametrize(("name", "options"), TASKS, ids=[f"{n}-{'-'.join(map(str, o.values()))}" for n, o in TASKS])
def test_indices_equal_the_previous_implementation_on_every_task(name, options):
    task, tokens = task_batch(name, options)
    ids = torch.tensor(task.vocab.digit_ids)
    table = digit_table(task.vocab.digit_ids)
    per_example = torch.randint(0, 50, (tokens.shape[0],), generator=torch.Generator().manual_seed(3))
    for offset in (0, 7, per_example):
        expected = abacus_indices_before_issue_17(tokens, ids, offset)
        assert torch.equal(abacus_indices(tokens, ids, offset), expected)  # ids: a table built per call
        assert torch.equal(abacus_indices(tokens, table, offset), expected)  # the model's prebuilt table


def test_indices_equal_the_previous_implementation_on_random_tokens():
    # every token id of a vocabulary anywhere, so digit runs of all lengths occur, plus ids
    # past the largest digit id (clamped onto the table's last, False, entry)
    generator = torch.Generator().manual_seed(1)
    for digit_ids in ([2, 3, 4, 5, 6, 7, 8, 9, 10, 11], [5, 2, 9], [0], []):
        ids = torch.tensor(digit_ids, dtype=torch.long)
        for batch, length in [(1, 1), (7, 13), (32, 64)]:
            tokens = torch.randint(0, 16, (batch, length), generator=generator)
            offset = torch.randint(0, 100, (batch,), generator=generator)
            expected = abacus_indices_before_issue_17(tokens, ids, offset)
            assert torch.equal(abacus_indices(tokens, ids, offset), expected)
            assert torch.equal(abacus_indices(tokens, digit_table(digit_ids), offset), expected)


@pytest.mark.parametrize(("name", "options"), TASKS[:2], ids=["addition", "addition-slots"])
def test_model_position_embedding_is_unchanged(name, options):
    task, tokens = task_batch(name, options)
    cfg = ModelConfig(vocab=task.vocab, d_model=16, n_heads=2, n_loops=2, max_seq_len=tokens.shape[1],
                      abacus_max_offset=10, answer_slots=options.get("answer_format") == "slots")
    model = LoopedTransformer(cfg).eval()
    offsets = torch.randint(0, 11, (tokens.shape[0],), generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens, names_filter="hook_pos_embed", abacus_offset=offsets)
    expected = abacus_indices_before_issue_17(tokens, torch.tensor(task.vocab.digit_ids), offsets)
    assert torch.equal(cache["hook_pos_embed"], model.W_pos[expected])


def test_digit_mask_and_indices_trace_into_one_graph():
    # fullgraph=True raises at the first graph break; the "eager" backend only traces
    tokens = torch.tensor([[2, 3, 12, 4, 13, 5, 6, 7, 0]])
    ids = torch.tensor([2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
    table = digit_table(ids)
    traced_with_table = torch.compile(abacus_indices, backend="eager", fullgraph=True)
    traced_mask_from_ids = torch.compile(digit_mask, backend="eager", fullgraph=True)
    assert torch.equal(traced_with_table(tokens, table, 3), abacus_indices_before_issue_17(tokens, ids, 3))
    assert torch.equal(traced_mask_from_ids(tokens, ids), digit_mask(tokens, ids))


def test_model_embedding_traces_into_one_graph(tiny_model):
    model = tiny_model(d_model=16, n_heads=2, max_seq_len=12, abacus_max_offset=4)
    tokens = model.to_tokens(["321+654=975", "12+34=46"])
    traced_embed = torch.compile(model.embed, backend="eager", fullgraph=True)
    torch.testing.assert_close(traced_embed(tokens, abacus_offset=3), model.embed(tokens, abacus_offset=3))


def test_position_overflow_is_still_caught_when_the_shapes_allow_it(tiny_model):
    # the bound from shapes says "maybe" (offset + length past the table), the data says no
    model = tiny_model(max_seq_len=12, abacus_max_offset=2)
    short = model.to_tokens(["1+2=3"])
    padded = torch.nn.functional.pad(short, (0, 20))  # 25 positions, 5 real
    model.embed(padded, abacus_offset=2)  # index 3 at most: fine
    with pytest.raises(ValueError, match="position index"):
        model.embed(model.to_tokens(["1" * 14]), abacus_offset=2)  # index 16 of 15
    learned = tiny_model(positional="learned", max_seq_len=6)
    learned.embed(padded, valid=padded != 0)  # 5 real tokens fit 6 learned positions
    with pytest.raises(ValueError, match="position index"):
        learned.embed(model.to_tokens(["1+2=3+4"]))

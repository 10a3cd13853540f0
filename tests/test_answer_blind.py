"""`ModelConfig.answer_hides_earlier_answer`: every head at a sorting answer query sees the
prompt and itself, not the labels written before it (but the symbol heads, with
`answer_blind_spares_symbol_heads`); and `answer_symbol_heads_read_only_answer`, the symbol
heads at an answer query narrowed to the labels written. Checked: the mask, that changing an earlier answer label
leaves a later query's logits unchanged, both attention paths, and cached decoding."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.core.attention import AttentionContext
from abacus_interp.core.decoding import naive_generate
from abacus_interp.core.masks import (
    HeadKinds,
    answer_positions,
    hide_earlier_answer,
    symbol_heads_read_only_answer,
)
from abacus_interp.core.positions import abacus_indices
from abacus_interp.errors import UserError
from abacus_interp.tasks import get_task

TASK = get_task("sorting", max_numbers=3, max_digits=4, label_pool=8, random_labels=True)
SORTER = dict(vocab=TASK.vocab, d_model=24, n_heads=3, n_layers=2, n_loops=2, max_seq_len=96, positional="none",
              rotary="abacus", abacus_max_offset=4, init_std=0.3, answer_hides_earlier_answer=True)


def sorter(**overrides) -> LoopedTransformer:
    return LoopedTransformer(ModelConfig(**{**SORTER, **overrides})).eval()


def test_an_answer_query_sees_the_prompt_and_itself_only():
    # "a:21,b:3,c:654=" is 15 tokens ("=" at 14), then the answer "bac"
    model = sorter()
    index = abacus_indices(model.to_tokens(["a:21,b:3,c:654=bac"]), model.digit_ids)
    assert answer_positions(index)[0].nonzero().squeeze(-1).tolist() == [15, 16, 17]
    mask = hide_earlier_answer(None, index, 18, 18, "cpu")[0, 0]  # [query key]
    causal = torch.ones(18, 18, dtype=torch.bool).tril()
    assert torch.equal(mask[:15], causal[:15])  # the prompt's queries are untouched
    for query in (15, 16, 17):
        assert mask[query].nonzero().squeeze(-1).tolist() == [*range(15), query]
    # a cached step (one query after 17 keys) gets the same row as the whole sequence
    assert torch.equal(hide_earlier_answer(None, index, 1, 18, "cpu")[0, 0, 0], mask[17])


def test_a_later_query_does_not_read_the_labels_written_before_it():
    model = sorter()
    tokens = model.to_tokens(["a:21,b:3,c:654=bac", "a:21,b:3,c:654=dgc", "a:21,b:3,c:654=fac"])
    logits = model(tokens, 2)  # [batch pos vocab]
    # query 17 holds "c" in each: it reads the prompt and itself, whatever came between
    torch.testing.assert_close(logits[1, 17], logits[0, 17])
    torch.testing.assert_close(logits[2, 16], logits[0, 16])  # "a" at 16, after "b" or "f"
    plain = sorter(answer_hides_earlier_answer=False)
    plain.load_state_dict(model.state_dict())
    other = plain(tokens, 2)
    assert not torch.allclose(other[1, 17], other[0, 17])  # without the blind they differ
    torch.testing.assert_close(other[:, :16], logits[:, :16])  # ... and agree up to the first answer query


@pytest.mark.parametrize("head_kinds", [{}, {"number_heads": 1},
                                        {"symbol_heads": 1, "answer_blind_spares_symbol_heads": True},
                                        {"symbol_heads": 1, "number_heads": 1, "n_heads": 4,
                                         "answer_blind_spares_symbol_heads": True,
                                         "answer_symbol_heads_read_only_answer": True}],
                         ids=["blind", "number-head", "spared-symbol-head", "symbol-head-on-the-answer"])
def test_attention_paths_agree_with_the_blind(head_kinds):
    # with a number or symbol head the mask is per head: the blind (and the symbol heads' narrowing
    # to the answer) is laid over each head's own mask
    tokens = sorter().to_tokens(["a:21,b:3,c:654=bac", "d:7,e:1=ed"])
    explicit = sorter(attention_backend="explicit", **head_kinds)
    fast = sorter(attention_backend="sdpa", **head_kinds)
    fast.load_state_dict(explicit.state_dict())
    torch.testing.assert_close(fast(tokens, 3), explicit(tokens, 3), atol=1e-5, rtol=1e-5)


def test_a_digit_in_the_answer_starts_a_number_and_the_labels_before_it_join_the_list():
    # what `answer_positions` documents: read off the index, the answer is what follows the last
    # number of the sequence given, so a (wrong) digit moves it
    model = sorter()
    right = abacus_indices(model.to_tokens(["a:21,b:3=ba"]), model.digit_ids)
    wrong = abacus_indices(model.to_tokens(["a:21,b:3=ba5cd"]), model.digit_ids)
    assert answer_positions(right)[0].nonzero().squeeze(-1).tolist() == [9, 10]
    # "5" at 11 is a number, "c" after it closes it, and only "d" at 13 is answer
    assert answer_positions(wrong)[0].nonzero().squeeze(-1).tolist() == [13]


@pytest.mark.parametrize("n_loops", [1, 3])
@pytest.mark.parametrize("spared", [False, True])
def test_cached_decoding_equals_naive_decoding_with_the_blind(n_loops, spared):
    model = sorter(symbol_heads=1, answer_blind_spares_symbol_heads=True) if spared else sorter()
    prompts = ["a:21,b:3,c:654=", "d:7,e:1=", "b:9990,c:12="]  # of different lengths: decoding left-pads them
    assert model.generate(prompts, n_loops=n_loops, max_new_tokens=4) == \
        naive_generate(model, prompts, n_loops=n_loops, max_new_tokens=4)


def test_the_field_round_trips_and_is_left_out_at_its_default():
    cfg = ModelConfig(**SORTER)
    assert cfg.attends_by_index and ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert "answer_hides_earlier_answer" not in ModelConfig(**{**SORTER, "answer_hides_earlier_answer": False}).to_dict()
    spared = ModelConfig(**{**SORTER, "symbol_heads": 1, "answer_blind_spares_symbol_heads": True})
    assert ModelConfig.from_dict(spared.to_dict()) == spared and "answer_blind_spares_symbol_heads" not in cfg.to_dict()


def test_a_spared_symbol_head_alone_reads_the_labels_written_before():
    # heads: windowed 0 and 1, symbol 2 (`answer_blind_spares_symbol_heads`)
    model = sorter(symbol_heads=1, answer_blind_spares_symbol_heads=True)
    tokens = model.to_tokens(["a:21,b:3,c:654=bac"])
    index = abacus_indices(tokens, model.digit_ids)
    mask = AttentionContext.build(model.cfg, 18, 18, "cpu", index=index).mask[0]  # [head query key]
    symbols = [pos for pos in range(15) if index[0, pos] == 0]  # labels, ":" and "," and "="
    for query in (15, 16, 17):
        for head in (0, 1):
            assert mask[head, query].nonzero().squeeze(-1).tolist() == [*range(15), query]
        assert mask[2, query].nonzero().squeeze(-1).tolist() == [*symbols, *range(15, query + 1)]
    # so a later query's logits depend on the labels written before it again
    other = model.to_tokens(["a:21,b:3,c:654=dgc"])
    assert not torch.allclose(model(tokens, 2)[0, 17], model(other, 2)[0, 17])


def test_the_symbol_heads_are_found_among_heads_of_every_kind():
    cfg = ModelConfig(**{**SORTER, "n_heads": 6, "offset_heads": (0,), "symbol_heads": 2, "number_heads": 1,
                         "answer_blind_spares_symbol_heads": True})
    heads = HeadKinds.of(cfg)
    assert list(heads.symbol_head_range) == [h for h in range(6) if heads.kind_of(h) == "symbol"] == [3, 4]


def test_sparing_a_head_needs_a_mask_per_head():
    index = abacus_indices(sorter().to_tokens(["a:21,b:3=ba"]), sorter().digit_ids)
    shared = torch.ones(1, 1, 11, 11, dtype=torch.bool).tril()  # [batch 1 query key]: one row for every head
    with pytest.raises(ValueError, match="per-head mask"):
        hide_earlier_answer(shared, index, 11, 11, "cpu", spared=range(0, 1))


@pytest.mark.parametrize("overrides", [dict(answer_blind_spares_symbol_heads=True),
                                       dict(answer_blind_spares_symbol_heads=True, answer_hides_earlier_answer=False,
                                            symbol_heads=1)])
def test_sparing_needs_the_blind_and_a_symbol_head(overrides):
    with pytest.raises(UserError, match="answer_blind_spares_symbol_heads"):
        ModelConfig(**{**SORTER, **overrides})


# `answer_symbol_heads_read_only_answer`: at an answer query the symbol heads read the labels
# written and the query itself, not the list's symbols; with or without the blind on the others.
@pytest.mark.parametrize("blind", [False, True])
@pytest.mark.parametrize("number_head", [False, True], ids=["symbol-head-last", "number-head-after"])
def test_symbol_heads_at_an_answer_query_read_only_the_answer(blind, number_head):
    # heads: windowed 0 and 1, symbol 2, and with a number head, number 3
    kinds = dict(symbol_heads=1, answer_hides_earlier_answer=blind, answer_blind_spares_symbol_heads=blind,
                 **(dict(n_heads=4, number_heads=1) if number_head else {}))
    model = sorter(answer_symbol_heads_read_only_answer=True, **kinds)
    tokens = model.to_tokens(["a:21,b:3,c:654=bac"])
    index = abacus_indices(tokens, model.digit_ids)
    mask = AttentionContext.build(model.cfg, 18, 18, "cpu", index=index).mask[0]  # [head query key]
    before = AttentionContext.build(sorter(**kinds).cfg, 18, 18, "cpu", index=index).mask[0]
    torch.testing.assert_close(mask[:, :15], before[:, :15])  # the list's queries and "=" keep their reads
    others = [head for head in range(mask.shape[0]) if head != 2]
    torch.testing.assert_close(mask[others], before[others])  # so do the other heads
    for query in (15, 16, 17):
        assert mask[2, query].nonzero().squeeze(-1).tolist() == list(range(15, query + 1))
    # a cached step (one query after 17 keys) gets the same row as the whole sequence
    cached = AttentionContext.build(model.cfg, 1, 18, "cpu", index=index).mask[0, :, 0]  # [head key]
    torch.testing.assert_close(cached, mask[:, 17])
    # query 17 reads the labels written through the symbol head, and the list through the others
    logits = model(tokens, 2)[0, 17]
    for changed in ("a:21,b:3,c:654=dac", "a:21,b:3,c:655=bac"):
        assert not torch.allclose(logits, model(model.to_tokens([changed]), 2)[0, 17])


def test_the_scalable_softmax_counts_the_answer_keys_of_a_narrowed_symbol_head():
    # left-padded like a decoding batch: the short list's row counts its own real keys only
    model = sorter(symbol_heads=1, answer_hides_earlier_answer=False, answer_symbol_heads_read_only_answer=True,
                   softmax_length_scale=0.3)
    short = model.to_tokens(["d:7,e:1=ed"])  # 10 tokens
    tokens = torch.cat([model.to_tokens(["a:21,b:3,c:654=bac"]), F.pad(short, (8, 0), value=0)])  # pad id 0
    index = abacus_indices(tokens, model.digit_ids)
    valid = tokens != 0
    context = AttentionContext.build(model.cfg, 18, 18, "cpu", key_valid=valid, index=index)
    counts = context.log_keys[:, :, 2, 0].exp().round()  # [batch query]: keys head 2 sees
    assert counts[0, 15:].tolist() == [1, 2, 3]  # "b", "a", "c": the labels so far
    assert counts[1, 16:].tolist() == [1, 2]  # "e", "d" after 8 pads
    cached = AttentionContext.build(model.cfg, 1, 18, "cpu", key_valid=valid, index=index)
    torch.testing.assert_close(cached.log_keys[:, 0], context.log_keys[:, -1])


@pytest.mark.parametrize("n_loops", [1, 3])
@pytest.mark.parametrize("backend", ["explicit", "sdpa"])
def test_cached_decoding_equals_naive_decoding_with_the_symbol_heads_on_the_answer(n_loops, backend):
    model = sorter(symbol_heads=1, answer_blind_spares_symbol_heads=True, answer_symbol_heads_read_only_answer=True,
                   attention_backend=backend)
    prompts = ["a:21,b:3,c:654=", "d:7,e:1=", "b:9990,c:12="]  # of different lengths: decoding left-pads them
    generated = model.generate(prompts, n_loops=n_loops, max_new_tokens=4)
    assert generated == naive_generate(model, prompts, n_loops=n_loops, max_new_tokens=4)
    assert len(set(generated)) > 1  # the completions depend on the prompt


def test_narrowing_needs_symbol_heads_and_a_mask_per_head():
    index = abacus_indices(sorter().to_tokens(["a:21,b:3=ba"]), sorter().digit_ids)
    shared = torch.ones(1, 1, 11, 11, dtype=torch.bool).tril()  # [batch 1 query key]: one row for every head
    for mask, heads in ((shared, range(0, 1)), (shared.expand(1, 3, 11, 11), range(0))):
        with pytest.raises(ValueError, match="per-head mask"):
            symbol_heads_read_only_answer(mask, index, 11, "cpu", heads)


@pytest.mark.parametrize(("overrides", "says"), [
    (dict(answer_hides_earlier_answer=False), "needs symbol_heads >= 1"),
    (dict(symbol_heads=1), "would read only itself"),
    (dict(answer_symbol_heads_read_only_answer="yes", symbol_heads=1, answer_blind_spares_symbol_heads=True),
     "use true or false"),
])
def test_reading_only_the_answer_needs_a_symbol_head_the_blind_spares(overrides, says):
    with pytest.raises(UserError, match=f"answer_symbol_heads_read_only_answer.*{says}"):
        ModelConfig(**{**SORTER, "answer_symbol_heads_read_only_answer": True, **overrides})


def test_reading_only_the_answer_round_trips_and_is_left_out_at_its_default():
    for blind in (False, True):
        cfg = ModelConfig(**{**SORTER, "symbol_heads": 1, "answer_hides_earlier_answer": blind,
                             "answer_blind_spares_symbol_heads": blind, "answer_symbol_heads_read_only_answer": True})
        assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert "answer_symbol_heads_read_only_answer" not in ModelConfig(**SORTER).to_dict()

"""Sorting's pairwise answer (model.item_comparator): each list's items are found at their most
significant digit and label, the comparison is antisymmetric, a planted comparator of values
answers the planted order step by step with labels written masked, a pair's comparison does not
depend on the rest of the list when the items are kept apart, cached decoding equals the naive
one, and a run trains, saves and reloads the comparator."""

from __future__ import annotations

import json
import random

import pytest
import torch

from abacus_interp.checkpoints import load_model
from abacus_interp.core.comparator import WRITTEN, ItemComparator, list_items
from abacus_interp.core.decoding import generate, naive_generate
from abacus_interp.core.families import build_model
from abacus_interp.core.positions import abacus_indices, digit_table
from abacus_interp.core.tokens import EOS_ID
from abacus_interp.errors import UserError
from abacus_interp.tasks import get_task
from abacus_interp.training import apply_overrides, get_preset, train
from tests.conftest import tiny_sort_run

TASK = get_task("sorting", max_numbers=5, max_digits=5, label_pool=26, random_labels=True)


def encode(text: str) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.tensor([TASK.vocab.encode(text)])
    return tokens, abacus_indices(tokens, digit_table(TASK.vocab.digit_ids))


def planted_comparator(values_dim: int = 0, sharpness: float = 50.0, alone: bool = False) -> ItemComparator:
    """c(i, j) = sharpness * (v_j - v_i), v a summary's coordinate `values_dim`: gelu(x) - gelu(-x) = x."""
    d_vocab = len(TASK.vocab)
    comparator = ItemComparator(4, 1, 0.02, TASK.vocab.label_ids, TASK.vocab.encode("=")[0], d_vocab, alone)
    with torch.no_grad():
        comparator.W_first.zero_()
        comparator.W_second.zero_()
        comparator.W_first[values_dim, 0] = -sharpness
        comparator.W_second[values_dim, 0] = sharpness
        comparator.w_out.fill_(1.0)
    return comparator


def test_items_sit_at_their_most_significant_digit_and_label():
    tokens, index = encode("c:123,f:4,k:98=fc")
    is_label = torch.zeros(len(TASK.vocab), dtype=torch.bool)
    is_label[TASK.vocab.label_ids] = True
    before_equals = torch.arange(tokens.shape[1])[None] < 14
    items = list_items(tokens, index, is_label, before_equals)
    assert items.summary.tolist() == [[4, 8, 13]]  # "3" of 123 (LSD first), "4", "8" of 98
    assert TASK.vocab.decode(items.label[0].tolist()) == "cfk"
    assert items.valid.tolist() == [[True, True, True]]


def test_labels_and_numbers_that_do_not_pair_up_are_refused():
    tokens, index = encode("c:123,f:=")
    is_label = torch.zeros(len(TASK.vocab), dtype=torch.bool)
    is_label[TASK.vocab.label_ids] = True
    with pytest.raises(ValueError, match="do not pair up"):
        list_items(tokens, index, is_label, torch.arange(tokens.shape[1])[None] < 8)


def test_the_comparison_is_antisymmetric_and_the_tie_keeps_list_order():
    comparator = ItemComparator(8, 16, 0.5, TASK.vocab.label_ids, TASK.vocab.encode("=")[0], len(TASK.vocab))
    summaries = torch.randn(3, 5, 8)
    odds = comparator.log_odds(summaries)
    assert torch.allclose(odds, -odds.transpose(1, 2), atol=1e-6)
    with torch.no_grad():
        comparator.tie.fill_(2.0)
    same = summaries[:, :1].expand(-1, 5, -1)  # five equal items
    tied = comparator.log_odds(same)
    assert torch.allclose(tied[0], 2.0 * torch.sign(torch.arange(5)[None] - torch.arange(5)[:, None]).float())


@pytest.mark.parametrize("values", [(3.0, 1.0, 2.0, 5.0), (0.4, 0.1, 0.3, 0.2)])
def test_a_planted_comparator_answers_the_planted_order_step_by_step(values):
    comparator = planted_comparator()
    labels = "bdgm"
    order = "".join(labels[i] for i in sorted(range(4), key=lambda i: values[i]))
    tokens, index = encode("b:11,d:22,g:33,m:44=" + order)
    normed = torch.zeros(1, tokens.shape[1], 4)
    for item, position in enumerate((3, 8, 13, 18)):  # each item's last digit
        normed[0, position, 0] = values[item]
    added = comparator(torch.zeros(1, tokens.shape[1], len(TASK.vocab)), normed, tokens, index)  # [1 pos d_vocab]
    equals = 19
    assert added[0, :equals].abs().max() == 0  # nothing inside the list
    label_ids = [TASK.vocab.encode(c)[0] for c in labels]
    for step in range(4):  # the query at "=" and after each label written
        scores = added[0, equals + step, label_ids]
        written = set(order[:step])
        assert labels[int(scores.argmax())] == order[step]
        for label, score in zip(labels, scores.tolist(), strict=True):
            if label in written:
                assert score == WRITTEN
    assert (added[0, equals + 4, label_ids] == WRITTEN).all()  # every label written: the EOS's step


def test_a_planted_comparator_sums_log_probabilities_over_the_remaining_items():
    comparator = planted_comparator(sharpness=1.0)
    values = (0.5, -0.25, 1.0)
    tokens, index = encode("b:11,d:22,g:33=d")
    normed = torch.zeros(1, tokens.shape[1], 4)
    for item, position in enumerate((3, 8, 13)):
        normed[0, position, 0] = values[item]
    added = comparator(torch.zeros(1, tokens.shape[1], len(TASK.vocab)), normed, tokens, index)
    b, g = TASK.vocab.encode("b")[0], TASK.vocab.encode("g")[0]
    log_smaller = torch.nn.functional.logsigmoid
    # after "d" is written, b is compared with g only, and g with b only
    assert added[0, 15, b].item() == pytest.approx(log_smaller(torch.tensor(1.0 - 0.5)).item(), abs=1e-6)
    assert added[0, 15, g].item() == pytest.approx(log_smaller(torch.tensor(0.5 - 1.0)).item(), abs=1e-6)


def test_alone_the_answer_labels_are_the_comparisons_only():
    values = (0.5, -0.25, 1.0)
    tokens, index = encode("b:11,d:22,g:33=d")
    normed = torch.zeros(1, tokens.shape[1], 4)
    for item, position in enumerate((3, 8, 13)):
        normed[0, position, 0] = values[item]
    logits = torch.randn(1, tokens.shape[1], len(TASK.vocab))
    d, g, z = TASK.vocab.encode("dgz")
    logits[0, 14, g] = 100.0  # the unembedding would pick g first; g is the largest
    logits[0, 14, z] = 100.0  # and z, which no item carries
    added = planted_comparator(sharpness=1.0)(logits, normed, tokens, index)
    alone = planted_comparator(sharpness=1.0, alone=True)(logits, normed, tokens, index)
    assert int(added[0, 14].argmax()) in (g, z)
    labels = TASK.vocab.label_ids
    assert labels[int(alone[0, 14, labels].argmax())] == d
    assert alone[0, 14, z] == WRITTEN and alone[0, 15, z] == WRITTEN
    assert alone[0, 14, EOS_ID] == logits[0, 14, EOS_ID]  # the other tokens keep the unembedding's logits
    assert torch.equal(alone[0, :14], logits[0, :14])  # and nothing inside the list changes


def test_alone_a_shorter_list_of_a_batch_keeps_its_first_label():
    """A row with fewer items than the batch's longest pads its items with its first label's
    position; those must not unlist the first label."""
    task_tokens = [TASK.vocab.encode(text) for text in ("b:11,d:22,g:33,m:44=", "c:5,e:7=")]
    tokens = torch.zeros(2, len(task_tokens[0]), dtype=torch.long)
    for row, ids in enumerate(task_tokens):
        tokens[row, : len(ids)] = torch.tensor(ids)
    index = abacus_indices(tokens, digit_table(TASK.vocab.digit_ids))
    normed = torch.zeros(2, tokens.shape[1], 4)
    normed[1, 6, 0] = -1.0  # e (7) smaller than c (5), as planted
    out = planted_comparator(sharpness=5.0, alone=True)(torch.zeros(2, tokens.shape[1], len(TASK.vocab)), normed, tokens, index)
    c, e = TASK.vocab.encode("ce")
    assert out[1, 7, c] > WRITTEN and out[1, 7, e] > out[1, 7, c]  # at "=": both listed, e first


def test_a_pair_compares_alike_in_a_list_of_three_and_of_ten_when_items_are_kept_apart():
    run = tiny_sort_run("model.item_comparator=16", "task.label_pool=26", "task.random_labels=true",
                        "model.max_seq_len=80")
    model = build_model(run.model).eval()
    short, long = "a:31,b:412,c:7=", "a:31,b:412,c:7,d:5,e:88,f:123,g:9,h:40,i:2,j:61="
    odds = []
    for text in (short, long):
        tokens = model.to_tokens(text)
        index = abacus_indices(tokens, model.digit_table)
        with torch.no_grad():
            state = model(tokens, return_type="state")
            items = list_items(tokens, index, model.comparator.is_label, torch.arange(tokens.shape[1])[None] < len(text) - 1)
            summaries = model.ln_final(state).gather(1, items.summary[..., None].expand(-1, -1, state.shape[-1]))
            odds.append(model.comparator.log_odds(summaries)[0, :3, :3])
    assert torch.allclose(odds[0], odds[1], atol=1e-5)


def test_cached_decoding_equals_naive_decoding_with_the_pairwise_answer():
    base = load_model("checkpoints/extrap-sort-apart-ft")
    model = build_model(base.cfg.replace(item_comparator=32)).eval()
    model.load_state_dict(base.state_dict(), strict=False)
    with torch.no_grad():
        model.comparator.w_out.mul_(20.0)
        model.comparator.tie.fill_(0.5)
    prompts = [e.prompt for e in TASK.sample(12, random.Random(3))]
    prompts += [e.prompt for e in TASK.sample(4, random.Random(4), min_numbers=9, max_numbers=9)]
    assert generate(model, prompts) == naive_generate(model, prompts)


def test_the_option_is_checked():
    with pytest.raises(UserError, match="item_comparator=0"):
        apply_overrides(get_preset("extrap-sort-window"), ["model.item_comparator=0"])
    with pytest.raises(UserError, match="sorting task only"):
        apply_overrides(get_preset("demo-add"), ["model.item_comparator=16"])


def test_a_run_trains_saves_and_reloads_the_comparator(tmp_path):
    run = tiny_sort_run("model.item_comparator=16", "train.steps=40", "train.lr=3e-3")
    result = train(run, tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in rows if "loss" in row]
    assert losses[-1] < losses[0]
    model = load_model(result.run_dir)
    assert model.cfg.item_comparator == 16 and model.comparator.W_first.abs().sum() > 0
    tokens = model.to_tokens("a:31,b:412,c:7=ca")
    again = load_model(result.run_dir)
    with torch.no_grad():
        assert torch.equal(model(tokens), again(tokens))


def test_the_fixed_point_lens_reads_the_pairwise_answer():
    """The per-loop readout of the fixed-point analysis is the model's answer at that loop: at the
    last loop it picks what the model's own forward pass picks, the comparison included (the
    unembedding alone, whose label logits `alone` drops, would pick otherwise)."""
    from analyses.fixed_point.collect import collect

    base = load_model("checkpoints/extrap-sort-apart-ft")
    model = build_model(base.cfg.replace(item_comparator=32, item_comparator_alone=True)).eval()
    model.load_state_dict(base.state_dict(), strict=False)
    with torch.no_grad():
        model.comparator.w_out.mul_(20.0)
    examples = TASK.sample(8, random.Random(5))
    with torch.no_grad():
        collected = collect(model, examples, horizon=model.cfg.n_loops, progress=False)
    for i, example in enumerate(examples):
        tokens = model.to_tokens(example.prompt + example.target)
        with torch.no_grad():
            picks = model(tokens)[0, len(example.prompt) - 1 : -1].argmax(-1)  # the "=" and each answer token
        assert collected.predicted[i, -1, : len(picks)].tolist() == picks.tolist()

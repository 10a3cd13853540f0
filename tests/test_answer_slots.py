"""The answer-slot format (`answer_format="slots"`): the model reads "_" in every answer
position, so the whole answer comes from the prompt in one pass. Checked: the task option,
the model never sees its answer digits, decoding agrees with teacher forcing, configs follow
the task, and the "mix" loss at depths past the trained one."""

from __future__ import annotations

import random

import pytest
import torch
from conftest import make_tiny_model

from abacus_interp import ModelConfig
from abacus_interp import checkpoints as ckpt
from abacus_interp.core.scoring import score_examples
from abacus_interp.core.tokens import encode_batch
from abacus_interp.tasks import get_task
from abacus_interp.training import apply_overrides, get_preset, train


def slot_task(**kw):
    return get_task("addition", answer_format="slots", **kw)


def test_task_option_keeps_examples_and_adds_the_placeholder():
    plain, slots = get_task("addition", max_digits=4), slot_task(max_digits=4)
    assert slots.vocab.symbols == (*plain.vocab.symbols, "_")
    assert slots.make(123, 456) == plain.make(123, 456)  # same strings, only what the model reads differs
    assert slots.answer_slots and not plain.answer_slots
    assert get_task("addition", **slots.config()).answer_slots
    assert "answer_format" not in plain.config()  # configs written before the option still match
    with pytest.raises(ValueError, match="answer_format"):
        get_task("addition", answer_format="backwards")


def test_model_reads_placeholders_after_equals():
    task = slot_task(max_digits=3)
    model = make_tiny_model(vocab=task.vocab, answer_slots=True)
    tokens = model.to_tokens(["321+654=975", "12+3="])
    read = model.read_tokens(tokens)
    slot, pad = task.vocab.encode("_")[0], 0
    assert read[0].tolist() == tokens[0, :8].tolist() + [slot] * 3
    assert read[1].tolist() == tokens[1, :5].tolist() + [pad] * 6  # padding stays padding
    with pytest.raises(ValueError, match="answer_format='slots'"):
        ModelConfig(vocab=get_task("addition").vocab, answer_slots=True)


def test_answer_digits_cannot_influence_any_logit():
    task = slot_task(max_digits=3)
    model = make_tiny_model(vocab=task.vocab, answer_slots=True, n_layers=1, n_loops=3)
    right = encode_batch(task.vocab, ["321+654="], ["975"]).tokens
    wrong = encode_batch(task.vocab, ["321+654="], ["118"]).tokens
    torch.testing.assert_close(model(right), model(wrong), rtol=0, atol=0)
    # an autoregressive model does read them
    plain = make_tiny_model(n_layers=1, n_loops=3)
    plain_right = encode_batch(plain.cfg.vocab, ["321+654="], ["975"]).tokens
    plain_wrong = encode_batch(plain.cfg.vocab, ["321+654="], ["118"]).tokens
    assert not torch.equal(plain(plain_right)[0, -2], plain(plain_wrong)[0, -2])


def test_decoding_equals_teacher_forced_argmax():
    task = slot_task(max_digits=3)
    model = make_tiny_model(vocab=task.vocab, answer_slots=True, n_layers=1, n_loops=2)
    examples = task.sample(12, random.Random(0))
    prompts = [e.prompt for e in examples]
    cached, naive = model.generate(prompts, max_new_tokens=5), model.generate(prompts, max_new_tokens=5, use_cache=False)
    assert cached == naive
    # teacher forcing with the model's own completion as target reproduces its argmax
    scores = score_examples(model, [type(e)(e.prompt, c, e.operands, e.answer) for e, c in zip(examples, cached, strict=True)])
    complete = [len(c) < 5 for c in cached]  # those that emitted EOS within the budget
    assert all(ok for ok, done in zip(scores.per_example_correct, complete, strict=True) if done)


def test_config_follows_the_task_through_overrides():
    cfg = get_preset("loop-add")
    assert cfg.model.answer_slots and "_" in cfg.model.vocab.symbols
    back = apply_overrides(cfg, ["task.answer_format=autoregressive"])
    assert not back.model.answer_slots and "_" not in back.model.vocab.symbols
    with pytest.raises(ValueError, match="max_loops"):
        apply_overrides(cfg, ["train.mix_depths=[1,64]"])
    with pytest.raises(ValueError, match="mix_depths"):
        apply_overrides(cfg, ["train.mix_depths=[3,2]"])


@pytest.mark.slow
def test_loop_add_trains_with_depths_past_the_trained_one(tmp_path):
    cfg = apply_overrides(get_preset("loop-add"), [
        "task.max_digits=3", "model.d_model=32", "model.n_loops=2", "model.max_loops=6", "model.max_seq_len=24",
        "train.mix_depths=[3,6]", "train.steps=20", "train.batch_size=16", "train.eval_problems=16",
        "train.eval_every=10", "train.checkpoint_every=20", "train.dense_checkpoints=1", "train.dense_until=1",
    ])
    train(cfg, tmp_path / "run", progress=False)
    rows = ckpt.read_metrics(tmp_path / "run")
    assert rows[-1]["step"] == 20
    # every drawn depth (3..6) exceeds the trained depth 2, so the optimised loss differs
    assert all(r["loss"] != r["full_depth_loss"] for r in rows)


def test_cascade_fraction_plants_long_chains_and_keeps_the_plain_stream():
    from collections import Counter

    from abacus_interp.tasks.carries import longest_cascade

    plain = get_task("addition", max_digits=5)
    zero = get_task("addition", max_digits=5, cascade_fraction=0.0)
    assert zero.sample(50, random.Random(3)) == plain.sample(50, random.Random(3))
    assert "cascade_fraction" not in zero.config()
    rich = get_task("addition", max_digits=5, cascade_fraction=1.0)
    assert get_task("addition", **rich.config()).cascade_fraction == 1.0
    counts = Counter(longest_cascade(*e.operands) for e in rich.sample(1000, random.Random(0)))
    assert set(counts) == {1, 2, 3, 4, 5}  # every planted length, none without a carry
    assert min(counts.values()) > 120  # lengths are drawn uniformly (200 each expected)
    assert all(len(str(a)) <= 5 and len(str(b)) <= 5 for a, b in (e.operands for e in rich.sample(200, random.Random(1))))
    with pytest.raises(ValueError, match="cascade_fraction"):
        get_task("addition", cascade_fraction=1.5)

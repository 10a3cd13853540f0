"""analyses.carry_attention: labels, attention statistics, ablation, patching and probes.

Validation against planted ground truth: a head whose pattern is set (by a hook) to the
aligned digits scores alignment 1 and a uniform head scores exactly chance; patching the one
position where a pair differs restores 100% of the logit difference; a probe reads a planted
linear feature (~1) and not shuffled labels (~0.5). Models are tiny; the file runs in seconds.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from abacus_interp import act_name
from abacus_interp.core.scoring import score_examples
from abacus_interp.core.tokens import encode_batch
from abacus_interp.jsonsafe import from_json
from abacus_interp.tasks import get_task
from abacus_interp.tasks.carries import carry_in
from analyses import carry_attention
from analyses.carry_attention import labels as L
from analyses.carry_attention.ablation import ablate_heads
from analyses.carry_attention.attention_stats import CATEGORIES, attention_stats, example_pattern
from analyses.carry_attention.figures import pattern_figure
from analyses.carry_attention.patching import PairSet, make_carry_pairs, patch_pairs
from analyses.carry_attention.probes import carry_probes, probe_accuracy
from analyses.carry_attention.result import ExamplePattern
from analyses.carry_attention.runner import LoopRunner

TASK = get_task("addition", max_digits=4)


@pytest.fixture
def model(tiny_model):
    return tiny_model(n_layers=1, n_loops=2, d_model=32, max_seq_len=32, abacus_max_offset=4, init_std=0.2)


@pytest.fixture
def problems():
    return L.build_problem_set(TASK.vocab, L.balanced_problems(TASK, 48, random.Random(0), 4), 4)


# ------------------------------------------------------------------------------ labels
def test_digit_labels_and_positions():
    labs = L.digit_labels(999, 1)  # 999 + 1 = 1000: a cascade of length 3 into the carry-out digit
    assert [d["carry_in"] for d in labs] == [0, 1, 1, 1]
    assert [d["chain_length"] for d in labs] == [0, 1, 2, 3]
    assert [d["subtask"] for d in labs] == ["make_carry", "use_carry", "use_sum9", "use_sum9"]
    assert [d["sum_is_nine"] for d in labs] == [False, True, True, False]
    assert [d["answer_digit"] for d in labs] == [0, 0, 0, 1]
    assert L.digit_labels(12, 34)[0]["subtask"] == "base_add"
    assert L.digit_labels(45, 4)[0]["subtask"] == "make_sum9"
    # "999+1=0001": a_i at i, b_0 at 4, '=' at 5 predicts digit 0; b has no digit 1
    pos = L.digit_positions(3, 1, 1)
    assert pos == {"pred": 6, "a_i": 1, "b_i": -1, "a_prev": 0, "b_prev": 4, "prev_answer": 5, "answer_start": 6}
    assert L.digit_positions(3, 1, 0)["a_prev"] == -1 and L.digit_positions(3, 1, 3)["a_i"] == -1


def test_problem_set_rows_and_balance(problems):
    r = problems.rows
    for n, ex in enumerate(problems.examples):
        a, b = ex.operands
        rows = np.nonzero(r["problem"] == n)[0]
        assert list(r["carry_in"][rows]) == carry_in(a, b)
        toks = problems.tokens[n]
        # the token at the predicting position + 1 is the answer digit the row labels
        assert all(int(toks[r["pred"][k] + 1]) == r["target"][k] for k in rows)
        assert all(int(toks[r["a_i"][k]]) == TASK.vocab.encode(str(r["a"][k]))[0] for k in rows if r["a_i"][k] >= 0)
    counts = problems.summary()["complexity_counts"]
    assert all(counts[b] >= 5 for b in ("0", "1", "2", "3", "4"))  # cascades oversampled
    assert counts["5+"] == 0  # 4-digit operands cannot cascade 5 times


# ----------------------------------------------------------------------- attention stats
def planted_patterns(tokens: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Head 0 attends only to a_i and b_i from the position predicting answer digit i (to
    itself elsewhere); head 1 is uniform over the causal keys; other heads attend to self."""
    vocab = TASK.vocab
    plus, eq = vocab.encode("+")[0], vocab.encode("=")[0]
    b, n = tokens.shape
    pattern = torch.eye(n).expand(b, n_heads, n, n).clone()
    pattern[:, 1] = torch.ones(n, n).tril() / torch.arange(1, n + 1)[:, None]
    for row in range(b):
        t = tokens[row].tolist()
        la, e = t.index(plus), t.index(eq)
        lb = e - la - 1
        for q in range(e, n):
            i = q - e
            keys = [k for k, ok in ((i, i < la), (la + 1 + i, i < lb)) if ok]
            if keys:
                pattern[row, 0, q] = 0
                pattern[row, 0, q, keys] = 1 / len(keys)
    return pattern


def test_alignment_of_planted_heads(model, problems):
    planted = planted_patterns(problems.tokens, model.cfg.n_heads)

    def plant(pattern, hook):
        return planted[:, :, : pattern.shape[2], : pattern.shape[3]].to(pattern.dtype)

    hooks = [(act_name("pattern", 0, loop=t), plant) for t in range(2)]
    stats = attention_stats(model, problems, 2, batch_size=1000, fwd_hooks=hooks)
    al = stats["alignment"]["all"]
    assert np.allclose(al["score"][:, 0, 0], 1.0) and np.allclose(al["lift"][:, 0, 0], 1.0)
    assert np.allclose(al["score"][:, 0, 1], al["chance"], atol=1e-6)  # uniform head = chance
    assert 0.05 < al["chance"] < 0.5
    assert np.allclose(stats["carry_source"]["all"]["score"][:, 0, 0], 0.0)
    assert {h["head"] for h in stats["top_heads"]["alignment"][:2]} == {0}
    # masses are a partition of the visible keys
    mass = stats["mass"]["all"]
    assert np.allclose(mass.sum(-1), 1.0, atol=1e-5)
    assert np.allclose(mass[:, 0, 0, CATEGORIES.index("other")], 0.0, atol=1e-6)
    # staircase: digit i's row of head 0 is on slots a_i and b_i, except for the carry-out
    # digits past both operands (there the planted head looks at itself)
    stair, cols, r = stats["staircase"][0, 0, 0], stats["staircase_cols"], problems.rows
    for i in range(4):
        sel = r["digit"] == i
        has = ((r["a_i"] >= 0) | (r["b_i"] >= 0))[sel].mean()
        assert stair[i, cols.index(f"a{i}")] + stair[i, cols.index(f"b{i}")] == pytest.approx(has)
    # the explicit (hooked) path of the real model gives patterns that sum to 1 per row
    real = attention_stats(model, problems, 2, batch_size=16)
    assert np.allclose(real["mass"]["all"].sum(-1), 1.0, atol=1e-5)
    ex = example_pattern(model, TASK.from_human("1999+1"), 2)
    assert ex["pattern"].shape == (2, 1, 4, 12, 12) and ex["tokens"][-1] == "<eos>"
    assert len(pattern_figure(from_json(ExamplePattern, ex)).data) == 2 * 4


# ------------------------------------------------------------------------------ ablation
def test_loop_runner_matches_full_forward(model, problems):
    runner = LoopRunner(model, problems.tokens[:8], 2)
    for t in range(2):
        assert torch.allclose(runner.from_loop(t, []), runner.logits, atol=1e-5)


def test_ablation_scores_and_mean_ablation_of_identical_problems(model):
    examples = [TASK.make(475, 38)] * 6 + [TASK.make(9, 91)] * 6
    ps = L.build_problem_set(TASK.vocab, [examples[0]] * 6, 4)
    res = ablate_heads(model, ps, 2)
    ref = score_examples(model, ps.examples, 2)
    assert res["baseline"]["exact_match"] == ref.exact_match
    # every problem identical: the slot mean is the activation itself, so mean ablation is a no-op
    for row in res["table"]:
        if row["kind"] == "mean":
            assert abs(row["delta_loss"]) < 1e-4
    assert max(abs(r["delta_loss"]) for r in res["table"] if r["kind"] == "zero") > 1e-3
    assert res["arrays"]["zero"]["exact_match"].shape == (2, 1, 4)
    mixed = ablate_heads(model, L.build_problem_set(TASK.vocab, examples, 4), 2, kinds=("mean",))
    assert len(mixed["table"]) == 8 and set(mixed["most_harmful"]) == {"mean"}


# ------------------------------------------------------------------------------ patching
def single_position_pair(p: int) -> PairSet:
    """Clean '734+51=' + answer and a corrupted copy whose token at p alone differs."""
    ex = TASK.make(437, 15)
    clean = encode_batch(TASK.vocab, [ex.prompt], [ex.target]).tokens
    corrupt = clean.clone()
    corrupt[0, p] = TASK.vocab.encode("9" if int(clean[0, p]) != TASK.vocab.encode("9")[0] else "2")[0]
    pos = L.digit_positions(3, 2, 2)
    positions = {k: np.array([pos[k]]) for k in ("a_i", "b_i", "a_prev", "b_prev", "prev_answer", "pred")}
    positions["changed"] = np.array([p])
    ids = TASK.vocab.encode("52")
    return PairSet(clean, corrupt, np.array([pos["pred"]]), np.array([ids[0]]), np.array([ids[1]]),
                   positions, np.array(["direct"]), np.array([2]), [("", "")])


def test_patching_the_only_differing_position_restores_everything(model):
    pairs = single_position_pair(1)  # a_1, the carry source of digit 2
    res = patch_pairs(model, pairs, 2)
    g, pos = res["groups"]["all"], res["positions"]
    assert g["mean_ld_clean"] != pytest.approx(g["mean_ld_corrupt"], abs=1e-4)
    assert g["input"][pos.index("changed")] == pytest.approx(1.0, abs=1e-5)
    assert g["input"][pos.index("a_prev")] == pytest.approx(1.0, abs=1e-5)  # the same position
    assert g["input"][pos.index("a_i")] == pytest.approx(0.0, abs=1e-5)  # identical there
    assert g["resid"].shape == (2, 1, len(pos)) and g["heads"].shape == (2, 1, 4, len(pos))
    # a pair differing only at the predicting position: its final state decides the logits
    res = patch_pairs(model, single_position_pair(pairs.pred[0]), 2, heads=False)
    g = res["groups"]["all"]
    assert g["resid"][1, 0, pos.index("pred")] == pytest.approx(1.0, abs=1e-5)
    assert g["input"][pos.index("pred")] == pytest.approx(1.0, abs=1e-5)
    assert res["first_loop_carry_present"] is not None


def test_carry_pairs_flip_only_the_carry():
    pairs = make_carry_pairs(TASK, TASK.vocab, 16, random.Random(3), 4)
    assert set(pairs.kind) == {"direct", "cascade"}
    for (c, r), i in zip(pairs.problems, pairs.digit, strict=True):
        ce, re_ = TASK.from_human(_human(c)), TASK.from_human(_human(r))
        assert carry_in(*ce.operands)[i] != carry_in(*re_.operands)[i]
        assert len(c) == len(r) and ce.target[i] != re_.target[i]
        diff = [k for k, (x, y) in enumerate(zip(ce.prompt, re_.prompt, strict=True)) if x != y]
        assert len(diff) == 1  # one operand digit changed
    assert torch.equal(pairs.clean_tokens != 0, pairs.corrupt_tokens != 0)


def _human(model_order: str) -> str:
    prompt = model_order.split("=")[0]
    a, b = prompt.split("+")
    return f"{a[::-1]}+{b[::-1]}"


# -------------------------------------------------------------------------------- probes
def test_probe_on_planted_feature_and_shuffled_control():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 600)
    X = rng.normal(size=(600, 16))
    X[:, 3] += 3.0 * (2 * y - 1)
    r = probe_accuracy(X, y, groups=np.arange(600) // 3, seed=0)
    assert r["accuracy"] > 0.95 and 0.35 < r["shuffled_accuracy"] < 0.65


def test_carry_probe_reads_a_feature_planted_in_the_residual(model, problems):
    feature = torch.zeros(problems.tokens.shape)
    r = problems.rows
    feature[r["problem"], r["pred"]] = torch.as_tensor(2.0 * r["carry_in"] - 1, dtype=torch.float)
    direction = torch.randn(model.cfg.d_model)

    def plant(resid, hook):
        return resid + 5.0 * feature[:, : resid.shape[1], None] * direction

    res = carry_probes(model, problems, 2, fwd_hooks=[(act_name("resid_post", 0, loop=1), plant)],
                       batch_size=1000)
    assert res["accuracy"][1, 0] > 0.95
    assert res["shuffled_accuracy"][1, 0] < 0.75
    assert res["first_decodable"]["loop"] <= 1


# ------------------------------------------------------------------------------- run()
def test_run_end_to_end(model):
    res = carry_attention.run(model, TASK, n_problems=24, n_pairs=6, n_probe_problems=40, max_digits=3,
                              ablation_kinds=("zero",), patch_positions=("a_prev", "pred"))
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["labels"]["n_problems"] == 24 and d["settings"]["max_digits"] == 3
    assert set(d) >= {"attention", "ablation", "patching", "probes", "example", "timings"}
    figs = res.figures()
    assert {"staircase", "alignment", "example_pattern", "ablation", "patching", "probes"} <= set(figs)
    assert json.dumps(res.summary())
    only = carry_attention.run(model, TASK, n_problems=8, max_digits=2, sections=("attention",))
    assert only.ablation is None and only.patching is None and "staircase" in only.figures()
    with pytest.raises(ValueError, match="sections"):
        carry_attention.run(model, TASK, sections=("nope",))
    with pytest.raises(ValueError, match="addition"):
        carry_attention.run(model, get_task("multiplication", max_digits=2))

"""Warm starts (train.init_from): a new run begins from another run's weights, may add a
lever's tensors (the running-sum readout) to them, grow (a wider MLP, more layers, more heads) while
computing the source's function, and refuses a model that would drop or resize any other."""

from __future__ import annotations

import random
import shutil
import signal
from pathlib import Path

import pytest
import torch

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.tokens import encode_batch
from abacus_interp.errors import UserError
from abacus_interp.training import TrainingInterrupted, apply_overrides, get_preset, train
from abacus_interp.training.data import BatchSource
from abacus_interp.training.growth import BLOCK_OUTPUTS

TINY_MUL = [
    "task.max_digits=3", "model.d_model=32", "model.n_heads=2", "model.n_layers=1", "model.n_loops=2",
    "model.max_seq_len=16", "train.batch_size=16", "train.eval_problems=8", "train.warmup_steps=0",
    "train.processes=1", "train.steps=6", "train.checkpoint_every=3", "train.dense_checkpoints=1",
    "train.log_every=1", "train.eval_every=3",
]  # fmt: skip
PROBE = ["model.running_sum_probe=true", "train.running_sum_loss=0.5"]


def tiny_mul(*extra: str):
    return apply_overrides(get_preset("mul"), [*TINY_MUL, *extra])


@pytest.fixture(scope="module")
def source_run(tmp_path_factory) -> Path:
    """A tiny multiplication run without the running-sum readout, trained to step 6."""
    run_dir = tmp_path_factory.mktemp("source") / "run"
    train(tiny_mul(), run_dir, progress=False)
    return run_dir


def test_a_warm_start_begins_at_the_sources_weights_and_adds_the_levers_tensors(source_run, tmp_path):
    run_dir = tmp_path / "warm"
    result = train(tiny_mul(*PROBE, f"train.init_from={source_run}", "train.seed=1"), run_dir, progress=False)
    assert result.final_step == 6
    latest = ckpt.step_path(source_run, 6)  # a run directory: its latest checkpoint
    source = ckpt.load_tensors(latest)
    start = ckpt.load_tensors(ckpt.step_path(run_dir, 0))
    assert set(start) - set(source) == {"W_sum", "b_sum"}  # the readout, freshly initialised
    for name, value in source.items():
        assert torch.equal(start[name], value), f"{name} is not the source's"
    end = ckpt.load_tensors(ckpt.step_path(run_dir, 6))
    assert not torch.equal(end["W_sum"], start["W_sum"])  # and it trains
    assert ckpt.read_run_config(run_dir)["train"]["init_from"] == str(latest)  # the file, not the folder
    rows = ckpt.read_metrics(run_dir)
    assert rows[0]["step"] == 1 and all("running_sum_loss" in r for r in rows)


def test_a_resumed_warm_start_continues_from_its_own_state(source_run, tmp_path, monkeypatch):
    early = tmp_path / "source.safetensors"
    shutil.copy(ckpt.step_path(source_run, 3), early)
    straight = tmp_path / "straight"
    train(tiny_mul(f"train.init_from={early}"), straight, progress=False)
    run_dir = tmp_path / "warm"
    original = BatchSource.batch

    def interrupted(self, step):  # SIGINT while step 4 is fetched: it finishes, saves and stops
        if step == 4:
            signal.raise_signal(signal.SIGINT)
        return original(self, step)

    monkeypatch.setattr(BatchSource, "batch", interrupted)
    with pytest.raises(TrainingInterrupted):
        train(tiny_mul(f"train.init_from={early}"), run_dir, progress=False)
    monkeypatch.setattr(BatchSource, "batch", original)
    early.unlink()  # a resume must not need the source again
    train(tiny_mul(), run_dir, progress=False)  # resumed without the --set
    assert ckpt.read_run_config(run_dir)["train"]["init_from"] == str(early)  # the history is kept
    resumed, whole = (ckpt.load_tensors(ckpt.step_path(run, 6)) for run in (run_dir, straight))
    assert all(torch.equal(resumed[k], whole[k]) for k in whole)  # the uninterrupted run's step 6
    assert [r["step"] for r in ckpt.read_metrics(run_dir)] == list(range(1, 7))


def test_a_resized_model_is_refused_before_anything_is_written(source_run, tmp_path):
    cfg = tiny_mul("model.d_model=48", f"train.init_from={source_run}", "train.steps=1")
    with pytest.raises(UserError, match=r"W_E is \[\d+, 32\], not \[\d+, 48\]"):
        train(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_layer_added_to_the_source_starts_as_the_identity_and_the_others_are_the_sources(source_run, tmp_path):
    run_dir = tmp_path / "run"
    train(tiny_mul("model.n_layers=2", f"train.init_from={source_run}", "train.steps=1"), run_dir, progress=False)
    source, start = ckpt.load_tensors(ckpt.step_path(source_run, 6)), ckpt.load_tensors(ckpt.step_path(run_dir, 0))
    added = sorted(k for k in start if k not in source)
    assert added and all(k.startswith("blocks.1.") for k in added)
    assert all(torch.equal(start[k], v) for k, v in source.items())
    assert all(not start[f"blocks.1.{name}"].any() for name in BLOCK_OUTPUTS)  # writes nothing yet
    assert start["blocks.1.attn.W_Q"].any()  # the rest is freshly initialised
    assert_same_function(source_run, run_dir)


def test_a_wider_mlp_keeps_the_sources_units_and_computes_its_function(source_run, tmp_path):
    run_dir = tmp_path / "run"
    train(tiny_mul("model.d_mlp=200", f"train.init_from={source_run}", "train.steps=1"), run_dir, progress=False)
    source, start = ckpt.load_tensors(ckpt.step_path(source_run, 6)), ckpt.load_tensors(ckpt.step_path(run_dir, 0))
    units = source["blocks.0.mlp.W_in"].shape[1]
    assert start["blocks.0.mlp.W_in"].shape[1] == 200 > units
    assert torch.equal(start["blocks.0.mlp.W_in"][:, :units], source["blocks.0.mlp.W_in"])
    assert torch.equal(start["blocks.0.mlp.W_out"][:units], source["blocks.0.mlp.W_out"])
    assert start["blocks.0.mlp.W_in"][:, units:].std() > 0  # the new units read the state...
    assert not start["blocks.0.mlp.W_out"][units:].any()  # ...and write nothing yet
    assert_same_function(source_run, run_dir)
    end = ckpt.load_tensors(ckpt.step_path(run_dir, 1))
    assert end["blocks.0.mlp.W_out"][units:].any()  # one step on, they write


def test_a_narrower_mlp_is_refused(tmp_path):
    wide = tmp_path / "wide"
    train(tiny_mul("model.d_mlp=200", "train.steps=1"), wide, progress=False)
    with pytest.raises(UserError, match=r"W_in is \[32, 200\], not \[32, 128\].*widen its MLP"):
        train(tiny_mul(f"train.init_from={wide}", "train.steps=1"), tmp_path / "run", progress=False)


def assert_same_function(source_run: Path, grown_run: Path) -> None:
    """The grown run's step 0 gives the source's logits on held-out problems."""
    source = ckpt.load_model(ckpt.step_path(source_run, 6), device="cpu").eval()
    grown = ckpt.load_model(ckpt.step_path(grown_run, 0), device="cpu").eval()
    task = ckpt.load_task(source_run)
    examples = task.sample(8, random.Random(0), 3, 3)
    tokens = encode_batch(task.vocab, [e.prompt for e in examples], [e.target for e in examples]).tokens
    with torch.no_grad():
        torch.testing.assert_close(grown(tokens), source(tokens), rtol=0, atol=1e-5)


def test_a_model_that_would_drop_a_tensor_is_refused(source_run, tmp_path):
    with_probe = tmp_path / "probe"
    train(tiny_mul(*PROBE, "train.steps=1"), with_probe, progress=False)
    with pytest.raises(UserError, match="this model has no W_sum, b_sum"):
        train(tiny_mul(f"train.init_from={with_probe}"), tmp_path / "run", progress=False)


def test_a_source_that_is_no_checkpoint_says_what_to_name(tmp_path):
    (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
    (tmp_path / "folder").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    for source, message in [(tmp_path / "empty", "has no checkpoints yet"),
                            (tmp_path / "folder", "is no run directory"),
                            (tmp_path / "notes.txt", "neither a run directory nor a .safetensors"),
                            (tmp_path / "missing.safetensors", "no such file or directory")]:
        with pytest.raises(UserError, match=message):
            train(tiny_mul(f"train.init_from={source}"), tmp_path / "run", progress=False)
    with pytest.raises(UserError, match="train.init_from is empty"):
        tiny_mul("train.init_from= ")


def test_the_model_card_says_where_a_warm_started_run_began(source_run, tmp_path):
    from analyses.report import build_report, load_report_json

    warm = tmp_path / "warm"
    train(tiny_mul(f"train.init_from={source_run}", "train.steps=2"), warm, progress=False)
    for run, expected in [(warm, str(ckpt.step_path(source_run, 6))), (source_run, None)]:
        out = tmp_path / f"report-{run.name}"
        build_report(run, out, sections=["model_card"], progress=False)
        card = load_report_json(out)["sections"]["model_card"]
        assert card["data"]["warm_start"] == expected
        said = [f for f in card["findings"] if "train.init_from" in f]
        assert said == ([f"The run started at the weights of {expected} (train.init_from), not at a fresh "
                         "initialisation: its step 0 is that checkpoint, and its curves continue that run's."]
                        if expected else [])


def test_growing_a_shipped_run_keeps_its_answers():
    """checkpoints/extrap-mul-ft2 grown to twice its MLP units and one more layer: the same logits
    on held-out N x 2 products, to float precision."""
    from abacus_interp.core.families import build_model
    from abacus_interp.training.run_state import warm_start

    run = Path(__file__).parents[1] / "checkpoints" / "extrap-mul-ft2"
    source = ckpt.load_model(run, device="cpu").eval()
    grown = build_model(source.cfg.replace(d_mlp=2 * source.cfg.d_mlp, n_layers=source.cfg.n_layers + 1)).eval()
    warm_start(grown, run)
    assert grown.blocks[0].mlp.W_out.shape[0] == 2 * source.cfg.d_mlp and len(grown.blocks) == source.cfg.n_layers + 1
    task = ckpt.load_task(run)
    examples = [task.make(a, b) for a, b in ((98765, 43), (31415926535, 27), (99, 99))]
    tokens = encode_batch(task.vocab, [e.prompt for e in examples], [e.target for e in examples]).tokens
    with torch.no_grad():
        # float32 precision: the wider MLP sums its units in another order, which moves logits
        # of size ~10 by up to ~1e-4 on some CPUs
        torch.testing.assert_close(grown(tokens), source(tokens), rtol=1e-5, atol=1e-4)


def test_growing_the_n_x_3_run_to_read_five_multiplier_digits_keeps_its_answers_and_products():
    """checkpoints/extrap-mul-digits-ft10 grown by two offset heads, two multiplier heads and a
    partial-product readout of five digits (the N x N warm start): the same answer logits on
    held-out N x 3 products, and the source's readout in the first three digits' rows."""
    from abacus_interp.core.families import build_model
    from abacus_interp.training.run_state import warm_start

    run = Path(__file__).parents[1] / "checkpoints" / "extrap-mul-digits-ft10"
    source = ckpt.load_model(run, device="cpu").eval()
    cfg = source.cfg.replace(n_heads=12, multiplier_heads=5, offset_heads=(*source.cfg.offset_heads, 2, 3),
                             partial_product_probe=5)
    grown = build_model(cfg).eval()
    warm_start(grown, run)
    assert torch.equal(grown.W_products[:, :3], source.W_products) and grown.W_products[:, 3:].any()
    assert torch.equal(grown.b_products[:3], source.b_products) and not grown.b_products[3:].any()
    task = ckpt.load_task(run)
    examples = [task.make(a, b) for a, b in ((98765, 432), (31415926535, 999), (7, 86))]
    tokens = encode_batch(task.vocab, [e.prompt for e in examples], [e.target for e in examples]).tokens
    with torch.no_grad():
        torch.testing.assert_close(grown(tokens, 24), source(tokens, 24), rtol=1e-5, atol=1e-4)
        state = grown(tokens, 24, return_type="state")
        torch.testing.assert_close(grown.read_partial_products(state)[:, :, :3],
                                   source.read_partial_products(state), rtol=1e-5, atol=1e-4)


def test_other_families_added_layers_start_fresh():
    """A retran or lstm layer is not attention and an MLP on a residual stream: zeroing its
    outputs would not make it the identity, so growth leaves an added one fresh."""
    from abacus_interp.training.growth import grow_state

    expected = {"blocks.0.attn.W_O": torch.ones(2, 3, 4), "blocks.1.attn.W_O": torch.ones(2, 3, 4)}
    state = {"blocks.0.attn.W_O": torch.full((2, 3, 4), 2.0)}
    grown, changed = grow_state(expected, state, identity_blocks=False)
    assert changed == [] and set(grown) == {"blocks.0.attn.W_O"}
    grown, changed = grow_state(expected, state)
    assert changed == ["blocks.1.attn.W_O"] and not grown["blocks.1.attn.W_O"].any()


def test_a_head_added_to_the_source_writes_nothing_and_the_others_keep_their_weights(source_run, tmp_path):
    run_dir = tmp_path / "run"
    train(tiny_mul("model.n_heads=3", "model.d_head=16", f"train.init_from={source_run}", "train.steps=1"),
          run_dir, progress=False)
    source, start = ckpt.load_tensors(ckpt.step_path(source_run, 6)), ckpt.load_tensors(ckpt.step_path(run_dir, 0))
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q"):
        key = f"blocks.0.attn.{name}"
        assert start[key].shape[0] == 3 and torch.equal(start[key][:2], source[key])
    assert not start["blocks.0.attn.W_O"][2].any() and start["blocks.0.attn.W_Q"][2].any()
    assert_same_function(source_run, run_dir)


def test_heads_keep_their_kind_when_a_head_is_put_before_them():
    from abacus_interp.training.growth import head_placement

    windowed_and_number = ["windowed"] * 3 + ["number"]
    assert head_placement(windowed_and_number, ["windowed"] * 3 + ["symbol", "number"]) == [0, 1, 2, 4]
    assert head_placement(["offset +1", "windowed"], ["offset +1", "offset -1", "windowed", "windowed"]) == [0, 2]
    with pytest.raises(ValueError, match="1 number head.s. per layer and this model 0"):
        head_placement(windowed_and_number, ["windowed"] * 5)


def test_a_model_with_more_heads_needs_the_sources_own_config(source_run, tmp_path):
    bare = tmp_path / "bare" / "weights.safetensors"
    bare.parent.mkdir()
    shutil.copy(ckpt.step_path(source_run, 6), bare)
    three_heads = ("model.n_heads=3", "model.d_head=16")
    with pytest.raises(UserError, match="which kind each of the source's is needs its run's config.json"):
        train(tiny_mul(*three_heads, f"train.init_from={bare}"), tmp_path / "run", progress=False)
    elsewhere = tmp_path / "other" / "checkpoints" / "weights.safetensors"  # beside another run's config
    elsewhere.parent.mkdir(parents=True)
    shutil.copy(ckpt.step_path(source_run, 6), elsewhere)
    other = ckpt.read_run_config(source_run)
    ckpt.write_json(elsewhere.parents[1] / "config.json", {**other, "model": {**other["model"], "n_heads": 1}})
    with pytest.raises(UserError, match=r"describes heads other than .*\(2 of width 16\)"):
        train(tiny_mul(*three_heads, f"train.init_from={elsewhere}"), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_warm_start_refuses_to_drop_heads_or_change_what_a_head_reads(source_run, tmp_path):
    with pytest.raises(UserError, match="has 2 heads per layer and this model 1; .* set model.n_heads >= 2"):
        train(tiny_mul("model.n_heads=1", "model.d_head=16", f"train.init_from={source_run}"), tmp_path / "run",
              progress=False)
    # a first multiplier head hides the multiplier's digits from every other head
    with pytest.raises(UserError, match="must keep the keys it reads, but the source has 2 windowed head.s."):
        train(tiny_mul("model.n_heads=3", "model.d_head=16", "model.multiplier_heads=1", "model.rotary=abacus", "model.multiplier_select=learned",
                       f"train.init_from={source_run}"), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_shipped_sorter_grown_by_a_spared_symbol_head_keeps_its_answers():
    """checkpoints/extrap-sort-blind with a fifth head put before its number head, a symbol head
    the answer blind spares (the warm start that probes the blind's lost stop): the same logits
    at step 0, although the new head's mask differs from every head the source has."""
    from abacus_interp.core.families import build_model
    from abacus_interp.training.run_state import warm_start

    run = Path(__file__).parents[1] / "checkpoints" / "extrap-sort-blind"
    if not run.is_dir():
        pytest.skip("checkpoints/extrap-sort-blind is not shipped in this checkout")
    source = ckpt.load_model(run, device="cpu").eval()
    grown = build_model(source.cfg.replace(n_heads=5, symbol_heads=1, answer_blind_spares_symbol_heads=True)).eval()
    warm_start(grown, run)
    assert torch.equal(grown.blocks[1].attn.W_V[4], source.blocks[1].attn.W_V[3])  # the number head moved
    task = ckpt.load_task(run)
    examples = task.sample(16, random.Random(0), max_numbers=8)
    tokens = encode_batch(task.vocab, [e.prompt for e in examples], [e.target for e in examples]).tokens
    with torch.no_grad():
        torch.testing.assert_close(grown(tokens), source(tokens), rtol=0, atol=1e-5)

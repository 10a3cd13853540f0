"""The focal loss (train.focal_gamma): each scored token's cross-entropy weighed by (1 - p)^gamma,
p its target's probability; None or 0 is the plain loss, a restricted readout and a gamma below 1
(where a sure token's weight has an infinite slope) work, the training step scores its answers
with it, and saved configs leave it out while off."""

from __future__ import annotations

import json
import math
from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F

from abacus_interp.core.model import LoopedTransformer
from abacus_interp.core.scoring import next_token_loss
from abacus_interp.errors import UserError
from abacus_interp.training import train
from abacus_interp.training.data import BatchSource
from abacus_interp.training.losses import training_losses
from tests.conftest import tiny_sort_run


def planted(probabilities: list[float]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logits over two tokens at positions 0..n-1 whose next token (token 1) has each probability."""
    n = len(probabilities)
    p = torch.tensor(probabilities, dtype=torch.float64)
    logits = torch.stack([torch.log(1 - p), torch.log(p)], -1)[None]  # [1 n 2]
    logits = torch.cat([logits, torch.zeros(1, 1, 2, dtype=torch.float64)], 1)  # [1 n+1 2], the last unscored
    tokens = torch.ones(1, n + 1, dtype=torch.long)
    loss_mask = torch.ones(1, n + 1, dtype=torch.bool)
    return logits, tokens, loss_mask


def test_the_weight_is_one_minus_p_to_the_gamma():
    logits, tokens, loss_mask = planted([0.9, 0.5, 0.2])
    expected = sum((1 - p) ** 2 * -math.log(p) for p in (0.9, 0.5, 0.2)) / 3
    focal = next_token_loss(logits, tokens, loss_mask, torch.float64, focal_gamma=2.0)
    assert focal.item() == pytest.approx(expected, rel=1e-12)
    plain = next_token_loss(logits, tokens, loss_mask, torch.float64)
    assert plain.item() == pytest.approx(sum(-math.log(p) for p in (0.9, 0.5, 0.2)) / 3, rel=1e-12)
    assert next_token_loss(logits, tokens, loss_mask, torch.float64, focal_gamma=0.0).item() == pytest.approx(
        plain.item(), rel=1e-12)


def test_a_restricted_readout_weighs_its_own_probabilities():
    logits = torch.tensor([[[0.0, 2.0, 1.0, -1.0], [0.0, 0.0, 0.0, 0.0]]], dtype=torch.float64)  # [1 2 4]
    tokens, loss_mask = torch.tensor([[0, 2]]), torch.tensor([[True, True]])
    allowed = torch.tensor([1, 2])  # the softmax over ids 1 and 2 only: p(2) = e / (e^2 + e)
    p = math.e / (math.e**2 + math.e)
    focal = next_token_loss(logits, tokens, loss_mask, torch.float64, allowed, focal_gamma=1.5)
    assert focal.item() == pytest.approx((1 - p) ** 1.5 * -math.log(p), rel=1e-12)


def test_a_gamma_below_one_keeps_finite_gradients_on_sure_tokens():
    logits = torch.tensor([[[0.0, 200.0], [0.0, 1.0], [0.0, 0.0]]], requires_grad=True)  # the first: loss 0 in float32
    tokens, loss_mask = torch.ones(1, 3, dtype=torch.long), torch.ones(1, 3, dtype=torch.bool)
    loss = next_token_loss(logits, tokens, loss_mask, focal_gamma=0.5)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    assert logits.grad[0, 1].abs().sum() > 0


def test_a_confident_token_weighs_less_than_a_hard_one():
    logits, tokens, loss_mask = planted([0.99, 0.3])
    logits.requires_grad_(True)
    next_token_loss(logits, tokens, loss_mask, torch.float64, focal_gamma=2.0).backward()
    focal_grads = logits.grad[0, :2].abs().sum(-1)
    logits.grad = None
    next_token_loss(logits, tokens, loss_mask, torch.float64).backward()
    plain_grads = logits.grad[0, :2].abs().sum(-1)
    # relative to the plain loss, the confident token's pull shrinks far more than the hard one's
    assert (focal_grads[0] / plain_grads[0]) < 0.01 * (focal_grads[1] / plain_grads[1])


def test_the_training_step_scores_its_tokens_with_it(single_torch_thread):
    plain_cfg, focal_cfg = tiny_sort_run(), tiny_sort_run("train.focal_gamma=2")
    model = LoopedTransformer(plain_cfg.model)
    source = BatchSource(plain_cfg.make_task(), plain_cfg.train, plain_cfg.model.max_seq_len)
    batch = source.batch(0)
    with torch.no_grad():
        plain = training_losses(model, batch, source.generator(0), plain_cfg, torch.device("cpu"), nullcontext())
        focal = training_losses(model, batch, source.generator(0), focal_cfg, torch.device("cpu"), nullcontext())
        logits = model.unembed(plain.state)[:, :-1]  # [batch pos d_vocab], as the step reads them
        scored = plain.loss_mask[:, :-1]
        per_token = F.cross_entropy(logits[scored], batch.tokens[:, 1:][scored], reduction="none")
    assert plain.full.item() == pytest.approx(per_token.mean().item(), rel=1e-5)
    assert focal.full.item() == pytest.approx(((1 - torch.exp(-per_token)) ** 2 * per_token).mean().item(), rel=1e-5)
    assert focal.full.item() < plain.full.item()


def test_a_run_trains_with_it_and_records_it(tmp_path, single_torch_thread):  # the formula: the test above
    train(tiny_sort_run("train.steps=60", "train.log_every=10", "train.lr=3e-3", "train.focal_gamma=2"),
          tmp_path / "run", progress=False)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["loss"] < 0.8 * rows[0]["loss"]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["train"]["focal_gamma"] == 2


def test_it_is_left_out_of_saved_configs_while_off_and_a_negative_gamma_says_so():
    assert "focal_gamma" not in tiny_sort_run().to_dict()["train"]
    with pytest.raises(UserError, match="focal_gamma must be >= 0"):
        tiny_sort_run("train.focal_gamma=-1")

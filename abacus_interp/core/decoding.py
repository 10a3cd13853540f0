"""Batched greedy decoding with a key/value cache kept per loop and layer.

A looped model is causal in every loop, so the keys and values of loop t, layer l at
earlier positions never change when a token is appended: each new token runs all loops
over one position, attending to the cached entries. Ragged prompts are left-padded so
every row's next token sits at the same index; padding keys are masked.

`naive_generate` re-runs the full forward for every new token; tests check that both
give identical outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Int
from torch import Tensor

from ..errors import UserError
from .tokens import EOS_ID, PAD_ID, left_pad


def _row_budgets(model, prompt_lengths: list[int], max_new_tokens: int | None) -> torch.Tensor:
    """New tokens allowed per row: `max_new_tokens`, or, without a bound, up to the longest
    sequence the model was built for. Per row, so a prompt's output never depends on the
    other prompts of its batch."""
    if max_new_tokens is not None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        return torch.full((len(prompt_lengths),), max_new_tokens)
    return torch.tensor([max(1, model.cfg.max_seq_len - n) for n in prompt_lengths])


def _greedy(logits, done, step: int, budgets) -> torch.Tensor:
    """Greedy next token; padding is never a valid output, finished rows emit padding."""
    logits = logits.clone()
    logits[:, PAD_ID] = float("-inf")
    nxt = logits.argmax(-1)
    nxt = torch.where(done, torch.full_like(nxt, PAD_ID), nxt)
    done |= (nxt == EOS_ID) | (step + 1 >= budgets)
    return nxt


def _batches(prompts: Sequence[str], batch_size: int):
    for start in range(0, len(prompts), batch_size):
        yield prompts[start : start + batch_size]


def generate(
    model,
    prompts: Sequence[str],
    n_loops: int | None = None,
    max_new_tokens: int | None = None,
    batch_size: int = 512,
    use_cache: bool = True,
) -> list[str]:
    """Greedy completions (EOS and padding stripped), in the order of `prompts`."""
    if isinstance(prompts, str):
        raise TypeError("generate takes a list of prompts; wrap a single prompt in a list")
    if n_loops is not None and n_loops < 1:  # the cached path never reaches forward's check
        raise UserError(f"n_loops must be >= 1, got {n_loops}")
    step = _generate_cached if use_cache else _generate_naive
    outputs: list[str] = []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for chunk in _batches(list(prompts), batch_size):
                ids = [model.cfg.vocab.encode(p) for p in chunk]
                tokens, valid = left_pad(ids)
                tokens, valid = tokens.to(model.W_E.device), valid.to(model.W_E.device)
                budgets = _row_budgets(model, [len(i) for i in ids], max_new_tokens).to(tokens.device)
                new = step(model, tokens, valid, n_loops, budgets)
                outputs.extend(model.cfg.vocab.decode(row.tolist()) for row in new)
    finally:
        model.train(was_training)
    return outputs


def naive_generate(model, prompts: Sequence[str], n_loops=None, max_new_tokens=None) -> list[str]:
    return generate(model, prompts, n_loops, max_new_tokens, use_cache=False)


def _generate_naive(model, tokens, valid, n_loops, budgets) -> Int[Tensor, "batch new"]:
    new_tokens = []
    done = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)
    for i in range(int(budgets.max())):
        logits = model(tokens, n_loops, valid=valid)
        still_running = ~done
        nxt = _greedy(logits[:, -1], done, i, budgets)
        new_tokens.append(nxt)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        # a finished row's padding is masked like prompt padding
        valid = torch.cat([valid, still_running[:, None]], dim=1)
        if bool(done.all()):
            break
    return torch.stack(new_tokens, dim=1)


def _generate_cached(model, tokens, valid, n_loops, budgets) -> Int[Tensor, "batch new"]:
    n_loops = model.cfg.n_loops if n_loops is None else n_loops
    cache = model.new_cache(n_loops)
    key_valid = valid
    # prefill: the whole prompt, filling cache[t][l] for every loop and layer
    inputs = model.embed(tokens, valid)
    index = model.attention_index(tokens)
    state = model.run_loops(inputs, range(n_loops), key_valid=key_valid, cache=cache, index=index)
    # every position's final state is kept: sorting's pairwise answer reads the list's items
    states = state
    logits = model.answer_logits(states, tokens)[:, -1:]
    new_tokens = []
    done = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)
    for i in range(int(budgets.max())):
        still_running = ~done
        nxt = _greedy(logits[:, -1], done, i, budgets)
        new_tokens.append(nxt)
        if bool(done.all()):
            break
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        # a finished row's padding is masked like prompt padding
        key_valid = torch.cat([key_valid, still_running[:, None]], dim=1)
        inputs = model.embed(tokens, key_valid, last=1)
        index = model.attention_index(tokens)  # every position's: the window compares with all keys
        state = model.run_loops(inputs, range(n_loops), key_valid=key_valid, cache=cache, index=index)
        states = torch.cat([states, state], dim=1) if model.cfg.item_comparator is not None else state
        logits = model.answer_logits(states, tokens)[:, -1:]
    return torch.stack(new_tokens, dim=1)

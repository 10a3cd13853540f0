"""Re-running a looped model from the middle: an intervention in loop t cannot change loops
0..t-1, so the clean states up to t are cached once and only loops t.. are recomputed
(about half the cost of a full pass per intervention, averaged over loops)."""

from __future__ import annotations

import torch

from abacus_interp.core.model import act_name
from abacus_interp.core.tokens import PAD_ID


def trim(tokens: torch.Tensor, device) -> torch.Tensor:
    """Drop all-padding trailing columns of a right-padded batch and move it to `device`."""
    return tokens[:, : int((tokens != PAD_ID).sum(1).max())].to(device)


class LoopRunner:
    """Clean run of one batch with every loop's outgoing state kept.

    `logits` is the clean output; `from_loop(t, hooks)` reruns loops t..n_loops-1 from the
    clean state leaving loop t-1 with `hooks` attached (hooks on loops < t never fire), and
    `cache` holds any extra activations named in `names` from the clean run."""

    def __init__(self, model, tokens: torch.Tensor, n_loops: int, names=()):
        self.model, self.tokens, self.n_loops = model, tokens, n_loops
        wanted = set(names) | {act_name("state_post", loop=t) for t in range(n_loops)} | {"hook_input"}
        with torch.inference_mode():
            self.logits, cache = model.run_with_cache(tokens, n_loops=n_loops, names_filter=lambda n: n in wanted)
        self.cache = cache
        self.inputs = cache["hook_input"]
        self.index = model.attention_index(tokens)

    def from_loop(self, start: int, fwd_hooks) -> torch.Tensor:
        if start == 0:
            with torch.inference_mode():
                return self.model.run_with_hooks(self.tokens, n_loops=self.n_loops, fwd_hooks=list(fwd_hooks))
        state = self.cache[act_name("state_post", loop=start - 1)]
        with torch.inference_mode(), self.model.hooks(fwd_hooks=list(fwd_hooks)):
            final = self.model.run_loops(self.inputs, range(start, self.n_loops), state=state, index=self.index)
            return self.model.unembed(final)

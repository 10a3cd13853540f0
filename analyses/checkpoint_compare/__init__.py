"""Compare the checkpoints of a run, and two runs, over training.

For every checkpoint (one pass, each file read once, one batched forward pass each):
  - loss and greedy exact match on a fixed problem set, on the tokens the run was trained on
    (`scoring.run_readout`, as its evaluation scores it), plus the run's metrics.jsonl curves;
  - weight norm per parameter group (embed, pos_embed, unembed, blocks.{l}.attn,
    blocks.{l}.mlp, layernorm) and the per-step parameter speed ||theta_{k+1} - theta_k|| / gap;
  - the state after every loop (`loops.{t}.hook_state_post`) on the problem set's tokens,
    compared by linear CKA between all pairs of checkpoints (step x step per loop), against
    the final checkpoint, and (with `run_b`) between the checkpoints of two runs.
Then: which parameters (and attention heads) moved most between two chosen checkpoints, and
change points: the steps where the model changed fastest, from three speeds per step (or
per unit of ln(1 + step), `per="log_step"`): "representation", the mean over loops of
(1 - CKA(k, k+1)) / gap; "parameters", ||theta_{k+1} - theta_k|| / gap; "loss",
|delta problem-set loss| / gap. The peaks of the chosen signal are marked on the figures.

    >>> cmp = run("checkpoints/small-add", steps=(500, 3000))
    >>> cmp.to_dict()["change_points"]
    >>> cmp.figures()["cka_steps"]
"""

from .analysis import run
from .config import RANK_BY, SIGNALS, CheckpointCompareConfig
from .findings import findings
from .plugin import ANALYSIS, CheckpointCompareAnalysis
from .result import CheckpointComparison, RunScan

__all__ = ["ANALYSIS", "RANK_BY", "SIGNALS", "CheckpointCompareAnalysis", "CheckpointCompareConfig",
           "CheckpointComparison", "RunScan", "findings", "run"]

"""Parameter counts by component and the compute multiplier of looping."""

from __future__ import annotations

from .flops import forward_flops_per_token

COMPONENTS = ("token_embedding", "positions", "attention", "mlp", "norms", "unembedding")
# A family's own components (its `components`, e.g. the LSTM layers of "lstm" and "retran")
# are listed after these, only for a model that has them, so a looped model's summary reads
# as it always has. All of them are the repeated block's, which looping multiplies.


def component_of(param_name: str, family_components: tuple[tuple[str, str], ...] = ()) -> str:
    """The component a parameter belongs to: the family's own (name fragment, component)
    pairs first, then the components every family shares."""
    for fragment, component in family_components:
        if fragment in param_name:
            return component
    if param_name == "W_E":
        return "token_embedding"
    if param_name == "W_pos":
        return "positions"
    if param_name in ("W_U", "b_U", "W_sum", "b_sum", "W_products", "b_products"):  # the readouts of the final state
        return "unembedding"
    if param_name.startswith("comparator."):  # sorting's pairwise answer, read off the final state too
        return "unembedding"
    if ".attn." in param_name:
        return "attention"
    if ".mlp." in param_name:
        return "mlp"
    # ln_state: the norm of the state before injection ("norm_add")
    if ".ln" in param_name or param_name.startswith(("ln_final", "ln_state")):
        return "norms"
    raise ValueError(f"parameter {param_name!r} belongs to no known component; a family names its own "
                     "kinds of parameters in its `components` (core/family_registry.py)")


def parameter_summary(model, seq_len: int | None = None) -> dict:
    """Parameters per component, and what looping buys: the block's parameters are used
    n_loops times, so forward compute is that of a model n_loops times deeper."""
    cfg = model.cfg
    counts = dict.fromkeys(COMPONENTS, 0)
    family_components = getattr(type(model), "components", ())
    for name, p in model.named_parameters():
        component = component_of(name, family_components)
        counts[component] = counts.get(component, 0) + p.numel()
    total = sum(counts.values())
    own = {component for _, component in family_components}
    block_params = counts["attention"] + counts["mlp"] + sum(counts.get(c, 0) for c in own) + sum(
        p.numel() for n, p in model.named_parameters() if n.startswith("blocks.") and ".ln" in n
    )
    seq_len = seq_len or cfg.max_seq_len
    return {
        "parameters": counts,
        "total_parameters": total,
        "looped_block_parameters": block_params,
        "effective_depth": cfg.n_layers * cfg.n_loops,
        "unrolled_equivalent_parameters": total + block_params * (cfg.n_loops - 1),
        # every query against all seq_len keys, as the comparison and the benchmarks count (core.flops)
        "forward_flops_per_token": round(forward_flops_per_token(cfg, seq_len)),
        # compute relative to one pass through the block: what the loop multiplies
        "loop_compute_multiplier": cfg.n_loops,
        "flops_seq_len": seq_len,
    }


def format_summary(summary: dict) -> str:
    lines = ["parameters by component:"]
    total = summary["total_parameters"]
    for name, n in summary["parameters"].items():
        lines.append(f"  {name:<16} {n:>12,}  {100 * n / max(total, 1):5.1f}%")
    lines.append(f"  {'total':<16} {total:>12,}")
    lines.append(
        f"looping: block of {summary['looped_block_parameters']:,} parameters applied "
        f"{summary['loop_compute_multiplier']}x (effective depth {summary['effective_depth']} layers); "
        f"an unrolled model with the same compute would have {summary['unrolled_equivalent_parameters']:,} parameters"
    )
    lines.append(
        f"forward FLOPs per token at length {summary['flops_seq_len']}: {summary['forward_flops_per_token']:,}"
    )
    return "\n".join(lines)

"""Loops and heads are named one way wherever a person reads them: `core.hooks`' labels count
loops from 1 (hook names and arguments from 0) and name heads L{layer}H{head}. Before, the
report said "loop 0 L0H1" in one section, "loop 1" for the same loop in another, "t5" and
"L2.1H3" (loop 2) in figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

from abacus_interp import head_label, hook_name, layer_label, loop_label, neuron_label

ROOT = Path(__file__).resolve().parents[1]
# spellings of a loop or head built by hand from a 0-based index: each one named a loop
# differently from its neighbours before the labels existed
HAND_MADE = re.compile(r"loop \{t\}|loop \{t \+ 1\}|\bt\{(t|r\.loop|loop)\}|L\{t\}|loop \{h\.loop\}|"
                       r"Loop \{s\.loop\}|loop \{s\.loop\}|loop \{h\['loop'\]\}")


def test_labels_count_loops_from_one_and_name_heads_like_transformer_lens():
    assert hook_name("hook_state_post", loop=0) == "loops.0.hook_state_post"  # the first loop's hooks
    assert loop_label(0) == "loop 1"
    assert head_label(0, 3) == "L0H3" and head_label(1, 2, loop=4) == "loop 5 L1H2"
    assert layer_label(1) == "L1" and layer_label(0, loop=0) == "loop 1 L0"
    assert neuron_label(0, 7, loop=2) == "loop 3 L0N7"


def _sources():
    for folder in ("abacus_interp", "analyses", "abacus_lab", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name != "hooks.py":
                yield path.relative_to(ROOT), path.read_text()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        code = [c["source"] for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        yield path.relative_to(ROOT), "\n".join("".join(c) if isinstance(c, list) else c for c in code)


def test_no_loop_or_head_is_named_by_hand():
    found = {str(path): [m.group(0) for m in HAND_MADE.finditer(text)] for path, text in _sources()}
    found = {path: spellings for path, spellings in found.items() if spellings}
    assert not found, f"name loops with core.hooks.loop_label / head_label: {found}"

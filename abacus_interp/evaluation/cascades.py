"""Addition problems with a planted longest carry cascade, for a balanced complexity set.

Under uniform sampling long carry cascades are rare (each extra link needs a digit pair
summing to exactly 9, probability 1/10), so accuracy "by carry complexity" measured on
uniform samples has almost no data where it matters. `sample_with_cascade` builds
problems whose longest cascade (`abacus_interp.tasks.carries.longest_cascade`) is exactly
the requested length, with every other digit as random as that constraint allows. It lives
in `abacus_interp.tasks.carries`, because the addition task also trains on such problems.

Terms, LSD-first digit index i (0 = units): digit i *generates* when a_i + b_i >= 10,
*propagates* when a_i + b_i == 9 (it passes an incoming carry on) and *kills* when
a_i + b_i <= 8. A cascade of length L is one generating digit k followed by L - 1
propagating digits, delivering a carry to digit k + L.
"""

from __future__ import annotations

from abacus_interp.tasks.carries import sample_with_cascade

CASCADE_BUCKETS = ("0", "1", "2", "3", "4", "5+")

__all__ = ["CASCADE_BUCKETS", "cascade_bucket", "sample_with_cascade"]


def cascade_bucket(length: int) -> str:
    """The bucket label of a longest-cascade length: 0..4, then "5+"."""
    return str(length) if length < 5 else "5+"



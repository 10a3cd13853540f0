"""Every setting of the comparisons analysis: one config, whose defaults are the report's."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.errors import UserError


@dataclass(frozen=True)
class ComparisonsConfig:
    """The settings `comparisons.run` uses: the defaults are what the report runs; `quick()`
    the tests'."""

    # held-out lists per accuracy row (the sorting issue's bar: >= 100 per row)
    n_per_row: int = 100
    # numbers this many digits long stand for "longer than trained" (4x a 5-digit training)
    far_digits: int = 20
    # lists of this many numbers stand for "more numbers than trained" (2x a 5-number training)
    far_numbers: int = 10
    # lists the head reading and the knockouts average over (in distribution)
    n_reading: int = 128
    # lists per count (the trained maximum and far_numbers) for the choice's margins and blinds
    n_choice: int = 128
    # planted pairs per deciding digit, for the lock-in loops and the patching
    n_pairs: int = 64
    # lists whose items' summaries the probes read (fitted on 70% of them, scored on the rest);
    # at 150 the leading digit's probe overfits (62-89% where 400 lists give 91-99%)
    n_summary: int = 400
    # with a pairwise answer (model.item_comparator): pairs per (length, deciding place) cell, and
    # the places read, from the leading digit (0) down
    n_pairwise: int = 128
    pairwise_places: int = 4
    seed: int = 0

    def __post_init__(self):
        if (min(self.n_per_row, self.n_reading, self.n_pairs, self.n_choice, self.n_summary, self.n_pairwise) < 2
                or self.far_digits < 1 or self.far_numbers < 2 or self.pairwise_places < 1):
            raise UserError("ComparisonsConfig: n_per_row, n_reading, n_pairs, n_choice, n_summary and n_pairwise >= 2, "
                            "far_digits >= 1, far_numbers >= 2, pairwise_places >= 1")

    @classmethod
    def quick(cls) -> ComparisonsConfig:
        return cls(n_per_row=8, n_reading=8, n_pairs=4, n_choice=8, n_summary=12, far_digits=8, far_numbers=6,
                   n_pairwise=8, pairwise_places=2)

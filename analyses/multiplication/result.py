"""The multiplication analysis's result, a tree of frozen dataclasses: `to_dict` is
`jsonsafe.to_json` of it, and `figures()` / `findings()` read its attributes through
figures.py and findings.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from abacus_interp.evaluation.extrapolation import ExtrapolationResult
from abacus_interp.jsonsafe import to_json
from abacus_interp.tasks.product_carries import partial_product_name
from analyses._running_sum import RunningSumReading
from analyses.carry_wave.patching import DelayedCarry
from analyses.prose import LinearFit, spearman

from .errors import ErrorSources
from .heads import HeadReading, Knockout
from .waves import CarryGuess


@dataclass(frozen=True)
class ReachFit:
    """Lock-in loop against carry reach over the answer digits of one sample."""

    label: str  # e.g. "near a power of ten, 20 x 3 digits"
    sample: str  # "uniform" or "near a power of ten"
    digits: int  # the multiplicand's
    multiplier_digits: int
    n_problems: int
    exact_match_at_horizon: float
    never_locked: int  # answer digits still wrong at the horizon (left out of the fit)
    reach: tuple[int, ...]  # per locked digit
    lock_in: tuple[int, ...]  # per locked digit: its lock-in loop (1-based)
    median_by_reach: tuple[tuple[int, float], ...]  # (reach, median lock-in loop)
    fit: LinearFit


@dataclass(frozen=True)
class HaltingFit:
    """Loops adaptive halting used against the longest carry reach of each problem."""

    label: str
    longest_reach: tuple[int, ...]
    loops_used: tuple[int, ...]
    converged: tuple[bool, ...]
    fit: LinearFit


@dataclass(frozen=True)
class DelayedProduct:
    """The delayed-carry patch on a pair of products that differ in a long run of digits."""

    digits: tuple[int, ...]  # the answer digits followed (units = 0): where the products differ
    patch: DelayedCarry  # lock_in[switch][followed digit]

    def lag_after_switch(self) -> tuple[tuple[int, float | None], ...]:
        """(switch loop, median of lock-in minus switch over the followed digits)."""
        out = []
        for s, row in zip(self.patch.switch_loops, self.patch.lock_in, strict=True):
            lags = sorted(lo - s for lo in row if lo is not None)
            out.append((s, float(lags[len(lags) // 2]) if lags else None))
        return tuple(out)

    def wave_fit(self) -> LinearFit:
        """Lock-in loop against the digit's column in the clean run (switch 0)."""
        pairs = [(d, lo) for d, lo in zip(self.digits, self.patch.lock_in[0], strict=True) if lo is not None]
        return LinearFit.of([d for d, _ in pairs], [lo for _, lo in pairs])


# the carries into a column, grouped: 0; small ones; up to product_carries.ONE_DIGIT_MAX_CARRY; past it, what
# only longer multipliers make (the bins must split there: the findings pool on each side)
CARRY_BINS: tuple[tuple[int, int | None], ...] = ((0, 0), (1, 2), (3, 4), (5, 8), (9, 12), (13, None))


# the run of large carries (MultiplicationTask.LARGE_CARRY or more) ending at a column, grouped: none;
# runs a 5-digit multiplicand holds often (1-3); runs it holds rarely (4-5: 0.4% of the answer digits
# of uniform 5 x 3 products); and 6 or more, which it holds only when every column from the third up
# carries 10 or more
RUN_BINS: tuple[tuple[int, int | None], ...] = ((0, 0), (1, 2), (3, 3), (4, 5), (6, None))


@dataclass(frozen=True)
class DigitBin:
    """The answer digits whose column has some quantity in `lo`..`hi` (a subclass says which),
    and how often they are right."""

    lo: int
    hi: int | None  # None: `lo` and above
    n: int  # answer digits (several per problem: they are not independent draws)
    right: float

    @property
    def span(self) -> str:
        """"0", "1-2", "13+": the bin's bounds as findings and figures write them."""
        return span_text(self.lo, self.hi)


@dataclass(frozen=True)
class CarryBin(DigitBin):
    """The answer digits whose column receives a carry of `lo`..`hi` from the column below
    (`tasks.product_carries.carries_in`), and how often they are right."""


@dataclass(frozen=True)
class CarryRunBin(DigitBin):
    """The answer digits at the end of a run of `lo`..`hi` columns in a row that take a large
    carry (`tasks.product_carries.large_carry_runs`), and how often they are right."""


def span_text(lo: int, hi: int | None) -> str:
    """"0", "1-2", "13+": a bin's bounds as findings and figures write them."""
    if hi is None:
        return f"{lo}+"
    return str(lo) if hi == lo else f"{lo}-{hi}"


# the multipliers grouped by the sum of their digits: up to 9 no column sums past 9 x 9 + 8 = 89,
# so no carry passes 8, as with a one-digit multiplier; above it the larger carries appear, in
# more columns the larger the sum
MULTIPLIER_BINS: tuple[tuple[int, int | None], ...] = ((0, 9), (10, 13), (14, None))


@dataclass(frozen=True)
class MultiplierBin:
    """The products whose multiplier's digits sum to `lo`..`hi`, and how many are right."""

    lo: int
    hi: int | None  # None: `lo` and above
    n: int  # problems
    exact_match: float

    @property
    def span(self) -> str:
        return span_text(self.lo, self.hi)


@dataclass(frozen=True)
class MultiplierDigitSplit:
    """Exact match of a row's products by the value of one multiplier digit b_j, small against
    large: every column multiplies b_j by one multiplicand digit, so a partial product the
    model forms badly should cost most where its digit is large (on extrap-mul-ft5, 5 x 3: b_2
    splits the products 73 / 29%, b_0 53 / 47%). The leading digit is never 0."""

    # digits from LARGE_DIGIT up are "large"
    LARGE_DIGIT: ClassVar[int] = 5

    j: int  # the digit b_j, units first (b_0)
    small_n: int  # problems with b_j below LARGE_DIGIT
    small_exact_match: float | None  # None where no problem has such a b_j
    large_n: int
    large_exact_match: float | None


@dataclass(frozen=True)
class ByMultiplier:
    """Exact match of uniform `digits` x `multiplier_digits` products (the accuracy table's
    problems of that row, decoded again) split by the multiplier's digit sum: whether a long
    product is right is decided mostly by its multiplier, which every column multiplies."""

    digits: int
    multiplier_digits: int
    n_problems: int
    exact_match: float
    bins: tuple[MultiplierBin, ...]
    by_multiplier_digit: tuple[MultiplierDigitSplit, ...] = ()  # one per multiplier digit, units first

    @property
    def label(self) -> str:
        return f"uniform, {self.digits} x {self.multiplier_digits} digits"


# a partial product a_(i-j) * b_j, 0..81, grouped: a one-digit product; then the two-digit
# ones in three bands
PRODUCT_BINS: tuple[tuple[int, int], ...] = ((0, 9), (10, 29), (30, 49), (50, 81))


@dataclass(frozen=True)
class ProductBin(DigitBin):
    """The answer digits whose column's partial product a_(i-j) * b_j is `lo`..`hi`, and how
    often they are right."""


@dataclass(frozen=True)
class PartialProductSplit:
    """How often the answer digits of the columns that add every one of the k partial products
    are right, by the size of one of them, a_(i-j) * b_j. In those columns the products enter
    the sum alike, so a model that adds them alike is as often wrong at a large a_i * b_0 as at
    a large a_(i-2) * b_2; the carry into the column grows with the products of the columns
    below, so the split is also given among the digits whose carry in is at most SMALL_CARRY
    (on extrap-mul-ft5, uniform 5 x 3 products, n=400, logit lens after 48 loops: right 96 / 88 /
    46 / 16% as a_(i-2) * b_2 grows through PRODUCT_BINS, 77 / 70 / 75 / 72% as a_i * b_0 does;
    among the digits of small carry 98 / 96 / 77 / 15% against 92 / 87 / 90 / 88%)."""

    # carries in up to this are "small": what the smallest column sums below already give
    SMALL_CARRY: ClassVar[int] = 4

    j: int  # the product a_(i-j) * b_j, b_j units first
    bins: tuple[ProductBin, ...]  # every answer digit of those columns
    small_carry_bins: tuple[ProductBin, ...]  # those whose carry in is at most SMALL_CARRY

    @property
    def product(self) -> str:
        """The product's name in answer column i: "a_i * b_0", "a_(i-2) * b_2"."""
        return partial_product_name(self.j)


@dataclass(frozen=True)
class FactorPairTable:
    """How often the answer digits of the columns that add all k partial products are right,
    by the two digits of one product, a_(i-j) and b_j: one cell per fact of the times table.
    Accuracy that falls with a * b, whichever factor is large, gives a `size_correlation` near
    -1; a few missed facts scattered through the table give one near 0 (the cells are not
    weighted by their digits). On extrap-mul-ft10 (uniform 5 x 3 products, n=1,500, logit lens
    after 48 loops) the answer digits of columns where a_(i-2) = b_2 = 9 are right 6%, where
    they are 5 and 9 46-48%, where they are 1 and 9 94-96%."""

    # cells with fewer answer digits than this are left out of size_correlation
    MIN_CELL: ClassVar[int] = 5
    DIGITS: ClassVar[range] = range(10)

    j: int  # the product a_(i-j) * b_j, b_j units first
    n: tuple[tuple[int, ...], ...]  # [a_(i-j)][b_j]: answer digits of that pair
    right: tuple[tuple[float | None, ...], ...]  # [a_(i-j)][b_j]; None where no digit has that pair

    @property
    def product(self) -> str:
        return partial_product_name(self.j)

    @property
    def size_correlation(self) -> float | None:
        """Spearman's rho between a cell's product a * b and how often its digits are right,
        over the cells of MIN_CELL digits or more: near -1 when accuracy falls with the
        product's size, near 0 when it does not depend on it (None: too few cells)."""
        cells = [(a * b, self.right[a][b]) for a in self.DIGITS for b in self.DIGITS if self.n[a][b] >= self.MIN_CELL]
        return spearman([size for size, _ in cells], [right for _, right in cells])


@dataclass(frozen=True)
class WrongDigits:
    """How far the wrong answer digits are from the right ones. Digit i is (s_i + c_i) mod 10,
    s_i its column's sum of partial products and c_i the carry in, so a carry misjudged by d
    moves it by d: offsets of +-1 are what a carry off by one gives. Offsets spread evenly up to
    +-5 are not near misses: a wrong column sum, or a carry far off (were the wrong digits
    random, 2 in 9 would be off by one)."""

    # a wrong digit's offset from the right one, (read - right) mod 10 taken in -5..4
    OFFSETS: ClassVar[tuple[int, ...]] = tuple(range(-5, 5))

    counts: tuple[int, ...]  # wrong digits per OFFSETS entry (the entry for 0 stays 0)
    not_a_digit: int  # answer positions read as a symbol that is no digit

    @property
    def n(self) -> int:
        return sum(self.counts)

    def share(self, *offsets: int) -> float | None:
        """The share of the wrong digits at these offsets (None: no digit is wrong)."""
        return sum(self.counts[self.OFFSETS.index(d)] for d in offsets) / self.n if self.n else None


@dataclass(frozen=True)
class DigitAccuracy:
    """How often each answer digit is right (logit lens after `loops`) on uniform N x k
    products: where an N x k multiplier fails. Column i sums `products[i]` partial products
    a_(i-j) * b_j and a carry, so the digit where accuracy first drops says how many products
    the model can add."""

    label: str  # e.g. "uniform, 5 x 2 digits"
    digits: int  # the multiplicand's
    multiplier_digits: int
    n_problems: int
    loops: int
    right: tuple[float, ...]  # per answer digit, units = 0
    products: tuple[int, ...]  # per answer digit: partial products its column sums
    # the same digits by the carry into their column: a one-digit multiplier's carries stop at 8
    # (9 x 9 + 8 = 89), longer multipliers make larger ones
    by_carry_in: tuple[CarryBin, ...] = ()
    # the same digits by the run of large carries ending at their column: far from home a column
    # can sit atop more large carries in a row than any trained product held
    by_carry_run: tuple[CarryRunBin, ...] = ()
    wrong: WrongDigits | None = None  # how far off the wrong digits are
    # for k of 2 digits or more: the digits of the columns that add all k products, by each product's size
    # (the report reads it at the trained length; by_digit_far's rows carry it too, for notebooks)
    by_partial_product: tuple[PartialProductSplit, ...] = ()
    # for k of 2 digits or more: the same digits by both digits of each product (a times table
    # of accuracy; a 10 x 10 table wants a thousand problems or so, more than the report's sample)
    by_factor_pair: tuple[FactorPairTable, ...] = ()

    def first_below(self, bar: float = 0.99) -> int | None:
        """The lowest answer digit right less than `bar` of the time (None: every one)."""
        return next((i for i, r in enumerate(self.right) if r < bar), None)


@dataclass(frozen=True)
class MultiplicationResult:
    trained_digits: int  # N, the multiplicand's trained length
    multiplier_digits: tuple[int, ...]  # the k the run was trained on
    horizon: int
    # the multiplier length the lock-in fits, head readings and knockouts use, and why
    inside_multiplier_digits: int
    inside: str
    accuracy: ExtrapolationResult  # N x k at every length multiple, adaptive loops
    lock_in: tuple[ReachFit, ...]
    halting: HaltingFit
    delayed: DelayedProduct
    # where each head reads and what forbidding it does (uniform, N x K); None for a model
    # without multiplier heads, whose attention does not split the multiplier off
    heads_trained: HeadReading | None
    heads_far: HeadReading | None
    knockout: Knockout | None
    by_digit: tuple[DigitAccuracy, ...] = ()  # one per k, at the trained multiplicand length
    # the same for k of 2 digits or more at the far length: whether a carry of a given size is
    # added as well there as in distribution, and how many more columns receive a large one
    by_digit_far: tuple[DigitAccuracy, ...] = ()
    # each column's running sum read from the state after every loop, one per k, same problems as by_digit
    running_sum: tuple[RunningSumReading, ...] = ()
    # exact match by the multiplier's digit sum, per k of 2 digits or more, at N and at the far length
    by_multiplier: tuple[ByMultiplier, ...] = ()
    # pairs of far products that differ in a long run: which of the two waits for its carry
    carry_guess: CarryGuess | None = None
    # per k of 2 digits or more, by_digit_far's wrong digits: a product misread, or the adding
    # (only for a model with the partial-product readout)
    error_sources: tuple[ErrorSources, ...] = ()

    def to_dict(self) -> dict:
        return to_json(self)

    def figures(self):
        from .figures import multiplication_figures

        return multiplication_figures(self)

    def findings(self) -> list[str]:
        from .findings import multiplication_findings

        return multiplication_findings(self)

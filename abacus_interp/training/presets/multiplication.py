"""The multiplication recipes: N x k products that extrapolate (extrap-mul) and N x N in distribution (mul).

Levers measured against extrap-mul at equal steps, beyond those in its docstring. Exact match
is `abacus-interp eval --lengths 5,20 --multipliers 1,2,3 --n 100`'s problems (uniform digits,
adaptive loops), scored on the plain task.

The partial-product digits (the preset extrap-mul-digits, below) beat this recipe at equal steps
by far the most: 5 x 2 99.2% against 26.8% at step 9,000 (400 problems of seed 1). Before them, the running-sum loss
(Bai et al. 2025) was the one lever that did:
`--set model.running_sum_probe=true --set train.running_sum_loss=0.5 --set train.steps=9000`
(the same schedule and batches as the shipped run's first 9,000 steps, one process), then
resumed with `--set train.steps=13000` as the shipped run was and stopped at 12,000 (122 min
of training clock, beside other work). Held-out exact match of the training mix ahead from
step ~4,000 (48% against 41%), 71% against 60% at 9,000 and 75% against 68% at 12,000. The same
eval as above at 5 / 20 digits, n=100: at step 9,000 x 2 digits 61% / 9% against the recipe's
28% / 7%, x 3 digits 9% / 0% against 1% / 0%; at step 12,000 x 2 74% / 26% against 45% / 14%, x 3
11% / 0% against 7% / 0% (x 1 100% in all). At 12,000 steps it is near the shipped run's 28,000
on N x 2 in distribution (81%). Not in this preset, which reproduces the shipped run.

The running-sum run resumed along the shipped run's schedule (`--set train.steps=13000`, then
`19000`: 65 minutes from step 12,009 to 19,000 beside other work), at step 13,000 / 19,000: x 2 digits 75% / 85% at 5 digits against the
recipe's 50% / 67%, 22% / 38% at 20 against 22% / 32%, 13% / 23% at 50 against 5% / 15%; x 3
digits 10% / 23% against 7% / 13% in distribution, 0-2% longer. At 19,000 steps it matches the
shipped run's 36,000 in distribution (78% and 24%) and not at 50 digits (23% against 37%).
Resumed with `--set train.steps=28000` and stopped at step 26,000 (CPU time ran out), against
the recipe at 26,000: x 2 digits 87% / 52% / 29% at 5 / 20 / 50 digits against 83% / 46% / 24%;
x 3 digits 35% / 0% / 1% against 20% / 2% / 0%. Against the shipped run's 36,000: ahead in
distribution (87% and 35% against 78% and 24%) and at 20 x 2 (52% against 40%), behind at 50 x 2
(29% against 37%).

Large digits on top of it (`--set task.large_digit_fraction=0.3`: 30% of the training
problems have every digit in 5..9, so a column carries more than 8 in 32% of N x 2 columns
against 4% under uniform digits; schedule steps=9000, stopped at step 7,015, 65 minutes beside
another training), against the running-sum run at step 7,000: x 2 digits 35% against 32% at
5 digits (the recipe: 26%), 5% against 4% at 20; x 3 digits 4% against 3%. By the sum of the
multiplier's digits (5 x 2, n=200): 42% against 48% at 0-9, 17% against 18% at 10-13, 39%
against 17% at 14 and above (n=23). It moves accuracy toward the heavy multipliers, not up:
not adopted.

Warm starts from the shipped step 36,000 (`train.init_from`), 5,000 steps of a fresh warm-up and
cosine at lr 6e-4 (to 6e-5), seed 1 (problems the source did not draw), two processes, two arms
one after the other: with the running-sum readout added (`model.running_sum_probe=true
train.running_sum_loss=0.5`, 29 minutes) and without (the plain continuation, 28 minutes, both
beside light work). The eval's problems at 5 / 20 / 50 digits, n=100: x 2 digits 92 / 66 / 55%
with the readout, 96 / 74 / 62% without, against the source's 78 / 40 / 37%; x 3 digits 30 / 2 /
5% and 35 / 7 / 6% against 24 / 2 / 0%. At step 2,500 (mid-schedule, lr still high) both were
below the source (x 2: 74 / 22 / 5% and 75 / 34 / 18%). The gain is the second warm-up and
decay, not the readout, which trails the plain arm at every row; the plain arm is shipped as
checkpoints/extrap-mul-ft. From scratch the readout led at equal steps (above); added late it did
not help (a guess, not measured: the fresh readout's error, 18 at the first step in units of ten
squared, pulls the trained state before the readout fits).

A second cycle from extrap-mul-ft's step 5,000 (the same command with `--set train.seed=2`, 32
minutes on the clock, about 5 of them paused, beside light work), same eval: x 2 digits 98 / 78
/ 72% at 5 / 20 / 50 digits, x 3 digits 42 / 7 / 7%; by the multiplier's digit sum at 50 x 2, 91
/ 74 / 25% (n = 46 / 34 / 20). Trained again from the shipped file
(`train.init_from=checkpoints/extrap-mul-ft/checkpoints/step_0005000.safetensors`, 24 minutes
alone) it gave the same figures to the problem and is shipped as checkpoints/extrap-mul-ft2.

A third cycle from extrap-mul-ft2's step 5,000 (seed 3), in two arms one after the other: plain
(24 minutes) and with the large-digit plant (`--set task.large_digit_fraction=0.25`, 25 minutes,
beside light work), both scored on the plain task, n=100 per row. x 2 digits at 5 / 20 /
50 digits: plain 99 / 77 / 71%, planted 98 / 80 / 76%, against ft2's 98 / 78 / 72%; x 3 digits:
plain 44 / 14 / 8%, planted 42 / 5 / 3%, against 42 / 7 / 7%. Multipliers of digit sum 14+ at 20
/ 50 x 2: plain 8 / 20%, planted 17 / 35%, against 8 / 25%. On x 2 the third cycle moved nothing
beyond the noise of 100 problems (about +-4 points), though a fourth cycle did gain (below). The
plant lifts the heaviest two-digit multipliers a little and costs x 3 past the trained length,
as it did from scratch. Neither is shipped.

Twice the MLP units on the same third cycle (`--set model.d_mlp=1024` with the plain arm's
command: ft2's step 5,000 grown by `training/growth.py`, the new units starting with zero output
weights so that step 0 is ft2's function; 40 minutes in two processes beside light work). Its
held-out exact match equalled the plain arm's at steps 1 to 14 (same function, same batches). At
step 5,000, n=100 per row: x 2 digits 97 / 78 / 75% at 5 / 20 / 50 digits, x 3 digits 44 / 10 /
6%, against the plain arm's 99 / 77 / 71% and 44 / 14 / 8%; multipliers of digit sum 14+ at 20 /
50 x 2: 17 / 30% against 8 / 20% (n = 12 / 20). Nothing moved beyond the noise: room in the MLP is
not what holds x 2 back. Not shipped.

Where ft2 goes wrong, answer digit by answer digit (adaptive loops, the eval's held-out uniform
problems, seed 0; n = answer digits, several per problem): each digit's error rises with the
carry into its column. 20 x 2 (200 problems): 0-0.9% at carries 0-5, 1.5-6% at 6-9, 12-18% at
10-11, 37-63% at 12-15; 50 x 2 (100 problems): 0-0.2% at 0-5, 1.6-5% at 6-9, 8-15% at 10-11,
21-77% at 12-15. In distribution, 5 x 3 (200 problems): 0.3% at 0, 3-13% at 1-4, 21-37% at 5-8,
47-72% at 9-13, every one wrong at 14 and above. Carries of 10 or more come into 2.6% of the
5 x 2 answer digits and 5.2% of the 20 x 2 ones: the longer the product, the more columns carry
that much, the more of them go wrong. The model has not learned to add a large carry, and
neither more units nor more cycles taught it.

Per carry, no difference between a short product and a long one can be seen at the report's
sample: the multiplication section of ft2's report (uniform problems, n=48 per row, logit lens
after 48 loops) reads each carry bin at 5 and 20 digits at 97 / 97% (carries 5-8) and 85 / 89%
(9-12, about 25 answer digits each) for x 2, 65 / 66% and 27 / 27% for x 3. What changes with
length is how many columns there are and how many of them receive a carry above 8: 5.6% of the
answer digits at 5 x 2, 8.4% at 20 x 2 and 9.1% at 50 x 2 (uniform problems, 4,000 per length).
Independent per-column slips would put 50 x 2 well under its 72% once 20 x 2 is at 78%; they
are not independent: a product is lost mostly by its multiplier (see `by_multiplier`).

The large-carry plant on the third cycle (`--set task.large_carry_fraction=0.3`: 30% of the
problems are uniform ones conditioned on a carry of 10 or more entering a column; ft2's step
5,000, seed 3, the plain arm's command; 28 minutes alone). x 2 digits at 5 / 20 / 50: 97 / 82 /
70%, x 3 44 / 9 / 5% (plain arm 99 / 77 / 71%, 44 / 14 / 8%). Answer digits by their exact carry
in (the eval's problems, adaptive loops, the same digits for both arms; `accuracy_by_carry_in`'s
count by single carries, a scratch script): carries of 10 or more at 20 x 2 (200 problems, 225
digits) wrong 12% against the plain arm's 20% (the large-digit arm's 20%), at 50 x 2 (400
problems, 1,286 digits) 12% against 16%; carries 2-5 at 50 x 2 wrong 0.4-0.5% against 0-0.1%.
The errors it targets fall by a quarter to two fifths. Per 50 x 2 product, the 3 or so digits
with carries of 10 or more gain about 0.1 right digits and the 24 or so with carries 2-5 lose
about as many, so exact match stays where it was.
That run is shipped as checkpoints/extrap-mul-ft3, as the source of the next.

A fourth cycle in two arms, 5,000 steps each, seed 4: with the plant from ft3's step 5,000
(30 minutes, shipped as checkpoints/extrap-mul-ft4) and plain from the plain third arm's step
5,000 (31 minutes), both beside light work. x 2 digits at 5 / 20 / 50 / 100: planted 98 / 83 /
78 / 65% (ft2: 98 / 78 / 72 / 56%); plain 99 / 83 / 76% at 5 / 20 / 50. x 3: planted 48 / 14 / 8 /
4%, plain 46 / 13 / 13% (ft2: 42 / 7 / 7 / 4%). The two arms are level on exact match: the gain
over ft2 is the fourth cycle, and the cycles had not levelled off after the third. What the
plant changes is which digits are wrong: at 50 x 2 (400 problems) digits with carries of 10 or
more wrong 6% against the plain arm's 14%, carries 6-9 0.8-1.7% against 0.8-4.1%, carries 1-5
0.2-0.5% against 0.1-0.2%.

A fifth cycle, the third with the plant, from ft4's step 5,000 (seed 5, 31 minutes alone; shipped as
checkpoints/extrap-mul-ft5) gained again on x 2: 100 / 92 / 84 / 76% at 5 / 20 / 50 / 100 digits;
x 3 50 / 16 / 8 / 2%, x 1 100% but one 100-digit product (99%). On ft4 (`DigitAccuracy.wrong`,
uniform problems, n=48 per row): x 2's wrong answer digits are nearly all off by one from the right
digit, a carry misjudged by one (88% at 50 x 2); x 3's only about a third (36% at 5 x 3; random
wrong digits: 2 in 9), the rest spread about evenly up to +-5, further than its carries are
likely to be off: x 3 mostly fails to form the sum of its three partial products.

Which of the three (`ByMultiplier.by_multiplier_digit`, the eval's problems, n=100 per row): ft5
gets a 5 x 3 product right 73% of the time when the multiplier's leading digit b_2 is 1-4 and 29%
when it is 5-9, against 53 / 47% split by b_0 (0-4 / 5-9) and 63 / 42% by b_1; at 20 x 3, 42 / 2%
by b_2 and 16 / 16% by b_0. A large b_2 also makes the product longer more often, but the wrong
digits are not at the top: at 5 x 3 (n=200) columns 0-1 (one and two products) are never wrong,
columns 2-4 (three products) and 5 (two) 19-26% of the time, the top columns 6 and 7 8% and 1%. So the
partial product added worst is a_(i-2) * b_2, measured directly (`DigitAccuracy.by_partial_product`,
uniform 5 x 3 products, n=400, logit lens after 48 loops): in the columns that add all three
products the answer digit is right 96 / 88 / 46 / 16% as a_(i-2) * b_2 grows through 0-9 / 10-29 /
30-49 / 50-81, and 77 / 70 / 75 / 72% as a_i * b_0 does (98 / 96 / 77 / 15% against 92 / 87 / 90 /
88% among digits whose carry in is at most 4, so it is not the carry). Yet it is the product
most plainly in the state: least-squares readouts fitted per loop (the report's running-sum
reading, 48 problems, fitted on 192 others) read a_(i-2) * b_2 with R² 0.953 at loop 2, a_(i-1) *
b_1 0.933, a_i * b_0 0.837; after 48 loops 0.870 / 0.751 / 0.617 (from the input alone -0.10 to 0.00).
The product that costs accuracy is linearly in the state; a guess, not shown: what fails is
folding it into the column's sum. Loops do not help: 5 x 3 (n=100) is 51%
at 8 fixed loops, 50% at 16, 32 and 64, and 50% adaptive at every tolerance from 1e-3 to 1e-5
(median 26 to 49 loops).

The two offset +1 heads read a_(i-2) and the carry slot, which share an Abacus index: on ft5
they put 48% and 55% of their attention on a_(i-2), 23% and 13% on the slot, the rest on
themselves. Split (`--set 'model.offset_head_numbers=[1,1,1,3]'`: one reads only the
multiplicand there, the other only the answer slot; ft5's step 5,000, the straight sixth cycle's
command and seed 6, 33 minutes): ft5's weights under the new mask start at 27% held-out exact
match of the training mix (80% before) and are back to 79% at step 5,000. x 2 99 / 94 / 88% at 5 /
20 / 50 digits, x 3 44 / 7 / 8%, against the straight sixth cycle's 98 / 92 / 87% and 50 / 19 / 12%;
by b_2 at 5 x 3 still 71 / 19%. A clean a_(i-2) does not rescue the large b_2: the read is not
what x 3 lacks. Not adopted.

Exclusive offset heads on top of the split (`--set model.offset_heads_exclusive=true`: each offset
head sees itself only where its column holds no digit; the split arm's step 5,000, seed 7, 32
minutes): held-out exact match fell to 33% at the switch and was back to 80% at step 5,000, but
x 2 99 / 90 / 71% and x 3 42 / 6 / 1% at 5 / 20 / 50 digits, against the split arm's 99 / 94 / 88%
and 44 / 7 / 8%. Looking at itself is part of how an offset head extrapolates; not adopted.

A second layer grown onto ft5 (`--set model.n_layers=2 --set train.steps=2500`, the added block
starting as the identity, `training/growth.py`; ft5's step 5,000, seed 6, the plant; 29 minutes,
the compute of a 5,000-step cycle of one layer): x 2 100 / 92 / 89%, x 3 48 / 11 / 9% at 5 / 20 /
50 digits, against the straight sixth cycle's 98 / 92 / 87% and 50 / 19 / 12%; by b_2 at 5 x 3 67 /
31%. A second stage per loop does not form the three-product sum either; not adopted.

The straight sixth cycle (ft5's step 5,000, seed 6, the plant, 31 minutes; shipped as
checkpoints/extrap-mul-ft6, level with ft5: x 1 100% up to 100 digits, x 2 98 / 92 / 87 / 78% at 5
/ 20 / 50 / 100 digits, x 3 50 / 19 / 12%) and a seventh from it (seed 7, 30 minutes, shipped as
checkpoints/extrap-mul-ft7): x 1 100 / 100 / 100 / 99%, x 2 100 / 92 / 94 / 86%, x 3 58 / 23 / 20 /
10% (ft5: 100 / 92 / 84 / 76%, 50 / 16 / 8 / 2%). Two cycles past ft5 moved x 3 at every length
and x 2 ten points at 50 and 100 digits; in the columns that add all three products the answer
digit is still right only 17% where a_(i-2) * b_2 is 50 or more (ft5 16%).

An eighth cycle from ft7 (seed 8, 31 minutes, shipped as checkpoints/extrap-mul-ft8) and a ninth
from it (seed 9, 30 minutes, shipped as checkpoints/extrap-mul-ft9), same rows at 5 / 20 / 50 /
100 digits: ft8 x 2 100 / 94 / 96 / 87%, x 3 54 / 16 / 14 / 7%; ft9 x 1 100%, x 2 99 / 97 / 97 /
92%, x 3 62 / 20 / 16 / 13%. x 2 is still climbing a few points a cycle; x 3 has not moved past
the noise since ft7 (by b_2 at 20 x 3, ft9 53 / 2%).

A tenth cycle from ft9 (seed 10, 26 minutes, shipped as checkpoints/extrap-mul-ft10), same rows: x 1
100%, x 2 99 / 98 / 97 / 92%, x 3 59 / 27 / 21 / 11%, level with ft9. By both digits of a product
(DigitAccuracy.by_factor_pair, uniform 5 x 3, n=1,500): the answer digits are right 6% where
a_(i-2) = b_2 = 9 and 46-48% where they are 9 and 5, rho -0.87 with a_(i-2) * b_2; +0.02 with a_i * b_0. The large products
fail, whichever factor is large; no one fact of the times table is missing.

Every cycle at lr 6e-4 first undid part of the last one (ft10's held-out loss rose from 0.138 to
0.368 after the warm-up). From ft10, an eleventh cycle at 2e-4 (seed 11, 26 minutes, shipped as
checkpoints/extrap-mul-ft11) kept it (0.151 at most, ending at 0.104), and two more at 2e-4 (seeds
12 and 13, 27 minutes each, checkpoints/extrap-mul-ft12 and -ft13) went on gaining. ft13, 400
problems per row: x 2 99.8% at 20 digits and 98.0% at 50 (100% at 5, n=100): x 2 clears the
issue's accuracy bars; x 3 75.0 / 42.0% at 5 / 20 digits (ft10 62.0 / 27.0%).

A fourteenth cycle at 2e-4 (seed 14, 27 minutes, checkpoints/extrap-mul-ft14) was level with ft13
and ended at its starting held-out loss (0.091): the 2e-4 cycles had stopped gaining. At half that
lr, 1e-4, a fifteenth cycle (seed 15, 29 minutes, checkpoints/extrap-mul-ft15) rose
to 0.108 at most and ended at 0.082, and a sixteenth of 10,000 steps (seed 16, 55 minutes,
checkpoints/extrap-mul-ft16, the best run of the chain) ended at 0.074. ft16, 400 problems per row: x 2
99.5 / 99.8 / 98.2% at 5 / 20 / 50 digits, x 3 78.2 / 48.2 / 40.0% (ft13 75.0 / 42.0 / 33.0%).
Averaging the weights of shipped cycles or of a cycle's last steps moved nothing beyond noise.
From ft16, a seventeenth cycle (lr 1e-4, seed 17, 24 minutes, not shipped) scored level with it
(x 2 99.5 / 98.0% at 20 / 50 digits, x 3 78.5 / 49.2% at 5 / 20), and the same cycle with the MLP
grown to twice the units (`--set model.d_mlp=1024`, 76 minutes, not shipped) scored level too
(99.5 / 98.0%, 79.0 / 50.5%): neither more cycles nor the MLP's room lifts x 3 now.
"""

from __future__ import annotations

from dataclasses import replace

from ..config import RunConfig, TrainConfig
from .recipe import recipe


def extrap_mul() -> RunConfig:
    """N x k multiplication that extrapolates in N: a multiplicand of up to 5 digits times a
    multiplier of 1 to 3 digits, in the answer-slot format (`rev(a)*rev(b)=` then a
    placeholder in every answer position: no scratchpad, the multiplier written once).

    Answer digit i needs a_i, a_(i-1), a_(i-2) (at Abacus offsets -1, 0, +1 from the position
    that predicts it, the slot of digit i - 1), every digit of the multiplier (at index 1..k,
    far from i once i is large) and a carry of 0..26 from the column below (the slot at offset
    +1). Heads of three kinds: four offset heads read exactly one of those columns each
    (`offset_heads=(-1, 0, 1, 1)`), one head attends by rotary positions in a window of +-2,
    and three multiplier heads (`multiplier_heads`) see only the multiplier, head j its digit
    j, the same way at any answer position; none but the multiplier heads sees the multiplier,
    so the carry stays a local automaton as in extrap-add. The MLP is gated (`swiglu`): a unit
    multiplies two linear readings of the state, so a_i * b_j is formed, not tabulated.

    Measured on the shipped run (checkpoints/extrap-mul, 270k parameters): trained to step 9,000
    with steps=9000, resumed with `--set train.steps=13000`, `--set train.steps=19000`,
    `--set train.steps=28000` and `--set train.steps=36000` (each resume stretched the cosine
    schedule, so the learning rate rose again, to ~4.6e-4 at step 9,000, ~5.8e-4 at 13,000,
    ~6.1e-4 at 19,000 and ~4.1e-4 at 28,000, and fell; a fresh run of this preset decays
    smoothly instead), 364 minutes of training clock over seven segments (about 26 of them
    paused while other trainings were timed), all of them beside other work.
    `abacus-interp eval checkpoints/extrap-mul --lengths 5,20,50,100 --multipliers 1,2,3 --n 100`
    (uniform digits, adaptive loops): x 1 digit 100% / 100% / 100% / 100% at 5 / 20 / 50 / 100
    digits; x 2 digits 78% / 40% / 37% / 25%; x 3 digits 24% / 2% / 0% / 1%. At step 28,000 (kept
    in the run) x 2 was 81 / 40 / 18 / 17% and x 3 15 / 1 / 1 / 0%; at 19,000 67 / 32 / 15 / 13% and
    13 / 0 / 0 / 0%; at 13,000 50 / 22 / 5 / 11% and 7%; at 9,000 28 / 7 / 3 / 2% and 1% (x 1 97-100%).
    The previous layout (five windowed heads, a GELU MLP, 9,000 steps) scored 99 / 98 / 91 / 88%
    on x 1 and 16% on 5 x 2. The levers one at a time, at equal steps (held-out exact match in
    distribution at step 1,000): window only 19.5%, + offset heads 19.1%, + offset heads and the
    gated MLP 26.6%; at step 9,000: 54% without either, 60% with both. Two layers x 4 loops (equal
    FLOPs), no 3-digit multipliers in the data, or d_mlp 1,024: no better than this recipe at
    equal steps (1,000-2,259-step probes).

    The levers that beat this recipe at equal steps (the partial products' digits, which the
    preset extrap-mul-digits adds, and the running-sum loss) and the probes after them are in
    the module docstring and extrap_mul_digits.
    """
    return recipe(
        "extrap-mul",
        "multiplication",
        {"max_digits": 5, "max_multiplier_digits": 3, "answer_format": "slots"},
        # max_seq_len bounds evaluation only (no position table): 100-digit multiplicands
        dict(d_model=128, n_heads=8, n_layers=1, n_loops=8, max_loops=128, max_seq_len=320, abacus_max_offset=0,
             positional="none", rotary="abacus", abacus_window=2, offset_heads=(-1, 0, 1, 1), multiplier_heads=3,
             activation="swiglu", input_injection="norm_add", halt_tol=1e-3),
        TrainConfig(
            steps=36000, batch_size=64, lr=2e-3, weight_decay=0.01, warmup_steps=200, grad_clip=1.0, processes=1,
            progressive="mix", mix_depths=(8, 24), step_penalty=1.0, init_state_noise=0.5,
            eval_every=250, eval_problems=256,
            checkpoint_every=500, dense_checkpoints=8, dense_until=500,
        ),
    )



def extrap_mul_digits() -> RunConfig:
    """extrap-mul with a second target: each answer slot also learns, through a linear readout of
    its final state, the units and tens of every partial product a_(i-j) * b_j its column adds
    (`model.partial_product_probe=3`, `train.partial_product_loss=0.5`; the readout is not used to
    answer). Why: extrap-mul-ft16 holds a_i * b_0 as digits but the later products as magnitudes
    (its units read as ten classes 67% of the time, a_(i-2) * b_2's 33%), and x 3 loses
    exactly the large later products. The running sum as one magnitude (Bai et al. 2025) was the
    only earlier lever to beat the recipe at equal steps; the digits beat it by far more.

    Measured on the shipped run (checkpoints/extrap-mul-digits: `train --preset extrap-mul` with
    the two settings and `train.steps=9000 --set train.processes=2`, 2,698 s, then resumed with
    `train.steps=12000`, 861 s: 59 minutes of training clock alone on the 2 cores, on a machine
    about 1.6x as fast as the one extrap-mul's 364 minutes were measured on; the resume stretched
    the cosine, so a fresh run of this preset decays over 12,000 steps instead). Against extrap-mul
    at its step 9,000 (the same schedule, batches and seed), `eval --lengths 5,20 --multipliers 2,3
    --n 400 --seed 1`: 5 x 2 99.2% against 26.8%, 5 x 3 47.8% against 1.2%, 20 x 2 93% against 8%,
    20 x 3 7.5% against 0%. At step 12,000, `eval --lengths 5,20,50 --multipliers 1,2,3 --n 100`:
    x 1 100% at 5 / 20 / 50 digits, x 2 99 / 97 / 96%, x 3 62 / 13 / 3% (on 400 problems, seed 1:
    5 x 2 99.8%, 20 x 2 96%, 5 x 3 56.8%, 20 x 3 11%). extrap-mul-ft9 reached about that (x 2 99 /
    97 / 97%, x 3 62 / 20 / 16%) after about 625 minutes on the slower machine; x 3 far from home
    is where it stays behind. One seed, one weight (0.5). Added late, to a cycle from
    extrap-mul-ft16, it does not help: 5 / 20 x 3 75.25 / 39.5% against the plain cycle's 78.5 / 49.2%.

    Continued as the chain was (`--set train.init_from=checkpoints/extrap-mul-digits --set
    train.steps=5000 --set train.lr=6e-4 --set train.seed=1 --set task.large_carry_fraction=0.3`, 27
    min, checkpoints/extrap-mul-digits-ft; then from each with the next seed, -ft2 to -ft4; -ft5 and
    -ft6 at lr 2e-4, -ft7 on at 1e-4, -ft10 with the plant at 0.5): x 2 100 / 100 / 99%, then 100%; x 3
    91 / 66 / 40% (ft), 98 / 87 / 65% (ft3), 100 / 97 / 97% (ft10; n=100; on 400 problems 5 / 20 x 3
    93.5 / 63.2%, 97.5 / 87.8%, 99.8 / 97.8%), 345 min from nothing. One cycle took x 3 past ft16, where the chain ended.
    """
    run = extrap_mul()
    return replace(run, model=replace(run.model, partial_product_probe=3),
                   train=replace(run.train, steps=12000, processes=2, partial_product_loss=0.5),
                   preset="extrap-mul-digits")


def mul() -> RunConfig:
    """N x N multiplication in distribution: both operands of up to 5 digits, the answer
    written least-significant digit first, one token at a time (no answer slots, no
    scratchpad), a looped block of 2 layers applied twice on learned Abacus positions.

    Why this layout and not extrap-mul's: nothing here has to extrapolate, so the answer may
    read the digits it already wrote, and one forward pass per answer token is cheap. The
    slot layout with heads of two kinds (5 multiplier heads, window +-4, mix depths 10..20)
    ran at 1.2 steps/s on one core against 7 for this one (probe beside it, same core
    budget), too slow to learn 5 x 5 on two cores in the issue's 90 minutes.

    Measured on the shipped run (checkpoints/mul, 45,000 steps, 58 minutes in two processes,
    404k parameters), `abacus-interp eval checkpoints/mul --grid 1..7 --n 50` (uniform digits,
    n=50 per cell, 2 loops): 100% on every N x 1 and 1 x N cell up to 5 digits, 92% on 2 x 2,
    6-20% on 2 x 3 .. 5 x 2 and 0-4% wherever both operands have 3 digits or more; 42% over
    the 25 trained cells (the training's held-out exact match rose to 39% by step 16,000 and
    ended at 44%). So the largest N with every cell up to N x N at >= 99% is 1, and 6- and
    7-digit operands fail (0-12%). It learned to multiply by one digit and not to add partial
    products, the same wall as extrap-mul's N x 2 (see docs/runs/multiplication.md).

    The running-sum loss (Bai et al. 2025) here: `--set model.running_sum_probe=true --set
    train.running_sum_loss=0.5 --set train.processes=1`, stopped after step 14,368 (38 min on one
    core): held-out exact match ahead early (22% against 15% at step 5,000, 23% against 19% at
    6,000) and level from 12,000 on (36% / 39% / 36% against 37% / 38% / 40% at 12,000 / 13,000 /
    14,000), so it was not trained on. Its readout reads the running sums with R² 0.996, yet to
    within 0.5 only 21-30% of them (uniform 2 x 2 .. 5 x 5, 128 problems each).

    Warm-started from the shipped step 45,000 for 10,000 steps more (`--set
    train.init_from=checkpoints/mul --set train.steps=10000 --set train.lr=6e-4 --set
    train.seed=1`, 13 minutes, shipped as checkpoints/mul-ft): 2 x 2 at 100% (n=50, 99% at n=200)
    against 92%, so every cell up to 2 x 2 is at >= 99%; the cells with a two-digit operand gained
    4-12 points and those where both have three digits or more stayed at 0-2%.
    A second such cycle from mul-ft's step 10,000 (seed 2, 12 minutes): at n=200, 2 x 2 100%,
    2 x 3 18% and 3 x 2 39% (mul-ft: 99 / 13 / 36%), 3 x 3 0% (2%); at n=50, 4 x 2 / 5 x 2 16 /
    10%. The largest N stays 2: more schedule does not add partial products. Not shipped.
    The same second cycle with a third layer grown into the loop (`--set model.n_layers=3`: the
    new block starts with zero output projections, so step 0 is mul-ft's function,
    `training/growth.py`; 19 minutes): at n=200, 2 x 2 100%, 2 x 3 16%, 3 x 2 37%, 3 x 3 1%; at
    n=50, 4 x 2 / 5 x 2 16 / 8%. Depth did no better than the plain cycle: not shipped.
    The same second cycle with the large-carry plant (`--set task.large_carry_fraction=0.3`, 17
    minutes): at n=200, 2 x 2 100%, 2 x 3 14%, 3 x 2 34%, 3 x 3 2%, against the plain cycle's
    100 / 18 / 39 / 0%: no better, not shipped.

    extrap-mul-digits' lever (`model.partial_product_probe=5`, `train.partial_product_loss=0.5`), stopped
    at step 20,000 (26 min), against this run's step 20,000 (n=50): 2 x 2 90% against 42%, 3 x 2 64%
    against 4%, 3 x 3 8% against 0%: it adds two partial products, not three. Not shipped.
    """
    return recipe(
        "mul",
        "multiplication",
        {"max_digits": 5},
        # max_seq_len: 5 + 1 + 5 + 1 + 10 answer digits + EOS, with room for 6 x 6 probes
        dict(d_model=128, n_heads=4, n_layers=2, n_loops=2, max_seq_len=32, abacus_max_offset=0),
        TrainConfig(
            steps=45000, batch_size=64, lr=2e-3, weight_decay=0.01, warmup_steps=200, grad_clip=1.0, processes=2,
            progressive="none", eval_every=1000, eval_problems=256,
            checkpoint_every=2000, dense_checkpoints=6, dense_until=1000,
        ),
    )

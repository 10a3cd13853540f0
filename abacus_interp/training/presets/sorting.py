"""The sorting recipe: lists of labelled numbers, for longer numbers and longer lists.

The levers measured against extrap-sort, one at a time (each row scored on plain lists,
held-out, `abacus-interp eval RUN --lengths 20 --counts 10 --n 100`'s rows unless said).
The random offset, measured on two 3,000-step probes at step 1,000 (n=50 per row): without
it 62% in distribution and 4% on lists of 1-20-digit numbers, with it 62% and 32%.

One symbol head (`model.symbol_heads=1`: a head that sees only labels, separators and the
answer, so no digit dilutes it) in place of one of the four,
against this recipe at step 4,000 (each answer token given the right ones before it): in
distribution 81% vs 79%; 20-digit numbers 22% vs 5%, the stop 86% vs 31%; 10
numbers of 20 digits: the stop 43% vs 4% (0% exact both); but 10 numbers of 1-5 digits: the
stop 77% vs 100% (0% exact both). It fixes the stop that longer numbers break and not the
labels, and costs the stop on longer lists; not adopted (one 4,000-step probe).

30% planted lists (`task.shared_prefix_fraction=0.3`: numbers that agree above a random
depth), same comparison at step 4,000, each row scored on plain lists: in distribution 80%
vs 79%; 5 numbers of 5 digits equal above depth 2 / 3 / 4: 4% / 8% / 11% vs 1% / 0% / 1%;
equal but the units 4% vs 1%; 20-digit numbers 4% vs 5%. It moves deep comparisons a little,
not to the bars; not adopted.

Both together (`--set model.symbol_heads=1 --set
task.shared_prefix_fraction=0.3`, 48 minutes to step 6,000 in one process beside another
training), against this recipe at steps 4,000 / 6,000: in distribution 79% / 82% vs 79% /
84%; 20-digit numbers 20% / 8% vs 5% / 7% (the stop 90% / 66% vs 31% / 11%); 10 numbers 0%
both, the stop 99% / 100% (the symbol head alone cost it: 77%); planted depths 2 / 3 / 4
at step 6,000: 10% / 3% / 6% vs 2% / 0% / 1%. The stop holds on long lists and mostly on long
numbers, the labels do not: not adopted.

Number heads as first built (commit e9c72fb: `model.number_heads=1`, one of the four heads
sees only its query's own number and the label and separators before it, at any count of
numbers; `--set train.processes=1`, 31 minutes to step 4,000 beside another training) against
this recipe at step 4,000: in distribution 84% vs
79%; 20-digit numbers 17% vs 5% (the stop 35% vs 31%); 10 numbers 0% both (each label given the
ones before it 22-94% vs 33-87%, the stop 93% vs 100%); hard lists of 5-digit numbers 0% vs 1%;
planted depths 2 / 3 / 4: 0% each vs 1% / 0% / 1%. With 10 numbers even the first label, the
smallest number, is right only 51% (52% for the recipe, 67% for the shipped run at step
14,000): more numbers break the choice among more candidates, not the binding of a label to
its number. Not adopted.

Number heads as now (each list item one group: label, digits and the separator that closes
it, so the closing separator reads the whole item; same command, 31 minutes), against this
recipe at step 4,000: in distribution 81% vs 79%; 10 numbers 2% vs 0%, the first label (the
smallest of 10) right 94% vs 52%, the others 53-70% vs 33-87%, the stop 100% both; but
20-digit numbers 4% vs 5% with their labels at 4-31% vs 53-84% (the stop 100% vs 31%); 10
numbers of 20 digits 0% both; hard lists 2% vs 1%; planted depths 2 / 3 / 4: 1% / 0% / 0%
vs 1% / 0% / 1%. It finds the smallest of many numbers, which nothing else did, and loses
the labels of long numbers: not adopted on one 4,000-step probe; the lever to combine with
one that keeps long numbers (the symbol head kept their stop, the random offset their labels).

The same trained on to step 6,000 (`--set model.number_heads=1 --set train.processes=1`, 31
minutes alone on the 2 cores, two threads), against the shipped run's own step 6,000: in
distribution 88% vs 84%; 10 numbers 3% vs 0%, the first label 95% vs 62%, the others 51-90% vs
44-99%; 20-digit numbers 6% vs 7%, their labels 0-38% vs 50-88% (the stop 23% vs 11%); 10
numbers of 20 digits 0% both; hard lists of 5 and 20 digits 0% both. Its step 4,000 repeated the
first probe's (20-digit labels 18-38%, the first of 10 labels 93%). Two more thousand steps
did not bring the long numbers' labels back. A guess, not measured: the head that reads a
whole item was trained on items of at most 7 tokens, and a 20-digit item is 22.

A warm start, the cycle that lifted extrap-mul (`--set train.init_from=checkpoints/extrap-sort
--set train.steps=5000 --set train.lr=6e-4 --set train.seed=1`: the shipped step 14,000, a fresh
warm-up and cosine, 22 minutes in two processes, 5 of them beside a report), against its source:
in distribution 93% vs 97%; 20-digit numbers 22% vs 13% (labels 53-64% vs 63-78%, the stop 38%
vs 19%); 10 numbers 3% vs 2%; 10 numbers of 20 digits 0% both; hard lists of 5 and 20 digits 1%
/ 0% vs 2% / 0%. It trades the trained range for the stop of long numbers and does not move the
labels: not shipped.

The scalable softmax (`--set model.softmax_length_scale=0.3`: each head's scores times s_h *
ln(keys its query sees), s_h learned), this recipe's schedule stopped after step 4,000 (18
minutes in two processes, beside light work; scored at step 4,020, where the stop saved it),
against this recipe at step 4,000: in distribution
78% vs 79%; 20-digit numbers 21% vs 5%, the stop 96% vs 31% (labels 38-73%); 10 numbers 0% both,
the stop 87% vs 100%; 10 numbers of 20 digits 0% both (the stop 27% vs 4%); hard lists of 5
digits 0% vs 1%, of 20 digits 0%. Like the symbol head it keeps the stop of long numbers, without a head set aside.
Trained on to the recipe's step 14,000 (`train` resumed, 50 minutes, beside light work), against
the shipped run: in distribution 95% vs 97%; 20-digit numbers 11% vs 13% (the stop 64% vs 19%,
labels 38-67% vs 63-78%); 10 numbers 2% both (labels 55-93%, the stop 83% vs 100%); 10 numbers
of 20 digits 0% both; hard lists of 5 and 20 digits 1% / 0% vs 2% / 0%. The lead of step 4,000
did not last: not shipped.

Twice the loops, as a warm start (`--set train.init_from=checkpoints/extrap-sort --set
model.n_loops=8 --set train.steps=2500 --set train.lr=6e-4 --set train.seed=1`: the shipped step
14,000 run at 8 loops, 2,500 steps of a fresh warm-up and cosine, the compute of the 4-loop warm
start's 5,000; 27 minutes in two processes beside light work), scored at its 8 loops against that
4-loop warm start: in distribution 95% vs 93%; 20-digit numbers 24% vs 22% (labels 55-76%, the stop
38% vs 38%); 10 numbers 2% vs 3%, the first label (the smallest of 10) 67% vs 70%; 10 numbers of 20
digits 0% both; hard lists of 5 and 20 digits 0% both. At step 1 the shipped weights at 8 loops
scored 38% in distribution (97% at 4): the loop is no fixed point there. More loops do not choose
among more numbers: not shipped.

The item-grouped number head with the scalable softmax (`--set model.number_heads=1 --set
model.softmax_length_scale=0.3`, this recipe's schedule stopped after step 4,000; 20 minutes in two
processes, beside light work). The guess it tests: the number head loses the labels of 20-digit
numbers because its attention over an item of 22 tokens, where training had at most 7, is
diluted, which the length scale undoes. At step 4,000, against the number head alone at its step
4,000: in distribution 82% vs 81%; 20-digit numbers 1% vs 4%, their labels 2-34% vs 4-31% (the
stop 100% both); 10 numbers 0% vs 2%, the first label 91% vs 94%; 10 numbers of 20 digits 0% both;
hard lists of 5 and 20 digits 1% / 0% vs 2% / 0%. The long numbers' labels stay lost: dilution is
not why (or not what the scale reaches). Not adopted.

Lists of one length, planted (`--set task.same_length_fraction=0.3`: 30% of the training lists
draw one length for all their numbers; this recipe's schedule stopped after step 6,000, 28 minutes
in two processes, alone on the 2 cores), against the shipped run's own step 6,000, both scored on
the plain task's lists (`list_rows` at `--lengths 5,10,20 --counts 6,8,10`, n=100 per row): in
distribution 82% vs 84%; lists of 5-digit numbers 79% vs 56% (the first label 96% vs 73%); 6
numbers of 5 digits 28% vs 7%; 10-digit numbers 38% vs 39%; 20-digit numbers 9% vs 7% (the stop 77%
vs 11%, the labels 37-72% vs 50-88%); 6 / 8 / 10 numbers 42 / 4 / 1% vs 43 / 4 / 0%; hard lists 0-2%
both. It mends what it targets, lists of one length inside the trained range, and neither
extrapolation: the rarity of one-length lists in training explains the weak spot at 5 digits,
not the failures at 20 digits or at 10 numbers. Not trained on (one 6,000-step probe).

The item-grouped number head with lists of one length planted (`--set model.number_heads=1 --set
task.same_length_fraction=0.3`, this recipe's schedule stopped after step 4,000; 35 minutes in two
processes, alone on the 2 cores). The guess it tests: one-length lists make the number head's item
summary carry leading digits rather than length alone, which is what decides a list of 20-digit
numbers. At step 4,000, against the number head alone at its step 4,000 (`abacus-interp eval RUN
--step 4000 --lengths 5,20 --counts 10 --n 100`): in distribution 80% vs 81%; lists of 5-digit
numbers 74%; 20-digit numbers 11% vs 4%, their labels 22-40% vs 4-31% (the stop 99% vs 100%); 10
numbers 0% vs 2%, the first label 91% vs 94%; 10 numbers of 20 digits 0% both; hard lists 0-2%.
The breakdown of its wrong labels says how this number-head run loses long numbers: on the 20-digit lists
40% of them (n=242) are letters that label no number of the list and 14% the stop before the last
label (the shipped sorter: 7% and 0% of 104), so the answer stops pointing at the list's labels; with
10 numbers 15% are numbers already written (the shipped sorter 6%). Not adopted (one probe).

The item-grouped number head with a symbol head (`--set model.number_heads=1 --set
model.symbol_heads=1`, stopped after step 4,000; 26 minutes in two processes, partly beside light
work). The guess it tests: a head that reads only labels, separators and the answer keeps the
answer pointing at the list's labels, which the number head alone loses on long numbers. At step
4,000, against the number head alone at its step 4,000 (same eval): in distribution 84% vs 81%; 20-digit numbers 3% vs 4%, their
labels 15-33% vs 4-31% (the stop 91% vs 100%), and 67% of their 255 wrong labels are letters of no
number in the list; 10 numbers 0% vs 2%, the first label 88% vs 94%; 10 numbers of 20 digits 0%
both; hard lists 0-1%. The labels of long numbers stay lost: not adopted (one probe).

The item-grouped number head with the answer blind (`--set model.number_heads=1 --set
model.answer_hides_earlier_answer=true`: no head at an answer query reads the labels written before
it, so each label is the smallest number above the one just written, one search at any count).
Against the number head alone at steps 4,000 / 6,000: in distribution 73% / 82% vs 81% / 88%; 10
numbers 1% / 3% vs 2% / 3% (the first label 88% / 92% vs 94% / 95%); 20-digit numbers 7% / 12% vs 4% /
6%, and none of its wrong labels on them names no number of the list. It comes close to a pick
among the numbers left (hiding the other candidates costs little more) and keeps long numbers'
labels as pointers, and it does not carry the count at those steps. Trained on to step 14,000 (shipped as
checkpoints/extrap-sort-blind, about 80 minutes on a machine half as fast as this recipe's 56):
97% in distribution, 10 numbers 35% (this recipe 2%), 20-digit numbers 13% (13%).
docs/runs/sorting.md has the tables.

The answer blind alone (`--set model.answer_hides_earlier_answer=true`, no number head; this
recipe's 14,000 steps in one process, 112 minutes beside light work; `abacus-interp eval RUN
--lengths 5,20 --counts 10 --n 100` and `--counts 5,6,7,8,9,10 --n 400`): in distribution 92%
(96% on 400); 5 / 6 / 7 / 8 / 9 / 10 numbers 89 / 66 / 31 / 6 / 1 / 0%, below this recipe past 5
(the first label of 10 numbers 66%, this recipe 67%, the pair 99-100%); 20-digit numbers 5%. At
steps 4,000 / 6,000: in distribution 70% / 83% (the pair 73% / 82%), 10 numbers 0% / 0% (1% / 3%).
The blind alone is not enough; the number head finds the smallest (whether it is enough alone at
step 14,000 is not measured). Not adopted. Both blind runs lose the stop of longer numbers: with 10-digit numbers
they write the EOS after the last label (teacher-forced) 34-36% of the time (this recipe 96%), exact match 10-15% (48%).

A symbol head the blind spares (`--set model.n_heads=5 --set model.d_head=32 --set
model.symbol_heads=1 --set model.answer_blind_spares_symbol_heads=true`, grown from
checkpoints/extrap-sort-blind, 2,500 steps at lr 6e-4; shipped as checkpoints/extrap-sort-spare),
against the same growth with that head blind (n=400 per row): 10 numbers 55% vs 47%; the stop of
lists equal but the units 55% vs 3%, of 20-digit lists 32% vs 16%; 10-digit numbers 11% vs 12%, the
stop 33% vs 27%. The head that reads the labels written gives back the stop where the numbers are
alike, not the labels of long numbers. Trained on 5,000 steps at lr 3e-4 (checkpoints/extrap-sort-spare-ft):
98.75% in distribution, 10 numbers 69% (extrap-sort-blind 40%, n=400), 10- and 20-digit numbers 10-12%.
The control arm trained on alike (checkpoints/extrap-sort-control-ft) reaches 55.5% with 10 numbers on
the same lists: at equal steps the spared head carries about 12 points of the count (one seed per arm).
8,000 steps more at lr 3e-4 (checkpoints/extrap-sort-spare-ft2, 72 minutes): 99.5% in distribution, 10 numbers
71.75 / 70.5% on the two sets of 400 lists, where 2,500 more stayed at 64.5-69.25%; length unmoved.

Digits that meet only nearby digits (`--set model.rotary=abacus_closers --set model.digit_window=2`
on extrap-sort-spare-ft, 2,500 + 4,000 steps at lr 3e-4: checkpoints/extrap-sort-window-ft), the first
lever that moved length: 10- and 20-digit numbers 50.75% and 39% (every run above 7-13%), 10 numbers
48.25%, in distribution 97.75% (n=400). The closer turned alone: 14% and 10%; the window alone (2,500
steps): 37.75% and 38.75%, 10 numbers 31.75%, as both together at that step (41%, 40%, 31%). The same levers trained
from nothing are the preset extrap-sort-window (below): 83.5% and 66.75% at 10 and 20 digits, 11% with
10 numbers. Trained 2,000 steps more with the scalable softmax (checkpoints/extrap-sort-window-scaled):
99.5% in distribution, 88% and 83.75% at 10 and 20 digits (75.5% at 20 without the scale), 10 numbers 27.75%.
2,500 steps more again (checkpoints/extrap-sort-window-scaled2): 10 numbers 38.25%, 20 digits 84.75%;
2,500 more after that leave the count level (37.75%); a second symbol head, an attention sink or symbol
heads that read only the answer (`model.answer_symbol_heads_read_only_answer`) do not lift it (35%, 31.25%,
0.5% from a broken start). Trained from nothing with that last option
(`--set model.answer_symbol_heads_read_only_answer=true`, checkpoints/extrap-sort-window-answer, 36 minutes
on a machine about 1.6x as fast): 20-digit numbers 84.75% (a second seed 70.75%; without the option 66.75%
and, at seed 4, 78%: no 20-digit gain past the seeds' spread;
10-digit numbers +4.5 / +5.25 points on both seeds), 10 numbers 5.5% (2.5%; without it 10-12.5%):
docs/runs/sorting.md.
"""

from __future__ import annotations

from dataclasses import replace

from ..config import RunConfig, TrainConfig
from .recipe import recipe


def extrap_sort() -> RunConfig:
    """Sorting labelled numbers (`a:05898,b:1,c:372012=` -> `bac`), trained on 2 to 5 numbers
    of 1 to 5 digits, for lists of longer numbers and of more numbers.

    The vocabulary holds all 26 letters and every training list takes a random set of them
    (`label_pool=26`, `random_labels`), so a list of 10 numbers uses no label the model has
    not read and copied. Positions are rotary on the Abacus index with no position table:
    the digits of equal significance in every number meet at index offset 0 whatever the
    number's length, which is where two numbers are compared. Labels, separators and the
    answer sit at index 0, so a digit's distance from them is its index: a random offset per
    list (0..30) trains the distances that 20-digit numbers put there.

    Measured on the shipped run (checkpoints/extrap-sort, 14,000 steps, 56 minutes in two
    processes on the 2-core CPU, 400k parameters), the report's comparisons section (held-out
    lists, n=100 per row, 4 loops): 97% in distribution; 13% with 2-5 numbers of 20 digits; 2%
    with 10 numbers of 1-5 digits; 0% with 10 numbers of 20 digits; 2% and 0% on lists of 5
    numbers of 5 and 20 digits that are equal but the units. On the 20-digit lists each label is
    right 63-78% of the time given the ones before it, and the stop after the last label 19%.
    The stop is read by a head that shares its softmax with the digits: at the stop query of
    lists of 5 numbers (n=64) L1H3 in loop 3 puts 47% of its attention on the labels with 5-digit
    numbers and 22% with 20-digit ones. It compares leading digits, not every digit: on planted
    pairs of 5-digit numbers equal above the deciding digit it is right 100% when the leading
    digits differ, 78% one place lower and 50-55% (chance) when only the last two differ. The levers tried
    against it are in the module docstring.
    """
    return recipe(
        "extrap-sort",
        "sorting",
        {"max_numbers": 5, "max_digits": 5, "label_pool": 26, "random_labels": True},
        # max_seq_len bounds evaluation only (no position table): 10 numbers of 20 digits
        dict(d_model=128, n_heads=4, n_layers=2, n_loops=4, max_seq_len=320, abacus_max_offset=30,
             abacus_offset_mode="example", positional="none", rotary="abacus"),
        TrainConfig(
            steps=14000, batch_size=64, lr=2e-3, weight_decay=0.01, warmup_steps=200, grad_clip=1.0, processes=2,
            progressive="none", eval_every=1000, eval_problems=256,
            checkpoint_every=2000, dense_checkpoints=4, dense_until=1000,
        ),
    )


def extrap_sort_window() -> RunConfig:
    """extrap-sort whose digits meet only the digits near them, trained from nothing, in about an
    hour on the 2-core CPU: the best length from nothing here, with this preset plus
    `answer_symbol_heads_read_only_answer` (checkpoints/extrap-sort-window-answer; two seeds of
    each do not separate them at 20 digits); checkpoints/extrap-sort-window-scaled and -scaled2,
    trained on from it, go further.

    On top of extrap-sort, the levers of the lineage that learned to count (the module
    docstring): the answer blind to the labels written (`answer_hides_earlier_answer`) but for
    one symbol head that reads labels, separators and the answer (`symbol_heads=1`,
    `answer_blind_spares_symbol_heads`), and one number head that reads its own list item
    (`number_heads=1`); five heads of 32 dimensions. And the two added for length (on
    extrap-sort-spare-ft the window alone moved it as far): each number's closer, the separator
    or "=" after its last digit, is turned as the digit past the last one
    (`rotary="abacus_closers"`), so it meets its number's leading digit at distance 1 at any
    length; and a digit or closer reads only the digits within +-2 of its Abacus index
    (`digit_window=2`), so the distances between two digits are those training showed, whatever
    the numbers' length. Half extrap-sort's steps (7,000, over which its cosine runs its course); the
    seed is the shipped run's.

    Measured on the shipped run (checkpoints/extrap-sort-window: trained as `train --preset
    extrap-sort` with these settings as `--set` flags and `train.checkpoint_every=500`, 7,000
    steps, 67 minutes in two processes beside light work), `abacus-interp eval RUN --lengths 5,10,20
    --counts 10 --n 400 --seed 1` and `--counts 5,6,7,8,9,10 --n 400`, held-out lists, 4 loops: in
    distribution 98.5% (98.75% on the seed-0 lists); 5-, 10- and 20-digit numbers 86.5 / 83.5 /
    66.75% (extrap-sort 13% at 20 digits); 5 to 10 numbers of 1-5 digits 97.5 / 88.5 / 72.5 / 53.25
    / 24.75 / 11%; 10 numbers of 20 digits 0%; lists equal but the units 0-0.25%. It does not count:
    with 10 numbers a step is wrong 21% of the time even where the two smallest numbers left differ
    in length, against 1 in 941 with 5. docs/runs/sorting.md has the tables.
    """
    run = extrap_sort()
    model = replace(run.model, n_heads=5, d_head=32, symbol_heads=1, number_heads=1,
                    answer_hides_earlier_answer=True, answer_blind_spares_symbol_heads=True,
                    rotary="abacus_closers", digit_window=2)
    train = replace(run.train, steps=7000, seed=3, checkpoint_every=1000)
    return replace(run, model=model, train=train, preset="extrap-sort-window")


def extrap_sort_pairwise() -> RunConfig:
    """extrap-sort-window with the list's items kept apart, answering by a pairwise comparison of
    its items, whose leading digits read only one another, trained from nothing.

    The answer (`item_comparator=128`, `item_comparator_alone`, core/comparator.py): an MLP reads
    two items' summaries (each number's most significant digit's final state) and gives the
    log-odds that the first is smaller; each label left is scored by the sum of its comparisons
    with the other items left, and a label written is masked. With the items kept apart
    (`list_items_read_alone`) a pair is compared alike in a list of two and of ten, so the count
    changes how many comparisons are summed, not what any of them sees. Each number's 5 leading
    digits and its closer read no digit below them (`leading_digits=5`), so an item's summary
    is the same function of its leading digits at 20 digits as at 5; at the trained 5 digits it
    hides nothing. extrap-sort-window's schedule and seed otherwise.

    Measured on the shipped run (checkpoints/extrap-sort-pairwise: `train --preset extrap-sort-pairwise`,
    7,000 steps, 47 minutes in two processes on the 2-core CPU), `abacus-interp eval RUN --lengths
    5,10,20,50 --counts 10 --n 400 --seed 1`, held-out lists, 4 loops: 100% in distribution; 99.75%
    with 20-digit numbers and 99.5% with 50-digit; 98.75% with 10 numbers; 98.25% with 10 numbers of
    20 digits; 1-2.5% on lists equal but the units (a units digit decides them). Every bar of the
    sorting issue is met. checkpoints/extrap-sort-apart-pairwise, the same answer as a warm start on
    extrap-sort-apart, reads two leading digits where this reads three (10 numbers of 20 digits
    77.5%): docs/runs/sorting.md.
    """
    run = extrap_sort_window()
    model = replace(run.model, list_items_read_alone=True, item_comparator=128, item_comparator_alone=True,
                    leading_digits=5)
    return replace(run, model=model, preset="extrap-sort-pairwise")

"""Integer expressions over + - * with parentheses and signed numbers.

Model order writes every number LSD-first but keeps the expression's structure: the human
`(12+3)*(-4)` becomes the prompt `(21+3)*(-4)=`, and the answer -60 becomes the target `-06`
(sign first, then LSD-first digits). A '-' token is unary exactly when it starts the problem
or follows '(' or '*' (the trees grammar writes negative literals as `(-12)`, so only '(').

Two generators (`grammar=`). "trees" (the default) draws random trees and writes them with
the fewest parentheses they need, so a model must learn operator precedence. "reference" is
the probabilistic grammar of the ReTran reference (`expression_grammar`): its human text,
e.g. "3*-4+(-5-2)", is kept character for character (a unary '-' follows '*', '(' or starts
the problem), only each number's digits reversed: the prompt `3*-4+(-5-2)=`. Its problems
are split by a hash of their text into train and test (`has_sampled_split`).

Values come from a small recursive-descent parser over exact integers; nothing is ever
passed to `eval`.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, ClassVar

# the module itself, not `from abacus_interp.tasks import ...`: the package's __init__ imports this file
import abacus_interp.tasks.expression_grammar as grammar_mod
from abacus_interp.core.tokens import Vocab
from abacus_interp.errors import UserError
from abacus_interp.tasks.base import (
    DIGIT_SYMBOLS,
    Example,
    Task,
    check_count,
    check_digit_range,
    decimal_text,
    decimal_value,
    random_with_digits,
    to_lsd,
)
from abacus_interp.tasks.expression_grammar import reverse_numbers

PRECEDENCE = {"+": 1, "-": 1, "*": 2}
LEAF_PROBABILITY = 0.35  # chance a non-root node below max_depth is a number
NEGATIVE_PROBABILITY = 0.2  # chance a number is negative
MAX_ATTEMPTS = 10_000  # resampling guard; the length check in __init__ makes hits certain
GRAMMAR_OPTIONS = {  # each grammar's options and their defaults
    "trees": {"max_depth": 3, "max_digits": 3, "max_prompt_len": 40},
    "reference": {
        "min_len": grammar_mod.REFERENCE_MIN_LEN,
        "max_len": grammar_mod.REFERENCE_MAX_LEN,
        "max_answer_len": grammar_mod.REFERENCE_MAX_ANSWER_LEN,
    },
}


@dataclass(frozen=True)
class Num:
    value: int  # non-negative; a negative literal is Neg(Num)


@dataclass(frozen=True)
class Neg:
    operand: Node


@dataclass(frozen=True)
class BinOp:
    op: str
    left: Node
    right: Node


Node = Num | Neg | BinOp


def evaluate(node: Node) -> int:
    """Exact integer value of an expression tree."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Neg):
        return -evaluate(node.operand)
    a, b = evaluate(node.left), evaluate(node.right)
    return a + b if node.op == "+" else a - b if node.op == "-" else a * b


def render(node: Node, lsd: bool) -> str:
    """Expression text with minimal parentheses; numbers LSD-first when `lsd` is True."""
    if isinstance(node, Num):
        return to_lsd(node.value) if lsd else decimal_text(node.value)
    if isinstance(node, Neg):
        inner = render(node.operand, lsd)
        # A number or a negation already reads as one unit; anything else needs brackets.
        atomic = isinstance(node.operand, (Num, Neg))
        return f"(-{inner})" if atomic else f"(-({inner}))"
    left, right = render(node.left, lsd), render(node.right, lsd)
    prec = PRECEDENCE[node.op]
    if isinstance(node.left, BinOp) and PRECEDENCE[node.left.op] < prec:
        left = f"({left})"
    # a-(b+c) and a-(b-c) need parentheses even though the precedences are equal.
    if isinstance(node.right, BinOp) and (
        PRECEDENCE[node.right.op] < prec or (PRECEDENCE[node.right.op] == prec and node.op == "-")
    ):
        right = f"({right})"
    return f"{left}{node.op}{right}"


def literals(node: Node) -> list[int]:
    """Signed number literals left to right (Neg(Num(12)) counts as -12)."""
    if isinstance(node, Num):
        return [node.value]
    if isinstance(node, Neg):
        if isinstance(node.operand, Num):
            return [-node.operand.value]
        return literals(node.operand)
    return literals(node.left) + literals(node.right)


class _Parser:
    """Recursive descent over a human expression:

    expr   := term (('+' | '-') term)*
    term   := factor ('*' factor)*
    factor := '-' factor | '+' factor | NUMBER | '(' expr ')'
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = re.findall(r"[0-9]+|\S", text)
        self.pos = 0

    def fail(self, why: str) -> UserError:
        return UserError(
            f"could not read {self.text!r} as an expression ({why}): expected integers in "
            "normal order with + - * and parentheses, e.g. '(12+3)*-4'"
        )

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise self.fail("it ends too early")
        self.pos += 1
        return tok

    def parse(self) -> Node:
        if not self.tokens:
            raise self.fail("it is empty")
        node = self.expr()
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()!r}")
        return node

    def expr(self) -> Node:
        node = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            node = BinOp(op, node, self.term())
        return node

    def term(self) -> Node:
        node = self.factor()
        while self.peek() == "*":
            self.take()
            node = BinOp("*", node, self.factor())
        return node

    def factor(self) -> Node:
        tok = self.take()
        if tok == "-":
            return Neg(self.factor())
        if tok == "+":
            return self.factor()
        if tok == "(":
            node = self.expr()
            if self.take() != ")":
                raise self.fail("a '(' is not closed")
            return node
        if tok.isdigit() and tok.isascii():
            return Num(decimal_value(tok))
        raise self.fail(f"unexpected {tok!r}")


def parse_expression(text: str) -> Node:
    """Human expression text -> tree; UserError saying the expected format."""
    return _Parser(text).parse()


class ExpressionTask(Task):
    """Integer expressions over + - * and parentheses, from one of two generators.

    grammar="trees" (the default, and what configs without a `grammar` key mean): random
    trees up to `max_depth` operators deep, numbers of up to `max_digits` digits, prompts
    (including '=') of at most `max_prompt_len` tokens.

    grammar="reference": the ReTran reference's probabilistic grammar, problems of
    `min_len`..`max_len` characters of human text whose answer text (sign included) has at
    most `max_answer_len` characters (the reference's 8, 30, 5 by default).
    """

    name: ClassVar[str] = "expressions"
    positional: ClassVar[str] = "abacus"

    def __init__(
        self,
        max_depth: int | None = None,
        max_digits: int | None = None,
        max_prompt_len: int | None = None,
        grammar: str = "trees",
        min_len: int | None = None,
        max_len: int | None = None,
        max_answer_len: int | None = None,
    ) -> None:
        if grammar not in GRAMMAR_OPTIONS:
            raise UserError(f"grammar must be 'trees' or 'reference', got {grammar!r}")
        self.grammar = grammar
        given = dict(max_depth=max_depth, max_digits=max_digits, max_prompt_len=max_prompt_len)
        given.update(min_len=min_len, max_len=max_len, max_answer_len=max_answer_len)
        _check_options(grammar, given)
        defaults = GRAMMAR_OPTIONS[grammar]
        self._options = {k: d if given[k] is None else given[k] for k, d in defaults.items()}
        if grammar == "trees":
            self.max_depth, self.max_digits, self.max_prompt_len = self._options.values()
            self._validate(self.max_depth, self.max_digits, self.max_prompt_len)
        else:
            self.min_len, self.max_len, self.max_answer_len = self._options.values()
            grammar_mod.check_lengths(self.min_len, self.max_len, self.max_answer_len)
        self.vocab = Vocab(symbols=tuple(DIGIT_SYMBOLS + "+-*()="), separator="")

    @property
    def has_sampled_split(self) -> bool:
        return self.grammar == "reference"

    @property
    def length_range(self) -> tuple[int, int] | None:
        return (self.min_len, self.max_len) if self.grammar == "reference" else None

    @staticmethod
    def _validate(max_depth: int, max_digits: int, max_prompt_len: int) -> None:
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
            raise UserError(f"max_depth must be an integer >= 0, got {max_depth!r}")
        check_digit_range(1, max_digits)
        # Some common shape must fit, or resampling would rarely (or never) succeed: at depth
        # 0 every literal "(-ddd)="; otherwise at least one operator "ddd+ddd=".
        need = max_digits + 4 if max_depth == 0 else 2 * max_digits + 2
        if isinstance(max_prompt_len, bool) or not isinstance(max_prompt_len, int):
            raise UserError(f"max_prompt_len must be an integer, got {max_prompt_len!r}")
        if max_prompt_len < need:
            raise UserError(
                f"max_prompt_len={max_prompt_len} is too short for numbers of {max_digits} "
                f"digits at depth {max_depth}; pass max_prompt_len >= {need}"
            )

    def _tree(self, rng: random.Random, depth_left: int, max_digits: int, root: bool) -> Node:
        # The root is always an operator (when depth allows) so no prompt is a bare number.
        if depth_left == 0 or (not root and rng.random() < LEAF_PROBABILITY):
            num = Num(random_with_digits(rng, rng.randint(1, max_digits)))
            return Neg(num) if rng.random() < NEGATIVE_PROBABILITY else num
        op = rng.choice("+-*")
        left = self._tree(rng, depth_left - 1, max_digits, False)
        right = self._tree(rng, depth_left - 1, max_digits, False)
        return BinOp(op, left, right)

    def _example(self, tree: Node, prompt: str | None = None) -> Example:
        """The example of `tree`; its prompt re-rendered from the tree unless given."""
        value = evaluate(tree)
        target = ("-" if value < 0 else "") + to_lsd(abs(value))
        if prompt is None:
            prompt = render(tree, lsd=True) + "="
        return Example(prompt=prompt, target=target, operands=tuple(literals(tree)), answer=value)

    def sample(
        self,
        n: int,
        rng: random.Random,
        max_depth: int | None = None,
        max_digits: int | None = None,
        max_prompt_len: int | None = None,
        min_len: int | None = None,
        max_len: int | None = None,
        split: str | None = "train",
    ) -> list[Example]:
        """`n` random expressions.

        Trees: each resampled until its prompt fits `max_prompt_len` (options default to the
        task's). Reference grammar: problems of `min_len`..`max_len` human characters (the
        task's range by default; `min_len=max_len=L` draws length L only, also beyond the
        trained range) with answers of at most `max_answer_len` characters, from the hashed
        `split` ("train", what training uses; "test", never trained on; None, both). Drawing
        is rejection, so "test" costs ~10x "train"; lengths above the task's `max_len` were
        never trained on in either split, and None draws them fastest.
        """
        check_count(n)
        sizes = dict(max_depth=max_depth, max_digits=max_digits, max_prompt_len=max_prompt_len)
        _check_options(self.grammar, dict(sizes, min_len=min_len, max_len=max_len))
        if self.grammar == "reference":
            return self._sample_reference(n, rng, min_len, max_len, split)
        if split not in ("train", None):
            raise UserError(
                f"the 'trees' grammar has no held-out split (got split={split!r}); "
                "use grammar='reference' for a hashed train/test split"
            )
        depth = self.max_depth if max_depth is None else max_depth
        digits = self.max_digits if max_digits is None else max_digits
        limit = self.max_prompt_len if max_prompt_len is None else max_prompt_len
        self._validate(depth, digits, limit)
        out = []
        for _ in range(n):
            for _attempt in range(MAX_ATTEMPTS):
                example = self._example(self._tree(rng, depth, digits, root=True))
                if len(example.prompt) <= limit:
                    break
            else:
                raise UserError(
                    f"no expression fit max_prompt_len={limit} in {MAX_ATTEMPTS} tries; "
                    "raise max_prompt_len or lower max_depth / max_digits"
                )
            out.append(example)
        return out

    def _sample_reference(
        self,
        n: int,
        rng: random.Random,
        min_len: int | None,
        max_len: int | None,
        split: str | None,
    ) -> list[Example]:
        lo = self.min_len if min_len is None else min_len
        hi = self.max_len if max_len is None else max_len
        grammar_mod.check_lengths(lo, hi)

        def build(text: str) -> Example | None:  # the text as written, digits reversed
            example = self._example(parse_expression(text), prompt=reverse_numbers(text) + "=")
            return example if len(str(example.answer)) <= self.max_answer_len else None

        return [grammar_mod.draw_problem(rng, lo, hi, split, build) for _ in range(n)]

    def make(self, *operands: Any) -> Example:
        """`make("(12+3)*-4")`: the operand of an expression task is the human expression."""
        if len(operands) != 1 or not isinstance(operands[0], str):
            raise ValueError("expressions take one operand, the human expression string")
        return self.from_human(operands[0])

    def from_human(self, text: str) -> Example:
        """Trees: the prompt is re-rendered ("(12+3)*-4" -> "(21+3)*(-4)="). Reference
        grammar: kept as written, whitespace dropped ("(12+3)*-4" -> "(21+3)*-4=")."""
        text = text.strip().removesuffix("=")
        tree = parse_expression(text)  # before dropping spaces, so "1 2+3" is refused
        if self.grammar == "reference":
            return self._example(tree, prompt=reverse_numbers("".join(text.split())) + "=")
        return self._example(tree)

    def parse(self, completion: str) -> int | None:
        """Optional '-' then LSD-first digits -> the integer, or None if malformed."""
        m = re.fullmatch(r"(-?)([0-9]+)", completion.strip())
        if m is None:
            return None
        value = decimal_value(m.group(2)[::-1])
        return -value if m.group(1) else value

    def to_human(self, completion: str) -> str:
        text = completion.strip()
        return "-" + text[1:][::-1] if text.startswith("-") else text[::-1]

    def max_sequence_length(
        self,
        max_depth: int | None = None,
        max_digits: int | None = None,
        max_prompt_len: int | None = None,
        max_len: int | None = None,
    ) -> int:
        """Prompt bound + sign + answer digits + EOS.

        Reference grammar: max_len characters + '=' + max_answer_len + EOS (the answer's
        text and the target have the same length). Trees: |value| < 10^T where T is the
        total number of digits in the literals (induction: |x op y| <= (X+1)(Y+1) - 1 when
        |x| <= X, |y| <= Y). T is at most both the prompt's digit tokens (max_prompt_len - 1)
        and 2^depth leaves * max_digits.
        """
        sizes = dict(max_depth=max_depth, max_digits=max_digits, max_prompt_len=max_prompt_len)
        _check_options(self.grammar, dict(sizes, max_len=max_len))
        if self.grammar == "reference":
            hi = self.max_len if max_len is None else max_len
            grammar_mod.check_lengths(1, hi)
            return hi + 1 + self.max_answer_len + 1
        depth = self.max_depth if max_depth is None else max_depth
        digits = self.max_digits if max_digits is None else max_digits
        limit = self.max_prompt_len if max_prompt_len is None else max_prompt_len
        self._validate(depth, digits, limit)
        answer_digits = min(limit - 1, 2**depth * digits)
        return limit + 1 + answer_digits + 1

    def config(self) -> dict[str, Any]:
        """Trees: the options as before `grammar` existed (so old configs, without it, match)."""
        head = {} if self.grammar == "trees" else {"grammar": self.grammar}
        return {**head, **self._options}


def _check_options(grammar: str, options: dict[str, Any]) -> None:
    """Setting an option of the other grammar is a mistake worth naming."""
    own = GRAMMAR_OPTIONS[grammar]
    stray = sorted(k for k, v in options.items() if v is not None and k not in own)
    if stray:
        raise UserError(
            f"{', '.join(stray)}: not an option of grammar={grammar!r}, which takes "
            f"{', '.join(own)}; drop it or pick the other grammar"
        )

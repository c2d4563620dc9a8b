"""Recursive-descent parser: tokens -> a well-typed tree of whitelisted nodes.

Precedence, loosest first (as in Python): or, and, not, comparisons (chainable), + -, * /,
unary minus, then numbers, parentheses and calls. Every nesting step (parenthesis, call, unary
operator) counts towards MAX_DEPTH, so deeply nested text fails fast instead of exhausting the
stack. Errors name the column of the token at fault.
"""

from __future__ import annotations

import difflib

from harness.thresholds.errors import ThresholdSyntaxError
from harness.thresholds.lexer import Token, tokenize
from harness.thresholds.tree import (
    COMPARE_OPS,
    FUNCTIONS,
    RESERVED,
    BinOp,
    BoolOp,
    Call,
    Compare,
    Expr,
    Neg,
    Not,
    Num,
    constant_value,
    params_of,
    type_of,
)

MAX_DEPTH = 32
_KINDS = {"num": "a number", "bool": "a condition"}


def _suggest(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _check_constant(func: str, param: str, node: Expr, column: int) -> None:
    """Reject a constant argument that could never be valid, so a thresholds file fails at load."""
    value = constant_value(node)
    if value is None:
        return
    if param in ("start", "end") and not value.is_integer():
        raise ThresholdSyntaxError(f"{func}(): {param} must be a whole step number, got {value:g}", column=column)
    if param in ("trim", "trim_low") and not 0 <= value < 1:
        raise ThresholdSyntaxError(f"{func}(): {param} must be a fraction in [0, 1), got {value:g}", column=column)
    if param == "q" and not 0 <= value <= 100:
        raise ThresholdSyntaxError(f"{func}(): q must be a percentile in [0, 100], got {value:g}", column=column)


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    @property
    def token(self) -> Token:
        return self.tokens[self.pos]

    def _advance(self) -> Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def _at(self, kind: str, text: str | None = None) -> bool:
        token = self.token
        return token.kind == kind and (text is None or token.text == text)

    def _expect_op(self, text: str, context: str) -> Token:
        if not self._at("op", text):
            raise self._unexpected(f"expected '{text}' {context}")
        return self._advance()

    def _unexpected(self, expected: str) -> ThresholdSyntaxError:
        token = self.token
        got = "end of expression" if token.kind == "end" else repr(token.text)
        return ThresholdSyntaxError(f"{expected}, got {got}", column=token.column)

    def _enter(self, token: Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ThresholdSyntaxError(f"expression nests deeper than {MAX_DEPTH} levels", column=token.column)

    def _typed(self, node: Expr, want: str, token: Token, role: str) -> Expr:
        if type_of(node) != want:
            raise ThresholdSyntaxError(f"{role} must be {_KINDS[want]}, not {_KINDS[type_of(node)]}",
                                       column=token.column)
        return node

    def parse(self) -> Expr:
        start = self.token
        if start.kind == "end":
            raise ThresholdSyntaxError("empty expression")
        node = self._or()
        if not self._at("end"):
            raise self._unexpected("expected an operator or the end")
        return self._typed(node, "bool", start, "a check")

    def _or(self) -> Expr:
        return self._bool_chain("or", self._and)

    def _and(self) -> Expr:
        return self._bool_chain("and", self._not)

    def _bool_chain(self, op: str, operand) -> Expr:
        first = self.token
        node = operand()
        while self._at("name", op):
            self._advance()
            self._typed(node, "bool", first, f"the left side of '{op}'")
            right_token = self.token
            right = self._typed(operand(), "bool", right_token, f"the right side of '{op}'")
            node = BoolOp(op, node, right)
        return node

    def _not(self) -> Expr:
        if self._at("name", "not"):
            token = self._advance()
            self._enter(token)
            operand_token = self.token
            node = Not(self._typed(self._not(), "bool", operand_token, "the operand of 'not'"))
            self.depth -= 1
            return node
        return self._compare()

    def _compare(self) -> Expr:
        first = self.token
        left = self._sum()
        ops: list[str] = []
        rights: list[Expr] = []
        while self.token.kind == "op" and self.token.text in COMPARE_OPS:
            op = self._advance()
            if not ops:
                self._typed(left, "num", first, f"the left side of '{op.text}'")
            right_token = self.token
            rights.append(self._typed(self._sum(), "num", right_token, f"the right side of '{op.text}'"))
            ops.append(op.text)
        return Compare(left, tuple(ops), tuple(rights)) if ops else left

    def _arith_chain(self, ops: tuple[str, ...], operand) -> Expr:
        first = self.token
        node = operand()
        while self.token.kind == "op" and self.token.text in ops:
            op = self._advance()
            self._typed(node, "num", first, f"the left side of '{op.text}'")
            right_token = self.token
            node = BinOp(op.text, node, self._typed(operand(), "num", right_token, f"the right side of '{op.text}'"))
        return node

    def _sum(self) -> Expr:
        return self._arith_chain(("+", "-"), self._term)

    def _term(self) -> Expr:
        return self._arith_chain(("*", "/"), self._unary)

    def _unary(self) -> Expr:
        if self._at("op", "-"):
            token = self._advance()
            self._enter(token)
            operand_token = self.token
            node = Neg(self._typed(self._unary(), "num", operand_token, "the operand of '-'"))
            self.depth -= 1
            return node
        return self._atom()

    def _atom(self) -> Expr:
        token = self.token
        if token.kind == "num":
            self._advance()
            return Num(token.value)  # type: ignore[arg-type]
        if self._at("op", "("):
            self._advance()
            self._enter(token)
            node = self._or()
            self._expect_op(")", f"to close the '(' at column {token.column}")
            self.depth -= 1
            return node
        if token.kind == "name" and token.text not in RESERVED and self.tokens[self.pos + 1].text == "(":
            return self._call()
        if token.kind in ("name", "str") and token.text not in RESERVED:
            raise ThresholdSyntaxError(
                f"metric {token.value!r} needs a function, e.g. last({token.text}) or mean({token.text})",
                column=token.column,
            )
        raise self._unexpected("expected a number, '(' or a function call")

    def _call(self) -> Call:
        name_token = self._advance()
        func = name_token.text
        if func not in FUNCTIONS:
            known = sorted(FUNCTIONS)
            raise ThresholdSyntaxError(
                f"unknown function {func!r}{_suggest(func, known)} (known: {', '.join(known)})",
                column=name_token.column,
            )
        self._enter(name_token)
        self._advance()  # '('
        metric = self._metric(func)
        args, kwargs = self._arguments(func)
        if not self._at("op", ")"):
            raise self._unexpected(f"expected ',' or ')' in {func}(...)")
        self._advance()
        self.depth -= 1
        return Call(func, metric, args, kwargs)

    def _metric(self, func: str) -> str:
        token = self.token
        is_name = token.kind == "name" and token.text not in RESERVED and token.text not in FUNCTIONS
        if not (is_name or token.kind == "str"):
            raise self._unexpected(f"{func}() takes a metric name first (quote unusual names: \"pass@1\")")
        self._advance()
        return str(token.value)

    def _arguments(self, func: str) -> tuple[tuple[Expr, ...], tuple[tuple[str, Expr], ...]]:
        params = params_of(func)
        args: list[Expr] = []
        kwargs: list[tuple[str, Expr]] = []
        while self._at("op", ","):
            self._advance()
            token = self.token
            if token.kind == "name" and self.tokens[self.pos + 1].text == "=":
                if token.text not in params:
                    raise ThresholdSyntaxError(
                        f"{func}() has no parameter {token.text!r} (parameters: {', '.join(params)})",
                        column=token.column,
                    )
                if token.text in params[: len(args)] or any(token.text == name for name, _ in kwargs):
                    raise ThresholdSyntaxError(f"{func}(): {token.text} given twice", column=token.column)
                self.pos += 2
                value_token = self.token
                value = self._typed(self._sum(), "num", value_token, f"{func}(): {token.text}")
                _check_constant(func, token.text, value, value_token.column)
                kwargs.append((token.text, value))
                continue
            if kwargs:
                raise ThresholdSyntaxError(f"{func}(): a positional argument follows a keyword argument",
                                           column=token.column)
            if len(args) >= len(params):
                raise ThresholdSyntaxError(f"{func}() takes at most {len(params)} arguments after the metric",
                                           column=token.column)
            value = self._typed(self._sum(), "num", token, f"{func}(): {params[len(args)]}")
            _check_constant(func, params[len(args)], value, token.column)
            args.append(value)
        given = set(params[: len(args)]) | {name for name, _ in kwargs}
        missing = [name for name in FUNCTIONS[func].extra if name not in given]
        if missing:
            raise self._unexpected(f"{func}() needs {', '.join(missing)} after the metric")
        return tuple(args), tuple(kwargs)


def parse(text: str) -> Expr:
    """Parse a threshold expression into a whitelisted, well-typed tree.

    Raises:
        ThresholdSyntaxError: one line naming the column at fault.
    """
    return _Parser(tokenize(text)).parse()

"""Edge conditions: a tiny, safe expression language (never `eval`).

    condition  := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := operand [ ("==" | "!=" | ">" | "<" | ">=" | "<=" | "contains") operand | "exists" ]
    operand    := {{path}} | "string" | 'string' | number | true | false | null | "(" condition ")"

References resolve like templates (`{{node.field}}`, `{{topic}}`, `{{items.0}}`). At
evaluation a missing reference is null: `exists` is false, `==` compares with null, and
ordered comparisons are false. Ordered comparisons treat numeric strings as numbers; `==`
does so when the other side is a number; booleans equal only booleans. `contains` tests a
substring, a list member or a dict key. A bare operand is tested for truthiness.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from domain.errors import MissingReference
from domain.templates import resolve, split_path

COMPARATORS = ("==", "!=", ">=", "<=", ">", "<", "contains")
KEYWORDS = {"true": True, "false": False, "null": None}
RESERVED = ("and", "or", "not", "contains", "exists")
NUMBER_RE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
TOKEN_RE = re.compile(
    r"""(?P<space>\s+)
    |(?P<ref>\{\{[^{}]*\}\})
    |(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    |(?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
    |(?P<op>==|!=|>=|<=|>|<|\(|\))
    |(?P<word>[A-Za-z_]+)""",
    re.VERBOSE,
)


class Ref(msgspec.Struct, frozen=True):
    """A reference to a variable or node output field."""

    path: str


class Literal(msgspec.Struct, frozen=True):
    """A constant: string, number, boolean or null."""

    value: Any


class Compare(msgspec.Struct, frozen=True):
    """A binary comparison (`==`, `!=`, `>`, `<`, `>=`, `<=`, `contains`)."""

    op: str
    left: Condition
    right: Condition


class Exists(msgspec.Struct, frozen=True):
    """True when the operand resolves to a non-null value."""

    operand: Condition


class Not(msgspec.Struct, frozen=True):
    """Negation."""

    operand: Condition


class And(msgspec.Struct, frozen=True):
    """All parts are true."""

    parts: tuple[Condition, ...]


class Or(msgspec.Struct, frozen=True):
    """At least one part is true."""

    parts: tuple[Condition, ...]


Condition = Ref | Literal | Compare | Exists | Not | And | Or


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    tokens, position = [], 0
    while position < len(text):
        match = TOKEN_RE.match(text, position)
        if match is None:
            snippet = text[position : position + 12]
            if text.startswith("{{", position):
                raise ValueError(f"unterminated reference at position {position}: {snippet!r}")
            if text[position] in "\"'":
                raise ValueError(f"unterminated string at position {position}: {snippet!r}")
            raise ValueError(f"unexpected character {text[position]!r} at position {position}")
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.append((kind, match.group(), position))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.index = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def accept(self, value: str) -> bool:
        token = self.peek()
        if token is not None and token[0] in ("op", "word") and token[1] == value:
            self.index += 1
            return True
        return False

    def fail(self, expected: str) -> ValueError:
        token = self.peek()
        if token is None:
            return ValueError(f"expected {expected} but the condition ended")
        return ValueError(f"expected {expected} at position {token[2]}, found {token[1]!r}")

    def parse(self) -> Condition:
        if not self.tokens:
            raise ValueError("empty condition")
        condition = self.disjunction()
        if self.peek() is not None:
            raise self.fail("'and', 'or' or the end of the condition")
        return condition

    def disjunction(self) -> Condition:
        parts = [self.conjunction()]
        while self.accept("or"):
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def conjunction(self) -> Condition:
        parts = [self.negation()]
        while self.accept("and"):
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def negation(self) -> Condition:
        if self.accept("not"):
            return Not(self.negation())
        return self.comparison()

    def comparison(self) -> Condition:
        left = self.operand()
        if self.accept("exists"):
            return Exists(left)
        for op in COMPARATORS:
            if self.accept(op):
                return Compare(op, left, self.operand())
        return left

    def operand(self) -> Condition:
        token = self.peek()
        if token is None:
            raise self.fail("a value")
        kind, text, position = token
        if kind == "op" and text == "(":
            self.index += 1
            inner = self.disjunction()
            if not self.accept(")"):
                raise self.fail("')'")
            return inner
        if kind == "ref":
            path = text[2:-2].strip()
            try:
                split_path(path)
            except ValueError as error:
                raise ValueError(f"{error} at position {position}") from None
            self.index += 1
            return Ref(path)
        if kind == "string":
            self.index += 1
            body = text[1:-1] if text[0] == '"' else text[1:-1].replace("\\'", "'").replace('"', '\\"')
            try:
                return Literal(json.loads(f'"{body}"'))
            except ValueError:
                raise ValueError(f"invalid escape in string at position {position}") from None
        if kind == "number":
            self.index += 1
            return Literal(json.loads(text))
        if kind == "word" and text in KEYWORDS:
            self.index += 1
            return Literal(KEYWORDS[text])
        if kind == "word" and text not in RESERVED:
            raise ValueError(
                f"unexpected word {text!r} at position {position}: write references as {{{{node.field}}}} "
                "and strings in quotes"
            )
        raise self.fail("a value")


def parse_condition(text: str) -> Condition:
    """Parse a condition; ValueError says what is wrong and where."""
    return _Parser(text).parse()


def _value(node: Condition, scope: dict[str, Any]) -> Any:
    if isinstance(node, Ref):
        try:
            return resolve(node.path, scope)
        except MissingReference:
            return None
    if isinstance(node, Literal):
        return node.value
    return evaluate(node, scope)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and NUMBER_RE.match(value.strip()):
        return float(value)
    return None


def _equal(left: Any, right: Any, a: float | None, b: float | None) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if a is not None and b is not None and not (isinstance(left, str) and isinstance(right, str)):
        return a == b
    return bool(left == right)


def _compare(op: str, left: Any, right: Any) -> bool:
    if op == "contains":
        if isinstance(left, str):
            return isinstance(right, str) and right in left
        if isinstance(left, list):
            return right in left
        if isinstance(left, dict):
            return isinstance(right, str) and right in left
        return False
    a, b = _number(left), _number(right)
    if op in ("==", "!="):
        equal = _equal(left, right, a, b)
        return equal if op == "==" else not equal
    if a is not None and b is not None:
        left, right = a, b
    elif not (isinstance(left, str) and isinstance(right, str)):
        return False
    return {">": left > right, "<": left < right, ">=": left >= right, "<=": left <= right}[op]


def evaluate(condition: Condition, scope: dict[str, Any]) -> bool:
    """Whether the condition holds for the given variables and node outputs."""
    if isinstance(condition, Or):
        return any(evaluate(part, scope) for part in condition.parts)
    if isinstance(condition, And):
        return all(evaluate(part, scope) for part in condition.parts)
    if isinstance(condition, Not):
        return not evaluate(condition.operand, scope)
    if isinstance(condition, Exists):
        return _value(condition.operand, scope) is not None
    if isinstance(condition, Compare):
        return _compare(condition.op, _value(condition.left, scope), _value(condition.right, scope))
    return bool(_value(condition, scope))

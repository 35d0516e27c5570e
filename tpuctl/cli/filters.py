"""`--filter=EXPRESSION` over a command's --json rows: the subset of `gcloud topic filters`
(https://cloud.google.com/sdk/gcloud/reference/topic/filters) that scripts use.

- `key:pattern` (HAS): case-insensitive; true when the pattern is a word of the value
  (words split at characters other than letters and digits, so `name:my-tpu` matches
  `projects/p/locations/z/nodes/my-tpu`), a `*` at its end matching any rest of a word
  sequence; `key:*` is true when the key has a value. On a list or a mapping, any
  element (any key or value) counts.
- `key=value`, `key!=value`: equality, case-insensitive for strings, numeric when both
  sides are numbers; `key=(a b)` and `key:(a b)` match any of the values.
- `key<value`, `<=`, `>`, `>=`: numeric when both sides are numbers, else as strings.
- `key~regex`, `key!~regex`: Python regular expression search, case-sensitive.
- `NOT term` or `-term`, `term AND term` (a space between terms means AND), `term OR term`,
  parentheses; as in gcloud, AND and OR in one group need parentheses to say which binds.
- Values may be quoted with '...' or "...". A key that a row does not have is false
  for every operator but `!=` and `!~`.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

from tpuctl.cli.keys import KEY, lookup, missing
from tpuctl.errors import UsageError

Predicate = Callable[[Any], bool]

_TOKEN = re.compile(
    r"\s*(?:(?P<open>\()|(?P<close>\))|(?P<op>!=|!~|<=|>=|[:=~<>])"
    r"|(?P<quoted>'[^']*'|\"[^\"]*\")|(?P<word>[^\s()!=:~<>'\"]+|!))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise UsageError(f"invalid --filter {text!r}: unexpected {text[pos:].strip()[:20]!r}")
        kind = m.lastgroup or ""
        value = m.group(kind)
        out.append((kind, value[1:-1] if kind == "quoted" else value))
        pos = m.end()
    return out


def parse_filter(text: str) -> Predicate:
    """A predicate over one row; UsageError (naming the expression) when malformed."""
    parser = _Parser(text, _tokens(text))
    predicate = parser.group()
    if parser.pos != len(parser.tokens):
        parser.fail(f"unexpected {parser.tokens[parser.pos][1]!r}")
    return predicate


class _Parser:
    def __init__(self, text: str, tokens: list[tuple[str, str]]) -> None:
        self.text, self.tokens, self.pos = text, tokens, 0

    def fail(self, why: str) -> None:
        raise UsageError(f"invalid --filter {self.text!r}: {why}")

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ("end", "")

    def take(self) -> tuple[str, str]:
        token = self.peek()
        self.pos += 1
        return token

    def group(self) -> Predicate:
        terms, joiners = [self.unary()], set()
        while self.peek()[0] not in ("end", "close"):
            kind, value = self.peek()
            if kind == "word" and value in ("AND", "OR"):
                self.take()
                joiners.add(value)
            else:
                joiners.add("AND")  # juxtaposition
            terms.append(self.unary())
        if len(joiners) > 1:
            self.fail("AND and OR together need parentheses, e.g. (a OR b) AND c")
        if not terms[1:]:
            return terms[0]
        if joiners == {"OR"}:
            return lambda row: any(t(row) for t in terms)
        return lambda row: all(t(row) for t in terms)

    def unary(self) -> Predicate:
        kind, value = self.peek()
        if kind == "word" and value == "NOT":
            self.take()
            inner = self.unary()
            return lambda row: not inner(row)
        if kind == "word" and value.startswith("-") and len(value) > 1:
            self.tokens[self.pos] = ("word", value[1:])
            inner = self.unary()
            return lambda row: not inner(row)
        if kind == "open":
            self.take()
            inner = self.group()
            if self.take()[0] != "close":
                self.fail("a '(' is not closed")
            return inner
        if kind != "word" or value in ("AND", "OR"):
            self.fail(f"expected a term (key OP value) at {value or 'the end'!r}")
        return self.term()

    def term(self) -> Predicate:
        key = self.take()[1]
        if not KEY.fullmatch(key):
            self.fail(f"{key!r} is not a resource key")
        kind, op = self.take()
        if kind != "op":
            self.fail(f"{key!r} needs an operator (: = != < <= > >= ~ !~) and a value")
        values = self.values()
        if op in ("~", "!~"):
            try:
                patterns = [re.compile(v) for v in values]
            except re.error as e:
                self.fail(f"bad regular expression ({e})")
            found = lambda row: _regex(lookup(row, key), patterns)  # noqa: E731
            return found if op == "~" else (lambda row: not found(row))
        if op == "!=":
            return lambda row: not any(_equal(lookup(row, key), v) for v in values)
        test = _TESTS[op]
        return lambda row: any(test(lookup(row, key), v) for v in values)

    def values(self) -> list[str]:
        kind, value = self.take()
        if kind in ("word", "quoted"):
            return [value]
        if kind == "open":
            out = []
            while self.peek()[0] in ("word", "quoted"):
                word = self.take()[1]
                if word != "OR":
                    out.append(word)
            if self.take()[0] != "close" or not out:
                self.fail("a list of values is (v1 v2 ...)")
            return out
        self.fail("an operator needs a value after it")
        return []


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    try:
        return float(str(v))
    except ValueError:
        return None


def _scalars(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [s for v in value for s in _scalars(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_scalars(v))]
    return [value]


def _has(value: Any, pattern: str) -> bool:
    if missing(value):
        return False
    if pattern == "*":
        return value not in ("", [], {})
    p = pattern.lower()
    prefix = p.endswith("*")
    words = re.escape(p.rstrip("*"))
    rx = re.compile(rf"(?<![a-z0-9]){words}" + ("" if prefix else r"(?![a-z0-9])"))
    return any(rx.search(str(s).lower()) for s in _scalars(value) if not missing(s))


def _equal(value: Any, wanted: str) -> bool:
    if missing(value):
        return False
    if isinstance(value, list):
        return any(_equal(v, wanted) for v in value)
    a, b = _number(value), _number(wanted)
    if a is not None and b is not None:
        return a == b
    if isinstance(value, bool):
        return str(value).lower() == wanted.lower()
    return str(value).lower() == wanted.lower()


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _compare(op: str) -> Callable[[Any, str], bool]:
    def test(value: Any, wanted: str) -> bool:
        if missing(value) or isinstance(value, list | dict):
            return False
        a, b = _number(value), _number(wanted)
        if a is not None and b is not None:
            return _OPS[op](a, b)
        return _OPS[op](str(value), wanted)

    return test


def _regex(value: Any, patterns: list[re.Pattern[str]]) -> bool:
    if missing(value):
        return False
    return any(p.search(str(s)) for p in patterns for s in _scalars(value) if not missing(s))


_TESTS: dict[str, Callable[[Any, str], bool]] = {
    ":": _has,
    "=": _equal,
    "<": _compare("<"),
    "<=": _compare("<="),
    ">": _compare(">"),
    ">=": _compare(">="),
}

"""Label and field selectors: parsing their string forms and matching objects.

The grammar is apimachinery's `labels.Parse`: comma-separated requirements, each one of
`key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`,
`key > 3`, `key < 3`. Field selectors accept only `=`, `==` and `!=`. Both parsers are ports of
apimachinery's (labels/selector.go, fields/selector.go), keys and values validated the same way and
errors worded the same, since kube-apiserver hands those texts back in its 400.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import validation
from .models import LabelSelector


class SelectorError(ValueError):
    """A selector string or object that does not parse."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "=", "==", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if op in ("=", "==", "in"):
            return self.key in labels and labels[self.key] in self.values
        if op in ("!=", "notin"):
            return self.key not in labels or labels[self.key] not in self.values
        if op in ("gt", "lt"):
            if self.key not in labels or len(self.values) != 1:
                return False
            have, want = parse_int64(labels[self.key]), parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "gt" else have < want
        return False  # pragma: no cover

    def __str__(self) -> str:
        op = self.operator
        if op == "exists":
            return self.key
        if op == "!":
            return f"!{self.key}"
        if op in ("in", "notin"):
            return f"{self.key} {op} ({','.join(sorted(self.values))})"
        if op == "gt":
            return f"{self.key}>{self.values[0]}"
        if op == "lt":
            return f"{self.key}<{self.values[0]}"
        return f"{self.key}{op}{self.values[0]}"


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()
    selects_nothing: bool = False  # labels.Nothing(): what a nil LabelSelector means

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.selects_nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def is_empty(self) -> bool:
        return not self.requirements and not self.selects_nothing

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


EVERYTHING = Selector()
NOTHING = Selector(selects_nothing=True)

_INT64 = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): an optional sign and digits only (no spaces, no `_`), in range."""
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def _aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message as is, several de-duplicated inside `[...]`."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def new_requirement(key: str, operator: str, values: list[str] | tuple[str, ...]) -> Requirement:
    """labels.NewRequirement: the key, the value count for the operator and every value are validated.

    The field paths in the messages are relative to nothing, as in apimachinery when no path option is
    given: `values[0][app]: Invalid value: "a b": a valid label must be ...`.
    """
    problems = []
    key_errors = validation.label_key_errors(key)
    if key_errors:
        problems.append(str(validation.invalid("key", key, "; ".join(key_errors))))
    vals = list(values)
    shown = validation.GoLiteral("[]string(nil)") if not vals else vals
    if operator in ("in", "notin"):
        if not vals:
            problems.append(str(validation.invalid("values", shown, "for 'in', 'notin' operators, values set can't be empty")))
    elif operator in ("=", "==", "!="):
        if len(vals) != 1:
            problems.append(str(validation.invalid("values", shown, "exact-match compatibility requires one single value")))
    elif operator in ("exists", "!"):
        if vals:
            problems.append(str(validation.invalid("values", shown, "values set must be empty for exists and does not exist")))
    elif operator in ("gt", "lt"):
        if len(vals) != 1:
            problems.append(str(validation.invalid("values", shown, "for 'Gt', 'Lt' operators, exactly one value is required")))
        for i, v in enumerate(vals):
            if parse_int64(v) is None:
                problems.append(str(validation.invalid(f"values[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer")))
    for i, v in enumerate(vals):
        value_errors = validation.label_value_errors(v)
        if value_errors:
            problems.append(str(validation.invalid(f"values[{i}][{key}]", v, "; ".join(value_errors))))
    if problems:
        raise SelectorError(_aggregate(problems))
    return Requirement(key, operator, tuple(vals))


# --- the label selector lexer and parser, ported from apimachinery's labels/selector.go -----------

_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_OPERATOR_TOKENS = {")": "CLOSE", ",": "COMMA", "!": "NOT", "==": "DEQ", "=": "EQ", ">": "GT", "<": "LT",
                    "!=": "NEQ", "(": "OPEN"}
_KEYWORDS = {"in": "IN", "notin": "NOTIN"}
_BINARY_OPERATORS = {"IN": "in", "NOTIN": "notin", "EQ": "=", "DEQ": "==", "NEQ": "!=", "GT": "gt", "LT": "lt"}


def _lex(text: str) -> list[tuple[str, str]]:
    """(token, literal) pairs ending in ("EOS", ""). Identifiers run until whitespace or a special
    character; special characters combine greedily while they still spell an operator (`!=`, `==`)."""
    items, pos, end = [], 0, len(text)
    while True:
        while pos < end and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= end:
            items.append(("EOS", ""))
            return items
        if text[pos] in _SPECIAL:
            literal = text[pos]
            pos += 1
            if pos < end and literal + text[pos] in _OPERATOR_TOKENS:
                literal += text[pos]
                pos += 1
            items.append((_OPERATOR_TOKENS[literal], literal))
        else:
            start = pos
            while pos < end and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
                pos += 1
            literal = text[start:pos]
            items.append((_KEYWORDS.get(literal, "ID"), literal))


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    # `in` and `notin` are identifiers wherever a key or a value may stand: `in in (in)` is legal.
    def lookahead(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.items[self.position]
        return ("ID" if values and tok in ("IN", "NOTIN") else tok), lit

    def consume(self, values: bool = True) -> tuple[str, str]:
        item = self.lookahead(values)
        self.position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements = []
        while True:
            tok, lit = self.lookahead()
            if tok in ("ID", "NOT"):
                try:
                    requirements.append(self.requirement())
                except SelectorError as exc:
                    raise SelectorError(f"unable to parse requirement: {exc}") from None
                tok, lit = self.consume()
                if tok == "EOS":
                    return requirements
                if tok != "COMMA":
                    raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
                tok, lit = self.lookahead()
                if tok not in ("ID", "NOT"):
                    raise SelectorError(f"found '{lit}', expected: identifier after ','")
            elif tok == "EOS":
                return requirements
            else:
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Requirement:
        tok, key = self.consume()
        operator = ""
        if tok == "NOT":
            operator = "!"
            tok, key = self.consume()
        if tok != "ID":
            raise SelectorError(f"found '{key}', expected: identifier")
        key_errors = validation.label_key_errors(key)
        if key_errors:
            # validateLabelKey with a nil field path, which prints as <nil>.
            raise SelectorError(str(validation.invalid("<nil>", key, "; ".join(key_errors))))
        if operator == "!":
            return new_requirement(key, "!", [])
        if self.lookahead()[0] in ("EOS", "COMMA"):
            return new_requirement(key, "exists", [])
        tok, lit = self.consume(values=False)
        if tok not in _BINARY_OPERATORS:
            raise SelectorError(f"found '{lit}', expected: in, notin, =, ==, !=, gt, lt")
        operator = _BINARY_OPERATORS[tok]
        values = self.value_set() if operator in ("in", "notin") else self.exact_value()
        return new_requirement(key, operator, sorted(values))

    def value_set(self) -> set[str]:
        tok, lit = self.consume()
        if tok != "OPEN":
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok == "CLOSE":  # `()` is the set holding the empty value
            self.consume()
            return {""}
        if tok not in ("ID", "COMMA"):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.consume()[0] != "CLOSE":
            raise SelectorError(f"found '{lit}', expected: ')'")
        return values

    def identifiers(self) -> set[str]:
        """A comma list in which an empty place (`(a,,b)`, `(,a)`, `(a,)`) is the empty value."""
        values: set[str] = set()
        while True:
            tok, lit = self.consume()
            if tok == "ID":
                values.add(lit)
                tok, lit = self.lookahead()
                if tok == "CLOSE":
                    return values
                if tok != "COMMA":
                    raise SelectorError(f"found '{lit}', expected: ',' or ')'")
            elif tok == "COMMA":
                if not values:
                    values.add("")
                tok, _ = self.lookahead()
                if tok == "CLOSE":
                    values.add("")
                    return values
                if tok == "COMMA":
                    values.add("")
            else:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> set[str]:
        if self.lookahead()[0] in ("EOS", "COMMA"):
            return {""}  # `a=` selects an empty value
        tok, lit = self.consume()
        if tok != "ID":
            raise SelectorError(f"found '{lit}', expected: identifier")
        return {lit}


def parse_label_selector(text: str | None) -> Selector:
    """labels.Parse: `app=web,tier in (a,b),!canary` into a Selector; an empty string selects everything.

    Requirements come out sorted by key, as labels.Parse sorts them.
    """
    if not text:
        return EVERYTHING
    requirements = _Parser(text).parse()
    return Selector(tuple(sorted(requirements, key=lambda r: r.key)))


def selector_from_map(match_labels: Mapping[str, str] | None) -> Selector:
    """A Service's `spec.selector` (equality only, as the endpoints controller reads it)."""
    return Selector(tuple(Requirement(k, "=", (v,)) for k, v in sorted((match_labels or {}).items())))


def selector_from_label_selector(sel: LabelSelector | None) -> Selector:
    """metav1.LabelSelectorAsSelector: nil selects nothing, an empty selector everything; otherwise
    matchLabels and matchExpressions, each validated as labels.NewRequirement does."""
    if sel is None:
        return NOTHING
    if not sel.match_labels and not sel.match_expressions:
        return EVERYTHING
    reqs = [new_requirement(k, "=", [v]) for k, v in (sel.match_labels or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in sel.match_expressions or []:
        if expr.operator not in ops:
            raise SelectorError(f"{json.dumps(expr.operator or '')} is not a valid label selector operator")
        reqs.append(new_requirement(expr.key or "", ops[expr.operator], expr.values or []))
    return Selector(tuple(sorted(reqs, key=lambda r: r.key)))


# --- field selectors -----------------------------------------------------------------------------

@dataclass(frozen=True)
class FieldRequirement:
    field: str
    operator: str  # "=" or "!="
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        have = fields.get(self.field, "")
        return have == self.value if self.operator == "=" else have != self.value


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(r.matches(fields) for r in self.requirements)

    def is_empty(self) -> bool:
        return not self.requirements

    def fields(self) -> set[str]:
        return {r.field for r in self.requirements}


def parse_field_selector(text: str | None) -> FieldSelector:
    """fields.ParseSelector: `spec.nodeName=n1,status.phase!=Failed`.

    Terms split at unescaped commas; each term splits at the first `!=`, `==` or `=` (the field name
    takes no escapes); the value is unescaped, and a bare `,` or `=` in it, or an unknown escape, is an
    error. Nothing is trimmed: `a = b` names the field `a `.
    """
    if not text:
        return FieldSelector()
    reqs = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = split
        reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", _unescape_value(value)))
    return FieldSelector(tuple(reqs))


def _split_terms(text: str) -> list[str]:
    """Split at commas not preceded by a backslash; the escapes stay in the terms."""
    terms, start, in_slash = [], 0, False
    for i, c in enumerate(text):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def _unescape_value(value: str) -> str:
    out, in_slash = [], False
    for c in value:
        if in_slash:
            if c not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            # UnescapedRune formats the rune with %v, which prints its code point: `=` reads 61.
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


FieldGetter = Callable[[dict[str, Any]], dict[str, str]]

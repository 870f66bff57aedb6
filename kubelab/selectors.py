"""Label and field selectors: parsing their string forms and matching objects.

The grammar is apimachinery's `labels.Parse`: comma-separated requirements, each one of
`key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`,
`key > 3`, `key < 3`. Field selectors accept only `=`, `==` and `!=`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .models import LabelSelector


class SelectorError(ValueError):
    """A selector string or object that does not parse."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if op in ("=", "in"):
            return self.key in labels and labels[self.key] in self.values
        if op in ("!=", "notin"):
            return self.key not in labels or labels[self.key] not in self.values
        if op in ("gt", "lt"):
            if self.key not in labels:
                return False
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except ValueError:
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

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def is_empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


EVERYTHING = Selector()

_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|>|<|[^\s!=(),<>]+)")


def _tokenize(text: str) -> list[str]:
    tokens, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            raise SelectorError(f"unable to parse requirement: found '{text[pos:]}'")
        tokens.append(match.group(1))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return tokens


def parse_label_selector(text: str | None) -> Selector:
    """Parse `app=web,tier in (a,b),!canary` into a Selector; an empty string selects everything."""
    if not text or not text.strip():
        return EVERYTHING
    tokens = _tokenize(text)
    reqs: list[Requirement] = []
    i = 0

    def expect_value(idx: int) -> str:
        if idx >= len(tokens) or tokens[idx] in ("=", "==", "!=", "(", ")", ",", "!", ">", "<"):
            # An empty value after an operator is legal: `a=` selects labels with an empty value.
            return ""
        return tokens[idx]

    while i < len(tokens):
        tok = tokens[i]
        if tok == "!":
            if i + 1 >= len(tokens):
                raise SelectorError("unable to parse requirement: found '', expected: identifier")
            reqs.append(Requirement(tokens[i + 1], "!"))
            i += 2
        else:
            key = tok
            if key in ("=", "==", "!=", "(", ")", ",", ">", "<"):
                raise SelectorError(f"unable to parse requirement: found '{key}', expected: !, identifier, or 'end of string'")
            op = tokens[i + 1] if i + 1 < len(tokens) else None
            if op is None or op == ",":
                reqs.append(Requirement(key, "exists"))
                i += 1
            elif op in ("=", "==", "!="):
                val = expect_value(i + 2)
                reqs.append(Requirement(key, "!=" if op == "!=" else "=", (val,)))
                i += 3 if val else 2
            elif op in (">", "<"):
                val = expect_value(i + 2)
                if not val or not val.lstrip("-").isdigit():
                    raise SelectorError(f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer")
                reqs.append(Requirement(key, "gt" if op == ">" else "lt", (val,)))
                i += 3
            elif op in ("in", "notin"):
                if i + 2 >= len(tokens) or tokens[i + 2] != "(":
                    raise SelectorError(f"unable to parse requirement: found '{tokens[i + 2] if i + 2 < len(tokens) else ''}', expected: '('")
                j, values = i + 3, []
                while j < len(tokens) and tokens[j] != ")":
                    if tokens[j] != ",":
                        values.append(tokens[j])
                    j += 1
                if j >= len(tokens):
                    raise SelectorError("unable to parse requirement: found '', expected: ')'")
                reqs.append(Requirement(key, op, tuple(values)))
                i = j + 1
            else:
                raise SelectorError(f"unable to parse requirement: found '{op}', expected: in, notin, =, ==, !=, gt, lt")
        if i < len(tokens):
            if tokens[i] != ",":
                raise SelectorError(f"unable to parse requirement: found '{tokens[i]}', expected: ',' or 'end of string'")
            i += 1
    for req in reqs:
        _check_label_key(req.key)
    return Selector(tuple(reqs))


def _check_label_key(key: str) -> None:
    from .validation import label_key_errors  # local import: validation imports selectors

    problems = label_key_errors(key)
    if problems:
        raise SelectorError(f"unable to parse requirement: invalid label key \"{key}\": {'; '.join(problems)}")


def selector_from_map(match_labels: Mapping[str, str] | None) -> Selector:
    """A Service's `spec.selector` (equality only, as the endpoints controller reads it)."""
    return Selector(tuple(Requirement(k, "=", (v,)) for k, v in sorted((match_labels or {}).items())))


def selector_from_label_selector(sel: LabelSelector | None) -> Selector:
    """metav1.LabelSelectorAsSelector: matchLabels plus matchExpressions; None selects nothing."""
    if sel is None:
        return Selector((Requirement("", "in", ()),))  # never matches, as a nil selector selects nothing
    reqs = [Requirement(k, "=", (v,)) for k, v in sorted((sel.match_labels or {}).items())]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in sel.match_expressions or []:
        if expr.operator not in ops:
            raise SelectorError(f"\"{expr.operator}\" is not a valid label selector operator")
        reqs.append(Requirement(expr.key or "", ops[expr.operator], tuple(expr.values or ())))
    return Selector(tuple(reqs))


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
    """Parse `spec.nodeName=n1,status.phase!=Failed`; `\\,` and `\\=` escape separators."""
    if not text or not text.strip():
        return FieldSelector()
    reqs = []
    for part in _split_unescaped(text, ","):
        if not part:
            continue
        for op in ("!=", "==", "="):
            idx = _find_unescaped(part, op)
            if idx >= 0:
                field, value = part[:idx].strip(), part[idx + len(op):]
                reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", _unescape(value)))
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
    return FieldSelector(tuple(reqs))


def _find_unescaped(text: str, needle: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(needle, i):
            return i
        i += 1
    return -1


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            current.append(text[i:i + 2])
            i += 2
            continue
        if text[i] == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(text[i])
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


FieldGetter = Callable[[dict[str, Any]], dict[str, str]]

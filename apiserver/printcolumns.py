"""The Table columns of a custom kind: its version's additionalPrinterColumns, as the CRD handler's table
convertor (apiextensions-apiserver/pkg/registry/customresource/tableconvertor) prints them.

Name first; then each column's JSONPath evaluated on the object. A path that finds nothing gives an empty
cell (null); strings print as found; integer, number and boolean columns keep JSON numbers and booleans;
date columns print the age of the timestamp, as kube's humanized date cells. Without columns a kind gets
one: Age (.metadata.creationTimestamp). Paths are kube's simple JSONPath: `.a.b`, `[0]`, `['a.b']`,
and the filter `[?(@.type=="Ready")]` conditions columns use. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from kubelab import timeutil

Column = tuple[str, str, int, str]  # name, type, priority, format (tables.Column)
_TOKEN = re.compile(r"""\.([^.\[]+)|\[(\d+)\]|\[['"]([^'"]+)['"]\]|\[\?\(@\.([\w.-]+)\s*==\s*['"]([^'"]*)['"]\)\]|\[\*\]""", re.ASCII)


def parse_path(path: str) -> list[tuple[str, Any]] | None:
    """A JSONPath as steps: ("key", name), ("index", n), ("filter", (field, value)), ("all", None); None when
    the path is not one this simple evaluator reads."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    steps: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            return None
        key, index, quoted, field, value = match.groups()
        if key is not None or quoted is not None:
            steps.append(("key", key if key is not None else quoted))
        elif index is not None:
            steps.append(("index", int(index)))
        elif field is not None:
            steps.append(("filter", (field, value)))
        else:
            steps.append(("all", None))
        pos = match.end()
    return steps


def find(obj: Any, steps: list[tuple[str, Any]]) -> list[Any]:
    """Every value the steps reach in `obj`."""
    current = [obj]
    for kind, arg in steps:
        found: list[Any] = []
        for value in current:
            if kind == "key" and isinstance(value, dict) and arg in value or kind == "index" and isinstance(value, list) and arg < len(value):
                found.append(value[arg])
            elif kind == "all" and isinstance(value, list):
                found.extend(value)
            elif kind == "filter" and isinstance(value, list):
                name, wanted = arg
                for item in value:
                    got = find(item, [("key", part) for part in name.split(".")])
                    if got and _text(got[0]) == wanted:
                        found.append(item)
        current = found
    return current


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _cell(typ: str, value: Any) -> Any:
    """cellForJSONValue: a JSON value of the column's type, else an empty cell."""
    if typ == "string":
        return _text(value)
    if typ == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        return int(value) if isinstance(value, float) and value.is_integer() else None
    if typ == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if typ == "boolean":
        return value if isinstance(value, bool) else None
    if typ == "date":
        return timeutil.age(value) if isinstance(value, str) else None
    return None


DEFAULT_COLUMNS = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]


def printer(columns: list[dict[str, Any]] | None) -> tuple[list[Column], Callable[[dict[str, Any]], list[Any]]]:
    """The column definitions and the row function of a version's additionalPrinterColumns."""
    defs = [c for c in columns or [] if isinstance(c, dict)] or DEFAULT_COLUMNS
    heads: list[Column] = [("Name", "string", 0, "name")]
    paths: list[tuple[str, list[tuple[str, Any]] | None]] = []
    for column in defs:
        typ = str(column.get("type") or "string")
        heads.append((str(column.get("name") or ""), typ, int(column.get("priority") or 0),
                      str(column.get("format") or "")))
        paths.append((typ, parse_path(str(column.get("jsonPath") or ""))))

    def row(obj: dict[str, Any]) -> list[Any]:
        cells: list[Any] = [(obj.get("metadata") or {}).get("name")]
        for typ, steps in paths:
            found = find(obj, steps) if steps is not None else []
            cells.append(_cell(typ, found[0]) if found else None)
        return cells

    return heads, row

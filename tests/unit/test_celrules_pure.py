"""apiserver/registry/celrules.py's pure parts: kube's DeclType for a schema node, values as CEL sees them,
Go durations, ValidFieldPath, the Go spelling of a ValidationRule, compile errors in cel-go's shape, and the
evaluation tree's field errors (create, update, ratcheting, the evaluation budget)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apiserver.registry import celrules


@pytest.mark.parametrize(("schema", "signature"), [
    ({"type": "integer"}, "int"),
    ({"type": "number"}, "double"),
    ({"type": "string", "format": "date-time"}, "timestamp"),
    ({"type": "string", "format": "duration"}, "duration"),
    ({"type": "string", "format": "byte"}, "bytes"),
    ({"type": "array", "items": {"type": "string"}}, "list(string)"),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, "map(string, int)"),
    ({"type": "object", "properties": {"a": {"type": "integer"}}}, "map(string, dyn)"),
    ({"x-kubernetes-int-or-string": True}, "dyn"),
    ({"x-kubernetes-preserve-unknown-fields": True}, "dyn"),
])
def test_cel_types_follow_kubes_decltype(schema: dict[str, Any], signature: str) -> None:
    assert celrules.cel_type(schema) == signature


@pytest.mark.parametrize(("text", "expected"), [
    ("1h30m", timedelta(hours=1, minutes=30)), ("-1.5s", timedelta(seconds=-1.5)), ("0", timedelta(0)),
    ("300ms", timedelta(milliseconds=300)), ("", None), ("1", None), ("1d", None), ("h", None), ("1h 2m", None),
])
def test_go_durations(text: str, expected: timedelta | None) -> None:
    assert celrules._go_duration(text) == expected


def test_values_are_what_cel_sees() -> None:
    schema = {"type": "object", "properties": {
        "ratio": {"type": "number"}, "at": {"type": "string", "format": "date-time"},
        "ttls": {"type": "object", "additionalProperties": {"type": "string", "format": "duration"}}}}
    value = celrules.to_cel({"ratio": 1, "at": "2026-01-01T00:00:00Z", "ttls": {"a": "1m"}}, schema)
    assert value["ratio"] == 1.0 and isinstance(value["ratio"], float)
    assert value["at"] == "2026-01-01T00:00:00Z"  # under map(string, dyn): cel-cpp takes no datetime there
    assert celrules.to_cel({"a": "1m"}, schema["properties"]["ttls"]) == {"a": timedelta(minutes=1)}
    assert celrules.to_cel("2026-01-01T00:00:00Z", schema["properties"]["at"]) == datetime(2026, 1, 1, tzinfo=UTC)
    assert celrules.to_cel("not a date", schema["properties"]["at"]) == "not a date"


@pytest.mark.parametrize(("path", "normalized"), [
    (".a", "a"), (".a.b", "a.b"), (".m['k.x']", "m[k.x]"), (".m.k", "m[k]"), (".nope", None), ("a", None),
    (".a.b.c", None), ("['a']", "a"),
])
def test_field_paths(path: str, normalized: str | None) -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"b": {"type": "string"}}},
        "m": {"type": "object", "additionalProperties": {"type": "string"}}}}
    assert celrules.field_path(path, schema) == normalized


def test_a_rule_is_spelled_as_go_prints_it() -> None:
    assert celrules.rule_literal({"rule": 'self == "a"'}) == (
        'apiextensions.ValidationRule{Rule:"self == \\"a\\"", Message:"", MessageExpression:"", '
        'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}')


def test_compile_errors_have_cel_gos_shape() -> None:
    result = celrules.compile_rule({"rule": "self.a +"}, {"type": "object"})
    assert result.rule is None and result.rule_error is not None
    assert result.rule_error.startswith("compilation failed: ERROR: <input>:1:9: Syntax error: ")
    assert result.rule_error.endswith(" | self.a +\n | ........^")
    assert celrules.compile_rule({"rule": "self + 1"}, {"type": "integer"}).rule_error == (
        "cel expression must evaluate to a bool")
    transition = celrules.compile_rule({"rule": "self >= oldSelf"}, {"type": "integer"}).rule
    assert transition is not None and transition.transition
    plain = celrules.compile_rule({"rule": "self >= 0 && 'oldSelf' != ''"}, {"type": "integer"}).rule
    assert plain is not None and not plain.transition  # a string that says oldSelf is no reference to it


def test_the_tree_runs_rules_on_create_and_update() -> None:
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"n": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.n < 10", "message": "small"},
                                     {"rule": "self.n >= oldSelf.n", "message": "grows"}]}}}
    tree = celrules.build(schema)
    assert tree is not None
    assert [(e.field, e.body) for e in tree.validate({"spec": {"n": 20}}, None)] == [
        ("spec", 'Invalid value: "object": small')]
    assert [(e.field, e.body) for e in tree.validate({"spec": {"n": 1}}, {"spec": {"n": 2}})] == [
        ("spec", 'Invalid value: "object": grows')]
    # Ratcheting: spec unchanged, so "small" does not fail an update that leaves it alone.
    assert tree.validate({"spec": {"n": 20}, "x": 1}, {"spec": {"n": 20}}) == []


def test_the_evaluation_budget_stops_a_hostile_object() -> None:
    schema = {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {
        "type": "integer", "x-kubernetes-validations": [{"rule": "self >= 0"}]}}}}
    tree = celrules.build(schema)
    assert tree is not None
    errs = tree.validate({"m": {str(i): 1 for i in range(celrules.MAX_EVALUATIONS + 5)}}, None)
    assert len(errs) == 1 and errs[0].detail.startswith("validation failed due to running out of cost budget")
    assert tree.validate({"m": {str(i): 1 for i in range(100)}}, None) == []

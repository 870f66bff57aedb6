"""Server-side apply's merge rules for custom kinds, read from a structural schema (managedfields.fieldpath's
SchemaRules and merge), and the order structured-merge-diff gives a merged associative list. Pure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from apiserver.managedfields import fieldpath

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
              "items": {"type": "object", "properties": {
                  "name": {"type": "string"},
                  "hosts": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
    "args": {"type": "array", "items": {"type": "string"}},
    "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
    "routes": {"type": "object", "additionalProperties": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["path"],
        "items": {"type": "object"}}}}}}}
KIND = fieldpath.custom_type_name("example.com/v1", "Mixer")


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    fieldpath.register_schema(KIND, SCHEMA)
    yield
    fieldpath.unregister_schema(KIND)


def test_the_rules_follow_the_schema() -> None:
    assert fieldpath.list_keys(KIND, ("spec", "ports")) == ("name",)
    assert fieldpath.is_set(KIND, ("spec", "ports", "hosts"))
    assert fieldpath.list_keys(KIND, ("spec", "args")) is None and not fieldpath.is_set(KIND, ("spec", "args"))
    assert fieldpath.is_atomic(KIND, ("spec", "selector"))
    assert fieldpath.list_keys(KIND, ("spec", "routes", "any-key")) == ("path",)
    assert fieldpath.list_keys(KIND, ("metadata", "ownerReferences")) == ("uid",)
    assert fieldpath.is_set(KIND, ("metadata", "finalizers"))
    # A built-in kind of the same name keeps its own rules; an unknown path has the defaults.
    assert fieldpath.list_keys("Mixer", ("spec", "ports")) is None
    assert fieldpath.list_keys(KIND, ("spec", "nowhere")) is None


def _names(items: list[dict[str, Any]]) -> list[str]:
    return [i["name"] for i in items]


@pytest.mark.parametrize(("live", "config", "merged"), [
    (["a", "b"], ["c"], ["a", "b", "c"]),
    (["a", "b", "c"], ["c", "a"], ["b", "c", "a"]),
    (["a", "b"], ["b", "x", "a"], ["b", "x", "a"]),
    (["a", "b", "c"], ["b"], ["a", "b", "c"]),
    ([], ["a", "b"], ["a", "b"]),
])
def test_an_associative_list_merges_in_structured_merge_diffs_order(
        live: list[str], config: list[str], merged: list[str]) -> None:
    out = fieldpath.merge({"spec": {"ports": [{"name": n} for n in live]}},
                          {"spec": {"ports": [{"name": n, "by": "config"} for n in config]}}, KIND)
    assert _names(out["spec"]["ports"]) == merged
    assert all(p.get("by") == "config" for p in out["spec"]["ports"] if p["name"] in config)


def test_sets_union_atomic_things_are_replaced_and_nothing_is_changed_in_place() -> None:
    live = {"spec": {"ports": [{"name": "a", "hosts": ["x"]}], "args": ["1"], "selector": {"k": "v"}}}
    config = {"spec": {"ports": [{"name": "a", "hosts": ["y"]}], "args": ["2"], "selector": {"j": "w"}}}
    out = fieldpath.merge(live, config, KIND)
    assert out["spec"] == {"ports": [{"name": "a", "hosts": ["x", "y"]}], "args": ["2"], "selector": {"j": "w"}}
    assert live["spec"]["ports"][0]["hosts"] == ["x"] and config["spec"]["args"] == ["2"]

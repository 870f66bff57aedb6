"""schema.prune checks a body for unknown fields before it walks it to copy and name them: the check
must find exactly what the full walk finds, at every depth (equivalence with schema._walk)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubelab import schema

POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}, "annotations": {"a": "b"}},
    "spec": {"nodeSelector": {"disk": "ssd"},
             "containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}],
                             "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "100m"}},
                             "env": [{"name": "A", "value": "1"}]}],
             "tolerations": [{"key": "k", "operator": "Exists"}]},
}
DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "d"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
             "template": {"metadata": {"labels": {"app": "d"}},
                          "spec": {"containers": [{"name": "c", "image": "x", "args": ["a", "b"]}]}}},
}


def _dict_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every dict inside `value`, as the keys and indexes leading to it."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        found.append(path)
        for key, child in value.items():
            found += _dict_paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _dict_paths(child, (*path, index))
    return found


def _with_unknown(obj: dict[str, Any], at: tuple[Any, ...]) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    target: Any = changed
    for step in at:
        target = target[step]
    target["notAField"] = {"nested": [1]}
    return changed


def _full_walk(obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    root = schema.root_type(obj["apiVersion"], obj["kind"])
    assert root is not None
    found: list[str] = []
    return schema._walk(root, obj, "", found, prune=True), found


CASES = [pytest.param(base, at, id=f"{base['kind']} {'.'.join(map(str, at)) or 'root'}")
         for base in (POD, DEPLOYMENT) for at in _dict_paths(base)]


@pytest.mark.parametrize(("base", "at"), CASES)
def test_an_unknown_field_anywhere_is_found_and_pruned_as_by_the_full_walk(base: dict[str, Any],
                                                                           at: tuple[Any, ...]) -> None:
    body = _with_unknown(base, at)
    pruned, found = schema.prune(body["apiVersion"], body["kind"], body)
    expected_pruned, expected_found = _full_walk(body)
    assert (pruned, found) == (expected_pruned, expected_found)
    # Free-form maps (labels, nodeSelector, resources) take any key; typed objects do not.
    assert found == [] or found[0].endswith("notAField")


@pytest.mark.parametrize("base", [POD, DEPLOYMENT], ids=["Pod", "Deployment"])
def test_a_body_without_unknown_fields_comes_back_whole(base: dict[str, Any]) -> None:
    pruned, found = schema.prune(base["apiVersion"], base["kind"], base)
    assert found == []
    assert pruned == _full_walk(base)[0] == base

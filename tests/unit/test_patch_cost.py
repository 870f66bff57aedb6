"""How much work a patch costs, counted (not timed): a patch that names N things must cost about N steps.

Applying a JSON patch one operation at a time to a fresh copy of the object made 8,000 `add`s cost
8,000 copies of a growing object (19 s of the API server's event loop); merging 10,000 finalizers
scanned the merged list once per finalizer and again per item while ordering it (10 s). Work is
counted two ways, both the same on every machine:

* Python calls (sys.setprofile's call events), with a budget: past it the patch is abandoned, so the
  old code fails here in a second instead of running for minutes;
* equality comparisons between list items: the items are strings whose `__eq__` counts (set and dict
  lookups compare only what hashes alike; a list scan compares against every item), with a budget too.

The results are checked as well, and tests/faults/test_costly_requests.py sends the same patches
through a real API server.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from apiserver.patch import json_patch, strategic_merge_patch


class OverBudget(Exception):
    pass


def calls_within(budget: int, fn: Callable[..., Any], *args: Any) -> tuple[Any, int]:
    """fn(*args) and how many Python and C function calls it made; OverBudget past `budget`."""
    count = 0

    def hook(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1
            if count > budget:
                raise OverBudget(f"more than {budget} calls")

    sys.setprofile(hook)
    try:
        return fn(*args), count
    finally:
        sys.setprofile(None)


class Counted(str):
    """A string that counts the equality comparisons made with it (class-wide) and stops past a budget."""

    comparisons = 0
    budget = sys.maxsize

    def __eq__(self, other: object) -> bool:
        Counted.comparisons += 1
        if Counted.comparisons > Counted.budget:
            raise OverBudget(f"more than {Counted.budget} comparisons")
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__


@contextmanager
def comparisons_within(budget: int) -> Iterator[Callable[[], int]]:
    Counted.comparisons, Counted.budget = 0, budget
    try:
        yield lambda: Counted.comparisons
    finally:
        Counted.budget = sys.maxsize  # the assertions after it compare freely


def test_8000_adds_cost_about_8000_steps() -> None:
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"seed": "x"}}
    ops = [{"op": "add", "path": f"/data/k{i}", "value": f"v{i}"} for i in range(8_000)]
    # ~30 calls an operation (pointer parsing, the insert, copying its value); a copy of the object per
    # operation is 8,000 times the object's thousands of keys.
    result, _ = calls_within(600_000, json_patch, doc, ops)
    assert result["data"] == {"seed": "x", **{f"k{i}": f"v{i}" for i in range(8_000)}}
    assert doc["data"] == {"seed": "x"}  # the live object is never changed


def test_operations_on_a_big_object_cost_what_they_touch() -> None:
    """100 operations on an object of 20,000 keys: the object is copied (and its depth checked) once, not
    100 times (2,000,000 calls and more)."""
    doc = {"metadata": {"name": "x"}, "data": {f"k{i}": "v" for i in range(20_000)}}
    ops = [{"op": "replace", "path": f"/data/k{i}", "value": "w"} for i in range(100)]
    result, _ = calls_within(250_000, json_patch, doc, ops)
    assert [result["data"][f"k{i}"] for i in (0, 99, 100)] == ["w", "w", "v"]


@pytest.mark.parametrize("live_count", [0, 100, 10_000])
def test_10000_finalizers_merge_with_linear_comparisons(live_count: int) -> None:
    live = {"metadata": {"name": "x", "finalizers": [Counted(f"example.com/old{i}") for i in range(live_count)]}}
    added = [Counted(f"example.com/f{i}") for i in range(10_000)]
    with comparisons_within(200_000):
        result = strategic_merge_patch(live, {"metadata": {"finalizers": added}}, "Pod")
    # The patch's items in its order, then the live ones (patch_test.go's "merging int list" rule).
    assert result["metadata"]["finalizers"] == [*added, *live["metadata"]["finalizers"]]


def test_10000_finalizers_deleted_and_ordered_with_linear_comparisons() -> None:
    live = [Counted(f"example.com/f{i}") for i in range(10_000)]
    order = list(reversed(live))
    patch = {"metadata": {"$setElementOrder/finalizers": order,
                          "$deleteFromPrimitiveList/finalizers": live[::2]}}
    with comparisons_within(200_000):
        result = strategic_merge_patch({"metadata": {"finalizers": live}}, patch, "Pod")
    assert result["metadata"]["finalizers"] == order[::2]  # the odd ones, in the new order


def owner(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": f"o{i}", "uid": Counted(f"uid-{i}")}


def test_keyed_lists_merge_and_reorder_with_linear_comparisons() -> None:
    """5,000 live ownerReferences, 5,000 more merged in by uid, 100 deleted, all 10,000 reordered."""
    live = {"metadata": {"ownerReferences": [owner(i) for i in range(0, 10_000, 2)]}}
    patch = {"metadata": {
        "$setElementOrder/ownerReferences": [{"uid": Counted(f"uid-{i}")} for i in range(10_000)],
        "ownerReferences": [owner(i) for i in range(1, 10_000, 2)]
        + [{"uid": Counted(f"uid-{i}"), "$patch": "delete"} for i in range(0, 200, 2)]}}
    with comparisons_within(300_000):
        result = strategic_merge_patch(live, patch, "Pod")
    assert [o["uid"] for o in result["metadata"]["ownerReferences"]] == \
        [f"uid-{i}" for i in range(10_000) if i >= 200 or i % 2]

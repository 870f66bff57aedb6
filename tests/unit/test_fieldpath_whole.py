"""The create path's field tracking walks a subtree present on one side only with an inlined walk
(fieldpath._Comparer.whole). It must find the very paths the generic element walk finds: checked here
against that walk, written out plainly, on random objects shaped like Kubernetes ones (granular maps,
keyed lists with duplicate keys, sets, atomic lists and maps, empty containers, scalars)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.managedfields.fieldpath import STRIPPED, Path, SchemaPath, _elements, _is_leaf, compare

KIND = "Pod"


def _reference_whole(value: Any, path: Path, spath: SchemaPath, into: set[Path]) -> None:
    if _is_leaf(value, KIND, spath) or value in ({}, [], None):
        into.add(path)
        return
    for element, (child_spath, child) in dict(_elements(value, KIND, spath)).items():
        _reference_whole(child, (*path, element), child_spath, into)
    if path:
        into.add(path)


def _reference_create(new: dict[str, Any]) -> set[Path]:
    found: set[Path] = set()
    for key, child in new.items():
        _reference_whole(child, ("f:" + key,), (key,), found)
    return found


scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["", "a", "TCP", "UDP"]))
leaves = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["a", "b", "c"]), inner, max_size=3), max_leaves=6)
port = st.fixed_dictionaries({"containerPort": st.sampled_from([80, 443])},
                             optional={"protocol": st.sampled_from(["TCP", "UDP"]), "name": leaves})
container = st.fixed_dictionaries({"name": st.sampled_from(["a", "b"])},
                                  optional={"image": scalars, "ports": st.lists(port, max_size=3),
                                            "args": st.lists(scalars, max_size=3),
                                            "resources": st.dictionaries(st.sampled_from(["limits", "requests"]),
                                                                         st.dictionaries(st.sampled_from(
                                                                             ["cpu", "memory"]), scalars)),
                                            "extra": leaves})
pod = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({}, optional={
        "name": scalars, "labels": st.dictionaries(st.sampled_from(["app", "tier"]), scalars),
        "finalizers": st.lists(st.sampled_from(["x", "y", "x"]), max_size=3),
        "ownerReferences": st.lists(st.fixed_dictionaries({"uid": st.sampled_from(["u1", "u2"])},
                                                          optional={"kind": scalars}), max_size=3)}),
     "spec": st.fixed_dictionaries({}, optional={
         "containers": st.lists(container | scalars, max_size=3),
         "nodeSelector": st.dictionaries(st.sampled_from(["a", "b"]), scalars),
         "tolerations": st.lists(st.dictionaries(st.sampled_from(["key", "operator"]), scalars), max_size=2),
         "affinity": leaves})},
    optional={"status": st.dictionaries(st.sampled_from(["phase", "conditions"]), leaves)})


@settings(max_examples=300)
@given(pod)
def test_the_inlined_walk_of_a_created_object_finds_what_the_element_walk_finds(new: dict[str, Any]) -> None:
    added = compare({}, new, KIND).added
    assert added == _reference_create(new) - STRIPPED
    assert compare(new, {}, KIND).removed == added

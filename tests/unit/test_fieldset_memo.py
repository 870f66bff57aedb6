"""The memo of FieldsV1 tries and field sets (apiserver/managedfields/fieldpath.py): a field set seen before
gives the same answer as building it afresh, and every caller gets a copy of its own."""

from __future__ import annotations

from apiserver.managedfields import fieldpath

TRIE = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {"f:containers": {'k:{"name":"pause"}': {".": {}, "f:image": {}, "f:name": {},
                                                         "f:resources": {".": {}, "f:limits": {"f:cpu": {}}}}}}}


def test_a_remembered_trie_is_the_built_one_and_not_shared() -> None:
    paths = fieldpath.from_fields_v1(TRIE)
    fresh = fieldpath._to_fields_v1(paths)
    first = fieldpath.to_fields_v1(paths)
    first["f:spec"]["f:containers"].clear()  # a caller changing what it got (it stores it in an object)
    first["f:extra"] = {}
    second = fieldpath.to_fields_v1(set(paths))
    assert second == fresh == TRIE
    assert list(second) == list(fresh)  # the Go serializer's key order is kept


def test_a_remembered_set_is_the_read_one_and_not_shared() -> None:
    first = fieldpath.from_fields_v1(TRIE)
    first.add(("f:changed",))
    first.discard(("f:metadata", "f:labels", "f:app"))
    second = fieldpath.from_fields_v1(TRIE)
    assert ("f:changed",) not in second
    assert ("f:metadata", "f:labels", "f:app") in second
    assert fieldpath.to_fields_v1(second) == TRIE


def test_big_or_unusual_field_sets_are_answered_without_the_memo() -> None:
    big = {f"f:k{i}": {} for i in range(fieldpath.MEMO_PATHS + 1)}
    paths = fieldpath.from_fields_v1(big)
    assert len(paths) == fieldpath.MEMO_PATHS + 1
    assert fieldpath.to_fields_v1(paths) == big
    assert fieldpath.from_fields_v1({1: {}}) == {(1,)}  # not JSON-encodable keys: read as they are
    assert fieldpath.from_fields_v1("junk") == set()


def test_the_memo_stays_bounded() -> None:
    for i in range(3 * fieldpath.MEMO_ENTRIES):
        trie = {f"f:x{i}": {}}
        assert fieldpath.to_fields_v1(fieldpath.from_fields_v1(trie)) == trie
    assert len(fieldpath._tries) <= fieldpath.MEMO_ENTRIES
    assert len(fieldpath._sets) <= fieldpath.MEMO_ENTRIES

"""The strategic merge patch and merge patch, checked against the implementations they replaced.

patch.py's strategic merge patch matches list items through dicts keyed by their identities and merges
into one copy of the live object; before, it scanned lists (quadratic in a list's length) and copied
every level it merged into. The earlier code is kept below, verbatim but for its names, as the reference
definition: on random live objects and patches (merge-keyed lists with duplicates, missing keys and
non-object items, every directive, values that are == across types such as 1, 1.0 and True) both must
give the same JSON, key order included, raise the same errors, and leave the live object unchanged.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver.errors import StatusError, bad_request
from apiserver.patch import (
    COMMON_MERGE_KEYS,
    DELETE_PRIMITIVE,
    DIRECTIVE,
    MERGE_KEYS,
    PRIMITIVE_MERGE,
    RETAIN_KEYS,
    SET_ORDER,
    Path,
    merge_patch,
    strategic_merge_patch,
)

EXAMPLES = int(os.environ.get("KUBELAB_FUZZ_EXAMPLES", "500"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


# --- the reference definitions (patch.py before the rewrite) -------------------------------------

def ref_merge_patch(original: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = ref_merge_patch(result.get(key), value)
    return result


def _merge_key(kind: str, path: Path) -> str | None:
    table = MERGE_KEYS.get(kind, {})
    if path in table:
        return table[path]
    return COMMON_MERGE_KEYS.get(path)


def ref_strategic_merge_patch(original: Any, patch: Any, kind: str) -> Any:
    if not isinstance(patch, dict):
        raise bad_request("json: cannot unmarshal into Go value of type map[string]interface {}")
    return ref_merge_map(original if isinstance(original, dict) else {}, patch, kind, ())


def ref_merge_map(original: dict[str, Any], patch: dict[str, Any], kind: str, path: Path) -> Any:
    directive = patch.get(DIRECTIVE)
    if directive == "replace":
        return ref_strip_directives({k: v for k, v in patch.items() if k != DIRECTIVE})
    if directive == "delete":
        return None
    if directive not in (None, "merge"):
        raise bad_request(f"Unknown patch type: {directive}")
    result = copy.deepcopy(original)
    retain = patch.get(RETAIN_KEYS)
    if isinstance(retain, list):
        # applyRetainKeysDirective runs before anything is merged: it clears the live keys the list
        # leaves out, then the patch's own keys are merged in as usual.
        result = {k: v for k, v in result.items() if k in retain}
    server_lists = {k: v for k, v in result.items() if isinstance(v, list)}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key == DIRECTIVE or key == RETAIN_KEYS:
            continue
        if key.startswith(SET_ORDER):
            orders[key[len(SET_ORDER):]] = value
            continue
        if key.startswith(DELETE_PRIMITIVE):
            field = key[len(DELETE_PRIMITIVE):]
            if isinstance(result.get(field), list):  # nothing to delete from a list that is not there
                result[field] = [x for x in result[field] if x not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
            continue
        child = path + (key,)
        current = result.get(key)
        if isinstance(value, dict):
            merged = ref_merge_map(current if isinstance(current, dict) else {}, value, kind, child)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = ref_merge_list(current if isinstance(current, list) else [], value, kind, child)
        else:
            result[key] = value
    for field, order in orders.items():
        if isinstance(result.get(field), list) and isinstance(order, list):
            result[field] = ref_normalize_order(result[field], order, server_lists.get(field) or [],
                                             _merge_key(kind, path + (field,)) or None)
    return result


def ref_merge_list(original: list[Any], patch: list[Any], kind: str, path: Path) -> list[Any]:
    """mergeSlice: lists with a merge key merge item by item, `patchStrategy:merge` scalar lists as sets,
    anything else is replaced. Deletions (`$patch: delete`) apply before the merge, as in apimachinery."""
    key = _merge_key(kind, path)
    if path in PRIMITIVE_MERGE or key == "":
        merged: list[Any] = []
        for item in list(original) + list(patch):
            if item not in merged:
                merged.append(item)
        return ref_normalize_order(merged, patch, original, None)
    if not key:
        return list(ref_strip_directives(patch))
    result = copy.deepcopy(original)
    plain: list[dict[str, Any]] = []
    replace = False
    for item in patch:
        if not isinstance(item, dict):
            continue
        directive = item.get(DIRECTIVE)
        if directive == "delete":
            result = [o for o in result if not (isinstance(o, dict) and o.get(key) == item.get(key))]
        elif directive == "replace":
            replace = True
        else:
            plain.append(item)
    if replace:
        return list(ref_strip_directives(plain))
    server_order = list(result)
    for item in plain:
        ident = item.get(key)
        index = next((i for i, o in enumerate(result) if isinstance(o, dict) and o.get(key) == ident), None)
        if index is None:
            result.append(ref_strip_directives(item))
        else:
            merged_item = ref_merge_map(result[index], item, kind, path)
            if merged_item is None:
                del result[index]
            else:
                result[index] = merged_item
    return ref_normalize_order(result, plain, server_order, key)


def ref_normalize_order(items: list[Any], patch_order: list[Any], server_order: list[Any], key: str | None) -> list[Any]:
    """normalizeElementOrder + mergeSortedSlice: the items named in the patch (or `$setElementOrder`) take
    the patch's order, the others keep the live order, and the two runs interleave by live position.

    mergeSortedSlice takes a server-only item first only when both it and the next patch item have a live
    position and its own is earlier; so a new item goes before the server-only ones (live [a, b] patched
    with [c] gives [c, a, b]), and live [1, 2, 3] patched with [3, 1] gives [2, 3, 1], one of
    apimachinery's own test cases.
    """
    def ident(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, dict) else item

    def position(ids: list[Any], item: Any) -> int:
        value = ident(item)
        return next((i for i, v in enumerate(ids) if v == value), -1)

    wanted = [ident(o) for o in patch_order if not (key and isinstance(o, dict) and o.get(DIRECTIVE) == "delete")]
    live = [ident(o) for o in server_order]
    named = sorted((i for i in items if position(wanted, i) >= 0), key=lambda i: position(wanted, i))
    server_only = sorted((i for i in items if position(wanted, i) < 0),
                         key=lambda i: (position(live, i) < 0, position(live, i)))
    out: list[Any] = []
    while named or server_only:
        if not named:
            out.append(server_only.pop(0))
        elif not server_only:
            out.append(named.pop(0))
        else:
            left, right = position(live, server_only[0]), position(live, named[0])
            out.append(server_only.pop(0) if left >= 0 and right >= 0 and left < right else named.pop(0))
    return out


def ref_strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ref_strip_directives(v) for k, v in value.items()
                if k not in (DIRECTIVE, RETAIN_KEYS) and not k.startswith((SET_ORDER, DELETE_PRIMITIVE))}
    if isinstance(value, list):
        return [ref_strip_directives(v) for v in value]
    return value


# --- random live objects and patches ------------------------------------------------------------
# Values == across types (1, 1.0, True; 0, False) stand in merge keys and set items, where the list
# scans compared with == and the lookups now hash.
SCALAR = st.sampled_from(["a", "b", "c", 1, 1.0, True, False, 0, "1"])
IDENT = st.sampled_from(["a", "b", 1, 1.0, True])


def _item(key: str, fields: dict[str, Any], *, patch: bool) -> Any:
    """A keyed-list item: usually an object with (or without) its merge key, sometimes not an object."""
    optional: dict[str, Any] = {key: IDENT, "v": SCALAR, **fields}
    if patch:
        optional["w"] = st.one_of(SCALAR, st.none())
        # A `replace` anywhere replaces the whole list: rarer, so that merges and deletions get tried.
        optional[DIRECTIVE] = st.sampled_from(["delete", "delete", "delete", "merge", "merge", "replace"])
        optional[RETAIN_KEYS] = st.lists(st.sampled_from([key, "v", "w", *fields]), max_size=3)
    obj = st.fixed_dictionaries({}, optional=optional)
    return st.one_of(obj, obj, obj, SCALAR)  # mostly objects


def _keyed_list(key: str, fields: dict[str, Any] | None = None, *, patch: bool) -> Any:
    return st.lists(_item(key, fields or {}, patch=patch), max_size=6)


def _order(key: str | None) -> Any:
    """A $setElementOrder list: identities (objects holding the merge key, or set items)."""
    if key is None:
        return st.lists(SCALAR, max_size=6)
    entry = st.fixed_dictionaries({key: IDENT}, optional={DIRECTIVE: st.just("delete")})
    return st.lists(st.one_of(entry, SCALAR), max_size=6)


def _map(fields: dict[str, Any], *, patch: bool, lists: dict[str, str | None] | None = None) -> Any:
    """An object with some of `fields` (half the time all of them, so that nested lists are there to
    merge); a patch's may also hold nulls and directives (`lists` names its fields that are lists, with
    their merge key, None for a set)."""
    optional = dict(fields)
    if patch:
        optional = {k: st.one_of(v, v, v, st.none()) for k, v in fields.items()}
        optional[DIRECTIVE] = st.sampled_from(["merge", "merge", "merge", "merge", "replace", "delete"])
        optional[RETAIN_KEYS] = st.lists(st.sampled_from(sorted(fields)), max_size=3)
        for name, key in (lists or {}).items():
            optional[SET_ORDER + name] = _order(key)
            if key is None:
                optional[DELETE_PRIMITIVE + name] = st.lists(SCALAR, max_size=4)
    extra = {k: v for k, v in optional.items() if k not in fields}
    return st.one_of(st.fixed_dictionaries({}, optional=optional),
                     st.fixed_dictionaries(dict(fields), optional=extra))


def pod(*, patch: bool) -> Any:
    port = _keyed_list("containerPort", {"protocol": st.sampled_from(["TCP", "UDP"])}, patch=patch)
    env = _keyed_list("name", patch=patch)
    container = {"ports": port, "env": env, "image": SCALAR}
    containers = st.lists(_item("name", container, patch=patch), max_size=5)
    metadata = _map({"finalizers": st.lists(SCALAR, max_size=6), "labels": st.dictionaries(st.sampled_from("xyz"), SCALAR),
                     "ownerReferences": _keyed_list("uid", {"name": SCALAR}, patch=patch)},
                    patch=patch, lists={"finalizers": None, "ownerReferences": "uid"})
    spec = _map({"containers": containers, "volumes": _keyed_list("name", {"emptyDir": st.just({})}, patch=patch),
                 "tolerations": st.lists(st.fixed_dictionaries({"key": SCALAR}), max_size=3), "nodeName": SCALAR},
                patch=patch, lists={"containers": "name", "volumes": "name"})
    status = _map({"conditions": _keyed_list("type", patch=patch)}, patch=patch, lists={"conditions": "type"})
    return _map({"metadata": metadata, "spec": spec, "status": status}, patch=patch)


def node(*, patch: bool) -> Any:
    spec = _map({"podCIDRs": st.lists(SCALAR, max_size=5)}, patch=patch, lists={"podCIDRs": ""})
    status = _map({"addresses": _keyed_list("type", {"address": SCALAR}, patch=patch)}, patch=patch,
                  lists={"addresses": "type"})
    return _map({"spec": spec, "status": status}, patch=patch)


def service(*, patch: bool) -> Any:
    spec = _map({"ports": _keyed_list("port", {"name": SCALAR}, patch=patch),
                 "selector": st.dictionaries(st.sampled_from("xyz"), SCALAR)}, patch=patch, lists={"ports": "port"})
    return _map({"spec": spec, "metadata": _map({"labels": st.dictionaries(st.sampled_from("xyz"), SCALAR)},
                                                  patch=patch)}, patch=patch)


CASES = {"Pod": pod, "Node": node, "Service": service}


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """What a patch function made, exactly (JSON bytes: types and key order count), or its error."""
    try:
        return "ok", orjson.dumps(fn(*args))
    except StatusError as exc:
        return "error", (exc.code, exc.message)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_strategic_merge_patch_equals_the_reference(kind: str) -> None:
    @SETTINGS
    @given(CASES[kind](patch=False), CASES[kind](patch=True))
    def check(live: dict[str, Any], patch: dict[str, Any]) -> None:
        before = copy.deepcopy(live)
        assert outcome(strategic_merge_patch, live, patch, kind) == outcome(ref_strategic_merge_patch, live, patch, kind)
        assert orjson.dumps(live) == orjson.dumps(before)

    check()


def _list_items(*, patch: bool) -> Any:
    fields: dict[str, Any] = {"name": IDENT, "image": SCALAR}
    if patch:
        fields[DIRECTIVE] = st.sampled_from(["delete", "delete", "merge", "replace"])
    obj = st.fixed_dictionaries({"name": IDENT}, optional={k: v for k, v in fields.items() if k != "name"})
    return st.lists(st.one_of(obj, obj, obj, obj, SCALAR, st.fixed_dictionaries({}, optional=fields)),
                    min_size=1, max_size=7)


@pytest.mark.parametrize("field", ["containers", "finalizers"])
def test_list_merges_equal_the_reference(field: str) -> None:
    """One merged list at a time, crowded: the items the patch deletes, merges, adds back and reorders
    are mostly ones the live list has."""
    items = _list_items(patch=False) if field == "containers" else st.lists(SCALAR, min_size=1, max_size=7)
    patch_items = _list_items(patch=True) if field == "containers" else st.lists(SCALAR, max_size=7)
    where = "spec" if field == "containers" else "metadata"
    order = _order("name" if field == "containers" else None)
    deletions = st.lists(SCALAR, max_size=4)

    @SETTINGS
    @given(items, patch_items, st.one_of(st.none(), order), st.one_of(st.none(), deletions))
    def check(live_items: list[Any], patch_list: list[Any], set_order: list[Any] | None,
              deleted: list[Any] | None) -> None:
        live = {where: {field: live_items}}
        body: dict[str, Any] = {field: patch_list}
        if set_order is not None:
            body[SET_ORDER + field] = set_order
        if deleted is not None and field == "finalizers":
            body[DELETE_PRIMITIVE + field] = deleted
        patch = {where: body}
        before = copy.deepcopy(live)
        assert outcome(strategic_merge_patch, live, patch, "Pod") == outcome(ref_strategic_merge_patch, live, patch, "Pod")
        assert orjson.dumps(live) == orjson.dumps(before)

    check()


def test_merge_patch_equals_the_reference() -> None:
    @SETTINGS
    @given(pod(patch=False), pod(patch=True))
    def check(live: dict[str, Any], patch: dict[str, Any]) -> None:
        before = copy.deepcopy(live)
        assert outcome(merge_patch, live, patch) == outcome(ref_merge_patch, live, patch)
        assert orjson.dumps(live) == orjson.dumps(before)

    check()


def test_the_generated_cases_reach_the_interesting_paths() -> None:
    """The strategies do produce merges by key, deletions, reorderings and ==-but-not-identical values
    (a check on the generator, so the equivalence above cannot pass by testing nothing)."""
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(pod(patch=False), pod(patch=True))
    def look(live: dict[str, Any], patch: dict[str, Any]) -> None:
        text = orjson.dumps(patch).decode()
        for marker in ("$setElementOrder/containers", "$deleteFromPrimitiveList", '"$patch":"delete"',
                       '"$patch":"replace"', "$retainKeys"):
            if marker in text:
                seen.add(marker)
        live_names = [c.get("name") for c in (live.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
        patch_names = [c.get("name") for c in ((patch.get("spec") or {}).get("containers") or [])
                       if isinstance(c, dict)]
        if set(map(repr, live_names)) & set(map(repr, patch_names)):
            seen.add("merge by key")

    look()
    assert seen == {"$setElementOrder/containers", "$deleteFromPrimitiveList", '"$patch":"delete"',
                    '"$patch":"replace"', "$retainKeys", "merge by key"}


# --- JSON patch against python-jsonpatch ----------------------------------------------------------
# patch.py applies RFC 6902 itself (rfc6902.py: one copy of the document, bounded copies, the words of
# evanphx/json-patch, which kube-apiserver uses). Where the RFC and that library agree, it must agree
# with python-jsonpatch: the same document, or a refusal where it refuses. Left out, where they differ
# on purpose: negative indices and leading zeros (the Go library takes them), the whole document as a
# target (it refuses), `test` of a missing member against null (it passes), true == 1 (JSON says no).

KEYS = st.sampled_from(["a", "b", "c"])
LEAF = st.one_of(st.sampled_from(["x", "y"]), st.integers(0, 3))
DOC = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
                   max_leaves=12)


def _pointers(doc: Any, prefix: str = "") -> list[str]:
    """Every member's pointer, and for containers one that is not there yet."""
    out = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += [f"{prefix}/{key}", *_pointers(value, f"{prefix}/{key}")]
        out.append(f"{prefix}/new")
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += [f"{prefix}/{i}", *_pointers(value, f"{prefix}/{i}")]
        out += [f"{prefix}/{len(doc)}", f"{prefix}/-"]
    return out


@st.composite
def doc_and_ops(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    doc = draw(st.dictionaries(KEYS, DOC, min_size=1, max_size=3))
    pointers = _pointers(doc) + ["/missing/x"]
    ops = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]))
        op: dict[str, Any] = {"op": kind, "path": draw(st.sampled_from(pointers))}
        if kind in ("add", "replace", "test"):
            op["value"] = draw(DOC)
        if kind in ("move", "copy"):
            op["from"] = draw(st.sampled_from(pointers))
        if kind == "test" and op["path"].endswith(("/new", "/-")):
            continue  # a missing member tests equal to null in the Go library only
        ops.append(op)
    return doc, ops


def test_json_patch_agrees_with_python_jsonpatch() -> None:
    import jsonpatch

    from apiserver.patch import json_patch

    @SETTINGS
    @given(doc_and_ops())
    def check(case: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
        doc, ops = case
        before = copy.deepcopy(doc)
        try:
            want: Any = ("ok", jsonpatch.JsonPatch(ops).apply(doc))
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError, IndexError):
            want = ("error", 422)
        try:
            got: Any = ("ok", json_patch(doc, ops))
        except StatusError as exc:
            got = ("error", exc.code)
        assert got == want, (doc, ops)
        assert doc == before

    check()

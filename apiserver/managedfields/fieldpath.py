"""Field paths and field sets over JSON objects, in structured-merge-diff's terms.

A path is a tuple of elements written as in FieldsV1: `f:spec` (a field or map key),
`k:{"port":80,"protocol":"TCP"}` (an item of an associative list, by its keys), `v:"a"` (an item of a
set list), `i:3` (an item of an atomic list, unused here since atomic lists are leaves). A set of paths
is a Python set; FieldsV1 is its trie, where `.` marks a node that is a member and has children.

What the Go types would say through their OpenAPI extensions (listType=map with listMapKeys,
listType=set, mapType/structType=atomic) is written down below for the kinds kubelab serves; a list
not named here is atomic (a leaf), a dict not named here is granular. Pure functions, no I/O.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

Path = tuple[str, ...]
SchemaPath = tuple[str, ...]  # field names only: ("spec", "ports")

# --- what the Go types declare ------------------------------------------------------------------

_POD_SPEC_LISTS: dict[SchemaPath, tuple[str, ...]] = {
    ("containers",): ("name",),
    ("initContainers",): ("name",),
    ("ephemeralContainers",): ("name",),
    ("containers", "ports"): ("containerPort", "protocol"),
    ("initContainers", "ports"): ("containerPort", "protocol"),
    ("containers", "env"): ("name",),
    ("initContainers", "env"): ("name",),
    ("containers", "volumeMounts"): ("mountPath",),
    ("initContainers", "volumeMounts"): ("mountPath",),
    ("containers", "volumeDevices"): ("devicePath",),
    ("containers", "resources", "claims"): ("name",),
    ("volumes",): ("name",),
    ("imagePullSecrets",): ("name",),
    ("hostAliases",): ("ip",),
    ("topologySpreadConstraints",): ("topologyKey", "whenUnsatisfiable"),
    ("resourceClaims",): ("name",),
    ("schedulingGates",): ("name",),
}


def _prefixed(prefix: SchemaPath, table: dict[SchemaPath, Any]) -> dict[SchemaPath, Any]:
    return {prefix + path: value for path, value in table.items()}


_CONDITIONS: dict[SchemaPath, tuple[str, ...]] = {("status", "conditions"): ("type",)}

# listType=map: the keys that identify an item.
LIST_KEYS: dict[str, dict[SchemaPath, tuple[str, ...]]] = {
    "Service": {("spec", "ports"): ("port", "protocol"), **_CONDITIONS},
    "Pod": {**_prefixed(("spec",), _POD_SPEC_LISTS), **_CONDITIONS, ("status", "podIPs"): ("ip",)},
    "Deployment": {**_prefixed(("spec", "template", "spec"), _POD_SPEC_LISTS), **_CONDITIONS},
    "ReplicaSet": {**_prefixed(("spec", "template", "spec"), _POD_SPEC_LISTS), **_CONDITIONS},
    "Node": {("status", "addresses"): ("type",), **_CONDITIONS},
    "Namespace": dict(_CONDITIONS),
}
COMMON_LIST_KEYS: dict[SchemaPath, tuple[str, ...]] = {("metadata", "ownerReferences"): ("uid",)}
# Key fields with a default, which structured-merge-diff fills in before it builds an item's key.
KEY_DEFAULTS: dict[str, Any] = {"protocol": "TCP"}
# listType=set.
SET_LISTS: set[SchemaPath] = {("metadata", "finalizers"), ("spec", "podCIDRs")}
# mapType=atomic / structType=atomic: owned as one leaf.
_WORKLOAD_ATOMIC: set[SchemaPath] = {("spec", "selector"), ("spec", "template", "spec", "nodeSelector")}
ATOMIC: dict[str, set[SchemaPath]] = {
    "Service": {("spec", "selector")},
    "Pod": {("spec", "nodeSelector")},
    "Deployment": _WORKLOAD_ATOMIC,
    "ReplicaSet": _WORKLOAD_ATOMIC,
}

# Never part of anyone's field set (the field manager's stripMeta).
STRIPPED: frozenset[Path] = frozenset({
    ("f:apiVersion",), ("f:kind",), ("f:metadata",), ("f:metadata", "f:name"), ("f:metadata", "f:namespace"),
    ("f:metadata", "f:creationTimestamp"), ("f:metadata", "f:selfLink"), ("f:metadata", "f:uid"),
    ("f:metadata", "f:clusterName"), ("f:metadata", "f:generation"), ("f:metadata", "f:managedFields"),
    ("f:metadata", "f:resourceVersion"),
})


class SchemaRules:
    """A custom kind's merge rules, read from its version's structural schema as structured-merge-diff reads
    the type apiextensions builds from it: an array is `x-kubernetes-list-type` map (keyed by
    `x-kubernetes-list-map-keys`), set, or atomic (also when it says nothing); an object is atomic only with
    `x-kubernetes-map-type: atomic` (granular otherwise). Schema paths are field names (list items add none),
    map keys of `additionalProperties` included; a path the schema does not reach has the default rules."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self._nodes: dict[SchemaPath, dict[str, Any] | None] = {}

    def node(self, spath: SchemaPath) -> dict[str, Any] | None:
        if spath not in self._nodes:
            self._nodes[spath] = self._walk(spath)
        return self._nodes[spath]

    def _walk(self, spath: SchemaPath) -> dict[str, Any] | None:
        node: Any = self.schema
        for name in spath:
            while isinstance(node, dict) and node.get("type") == "array":
                node = node.get("items")  # an item of a list is reached by no field name
            if not isinstance(node, dict):
                return None
            properties = node.get("properties")
            if isinstance(properties, dict) and name in properties:
                node = properties[name]
            elif isinstance(node.get("additionalProperties"), dict):
                node = node["additionalProperties"]
            else:
                return None
        return node if isinstance(node, dict) else None

    def _list_type(self, spath: SchemaPath) -> str | None:
        node = self.node(spath)
        if node is None or node.get("type") != "array":
            return None
        found = node.get("x-kubernetes-list-type")
        return found if isinstance(found, str) else None

    def list_keys(self, spath: SchemaPath) -> tuple[str, ...] | None:
        node = self.node(spath)
        keys = node.get("x-kubernetes-list-map-keys") if node is not None else None
        if self._list_type(spath) != "map" or not isinstance(keys, list) or not keys:
            return None
        return tuple(str(k) for k in keys)

    def is_set(self, spath: SchemaPath) -> bool:
        return self._list_type(spath) == "set"

    def is_atomic(self, spath: SchemaPath) -> bool:
        node = self.node(spath)
        return node is not None and node.get("x-kubernetes-map-type") == "atomic"


# The custom kinds' rules, by the type name the registry gives them (custom_type_name): registered while a
# definition's version is served (apiserver/apiextensions.py), as the built-in kinds' tables above are fixed.
_CUSTOM: dict[str, SchemaRules] = {}


def custom_type_name(api_version: str, kind: str) -> str:
    """The name a custom kind's version goes by here: never a built-in kind's (it holds a "/")."""
    return f"{api_version}/{kind}"


def register_schema(type_name: str, schema: dict[str, Any] | None) -> None:
    """Merge `type_name`'s objects by `schema` (None: maps granular, lists atomic)."""
    _CUSTOM[type_name] = SchemaRules(schema or {})


def unregister_schema(type_name: str) -> None:
    _CUSTOM.pop(type_name, None)


def list_keys(kind: str, spath: SchemaPath) -> tuple[str, ...] | None:
    rules = _CUSTOM.get(kind)
    if rules is not None:
        return rules.list_keys(spath) or COMMON_LIST_KEYS.get(spath)
    return LIST_KEYS.get(kind, {}).get(spath) or COMMON_LIST_KEYS.get(spath)


def is_set(kind: str, spath: SchemaPath) -> bool:
    rules = _CUSTOM.get(kind)
    if rules is not None:
        return rules.is_set(spath) or spath == ("metadata", "finalizers")
    return spath in SET_LISTS


def is_atomic(kind: str, spath: SchemaPath) -> bool:
    rules = _CUSTOM.get(kind)
    if rules is not None:
        return rules.is_atomic(spath)
    return spath in ATOMIC.get(kind, ())


# --- path elements -------------------------------------------------------------------------------

def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def item_element(kind: str, spath: SchemaPath, item: Any) -> str | None:
    """The element naming one item of the list at `spath`, or None for an atomic list."""
    keys = list_keys(kind, spath)
    if keys is not None:
        if not isinstance(item, dict):
            return None
        key = {k: item.get(k, KEY_DEFAULTS.get(k)) for k in keys if k in item or k in KEY_DEFAULTS}
        return "k:" + _json(key)
    if is_set(kind, spath):
        return "v:" + _json(item)
    return None


def _element_string(element: str) -> str:
    """fieldpath.PathElement.String(): `.name`, `[port=80,protocol="TCP"]`, `[="a"]`, `[3]`."""
    kind, text = element[:2], element[2:]
    if kind == "f:":
        return "." + text
    if kind == "k:":
        key = orjson.loads(text)
        return "[" + ",".join(f"{k}={_json(v)}" for k, v in sorted(key.items())) + "]"
    if kind == "v:":
        return f"[={text}]"
    return f"[{text}]"


def path_string(path: Path) -> str:
    """How kube-apiserver prints a path in conflict messages: `.spec.ports[port=80,protocol="TCP"].name`."""
    return "".join(_element_string(e) for e in path)


# --- walking objects -----------------------------------------------------------------------------

def _children(value: Any, kind: str, spath: SchemaPath) -> Iterator[tuple[str, SchemaPath, Any]]:
    """The child elements of a granular dict or an associative/set list, with their values."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield "f:" + key, spath + (key,), child
    elif isinstance(value, list):
        for item in value:
            element = item_element(kind, spath, item)
            if element is not None:
                yield element, spath, item


def _is_leaf(value: Any, kind: str, spath: SchemaPath) -> bool:
    if isinstance(value, dict):
        return is_atomic(kind, spath)
    if isinstance(value, list):
        return list_keys(kind, spath) is None and not is_set(kind, spath)
    return True


# The walks below are module-level functions (or a small class), not closures that call themselves:
# such a closure and its cell form a reference cycle that kept everything it captured (200,000 field
# paths of a big object) alive until the next full garbage collection.

def to_field_set(obj: dict[str, Any], kind: str) -> set[Path]:
    """ToFieldSet of an applied configuration: every leaf, every list item, every empty dict."""
    found: set[Path] = set()
    _collect_fields(obj, (), (), kind, found)
    return found - STRIPPED


def _collect_fields(value: Any, path: Path, spath: SchemaPath, kind: str, found: set[Path]) -> None:
    if _is_leaf(value, kind, spath) or (isinstance(value, dict) and not value):
        found.add(path)
        return
    for element, child_spath, child in _children(value, kind, spath):
        child_path = path + (element,)
        if not element.startswith("f:"):
            found.add(child_path)  # a list item is a member in its own right
        _collect_fields(child, child_path, child_spath, kind, found)


_MISSING = object()


@dataclass
class Comparison:
    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)


def compare(old: dict[str, Any], new: dict[str, Any], kind: str) -> Comparison:
    """TypedValue.Compare: leaves added, modified or removed, and the containers (dicts, list items)
    that appeared or vanished as a whole."""
    result = _Comparer(kind).walk(old, new, (), ())
    for group in (result.added, result.modified, result.removed):
        group -= STRIPPED
    return result


class _Comparer:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.result = Comparison()

    def whole(self, value: Any, path: Path, spath: SchemaPath, into: set[Path]) -> None:
        # A subtree on one side only (all of a create): every leaf and container in it, with none
        # of walk's comparing. _is_leaf and _elements inlined: this is most of a create's field
        # tracking (a pod's ~50 nodes), and their generators cost more than the work.
        kind = self.kind
        if isinstance(value, dict):
            if not value or is_atomic(kind, spath):
                into.add(path)
                return
            for key, child in value.items():
                self.whole(child, (*path, "f:" + key), (*spath, key), into)
        elif isinstance(value, list):
            if not value or (list_keys(kind, spath) is None and not is_set(kind, spath)):
                into.add(path)
                return
            # Items naming the same element: the last one counts, as in walk's dict of elements.
            items: dict[str, Any] = {}
            for item in value:
                element = item_element(kind, spath, item)
                if element is not None:
                    items[element] = item
            for element, item in items.items():
                self.whole(item, (*path, element), spath, into)
        else:
            into.add(path)
            return
        if path:
            into.add(path)

    def walk(self, lhs: Any, rhs: Any, path: Path, spath: SchemaPath) -> Comparison:
        result, missing = self.result, _MISSING
        if lhs is missing or rhs is missing:
            if rhs is not missing:
                self.whole(rhs, path, spath, result.added)
            elif lhs is not missing:
                self.whole(lhs, path, spath, result.removed)
            return result
        if lhs == rhs:
            return result  # equal subtrees hold no change (a status write leaves spec alone: one C-speed compare)
        leaf = _is_leaf(rhs if rhs is not missing else lhs, self.kind, spath)
        empty = all(v is missing or v in ({}, [], None) for v in (lhs, rhs))
        if leaf or empty or type(lhs) is not type(rhs) and missing not in (lhs, rhs):
            if lhs is missing:
                result.added.add(path)
            elif rhs is missing:
                result.removed.add(path)
            elif lhs != rhs:
                result.modified.add(path)
            return result
        left = dict(_elements(lhs, self.kind, spath)) if lhs is not missing else {}
        right = dict(_elements(rhs, self.kind, spath)) if rhs is not missing else {}
        for element in list(left) + [e for e in right if e not in left]:
            l_spath, l_value = left.get(element, (None, missing))
            r_spath, r_value = right.get(element, (None, missing))
            self.walk(l_value, r_value, path + (element,), r_spath or l_spath or spath)
        if path:
            if lhs is missing:
                result.added.add(path)
            elif rhs is missing:
                result.removed.add(path)
        return result


def _elements(value: Any, kind: str, spath: SchemaPath) -> Iterator[tuple[str, tuple[SchemaPath, Any]]]:
    for element, child_spath, child in _children(value, kind, spath):
        yield element, (child_spath, child)


# --- editing objects by path ---------------------------------------------------------------------

def _step(container: Any, element: str, kind: str, spath: SchemaPath) -> tuple[Any, SchemaPath] | None:
    if element.startswith("f:"):
        if isinstance(container, dict) and element[2:] in container:
            return container[element[2:]], spath + (element[2:],)
        return None
    if isinstance(container, list):
        for item in container:
            if item_element(kind, spath, item) == element:
                return item, spath
    return None


def get(obj: Any, path: Path, kind: str) -> tuple[bool, Any]:
    current: Any = obj
    spath: SchemaPath = ()
    for element in path:
        found = _step(current, element, kind, spath)
        if found is None:
            return False, None
        current, spath = found
    return True, current


def remove(obj: dict[str, Any], path: Path, kind: str) -> None:
    """Take the field or list item at `path` out of `obj` (in place); a missing path is fine."""
    if not path:
        return
    exists, parent = get(obj, path[:-1], kind)
    if not exists:
        return
    element = path[-1]
    spath = _schema_path(path[:-1])
    if element.startswith("f:") and isinstance(parent, dict):
        parent.pop(element[2:], None)
    elif isinstance(parent, list):
        parent[:] = [item for item in parent if item_element(kind, spath, item) != element]


def _schema_path(path: Path) -> SchemaPath:
    return tuple(e[2:] for e in path if e.startswith("f:"))


def owns_at_or_below(owned: Iterable[Path], path: Path) -> bool:
    """Whether `owned` holds `path` itself or a path below it (EnsureNamedFieldsAreMembers: owning a
    field keeps the fields that contain it)."""
    return any(p[:len(path)] == path for p in owned)


# --- merging an applied configuration -------------------------------------------------------------

def merge(live: dict[str, Any], config: dict[str, Any], kind: str) -> dict[str, Any]:
    """structured-merge-diff's merge of an applied configuration into the live object, by the kind's rules:
    granular maps merge key by key (a null in the configuration takes the key out, as for every apply here),
    associative and set lists item by item (see _merge_items for the order), atomic maps and lists and
    scalars are replaced. A new object; neither argument is changed."""
    merged = _merge(live, config, kind, ())
    return merged if isinstance(merged, dict) else {}


def _merge(live: Any, config: Any, kind: str, spath: SchemaPath) -> Any:
    if isinstance(config, dict) and isinstance(live, dict) and not is_atomic(kind, spath):
        out = dict(live)
        for key, value in config.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = _merge(live.get(key, _MISSING), value, kind, spath + (key,))
        return out
    if isinstance(config, list) and isinstance(live, list) and not _is_leaf(config, kind, spath):
        merged = _merge_items(live, config, kind, spath)
        if merged is not None:
            return merged
    return copy.deepcopy(config)


def _merge_items(live: list[Any], config: list[Any], kind: str, spath: SchemaPath) -> list[Any] | None:
    """An associative or set list merged in structured-merge-diff's order: the live items stay where they are,
    the configuration's items come in its order, an item in both where the configuration puts it relative to
    the other shared ones. None when an item has no key (the list is then replaced whole)."""
    l_order = [item_element(kind, spath, item) for item in live]
    r_order = [item_element(kind, spath, item) for item in config]
    if None in l_order or None in r_order:
        return None
    l_items = {e: item for e, item in zip(l_order, live, strict=True) if e is not None}
    r_items = {e: item for e, item in zip(r_order, config, strict=True) if e is not None}
    shared = iter([e for e in r_items if e in l_items])
    next_shared = next(shared, None)
    out: list[Any] = []
    done: set[str] = set()
    li = ri = 0
    while li < len(l_order) or ri < len(r_order):
        if li < len(l_order):
            element = l_order[li]
            assert element is not None
            if element in done:
                li += 1
                continue
            if ri < len(r_order) and element == r_order[ri]:
                out.append(_merge(l_items[element], r_items[element], kind, spath))
                done.add(element)
                li, ri = li + 1, ri + 1
                next_shared = next(shared, None) if next_shared == element else next_shared
                continue
            if element not in r_items:
                out.append(copy.deepcopy(l_items[element]))
                done.add(element)
                li += 1
                continue
            if ri >= len(r_order) or (next_shared is not None and next_shared != element):
                li += 1  # a shared item the configuration places later: it comes with it
                continue
        element = r_order[ri]
        assert element is not None
        ri += 1
        if element in done:
            continue
        out.append(_merge(l_items.get(element, _MISSING), r_items[element], kind, spath))
        done.add(element)
        if next_shared == element:
            next_shared = next(shared, None)
    return out


# --- FieldsV1 ------------------------------------------------------------------------------------

# Every pod of a Deployment or a scheduler_perf burst has the same field sets: its creator's, the scheduler's
# binding, the kubelet's status. Building a trie from a set (and a set from a trie) cost 0.1-0.3 ms per entry
# per write, four or more per pod; a field set seen before is looked up instead and its answer copied (the
# caller gets its own, mutable result either way). Only field sets of up to MEMO_PATHS paths are kept, at
# most MEMO_ENTRIES of each kind (all forgotten when full): about 6 MiB when both are full of the largest
# (tracemalloc), whatever is written; in a cluster the same few field sets come back (a pod's creator, the
# scheduler, the kubelet, each controller).
MEMO_PATHS = 128
MEMO_ENTRIES = 128
_tries: dict[frozenset[Path], bytes] = {}
_sets: dict[bytes, frozenset[Path]] = {}


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """The FieldsV1 trie of a set: `{"f:spec": {"f:ports": {".": {}, "k:{...}": {...}}}}`."""
    key = frozenset(paths)
    if len(key) > MEMO_PATHS:
        return _to_fields_v1(key)
    encoded = _tries.get(key)
    if encoded is None:
        if len(_tries) >= MEMO_ENTRIES:
            _tries.clear()
        encoded = _tries[key] = orjson.dumps(_to_fields_v1(key))
    result: dict[str, Any] = orjson.loads(encoded)  # a copy of its own: the caller stores and may change it
    return result


def _to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    members: set[Path] = set()
    for path in paths:
        members.add(path)
        node = root
        for element in path:
            node = node.setdefault(element, {})
    _mark_members(root, (), members)
    return _sorted(root)


def _mark_members(node: dict[str, Any], path: Path, members: set[Path]) -> None:
    for element, child in list(node.items()):
        child_path = path + (element,)
        if child:
            _mark_members(child, child_path, members)
            if child_path in members:
                child["."] = {}


# Keys sorted per call: sorting holds the GIL for the whole call, which the event loop waits behind
# (offload.py); 200,000 finalizers took one 120 ms sort. Runs this long merge in Python instead.
_SORT_RUN = 4096


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    # "." first, then the elements in byte order, as the Go serializer writes them: plain byte order
    # is both, "." sorting before every element ("f:", "i:", "k:", "v:").
    return {k: _sorted(node[k]) if node[k] else {} for k in _sorted_keys(list(node))}


def _sorted_keys(keys: list[str]) -> list[str]:
    if len(keys) <= _SORT_RUN:
        return sorted(keys)
    return list(heapq.merge(*(sorted(keys[i:i + _SORT_RUN]) for i in range(0, len(keys), _SORT_RUN))))


def from_fields_v1(fields: Any) -> set[Path]:
    """The set of a FieldsV1 trie (the memo above, the other way round: keyed by the trie's JSON)."""
    try:
        key = orjson.dumps(fields)
    except TypeError:  # not JSON (a malformed entry): read as it is, not memoized
        key = b""
    known = _sets.get(key) if key else None
    if known is not None:
        return set(known)
    result: set[Path] = set()
    _read_fields(fields, (), result)
    if key and len(result) <= MEMO_PATHS:
        if len(_sets) >= MEMO_ENTRIES:
            _sets.clear()
        _sets[key] = frozenset(result)
    return result


def _read_fields(node: Any, path: Path, result: set[Path]) -> None:
    if not isinstance(node, dict):
        return
    for element, child in node.items():
        if element == ".":
            result.add(path)
            continue
        child_path = path + (element,)
        if not child:
            result.add(child_path)
        else:
            _read_fields(child, child_path, result)

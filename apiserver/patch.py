"""Patches: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Strategic merge patch is what `kubectl apply` and `kubectl patch` send by default. It differs from a
merge patch in lists: lists that have a merge key in the Kubernetes Go types (`ports` of a Service by
`port`, `containers` by `name`) are merged item by item instead of replaced, and the patch may carry
directives — `$patch: delete|replace|merge`, `$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>`
and `$retainKeys` — which are applied and never stored.

A patch costs about what it names: each copies the live object once and works on that copy in place,
and lists are matched through dicts, not scans (10,000 finalizers had taken 10 s, quadratically). What a
patch may make is bounded as kube-apiserver bounds it: a JSON patch has at most 10,000 operations and
its copies may add at most 3 MiB (rfc6902.py), and no patch may make an object bigger than a request body.
"""

from __future__ import annotations

from typing import Any

import orjson

from . import codecs, errors, rfc6902

Path = tuple[str, ...]

_POD_SPEC_KEYS: dict[Path, str] = {
    ("containers",): "name",
    ("initContainers",): "name",
    ("ephemeralContainers",): "name",
    ("containers", "ports"): "containerPort",
    ("initContainers", "ports"): "containerPort",
    ("containers", "env"): "name",
    ("initContainers", "env"): "name",
    ("containers", "volumeMounts"): "mountPath",
    ("initContainers", "volumeMounts"): "mountPath",
    ("containers", "volumeDevices"): "devicePath",
    ("volumes",): "name",
    ("imagePullSecrets",): "name",
    ("hostAliases",): "ip",
    ("topologySpreadConstraints",): "topologyKey",
    ("resourceClaims",): "name",
    ("schedulingGates",): "name",
}


def _with_prefix(prefix: Path, table: dict[Path, str]) -> dict[Path, str]:
    return {prefix + path: key for path, key in table.items()}


# patchMergeKey of the Go types, by kind and field path (list indices left out).
MERGE_KEYS: dict[str, dict[Path, str]] = {
    "Service": {("spec", "ports"): "port", ("status", "conditions"): "type"},
    "Pod": {**_with_prefix(("spec",), _POD_SPEC_KEYS), ("status", "conditions"): "type",
            ("status", "podIPs"): "ip", ("status", "hostIPs"): "ip"},
    "Node": {("status", "addresses"): "type", ("status", "conditions"): "type",
             ("spec", "podCIDRs"): ""},
    "Deployment": {**_with_prefix(("spec", "template", "spec"), _POD_SPEC_KEYS), ("status", "conditions"): "type"},
    "ReplicaSet": {**_with_prefix(("spec", "template", "spec"), _POD_SPEC_KEYS), ("status", "conditions"): "type"},
    "Namespace": {("status", "conditions"): "type"},
}
COMMON_MERGE_KEYS: dict[Path, str] = {("metadata", "ownerReferences"): "uid"}
# Lists of scalars merged as sets (patchStrategy:"merge" without a key).
PRIMITIVE_MERGE: set[Path] = {("metadata", "finalizers"), ("spec", "podCIDRs")}

DIRECTIVE = "$patch"
SET_ORDER = "$setElementOrder/"
DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
RETAIN_KEYS = "$retainKeys"


def merge_patch(original: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces. The live object is
    copied once and merged into in place (a copy per level made a deep object cost its size times its
    depth)."""
    if not isinstance(patch, dict):
        return rfc6902.clone(patch)
    return _merge_into(rfc6902.clone(original) if isinstance(original, dict) else {}, patch)


def _merge_into(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            target[key] = _merge_into(current if isinstance(current, dict) else {}, value)
        else:
            target[key] = rfc6902.clone(value) if isinstance(value, list) else value
    return target


def json_patch(original: Any, patch: Any) -> Any:
    """RFC 6902, all or nothing, bounded as kube-apiserver bounds it (rfc6902.py). A failing operation is
    kube-apiserver's 422: the message is the generic `the server rejected our request due to an error
    in our request` and the reason sits in details.causes, as NewGenericServerResponse puts it (a
    failed `test` reads as evanphx/json-patch words it: `testing value /spec/x failed: test failed`)."""
    if not isinstance(patch, list):
        raise errors.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    try:
        result = rfc6902.apply(original, patch)
    except (rfc6902.TooDeep, RecursionError):  # a chain of copies into themselves
        raise _patch_rejected(f"exceeded max depth of {codecs.MAX_DEPTH}") from None
    except rfc6902.PatchFailed as exc:
        raise _patch_rejected(str(exc)) from None
    try:
        # Operations can nest a value deeper than any body may be (a copy into itself, an add of a deep
        # value at a deep path); what could not have been sent cannot be made.
        codecs.check_depth(result)
    except ValueError as exc:
        raise _patch_rejected(str(exc)) from None
    return result


def _patch_rejected(cause: str) -> errors.StatusError:
    return errors.StatusError(422, "Invalid", "the server rejected our request due to an error in our request",
                              {"causes": [{"message": cause}]})


def _merge_key(kind: str, path: Path) -> str | None:
    table = MERGE_KEYS.get(kind, {})
    if path in table:
        return table[path]
    return COMMON_MERGE_KEYS.get(path)


# --- strategic merge patch ---------------------------------------------------------------------
# The live object is copied once (strategic_merge_patch) and merged into in place; the patch is never
# changed, so a retried update applies it again as sent. Lists are matched through dicts keyed by
# _hashable(identity), whose equality is Python's ==, so every lookup finds what the list scan it
# replaces found (10,000 finalizers cost 10,000 lookups, not 10,000 scans of 10,000).

def strategic_merge_patch(original: Any, patch: Any, kind: str) -> Any:
    if not isinstance(patch, dict):
        raise errors.bad_request("json: cannot unmarshal into Go value of type map[string]interface {}")
    return _merge_map(rfc6902.clone(original) if isinstance(original, dict) else {}, patch, kind, ())


def _hashable(value: Any) -> Any:
    """`value` as a dict key that equals another exactly when the values are == (1 == 1.0 == True, as
    the list scans compared them): objects become frozensets of their items, arrays tuples."""
    if isinstance(value, dict):
        return frozenset((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _identity(item: Any, key: str | None) -> Any:
    return _hashable(item.get(key) if key and isinstance(item, dict) else item)


def _merge_map(result: dict[str, Any], patch: dict[str, Any], kind: str, path: Path) -> Any:
    """Merge `patch` into `result` (a private copy, changed in place) and return it; None for
    `$patch: delete`."""
    directive = patch.get(DIRECTIVE)
    if directive == "replace":
        return strip_directives({k: v for k, v in patch.items() if k != DIRECTIVE})
    if directive == "delete":
        return None
    if directive not in (None, "merge"):
        raise errors.bad_request(f"Unknown patch type: {directive}")
    retain = patch.get(RETAIN_KEYS)
    if isinstance(retain, list):
        # applyRetainKeysDirective runs before anything is merged: it clears the live keys the list
        # leaves out, then the patch's own keys are merged in as usual.
        kept = _hashable_set(retain)
        result = {k: v for k, v in result.items() if _hashable(k) in kept}
    # The live order of each list the patch reorders, read before anything merges into its items.
    live_orders: dict[str, list[Any]] = {}
    for key in patch:
        if key.startswith(SET_ORDER):
            field = key[len(SET_ORDER):]
            if isinstance(result.get(field), list):
                merge_key = _merge_key(kind, path + (field,)) or None
                live_orders[field] = [_identity(o, merge_key) for o in result[field]]
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key == DIRECTIVE or key == RETAIN_KEYS:
            continue
        if key.startswith(SET_ORDER):
            orders[key[len(SET_ORDER):]] = value
            continue
        if key.startswith(DELETE_PRIMITIVE):
            field = key[len(DELETE_PRIMITIVE):]
            if value is not None and not isinstance(value, list):
                raise errors.bad_request("invalid patch format of primitive list")
            if isinstance(result.get(field), list):  # nothing to delete from a list that is not there
                gone = _hashable_set(value or [])
                result[field] = [x for x in result[field] if _hashable(x) not in gone]
            continue
        if value is None:
            result.pop(key, None)
            continue
        child = path + (key,)
        current = result.get(key)
        if isinstance(value, dict):
            merged = _merge_map(current if isinstance(current, dict) else {}, value, kind, child)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(current if isinstance(current, list) else [], value, kind, child)
        else:
            result[key] = value
    for field, order in orders.items():
        if isinstance(result.get(field), list) and isinstance(order, list):
            merge_key = _merge_key(kind, path + (field,)) or None
            result[field] = _normalize_order(result[field], _wanted(order, merge_key),
                                             live_orders.get(field, []), merge_key)
    return result


def _hashable_set(values: Any) -> set[Any]:
    return {_hashable(v) for v in values} if isinstance(values, list) else set()


def _wanted(patch_order: list[Any], key: str | None) -> list[Any]:
    """The identities a patch (or `$setElementOrder`) orders, deletions left out."""
    return [_identity(o, key) for o in patch_order
            if not (key and isinstance(o, dict) and o.get(DIRECTIVE) == "delete")]


_GONE = object()  # a slot whose item a `$patch: delete` inside it removed


def _merge_list(original: list[Any], patch: list[Any], kind: str, path: Path) -> list[Any]:
    """mergeSlice: lists with a merge key merge item by item, `patchStrategy:merge` scalar lists as sets,
    anything else is replaced. Deletions (`$patch: delete`) apply before the merge, as in apimachinery.
    `original` is a private copy; the list returned is a new one."""
    key = _merge_key(kind, path)
    if path in PRIMITIVE_MERGE or key == "":
        merged: list[Any] = []
        seen: set[Any] = set()
        for items, from_patch in ((original, False), (patch, True)):
            for item in items:
                ident = _hashable(item)
                if ident not in seen:
                    seen.add(ident)
                    merged.append(rfc6902.clone(item) if from_patch and isinstance(item, dict | list) else item)
        return _normalize_order(merged, _wanted(patch, None), [_hashable(o) for o in original], None)
    if not key:
        return list(strip_directives(patch))
    deleted: set[Any] = set()
    plain: list[dict[str, Any]] = []
    replace = False
    for item in patch:
        if not isinstance(item, dict):
            continue
        directive = item.get(DIRECTIVE)
        if directive == "delete":
            deleted.add(_hashable(item.get(key)))
        elif directive == "replace":
            replace = True
        else:
            plain.append(item)
    result = [o for o in original if not (isinstance(o, dict) and _hashable(o.get(key)) in deleted)]
    if replace:
        return list(strip_directives(plain))
    live = [_identity(o, key) for o in result]
    # Where each identity's items are (dict items only, in list order): a patch item merges into the
    # first, as the scan for the first match did; a new item joins the end of the list and its identity.
    slots: dict[Any, list[int]] = {}
    for index, o in enumerate(result):
        if isinstance(o, dict):
            slots.setdefault(_hashable(o.get(key)), []).append(index)
    for item in plain:
        ident = _hashable(item.get(key))
        where = slots.get(ident)
        if not where:
            slots.setdefault(ident, []).append(len(result))
            result.append(strip_directives(item))
            continue
        merged_item = _merge_map(result[where[0]], item, kind, path)
        if merged_item is None:
            result[where.pop(0)] = _GONE
        else:
            result[where[0]] = merged_item
    result = [o for o in result if o is not _GONE]
    return _normalize_order(result, [_hashable(i.get(key)) for i in plain], live, key)


def _normalize_order(items: list[Any], wanted: list[Any], live: list[Any], key: str | None) -> list[Any]:
    """normalizeElementOrder + mergeSortedSlice: the items named in the patch (or `$setElementOrder`) take
    the patch's order, the others keep the live order, and the two runs interleave by live position.
    `wanted` and `live` are the identities (_identity) in the patch's and the live order.

    mergeSortedSlice takes a server-only item first only when both it and the next patch item have a live
    position and its own is earlier; so a new item goes before the server-only ones (live [a, b] patched
    with [c] gives [c, a, b]), and live [1, 2, 3] patched with [3, 1] gives [2, 3, 1], one of
    apimachinery's own test cases.
    """
    wanted_at = _first_positions(wanted)
    live_at = _first_positions(live)
    named: list[tuple[int, int, Any]] = []  # (position in the patch, live position, item)
    server_only: list[tuple[int, Any]] = []  # (live position, item)
    for item in items:
        ident = _identity(item, key)
        at = wanted_at.get(ident, -1)
        if at >= 0:
            named.append((at, live_at.get(ident, -1), item))
        else:
            server_only.append((live_at.get(ident, -1), item))
    named.sort(key=lambda n: n[0])  # stable: equal identities keep their order
    server_only.sort(key=lambda s: (s[0] < 0, s[0]))
    out: list[Any] = []
    i = j = 0
    while i < len(named) or j < len(server_only):
        if i == len(named):
            out.append(server_only[j][1])
            j += 1
        elif j == len(server_only):
            out.append(named[i][2])
            i += 1
        else:
            left, right = server_only[j][0], named[i][1]
            if left >= 0 and right >= 0 and left < right:
                out.append(server_only[j][1])
                j += 1
            else:
                out.append(named[i][2])
                i += 1
    return out


def _first_positions(idents: list[Any]) -> dict[Any, int]:
    positions: dict[Any, int] = {}
    for index, ident in enumerate(idents):
        positions.setdefault(ident, index)
    return positions


def strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_directives(v) for k, v in value.items()
                if k not in (DIRECTIVE, RETAIN_KEYS) and not k.startswith((SET_ORDER, DELETE_PRIMITIVE))}
    if isinstance(value, list):
        return [strip_directives(v) for v in value]
    return value


def apply_patch(content_type: str, original: dict[str, Any], patch: Any, kind: str) -> Any:
    """`patch` (decoded) of type `content_type` applied to a copy of `original`. The result may be no
    bigger than a request body: no patch may make what no request could send (kube-apiserver meets the
    same object at etcd's limit, after the work that led to it)."""
    if content_type == "application/json-patch+json":
        result = json_patch(original, patch)
    elif content_type == "application/merge-patch+json":
        result = merge_patch(original, patch)
    elif content_type in ("application/strategic-merge-patch+json", "application/apply-patch+yaml"):
        # Server-side apply is approximated by a strategic merge of the applied configuration: fields
        # merge by key rather than being replaced, so a second apply never wipes what the first set.
        result = strategic_merge_patch(original, patch, kind)
    else:
        raise errors.unsupported_media_type(PATCH_TYPES)
    check_size(result)
    return result


def check_size(obj: Any) -> None:
    """413 for an object whose JSON is over the request body limit (orjson's length: C speed)."""
    try:
        size = len(orjson.dumps(obj))
    except (TypeError, orjson.JSONEncodeError):
        return  # not JSON the encoder takes (a YAML big integer): storing it says what is wrong
    if size > codecs.MAX_BODY:
        raise errors.too_large()


# kube-apiserver's patch types, in the order its 415 lists them (the PATCH route's supportedTypes).
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml")

"""Patches: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Strategic merge patch is what `kubectl apply` and `kubectl patch` send by default. It differs from a
merge patch in lists: lists that have a merge key in the Kubernetes Go types (`ports` of a Service by
`port`, `containers` by `name`) are merged item by item instead of replaced, and the patch may carry
directives — `$patch: delete|replace|merge`, `$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>`
and `$retainKeys` — which are applied and never stored.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from . import errors

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
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(original: Any, patch: Any) -> Any:
    """RFC 6902, all or nothing. A failing operation is kube-apiserver's 422: the message is the generic
    `the server rejected our request due to an error in our request` and the reason sits in
    details.causes, as NewGenericServerResponse puts it (a failed `test` reads as evanphx/json-patch
    words it: `testing value /spec/x failed: test failed`)."""
    if not isinstance(patch, list):
        raise errors.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = original
    for op in patch:
        try:
            doc = jsonpatch.JsonPatch([op]).apply(doc)
        except jsonpatch.JsonPatchTestFailed as exc:
            path = op.get("path", "") if isinstance(op, dict) else ""
            raise _patch_rejected(f"testing value {path} failed: test failed") from exc
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError) as exc:
            raise _patch_rejected(str(exc)) from exc
    return doc


def _patch_rejected(cause: str) -> errors.StatusError:
    return errors.StatusError(422, "Invalid", "the server rejected our request due to an error in our request",
                              {"causes": [{"message": cause}]})


def _merge_key(kind: str, path: Path) -> str | None:
    table = MERGE_KEYS.get(kind, {})
    if path in table:
        return table[path]
    return COMMON_MERGE_KEYS.get(path)


def strategic_merge_patch(original: Any, patch: Any, kind: str) -> Any:
    if not isinstance(patch, dict):
        raise errors.bad_request("json: cannot unmarshal into Go value of type map[string]interface {}")
    return _merge_map(original if isinstance(original, dict) else {}, patch, kind, ())


def _merge_map(original: dict[str, Any], patch: dict[str, Any], kind: str, path: Path) -> Any:
    directive = patch.get(DIRECTIVE)
    if directive == "replace":
        return strip_directives({k: v for k, v in patch.items() if k != DIRECTIVE})
    if directive == "delete":
        return None
    if directive not in (None, "merge"):
        raise errors.bad_request(f"Unknown patch type: {directive}")
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
            result[field] = _normalize_order(result[field], order, server_lists.get(field) or [],
                                             _merge_key(kind, path + (field,)) or None)
    return result


def _merge_list(original: list[Any], patch: list[Any], kind: str, path: Path) -> list[Any]:
    """mergeSlice: lists with a merge key merge item by item, `patchStrategy:merge` scalar lists as sets,
    anything else is replaced. Deletions (`$patch: delete`) apply before the merge, as in apimachinery."""
    key = _merge_key(kind, path)
    if path in PRIMITIVE_MERGE or key == "":
        merged: list[Any] = []
        for item in list(original) + list(patch):
            if item not in merged:
                merged.append(item)
        return _normalize_order(merged, patch, original, None)
    if not key:
        return list(strip_directives(patch))
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
        return list(strip_directives(plain))
    server_order = list(result)
    for item in plain:
        ident = item.get(key)
        index = next((i for i, o in enumerate(result) if isinstance(o, dict) and o.get(key) == ident), None)
        if index is None:
            result.append(strip_directives(item))
        else:
            merged_item = _merge_map(result[index], item, kind, path)
            if merged_item is None:
                del result[index]
            else:
                result[index] = merged_item
    return _normalize_order(result, plain, server_order, key)


def _normalize_order(items: list[Any], patch_order: list[Any], server_order: list[Any], key: str | None) -> list[Any]:
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


def strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_directives(v) for k, v in value.items()
                if k not in (DIRECTIVE, RETAIN_KEYS) and not k.startswith((SET_ORDER, DELETE_PRIMITIVE))}
    if isinstance(value, list):
        return [strip_directives(v) for v in value]
    return value


def apply_patch(content_type: str, original: dict[str, Any], patch: Any, kind: str) -> Any:
    if content_type == "application/json-patch+json":
        return json_patch(original, patch)
    if content_type == "application/merge-patch+json":
        return merge_patch(original, patch)
    if content_type in ("application/strategic-merge-patch+json", "application/apply-patch+yaml"):
        # Server-side apply is approximated by a strategic merge of the applied configuration: fields
        # merge by key rather than being replaced, so a second apply never wipes what the first set.
        return strategic_merge_patch(original, patch, kind)
    raise errors.unsupported_media_type(PATCH_TYPES)


# kube-apiserver's patch types, in the order its 415 lists them (the PATCH route's supportedTypes).
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml")

"""metadata.managedFields: who owns which fields, kept up to date on every write, and server-side apply.

The algorithms are structured-merge-diff's (merge.Updater) on JSON dicts:

- An update (create, PUT, merge/JSON/strategic patch) by manager M makes M own every field it added
  or changed, and takes those fields from everyone else, without conflicts.
- An apply by M merges M's configuration into the live object, removes the fields M applied last
  time and no longer applies (unless another manager owns them), and refuses, with the conflicting
  paths, to change a field another manager owns to a different value — unless forced, in which case
  the field changes hands. M's Apply entry then holds exactly the configuration's field set.
- kube-apiserver's client-side-apply upgrade: an apply by the manager `kubectl` may take over fields
  whose value still equals the last-applied-configuration annotation, and keeps that annotation in
  step with what it applied.

Simplified against kube-apiserver: one API version per kind (no conversion of field sets), a merge
that is, for built-in kinds, the strategic merge patch (associative lists merge by their patchMergeKey, not
by all their list-map keys; custom kinds merge by their schema's list and map types, fieldpath.merge), and "created as a whole" markers (`.`) for nested structs an update adds, where
kube-apiserver compares against the Go type's zero value, in which non-pointer structs already exist
(the registry treats metadata, spec and status so). Applies to the status subresource are not
supported (the status strategy keeps the stored metadata, managedFields included).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from . import fieldpath
from .fieldpath import Path

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# The one manager name kube-apiserver's client-side-apply upgrade applies to (kubectl apply --server-side).
KUBECTL = "kubectl"
APPLY, UPDATE = "Apply", "Update"
_STATUS: Path = ("f:status",)

# merge(live, config): the merged object, new; neither argument is changed.
Merge = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


@dataclass
class Entry:
    manager: str
    operation: str
    api_version: str
    fields: set[Path] = field(default_factory=set)
    time: str | None = None
    subresource: str = ""

    def same_manager(self, other: Entry) -> bool:
        """BuildManagerIdentifier: an applier is one manager whatever version it applied; an updater
        is one per API version. Both are one per subresource."""
        mine = (self.manager, self.operation, self.subresource)
        if mine != (other.manager, other.operation, other.subresource):
            return False
        return self.operation == APPLY or self.api_version == other.api_version

    def describe(self) -> str:
        """printManager, as conflict messages name a manager."""
        text = orjson.dumps(self.manager).decode()
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == UPDATE:
            text += f" using {self.api_version}" + (f" at {self.time}" if self.time else "")
        return text


@dataclass
class Conflict:
    entry: Entry
    path: Path


class ApplyConflict(Exception):
    """Fields another manager owns would change; kube-apiserver answers 409 with one cause each."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        super().__init__(conflict_message(conflicts))
        self.conflicts = conflicts


def conflict_message(conflicts: list[Conflict]) -> str:
    """getConflictMessage: one conflict inline, several grouped by manager (managers sorted)."""
    if len(conflicts) == 1:
        c = conflicts[0]
        return f"Apply failed with 1 conflict: conflict with {c.entry.describe()}: {fieldpath.path_string(c.path)}"
    by_manager: dict[tuple[str, str, str], tuple[str, list[str]]] = {}
    for c in conflicts:
        key = (c.entry.manager, c.entry.operation, c.entry.subresource)
        by_manager.setdefault(key, (c.entry.describe(), []))[1].append(fieldpath.path_string(c.path))
    lines = []
    for key in sorted(by_manager):
        described, paths = by_manager[key]
        lines.append(f"conflicts with {described}:")
        lines += [f"- {p}" for p in paths]
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)


# --- entries <-> metadata.managedFields ----------------------------------------------------------

def decode_entries(raw: Any) -> list[Entry]:
    """The entries of metadata.managedFields; entries that are not well-formed are dropped, as the
    field manager resets managed fields it cannot decode."""
    entries: list[Entry] = []
    for item in raw or []:
        if not isinstance(item, dict) or not isinstance(item.get("manager"), str) \
                or item.get("operation") not in (APPLY, UPDATE) or item.get("fieldsType", "FieldsV1") != "FieldsV1":
            continue
        entries.append(Entry(item["manager"], item["operation"], str(item.get("apiVersion") or ""),
                             fieldpath.from_fields_v1(item.get("fieldsV1") or {}), item.get("time"),
                             str(item.get("subresource") or "")))
    return entries


def encode_entries(entries: list[Entry]) -> list[dict[str, Any]] | None:
    """sortEncodedManagedFields: Apply before Update, then by time, manager, version, subresource."""
    kept = [e for e in entries if e.fields]
    kept.sort(key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource))
    out = []
    for e in kept:
        item: dict[str, Any] = {"manager": e.manager, "operation": e.operation, "apiVersion": e.api_version}
        if e.time:
            item["time"] = e.time
        item["fieldsType"] = "FieldsV1"
        item["fieldsV1"] = fieldpath.to_fields_v1(e.fields)
        if e.subresource:
            item["subresource"] = e.subresource
        out.append(item)
    return out or None


def _without_meta_noise(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _scoped(paths: set[Path], subresource: str) -> set[Path]:
    """The fields a write may own: the status subresource owns status only, the main resource
    everything but status (the strategies' reset fields)."""
    if subresource == "status":
        return {p for p in paths if p[:1] == _STATUS}
    return {p for p in paths if p[:1] != _STATUS}


def _find(entries: list[Entry], wanted: Entry) -> Entry | None:
    return next((e for e in entries if e.same_manager(wanted)), None)


# --- update ------------------------------------------------------------------------------------

def track_update(kind: str, old: dict[str, Any], new: dict[str, Any], entries: list[Entry], *, manager: str,
                 api_version: str, subresource: str = "", now: str) -> list[Entry]:
    """Updater.Update plus managedFieldsUpdater: the fields this write added or changed become the
    manager's (and stop being anyone else's); the manager's entry gets a new time only if it took
    something."""
    diff = fieldpath.compare(_without_meta_noise(old), _without_meta_noise(new), kind)
    taken = _scoped(diff.added | diff.modified, subresource)
    removed = diff.removed
    result = [Entry(e.manager, e.operation, e.api_version, set(e.fields), e.time, e.subresource) for e in entries]
    me = Entry(manager, UPDATE, api_version, subresource=subresource)
    mine = _find(result, me)
    for e in result:
        if e is not mine:
            e.fields -= taken | removed
    if mine is None:
        if not taken:
            return [e for e in result if e.fields]
        mine = me
        result.append(mine)
    mine.fields = (mine.fields - removed) | taken
    if taken:
        mine.time = now
    return [e for e in result if e.fields]


# --- apply -------------------------------------------------------------------------------------

def apply(kind: str, live: dict[str, Any] | None, config: dict[str, Any], entries: list[Entry], *, manager: str,
          api_version: str, force: bool, now: str, merge: Merge, subresource: str = "") -> dict[str, Any]:
    """Server-side apply of `config` by `manager` onto `live` (None: the object does not exist yet).
    Returns the new object with its managedFields; raises ApplyConflict."""
    live = _without_meta_noise(live or {})
    try:
        return _apply(kind, live, config, entries, manager=manager, api_version=api_version, force=force, now=now,
                      merge=merge, subresource=subresource)
    except ApplyConflict as exc:
        # lastAppliedManager: kubectl moving from client-side to server-side apply may take over the
        # fields whose live value is still what the last client-side apply set.
        allowed = _allowed_by_last_applied(kind, live) if manager == KUBECTL else set()
        remaining = [c for c in exc.conflicts if c.path not in allowed]
        if remaining or not allowed:
            raise ApplyConflict(remaining or exc.conflicts) from None
        return _apply(kind, live, config, entries, manager=manager, api_version=api_version, force=True, now=now,
                      merge=merge, subresource=subresource)


def _apply(kind: str, live: dict[str, Any], config: dict[str, Any], entries: list[Entry], *, manager: str,
           api_version: str, force: bool, now: str, merge: Merge, subresource: str) -> dict[str, Any]:
    applied = _scoped(fieldpath.to_field_set(config, kind), subresource)
    result = [Entry(e.manager, e.operation, e.api_version, set(e.fields), e.time, e.subresource) for e in entries]
    me = Entry(manager, APPLY, api_version, subresource=subresource)
    mine = _find(result, me)
    others = [e for e in result if e is not mine]
    merged = merge(live, config)  # a new object: the merge copies what it merges into
    if mine is not None:
        # prune + addBackOwnedItems: what this manager applied last time and no longer applies goes,
        # unless some manager (this one included, through a field below it) still owns it.
        owned = applied.union(*(e.fields for e in others))
        for path in sorted(mine.fields - applied, key=len):
            if not fieldpath.owns_at_or_below(owned, path):
                fieldpath.remove(merged, path, kind)
    diff = fieldpath.compare(live, merged, kind)
    changed = _scoped(diff.added | diff.modified, subresource)
    conflicts = [Conflict(e, p) for e in others for p in sorted(e.fields & changed, key=fieldpath.path_string)]
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    for e in others:
        e.fields -= changed | diff.removed
    if mine is None:
        mine = me
        result.append(mine)
    object_changed = bool(diff.added or diff.modified or diff.removed)
    if object_changed or mine.fields != applied or mine.time is None:
        mine.time = now
    mine.fields = applied
    mine.api_version = api_version
    if manager == KUBECTL:
        _sync_last_applied(live, merged, config)
    merged.setdefault("metadata", {})["managedFields"] = encode_entries(result)
    if merged["metadata"]["managedFields"] is None:
        del merged["metadata"]["managedFields"]
    return merged


def _last_applied(obj: dict[str, Any]) -> str | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    return value if isinstance(value, str) and value else None


def _allowed_by_last_applied(kind: str, live: dict[str, Any]) -> set[Path]:
    """allowedConflictsFromLastApplied: the fields of the last client-side apply whose live value
    still equals it."""
    text = _last_applied(live)
    if text is None:
        return set()
    try:
        last = orjson.loads(text)
    except orjson.JSONDecodeError:
        return set()
    if not isinstance(last, dict):
        return set()
    diff = fieldpath.compare(last, live, kind)
    return fieldpath.to_field_set(last, kind) - (diff.added | diff.modified | diff.removed)


def _sync_last_applied(live: dict[str, Any], merged: dict[str, Any], config: dict[str, Any]) -> None:
    """lastAppliedUpdater: when kubectl applies server-side to an object that carries the
    client-side annotation, the annotation becomes the applied configuration (without itself), as
    encoding/json writes it: sorted keys, HTML characters escaped, a trailing newline."""
    if _last_applied(live) is None:
        return
    body = copy.deepcopy(config)
    annotations = (body.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
    text = orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") + "\n"
    merged.setdefault("metadata", {}).setdefault("annotations", {})[LAST_APPLIED] = text

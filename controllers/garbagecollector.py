"""The garbage collector: dependents follow their owners (kube's pkg/controller/garbagecollector).

It watches every kind kubelab serves but events (kube's DefaultIgnoredResources: nothing owns an
event's lifetime but its TTL) and keeps two indexes: UID -> object and owner UID -> dependents.
Work items are UIDs, reconciled level-triggered:

- A dependent whose owners are all gone (absent, or the name now has another UID) is deleted, with
  Orphan or Foreground if it carries that finalizer, else Background. One with a live owner left only
  has the dangling references patched out.
- An owner deleted with `propagationPolicy: Foreground` carries the `foregroundDeletion` finalizer:
  its dependents are deleted (in Foreground themselves if they have dependents), and the finalizer is
  removed once no dependent with `blockOwnerDeletion: true` is left.
- An owner deleted with `Orphan` carries the `orphan` finalizer: its references are removed from
  every dependent, then the finalizer.

Custom objects take part both ways, as kube's collector finds them through discovery: when a
CustomResourceDefinition (watched like every other kind) serves a kind, an informer on its storage
version joins the graph, and owner references to any served version of it resolve.

The decision for one object is the pure `classify_owners` + `plan`; the rest is I/O. An owner not in
the caches is looked up with a live GET before anything is deleted, so an informer that lags behind
never costs a dependent its life.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kubelab import customresources, kinds
from kubelab.client import ApiClient, Conflict, Informer, NotFound, WorkQueue
from kubelab.kinds import ResourceType
from kubelab.models import OwnerReference, TypedObject

log = logging.getLogger(__name__)

# Kinds the collector neither watches nor deletes (garbagecollector.DefaultIgnoredResources).
IGNORED: frozenset[ResourceType] = frozenset({kinds.EVENTS})

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


class OwnerState(Enum):
    SOLID = "solid"  # exists, and is not waiting for its dependents to go
    DANGLING = "dangling"  # gone, or the name belongs to another UID now
    WAITING = "waiting"  # being deleted in the foreground


@dataclass(frozen=True)
class Plan:
    """What to do with one dependent. `delete` is a propagation policy or None; `remove_refs` are owner
    UIDs whose references to patch out."""

    delete: str | None = None
    remove_refs: tuple[str, ...] = ()


def owner_state(owner: TypedObject | None, ref: OwnerReference) -> OwnerState:
    if owner is None or owner.metadata.uid != ref.uid:
        return OwnerState.DANGLING
    if owner.metadata.deletion_timestamp and FOREGROUND in (owner.metadata.finalizers or []):
        return OwnerState.WAITING
    return OwnerState.SOLID


def plan(obj: TypedObject, states: dict[str, OwnerState], *, has_dependents: bool) -> Plan:
    """attemptToDeleteItem's decision, pure. `states` maps each owner UID of `obj` to its state."""
    if obj.metadata.deletion_timestamp and FOREGROUND not in (obj.metadata.finalizers or []):
        return Plan()  # already going
    refs = obj.metadata.owner_references or []
    if not refs:
        return Plan()
    solid = [r.uid or "" for r in refs if states.get(r.uid or "") is OwnerState.SOLID]
    dangling = [r.uid or "" for r in refs if states.get(r.uid or "") is OwnerState.DANGLING]
    waiting = [r.uid or "" for r in refs if states.get(r.uid or "") is OwnerState.WAITING]
    if solid:
        # Someone still owns it: only the references to owners gone or going are removed.
        return Plan(remove_refs=tuple(dangling + waiting)) if dangling or waiting else Plan()
    if waiting and has_dependents:
        return Plan(delete="Foreground")
    finalizers = obj.metadata.finalizers or []
    if ORPHAN in finalizers:
        return Plan(delete="Orphan")
    if FOREGROUND in finalizers:
        return Plan(delete="Foreground")
    return Plan(delete="Background")


def _ref_key(ref: OwnerReference) -> tuple[str, str]:
    return ref.api_version or "", ref.kind or ""


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("gc: %s stopped: %r", task.get_name(), task.exception())


class GarbageCollector:
    name = "garbage-collector"

    def __init__(self, api: ApiClient, informers: list[Informer[Any]]) -> None:
        self.api = api
        self.informers = informers
        self.queue = WorkQueue(self.name)
        self.by_uid: dict[str, tuple[ResourceType, TypedObject]] = {}
        self.dependents: dict[str, set[str]] = {}  # owner UID -> dependent UIDs
        # Custom kinds: (apiVersion, kind) of every served version -> the storage version's resource, and
        # per definition the informer on it and the task running that informer.
        self.custom: dict[tuple[str, str], ResourceType] = {}
        self._custom_informers: dict[str, tuple[Informer[Any], asyncio.Task[None]]] = {}
        self._custom_keys: dict[str, list[tuple[str, str]]] = {}
        for informer in informers:
            informer.add_handler(self._handler(informer.rt))
            if informer.rt == kinds.CUSTOMRESOURCEDEFINITIONS:
                informer.add_handler(self._on_definition)

    def _on_definition(self, event: str, old: Any, new: Any) -> None:
        """A definition changed: follow the kind it serves (an informer on its storage version), or stop."""
        name = (new or old).metadata.name or ""
        data = new.to_dict() if new is not None else {}
        served = customresources.served_types(data)
        storage = customresources.storage_type(data) if served else None
        for key in self._custom_keys.pop(name, []):
            self.custom.pop(key, None)
        if storage is not None:
            keys = self._custom_keys[name] = [(rt.api_version, rt.kind) for rt in served]
            self.custom.update(dict.fromkeys(keys, storage))
        current = self._custom_informers.get(name)
        if current is not None and (storage is None or current[0].rt != storage):
            current[1].cancel()
            del self._custom_informers[name]
            current = None
        if storage is not None and current is None:
            informer: Informer[Any] = Informer(self.api, storage, name=f"gc-{storage.group_resource}")
            informer.add_handler(self._handler(storage))
            task = asyncio.get_running_loop().create_task(informer.run(), name=f"{informer.name}-informer")
            task.add_done_callback(_log_failure)
            self._custom_informers[name] = (informer, task)

    async def stop_custom(self) -> None:
        tasks = [task for _, task in self._custom_informers.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._custom_informers.clear()

    # --- the graph -----------------------------------------------------------------------------

    def _handler(self, rt: ResourceType) -> Callable[[str, Any, Any], None]:
        return lambda event, old, new: self._on_event(rt, old, new)

    def _on_event(self, rt: ResourceType, old: TypedObject | None, new: TypedObject | None) -> None:
        if new is None:
            assert old is not None
            uid = old.metadata.uid or ""
            self.by_uid.pop(uid, None)
            for ref in old.metadata.owner_references or []:
                self._forget_dependent(ref.uid or "", uid)
                owner = self.by_uid.get(ref.uid or "")
                if owner is not None and owner[1].metadata.deletion_timestamp:
                    self.queue.add(ref.uid or "")  # an owner waiting for its dependents may be done
            for dependent in self.dependents.get(uid, set()):
                self.queue.add(dependent)  # their owner is gone
            return
        uid = new.metadata.uid or ""
        self.by_uid[uid] = (rt, new)
        old_refs = {r.uid for r in (old.metadata.owner_references if old else None) or []}
        new_refs = {r.uid for r in new.metadata.owner_references or []}
        for gone in old_refs - new_refs:
            self._forget_dependent(gone or "", uid)
            if gone in self.by_uid:
                self.queue.add(gone or "")
        for owner_uid in new_refs:
            self.dependents.setdefault(owner_uid or "", set()).add(uid)
        if new_refs and (old is None or old_refs != new_refs):
            self.queue.add(uid)
        finalizers = set(new.metadata.finalizers or [])
        if new.metadata.deletion_timestamp and finalizers & {ORPHAN, FOREGROUND}:
            self.queue.add(uid)
            if FOREGROUND in finalizers:
                for dependent in self.dependents.get(uid, set()):
                    self.queue.add(dependent)

    def _forget_dependent(self, owner_uid: str, uid: str) -> None:
        dependents = self.dependents.get(owner_uid)
        if dependents is not None:
            dependents.discard(uid)
            if not dependents and owner_uid not in self.by_uid:
                del self.dependents[owner_uid]

    def has_synced(self) -> bool:
        return all(i.has_synced() for i in self.informers)

    def _dependents_of(self, uid: str) -> list[tuple[ResourceType, TypedObject]]:
        return [self.by_uid[d] for d in self.dependents.get(uid, set()) if d in self.by_uid]

    async def _owner(self, obj: TypedObject, ref: OwnerReference) -> TypedObject | None:
        """The owner named by `ref`: from the caches by UID, else a live GET (the caches may lag)."""
        cached = self.by_uid.get(ref.uid or "")
        if cached is not None:
            return cached[1]
        rt = kinds.by_kind(*_ref_key(ref)) or self.custom.get(_ref_key(ref))
        if rt is None:
            raise LookupError(f"unknown owner kind {ref.api_version}/{ref.kind}")
        if rt.namespaced and not obj.metadata.namespace:
            # A cluster-scoped dependent cannot have a namespaced owner: kube leaves it alone (an
            # unresolvable reference), rather than collect it.
            raise LookupError(f"cluster-scoped {obj.kind} {obj.key} names a namespaced owner {ref.kind}")
        try:
            namespace = obj.metadata.namespace if rt.namespaced else None
            owner: TypedObject = await self.api.get(rt, ref.name or "", namespace)
        except NotFound:
            return None
        return owner

    # --- reconcile -----------------------------------------------------------------------------

    async def reconcile(self, uid: str) -> None:
        entry = self.by_uid.get(uid)
        if entry is None:
            return
        rt, obj = entry
        finalizers = obj.metadata.finalizers or []
        if obj.metadata.deletion_timestamp and ORPHAN in finalizers:
            await self._orphan_dependents(rt, obj)
            return
        if obj.metadata.deletion_timestamp and FOREGROUND in finalizers:
            await self._delete_dependents(rt, obj)
            if obj.metadata.owner_references:
                await self._attempt_to_delete(rt, obj)  # it may itself be a dependent of a foreground owner
            return
        if obj.metadata.owner_references:
            await self._attempt_to_delete(rt, obj)

    async def _attempt_to_delete(self, rt: ResourceType, obj: TypedObject) -> None:
        states: dict[str, OwnerState] = {}
        for ref in obj.metadata.owner_references or []:
            try:
                states[ref.uid or ""] = owner_state(await self._owner(obj, ref), ref)
            except LookupError as exc:
                log.warning("gc: %s %s: %s; leaving it alone", rt.kind, obj.key, exc)
                return
        decision = plan(obj, states, has_dependents=bool(self._dependents_of(obj.metadata.uid or "")))
        if decision.remove_refs:
            await self._remove_refs(rt, obj, set(decision.remove_refs))
        if decision.delete is not None:
            # Confirm with a live read that this is still the object the decision was made about.
            try:
                latest: TypedObject = await self.api.get(rt, obj.metadata.name or "", obj.metadata.namespace)
            except NotFound:
                return
            if latest.metadata.uid != obj.metadata.uid:
                return
            log.info("gc: deleting %s %s (owners gone; propagation %s)", rt.kind, obj.key, decision.delete)
            await self._delete(rt, latest, decision.delete)

    async def _delete(self, rt: ResourceType, obj: TypedObject, policy: str) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy,
                "preconditions": {"uid": obj.metadata.uid}}
        try:
            await self.api.request("DELETE", rt.path(obj.metadata.namespace, obj.metadata.name), body=body)
        except NotFound:
            pass
        except Conflict:
            pass  # another object of that name now: not ours to delete

    async def _remove_refs(self, rt: ResourceType, obj: TypedObject, owner_uids: set[str]) -> None:
        refs = [r.to_dict() for r in obj.metadata.owner_references or [] if r.uid not in owner_uids]
        patch = {"metadata": {"ownerReferences": refs or None,
                              "resourceVersion": obj.metadata.resource_version}}
        try:
            await self.api.patch(rt, obj.metadata.name or "", patch, obj.metadata.namespace)
        except NotFound:
            pass

    async def _remove_finalizer(self, rt: ResourceType, obj: TypedObject, finalizer: str) -> None:
        remaining = [f for f in obj.metadata.finalizers or [] if f != finalizer]
        patch = {"metadata": {"finalizers": remaining or None,
                              "resourceVersion": obj.metadata.resource_version}}
        try:
            await self.api.patch(rt, obj.metadata.name or "", patch, obj.metadata.namespace)
        except NotFound:
            return
        log.info("gc: removed the %s finalizer of %s %s", finalizer, rt.kind, obj.key)

    async def _orphan_dependents(self, rt: ResourceType, owner: TypedObject) -> None:
        """attemptToOrphan: drop the owner from every dependent, then the `orphan` finalizer."""
        uid = owner.metadata.uid or ""
        for dep_rt, dependent in self._dependents_of(uid):
            await self._remove_refs(dep_rt, dependent, {uid})
        await self._remove_finalizer(rt, owner, ORPHAN)

    async def _delete_dependents(self, rt: ResourceType, owner: TypedObject) -> None:
        """processDeletingDependentsItem: wait for the blocking dependents, deleting those not yet going."""
        uid = owner.metadata.uid or ""
        blocking = []
        for _rt, dependent in self._dependents_of(uid):
            ref = next((r for r in dependent.metadata.owner_references or [] if r.uid == uid), None)
            if ref is not None and ref.block_owner_deletion:
                blocking.append(dependent)
            going = dependent.metadata.deletion_timestamp is not None
            if not going or FOREGROUND in (dependent.metadata.finalizers or []):
                self.queue.add(dependent.metadata.uid or "")
        if not blocking:
            await self._remove_finalizer(rt, owner, FOREGROUND)


async def run(gc: GarbageCollector, *, workers: int = 2) -> None:
    """Workers start once every informer has listed: an owner missing from a cache that has not
    listed yet is not gone."""
    for informer in gc.informers:
        await informer.wait_synced()
    for uid, (_rt, obj) in list(gc.by_uid.items()):
        if obj.metadata.owner_references or (obj.metadata.deletion_timestamp
                                             and set(obj.metadata.finalizers or []) & {ORPHAN, FOREGROUND}):
            gc.queue.add(uid)
    try:
        async with asyncio.TaskGroup() as tg:
            for n in range(workers):
                tg.create_task(gc.queue.run_worker(gc.reconcile), name=f"{gc.name}-worker-{n}")
    finally:
        await gc.stop_custom()


__all__ = ["GarbageCollector", "OwnerState", "Plan", "owner_state", "plan", "run"]

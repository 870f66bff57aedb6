"""The kinds CustomResourceDefinitions define, served while the API server runs.

kube-apiserver's apiextensions-apiserver runs its controllers in the API server process; so does this
module, against the registry directly:

* the naming controller: a definition's names are accepted unless another definition of the same group
  holds one of them (`"x" is already in use`, NamesAccepted False with PluralConflict, KindConflict, ...);
  accepted names go into status.acceptedNames, and Established starts False ("Installing");
* the establishing controller: once the names are accepted, Established True (InitialNamesAccepted);
* the finalizer controller: a definition marked for deletion has its objects deleted
  (Terminating: InstanceDeletionInProgress), then loses the customresourcecleanup finalizer and goes.

`served()` is what the router and discovery serve: the built-in resources plus one ResourceType per served
version of every Established definition, swapped whole whenever a definition changes, so a request sees one
consistent catalogue. Discovery lists a kind as soon as its definition is Established; a deleted
definition's endpoints stop serving with the DELETED event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kubelab import kinds, timeutil
from kubelab.customresources import (
    condition,
    deprecation_warning,
    is_condition_true,
    served_types,
    spec_of,
    storage_type,
    stored_as,
    version_field,
    version_schema,
)
from kubelab.kinds import ResourceType
from kubelab.selectors import parse_field_selector, parse_label_selector

from . import errors, managedfields, printcolumns, tables
from .conversion import rewrite_api_version
from .registry import Registry
from .registry.crds import CLEANUP_FINALIZER, with_condition
from .registry.customresources import CustomObjectStrategy

log = logging.getLogger(__name__)

CRDS = kinds.CUSTOMRESOURCEDEFINITIONS
RETRY_SECONDS = 1.0


def accepted_names(crd: dict[str, Any], others: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    """The naming controller's calculateNamesAndConditions: the names this definition may hold, given the
    names other definitions of its group hold, and its NamesAccepted condition. Pure."""
    spec = spec_of(crd)
    group = spec.get("group")
    requested = dict(spec.get("names") or {})
    accepted = dict((crd.get("status") or {}).get("acceptedNames") or {})
    resources: set[str] = set()
    kinds_: set[str] = set()
    for other in others:
        if spec_of(other).get("group") != group or (other.get("metadata") or {}).get("name") == \
                (crd.get("metadata") or {}).get("name"):
            continue
        names = (other.get("status") or {}).get("acceptedNames") or {}
        resources.update(n for n in (names.get("plural"), names.get("singular"), *(names.get("shortNames") or []))
                         if n)
        kinds_.update(n for n in (names.get("kind"), names.get("listKind")) if n)
    cond = {"type": "NamesAccepted", "status": "Unknown", "reason": "", "message": ""}
    new = dict(accepted)

    def fresh(wanted: Any, held: Any, used: set[str]) -> str | None:
        if wanted == held or wanted not in used:
            return None
        return f'"{wanted}" is already in use'

    for key, used, reason in (("plural", resources, "PluralConflict"), ("singular", resources, "SingularConflict")):
        problem = fresh(requested.get(key), accepted.get(key), used)
        if problem:
            cond.update(status="False", reason=reason, message=problem)
        elif requested.get(key) is not None:
            new[key] = requested[key]
    if requested.get("shortNames") != accepted.get("shortNames"):
        held = set(accepted.get("shortNames") or [])
        problems = [p for s in requested.get("shortNames") or [] if s not in held
                    for p in [fresh(s, "", resources)] if p]
        if problems:
            message = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
            cond.update(status="False", reason="ShortNamesConflict", message=message)
        else:
            new["shortNames"] = requested.get("shortNames")
    for key, reason in (("kind", "KindConflict"), ("listKind", "ListKindConflict")):
        problem = fresh(requested.get(key), accepted.get(key), kinds_)
        if problem:
            cond.update(status="False", reason=reason, message=problem)
        elif requested.get(key) is not None:
            new[key] = requested[key]
    if requested.get("categories") is not None:
        new["categories"] = requested["categories"]
    else:
        new.pop("categories", None)
    if new.get("shortNames") is None:
        new.pop("shortNames", None)
    if cond["status"] == "Unknown":
        cond.update(status="True", reason="NoConflicts", message="no conflicts found")
    return new, cond


def next_status(crd: dict[str, Any], others: list[dict[str, Any]], now: str) -> dict[str, Any]:
    """The status the naming and establishing controllers leave a live definition with. Pure."""
    status = dict(crd.get("status") or {})
    names, named = accepted_names(crd, others)
    status["acceptedNames"] = names
    status = with_condition(status, named, now)
    established = condition({"status": status}, "Established")
    if named["status"] == "True":
        if established is None or established.get("status") != "True":
            # The naming controller says Installing; the establishing controller then says Established.
            status = with_condition(status, {"type": "Established", "status": "True",
                                             "reason": "InitialNamesAccepted",
                                             "message": "the initial names have been accepted"}, now)
    elif established is None:
        status = with_condition(status, {"type": "Established", "status": "False", "reason": "NotAccepted",
                                         "message": "not all names are accepted"}, now)
    return status


class CustomResources:
    """The served catalogue and the apiextensions controllers of one API server."""

    def __init__(self, registry: Registry, builtin: tuple[ResourceType, ...], *,
                 on_change: Callable[[tuple[ResourceType, ...]], None]) -> None:
        self.registry = registry
        self.builtin = builtin
        self.on_change = on_change
        self.crds: dict[str, dict[str, Any]] = {}
        self._served: dict[str, tuple[ResourceType, ...]] = {}
        self._stored: dict[str, ResourceType] = {}  # what each served definition's versions are stored as
        self._terminating: set[str] = set()  # storage paths of definitions marked for deletion
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []

    # --- what is served ------------------------------------------------------------------------

    def served(self) -> tuple[ResourceType, ...]:
        return (*self.builtin, *(rt for rts in self._served.values() for rt in rts))

    def is_terminating(self, rt: ResourceType) -> bool:
        return rt.storage_path in self._terminating

    def _apply(self, name: str, crd: dict[str, Any] | None) -> None:
        before = self._served.get(name, ())
        after = served_types(crd) if crd is not None else ()
        if crd is None:
            self.crds.pop(name, None)
        else:
            self.crds[name] = crd
        rt_store = storage_type(crd) if crd is not None else None
        if rt_store is not None:
            if (crd or {}).get("metadata", {}).get("deletionTimestamp"):
                self._terminating.add(rt_store.storage_path)
            else:
                self._terminating.discard(rt_store.storage_path)
        if before == after:
            return
        strategies, conversions = self.registry.strategies, self.registry.conversions
        stored = stored_as(crd) if crd is not None and after else None
        for rt in before:
            conversions.unregister(rt)
            managedfields.unregister_schema(managedfields.type_name(rt))
        for rt in after:
            schema = version_schema(crd or {}, rt.version)
            strategies[rt] = CustomObjectStrategy(rt, schema=schema,
                                                  deprecation_warning=deprecation_warning(crd or {}, rt.version))
            # Server-side apply merges and tracks fields by the version's list and map types.
            managedfields.register_schema(managedfields.type_name(rt), schema)
            tables.register(rt, *printcolumns.printer(version_field(crd or {}, rt.version,
                                                                    "additionalPrinterColumns")))
            if stored is not None:
                # Conversion strategy None: every served version, the storage one too, is the stored object
                # with its apiVersion rewritten (conversion.py), kept under the storage version's prefix.
                conversions.register(rewrite_api_version(rt, stored))
        before_stored = self._stored.pop(name, None)
        if stored is not None:
            self._stored[name] = stored
        if after:
            self._served[name] = after
        else:
            self._served.pop(name, None)
        self.on_change(self.served())
        for rt in before:
            if rt not in after:
                strategies.pop(rt, None)
                tables.unregister(rt)
        if self.registry.cacher is not None:
            # The watch cache is the storage version's (Registry.storage_of): a moved storage version, or a
            # definition no longer served, ends the old one's watchers.
            for rt in {*before, *([before_stored] if before_stored else [])} - {*after, stored}:
                self.registry.cacher.forget(rt)
        log.info("custom resource %s now served as %s", name, [rt.group_version for rt in after] or "nothing")

    # --- running -------------------------------------------------------------------------------

    async def start(self) -> None:
        """List the definitions (served at once: a restarted API server serves what is Established before
        it answers), then follow them and reconcile each change."""
        items, revision = await self.registry.list(CRDS, None, parse_label_selector(""), parse_field_selector(""))
        for crd in items:
            self._apply(crd["metadata"]["name"], crd)
            self._enqueue(crd["metadata"]["name"])
        self._tasks = [asyncio.create_task(self._follow(revision), name="apiextensions-watch"),
                       asyncio.create_task(self._work(), name="apiextensions-controllers")]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _enqueue(self, name: str) -> None:
        if name not in self._queued:
            self._queued.add(name)
            self._queue.put_nowait(name)

    async def _follow(self, revision: int) -> None:
        everything, no_fields = parse_label_selector(""), parse_field_selector("")
        since: str | None = str(revision)
        while True:
            try:
                async for event in self.registry.watch(CRDS, None, since, everything, no_fields):
                    name = event.object["metadata"]["name"]
                    self._apply(name, None if event.type == "DELETED" else event.object)
                    since = event.object["metadata"].get("resourceVersion") or since
                    self._enqueue(name)
            except asyncio.CancelledError:
                raise
            except errors.StatusError as exc:
                if exc.code == 410:  # too old: start over from a fresh list
                    since = None
                log.warning("watch of customresourcedefinitions: %s", exc.message)
            except Exception:
                log.exception("watch of customresourcedefinitions failed")
            await asyncio.sleep(RETRY_SECONDS)
            if since is None:
                items, revision = await self.registry.list(CRDS, None, everything, no_fields)
                seen = {crd["metadata"]["name"] for crd in items}
                for gone in set(self.crds) - seen:
                    self._apply(gone, None)
                for crd in items:
                    self._apply(crd["metadata"]["name"], crd)
                    self._enqueue(crd["metadata"]["name"])
                since = str(revision)

    async def _work(self) -> None:
        while True:
            name = await self._queue.get()
            self._queued.discard(name)
            try:
                again = await self.reconcile(name)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("customresourcedefinition %s", name)
                again = True
            if again:
                asyncio.get_running_loop().call_later(RETRY_SECONDS, self._enqueue, name)

    # --- the controllers -------------------------------------------------------------------------

    async def reconcile(self, name: str) -> bool:
        """One definition through the naming, establishing and finalizer controllers; True to retry later."""
        crd = self.crds.get(name)
        if crd is None:
            return False
        if crd["metadata"].get("deletionTimestamp"):
            return await self._finalize(name, crd)
        others = [c for n, c in self.crds.items() if n != name]
        status = next_status(crd, others, timeutil.rfc3339())
        if status == crd.get("status"):
            return False
        # Serve first, then say Established: a client that waits for the condition finds the endpoints here
        # (kube's establishing controller likewise writes the condition only once the handler serves).
        self._apply(name, {**crd, "status": status})
        await self._write_status(name, lambda current: next_status(current, others, timeutil.rfc3339()))
        return False

    async def _write_status(self, name: str, status_of: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            return {**current, "status": status_of(current)}

        try:
            await self.registry.guaranteed_update(CRDS, None, name, mutate, subresource="status")
        except errors.StatusError as exc:
            if exc.code != 404:
                raise

    def _ensure_strategy(self, rt: ResourceType, crd: dict[str, Any]) -> None:
        """The strategy the cleanup's registry calls need: the resource may not be served (never Established),
        or stop being served while the cleanup runs (its definition went through another run)."""
        if rt not in self.registry.strategies:
            self.registry.strategies[rt] = CustomObjectStrategy(rt)

    async def _finalize(self, name: str, crd: dict[str, Any]) -> bool:
        """The finalizer controller: delete every object of the definition, then drop the finalizer."""
        if CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or []):
            return False
        rt = storage_type(crd)
        terminating = condition(crd, "Terminating") or {}
        if terminating.get("reason") != "InstanceDeletionInProgress" and is_condition_true(crd, "Terminating"):
            await self._write_status(name, lambda current: with_condition(dict(current.get("status") or {}), {
                "type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
                "message": "CustomResource deletion is in progress"}, timeutil.rfc3339()))
        if rt is not None:
            everything, no_fields = parse_label_selector(""), parse_field_selector("")
            self._ensure_strategy(rt, crd)
            items, _ = await self.registry.list(rt, None, everything, no_fields)
            for item in items:
                meta = item.get("metadata") or {}
                if meta.get("deletionTimestamp"):
                    continue
                try:
                    self._ensure_strategy(rt, crd)
                    await self.registry.delete(rt, meta.get("namespace"), meta.get("name", ""))
                except errors.StatusError as exc:
                    if exc.code != 404:
                        raise
            self._ensure_strategy(rt, crd)
            remaining, _ = await self.registry.list(rt, None, everything, no_fields)
            if remaining:
                return True  # objects with finalizers of their own: look again

        def release(current: dict[str, Any]) -> dict[str, Any]:
            meta = dict(current.get("metadata") or {})
            meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != CLEANUP_FINALIZER]
            status = with_condition(dict(current.get("status") or {}), {
                "type": "Terminating", "status": "False", "reason": "InstanceDeletionCompleted",
                "message": "removed all instances"}, timeutil.rfc3339())
            return {**current, "metadata": meta, "status": status}

        try:
            await self.registry.guaranteed_update(CRDS, None, name, release)
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
        if rt is not None and not any(rt in rts for rts in self._served.values()):
            self.registry.strategies.pop(rt, None)  # the cleanup's own; a served one goes with the DELETED event
        return False


__all__ = ["CustomResources", "accepted_names", "next_status"]

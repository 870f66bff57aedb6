"""Strategy: what is particular to one kind — defaults, validation, what an update may change.

The generic store (store.py) calls these hooks in kube-apiserver's order: decode, PrepareForCreate
(defaults), Validate, then storage. Hooks work on the typed model; they never touch etcd. The one
exception to purity is allocation (ClusterIPs, NodePorts), which hands the store the extra keys to
claim or release in the same etcd transaction as the object itself.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any

from kubelab import schema, timeutil, validation
from kubelab.kinds import ResourceType
from kubelab.models import TypedObject
from kubelab.validation import FieldError

from ..storage import Txn

# apiserver's names.SimpleNameGenerator: 5 characters from an alphabet without vowels or look-alikes.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass
class Allocation:
    """What one write claims and releases besides the object itself.

    `errors` are refusals known before trying (a ClusterIP outside the range); `taken_errors` maps a
    reservation key the user asked for by hand to the 422 to answer if that key turns out to be taken.
    """

    txn: Txn = field(default_factory=Txn)
    errors: list[FieldError] = field(default_factory=list)
    taken_errors: dict[str, FieldError] = field(default_factory=dict)


ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"


def gc_policy(options: dict[str, Any], finalizers: list[str], default: str) -> str:
    """The propagation policy of one DELETE (shouldOrphanDependents / shouldDeleteDependents)."""
    orphan = options.get("orphanDependents")
    if orphan is not None:
        return "Orphan" if orphan else "Background"
    policy = options.get("propagationPolicy")
    if policy in ("Orphan", "Background", "Foreground"):
        return str(policy)
    for finalizer in finalizers:
        if finalizer == ORPHAN_FINALIZER:
            return "Orphan"
        if finalizer == FOREGROUND_FINALIZER:
            return "Foreground"
    return default


def generate_name(base: str) -> str:
    return base[:58] + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))


def spec_generation(new: TypedObject, old: TypedObject, subresource: str | None) -> int:
    """metadata.generation after an update of a kind whose generation counts its spec (the PrepareForUpdate
    of kube's Deployments, Jobs, Ingresses, budgets, ...): one more when a write through the main resource
    changed the spec, never for status or other subresource writes. An absent spec is an empty one, as the
    Go struct it is in kube."""
    old_spec, new_spec = getattr(old, "spec", None), getattr(new, "spec", None)
    changed = (old_spec.to_dict() if old_spec is not None else {}) != (new_spec.to_dict() if new_spec is not None else {})
    generation = old.metadata.generation or 1
    return generation + 1 if subresource is None and changed else generation


class Strategy:
    """Defaults and validation shared by every kind; subclasses add their own."""

    rt: ResourceType
    # Kinds whose main-resource writes ignore status (and whose status writes ignore the rest).
    has_status: bool = True
    # Seconds an object lives after its last write (events: --event-ttl); None: until deleted.
    ttl: int | None = None
    name_check = staticmethod(validation.dns1123_subdomain_errors)
    # The Go zero value of the kind's status struct, as kube-apiserver always serves it: a status field
    # is a struct (never a nil pointer), so an object no controller wrote status for yet reads
    # `"status": {}`, and the fields without `omitempty` in the Go type appear as 0 even when a status
    # write left them out (ReplicaSetStatus.Replicas: `{"replicas": 0}`). The attributes that are 0 then;
    # None: the kind's status is left as written (Pod, Node, Namespace: their strategies fill it).
    status_zero: tuple[str, ...] | None = None
    # The `Warning: 299` text every request to this version gets, when the version is deprecated (a CRD
    # version's deprecationWarning or apiextensions' default); None: no warning.
    deprecation_warning: str | None = None
    # Kinds whose metadata.generation counts spec changes (kube's Deployments, Jobs, Ingresses, budgets,
    # ...): 1 at create, one more for each write through the main resource that changes the spec.
    counts_spec_generation: bool = False

    def __init__(self, rt: ResourceType) -> None:
        self.rt = rt

    # --- defaults --------------------------------------------------------------------------------

    def set_defaults(self, obj: TypedObject) -> None:
        """Field defaults (the Go types' SetDefaults_*): applied to every decoded body, on create,
        update and patch alike, as kube-apiserver defaults while decoding. A PUT that leaves out a
        defaulted field (`protocol`, `type`) therefore means the default, not "unset"."""

    def prune_unknown(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The body without the fields the kind does not have, and their paths (what fieldValidation
        refuses or warns about): the Go types' fields, as kubernetes.json records them."""
        return schema.prune(self.rt.api_version, self.rt.kind, body)

    # --- create ----------------------------------------------------------------------------------

    def prepare_create(self, obj: TypedObject) -> None:
        meta = obj.metadata
        meta.uid = str(uuid.uuid4())
        meta.creation_timestamp = timeutil.rfc3339()
        meta.resource_version = None
        meta.deletion_timestamp = None
        meta.deletion_grace_period_seconds = None
        if not self.rt.namespaced:
            meta.namespace = None
        obj.api_version = self.rt.api_version
        obj.kind = self.rt.kind
        if self.counts_spec_generation:
            meta.generation = 1

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        return self.validate_meta(obj)

    def warnings_on_create(self, obj: TypedObject) -> list[str]:
        """WarningsOnCreate: the `Warning: 299` texts a create of this valid object gets (kube's BeforeCreate
        adds them once validation passed, so a refused object gets none)."""
        return []

    def validate_meta(self, obj: TypedObject) -> list[FieldError]:
        meta = obj.metadata
        errs: list[FieldError] = []
        if not meta.name and not meta.generate_name:
            errs.append(validation.required("metadata.name", "name or generateName is required"))
        elif meta.name:
            errs += [validation.invalid("metadata.name", meta.name, p) for p in self.name_check(meta.name)]
        if meta.generate_name and not meta.name:
            # The generated suffix is alphanumeric, so checking the prefix plus one letter suffices.
            errs += [validation.invalid("metadata.generateName", meta.generate_name, p)
                     for p in self.name_check(meta.generate_name + "a")]
        if self.rt.namespaced and meta.namespace:
            errs += [validation.invalid("metadata.namespace", meta.namespace, p)
                     for p in validation.dns1123_label_errors(meta.namespace)]
        errs += validation.validate_labels(meta.labels, "metadata.labels")
        errs += validation.validate_annotations(meta.annotations, "metadata.annotations")
        return errs

    def allocate(self, obj: TypedObject, old: TypedObject | None, *, avoid: set[str]) -> Allocation:
        """Keys to claim and release with this write (nothing for most kinds); `avoid` holds keys
        found taken by an earlier attempt of the same write."""
        return Allocation()

    def release(self, obj: TypedObject) -> Txn:
        """Keys to release when `obj` is deleted."""
        return Txn()

    # --- delete ----------------------------------------------------------------------------------

    # The resource's DefaultGarbageCollectionPolicy: Background ("DeleteDependents") for every kind
    # kubelab serves (only v1 ReplicationController and old apps/extensions versions default to Orphan);
    # None for kinds whose deletion the garbage collector does not take part in.
    default_gc_policy: str | None = "Background"

    def set_gc_finalizers(self, obj: TypedObject, options: dict[str, Any]) -> None:
        """deletionFinalizersForGarbageCollection: the `orphan` / `foregroundDeletion` finalizers a DELETE
        asks for. First match wins: orphanDependents, propagationPolicy, a finalizer already on the
        object, the kind's default. The garbage collector then orphans or deletes the dependents and
        removes the finalizer, which completes the deletion."""
        if self.default_gc_policy is None:
            return
        meta = obj.metadata
        current = list(meta.finalizers or [])
        policy = gc_policy(options, current, self.default_gc_policy)
        wanted = [f for f in current if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)]
        if policy == "Orphan":
            wanted.append(ORPHAN_FINALIZER)
        elif policy == "Foreground":
            wanted.append(FOREGROUND_FINALIZER)
        if set(wanted) != set(current):
            meta.finalizers = wanted or None

    def mark_for_deletion(self, obj: TypedObject, options: dict[str, Any]) -> Txn | None:
        """kube's BeforeDelete: whether a DELETE leaves `obj` in place, marked, instead of removing it.

        An object with finalizers gets a deletionTimestamp (grace 0) and stays until its finalizers are
        gone. Returns the extra keys of the marking write, or None when the object goes at once.
        """
        meta = obj.metadata
        if not meta.finalizers:
            return None
        # markAsDeleting: the timestamp is now (or kept if earlier) and the grace period 0, also for a
        # pod whose graceful deletion ends here, so removing the last finalizer completes the deletion.
        now = timeutil.rfc3339()
        if not meta.deletion_timestamp or meta.deletion_timestamp > now:
            meta.deletion_timestamp = now
        meta.deletion_grace_period_seconds = 0
        return Txn()

    def should_delete_on_update(self, obj: TypedObject) -> bool:
        """An update that leaves a marked object without finalizers (and without a grace period still
        running) completes its deletion, as the generic store's ShouldDeleteDuringUpdate."""
        meta = obj.metadata
        return bool(meta.deletion_timestamp) and not meta.finalizers and not meta.deletion_grace_period_seconds

    # --- update ----------------------------------------------------------------------------------

    def prepare_update(self, new: TypedObject, old: TypedObject, subresource: str | None) -> None:
        """Carry over what an update may not change: identity, and status or spec by subresource."""
        nm, om = new.metadata, old.metadata
        nm.uid = om.uid
        nm.creation_timestamp = om.creation_timestamp
        nm.deletion_timestamp = om.deletion_timestamp
        nm.deletion_grace_period_seconds = om.deletion_grace_period_seconds
        nm.generate_name = om.generate_name if nm.generate_name is None else nm.generate_name
        nm.namespace = om.namespace
        new.api_version = self.rt.api_version
        new.kind = self.rt.kind
        if subresource == "status":
            # ResetObjectMetaForStatus: a status write changes status only.
            new.metadata = om.model_copy(update={"resource_version": nm.resource_version})
            self.keep_non_status(new, old)
        elif subresource is None and self.has_status and hasattr(new, "status"):
            new.status = getattr(old, "status", None)
        if self.counts_spec_generation:
            new.metadata.generation = spec_generation(new, old, subresource)

    def fill_status(self, obj: TypedObject) -> None:
        """Make `status` the Go zero value plus what was written (status_zero); the store calls this
        after prepare_create / prepare_update, so it holds for every write of the object."""
        if self.status_zero is None:
            return
        status = getattr(obj, "status", None)
        if status is None:
            status = type(obj).model_fields["status"].annotation  # `XStatus | None`
            status = next(t for t in status.__args__ if t is not type(None))()  # type: ignore[union-attr]
            obj.status = status  # type: ignore[attr-defined]
        for name in self.status_zero:
            if getattr(status, name) is None:
                setattr(status, name, 0)

    def keep_non_status(self, new: TypedObject, old: TypedObject) -> None:
        """On a status write, everything but status comes from the stored object."""
        for name in type(old).model_fields:
            if name not in ("status", "metadata", "api_version", "kind"):
                setattr(new, name, getattr(old, name))

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        errs = self.validate_meta(new)
        if new.metadata.name != old.metadata.name:
            errs.append(validation.invalid("metadata.name", new.metadata.name, "field is immutable"))
        return errs

    def validate_meta_update(self, new: TypedObject, old: TypedObject) -> list[FieldError]:
        """ValidateObjectMetaUpdate alone: the name may not change, and the labels and annotations must
        be valid, but the name's format is not checked again (kinds whose update validation is only this,
        like Namespace's, can thus still be updated, and finalized, when stored under a name that would
        not pass today)."""
        errs = []
        if new.metadata.name != old.metadata.name:
            errs.append(validation.invalid("metadata.name", new.metadata.name, "field is immutable"))
        errs += validation.validate_labels(new.metadata.labels, "metadata.labels")
        errs += validation.validate_annotations(new.metadata.annotations, "metadata.annotations")
        return errs

    # --- field selectors -------------------------------------------------------------------------

    def field_labels(self, obj: dict[str, Any]) -> dict[str, str]:
        meta = obj.get("metadata") or {}
        fields = {"metadata.name": meta.get("name", "")}
        if self.rt.namespaced:
            fields["metadata.namespace"] = meta.get("namespace", "")
        return fields

    def supported_fields(self) -> set[str]:
        return {"metadata.name", "metadata.namespace"}

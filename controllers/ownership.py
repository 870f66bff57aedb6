"""Controller references: who owns an object, and whether a controller should adopt or release it.

kube's ControllerRefManager in pure form. An object is owned by the owner its ownerReference with
`controller: true` names by UID (a same-named owner with another UID is someone else). A controller
adopts matching orphans, releases owned objects that stopped matching, and leaves objects of other
controllers alone. `claim` and the patches are pure; `claim_all` does the I/O around them (the PATCH,
the live GET of the owner before adopting), for the ReplicaSet and Deployment controllers alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any, TypeVar

from kubelab.client import ApiClient, NotFound
from kubelab.kinds import ResourceType
from kubelab.models import OwnerReference, TypedObject

T = TypeVar("T", bound=TypedObject)


class Claim(Enum):
    OWNED = "owned"  # ours, and it matches: keep it
    ADOPT = "adopt"  # an orphan that matches: add our controllerRef
    RELEASE = "release"  # ours, but it no longer matches: remove our ownerReference
    IGNORE = "ignore"  # someone else's, or not ours and not a candidate


def controller_ref(obj: TypedObject) -> OwnerReference | None:
    """metav1.GetControllerOf: the ownerReference with controller=true."""
    for ref in obj.metadata.owner_references or []:
        if ref.controller:
            return ref
    return None


def new_controller_ref(owner: TypedObject) -> OwnerReference:
    """metav1.NewControllerRef: controller and blockOwnerDeletion, as every workload controller sets them."""
    return OwnerReference(api_version=owner.api_version, kind=owner.kind, name=owner.metadata.name,
                          uid=owner.metadata.uid, controller=True, block_owner_deletion=True)


def claim(obj: TypedObject, owner: TypedObject, *, matches: bool) -> Claim:
    """ClaimObject's decision for one object: `matches` says whether the owner's selector selects it."""
    ref = controller_ref(obj)
    owner_deleting = bool(owner.metadata.deletion_timestamp)
    if ref is not None:
        if ref.uid != owner.metadata.uid:
            return Claim.IGNORE
        if matches:
            return Claim.OWNED
        # An owner being deleted, or an object being deleted, is not worth a PATCH.
        if owner_deleting or obj.metadata.deletion_timestamp:
            return Claim.IGNORE
        return Claim.RELEASE
    if owner_deleting or not matches or obj.metadata.deletion_timestamp:
        return Claim.IGNORE
    return Claim.ADOPT


SMP = "application/strategic-merge-patch+json"


def adopt_patch(obj: TypedObject, owner: TypedObject) -> dict[str, Any]:
    """The strategic merge patch kube's adopt sends: ownerReferences merge by UID, so only ours is added;
    the object's UID guards against a same-named replacement."""
    return {"metadata": {"ownerReferences": [new_controller_ref(owner).to_dict()], "uid": obj.metadata.uid}}


def release_patch(obj: TypedObject, owner_uid: str) -> dict[str, Any]:
    """The strategic merge patch kube's release sends: delete our reference, by UID."""
    return {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": owner_uid}],
                         "uid": obj.metadata.uid}}


async def claim_all(api: ApiClient, owner: TypedObject, owner_rt: ResourceType, candidates: Iterable[T],
                    child_rt: ResourceType, matches: Callable[[T], bool], *, what: str) -> list[T]:
    """ClaimObjects: the candidates `owner` controls after adopting matching orphans and releasing
    owned objects that stopped matching. Before its first adoption the owner is read live, and a
    deleted or replaced owner adopts nothing (RecheckDeletionTimestamp): the cache may be behind, and
    a sync on a partial claim could over-create. `what` names the children in that error."""
    owned: list[T] = []
    checked = False
    for obj in candidates:
        decision = claim(obj, owner, matches=matches(obj))
        if decision is Claim.OWNED:
            owned.append(obj)
        elif decision is Claim.ADOPT:
            if not checked:
                fresh = await api.get(owner_rt, owner.metadata.name or "", owner.metadata.namespace)
                if fresh.metadata.uid != owner.metadata.uid or fresh.metadata.deletion_timestamp:
                    owner_kind = (owner.kind or "").lower()
                    raise RuntimeError(f"cannot adopt {what}: {owner_kind} {owner.key} is being deleted or was "
                                       "replaced")
                checked = True
            try:
                owned.append(await api.patch(child_rt, obj.metadata.name or "", adopt_patch(obj, owner),
                                             obj.metadata.namespace, content_type=SMP))
            except NotFound:
                continue
        elif decision is Claim.RELEASE:
            try:
                await api.patch(child_rt, obj.metadata.name or "", release_patch(obj, owner.metadata.uid or ""),
                                obj.metadata.namespace, content_type=SMP)
            except NotFound:
                continue
    return owned

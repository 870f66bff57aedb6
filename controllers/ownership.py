"""Controller references: who owns an object, and whether a controller should adopt or release it.

kube's ControllerRefManager in pure form. An object is owned by the owner its ownerReference with
`controller: true` names by UID (a same-named owner with another UID is someone else). A controller
adopts matching orphans, releases owned objects that stopped matching, and leaves objects of other
controllers alone. Pure: the I/O (the PATCH, the live GET before adopting) is the caller's.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from kubelab.models import OwnerReference, TypedObject


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

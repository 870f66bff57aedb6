"""ControllerRevisions: the template history of DaemonSets and StatefulSets (kube's controller/history).

Each distinct pod template an owner has had is one ControllerRevision named `<owner>-<hash>`, whose
`data` is the strategic merge patch that restores it (`{"spec": {"template": {..., "$patch": "replace"}}}`,
what `kubectl rollout undo` sends back) and whose `revision` orders them. The pods made from it carry the
hash as their `controller-revision-hash` label. Going back to an old template reuses its revision and
renumbers it as the newest, as kube's controllers do. The decisions are pure; `sync_revisions` writes.
"""

from __future__ import annotations

from typing import Any

from kubelab import kinds, wellknown
from kubelab.client import AlreadyExists, ApiClient, NotFound
from kubelab.kinds import ResourceType
from kubelab.models import ControllerRevision, ObjectMeta, PodTemplateSpec, TypedObject
from kubelab.selectors import Selector

from .ownership import claim_all, new_controller_ref
from .rollout import compute_hash

HASH_LABEL = wellknown.CONTROLLER_REVISION_HASH


def revision_data(template: PodTemplateSpec | None) -> dict[str, Any]:
    """The patch a revision stores: the whole template, replacing whatever is there."""
    return {"spec": {"template": {**(template.to_dict() if template else {}), "$patch": "replace"}}}


def template_hash(template: PodTemplateSpec | None, collision_count: int | None) -> str:
    return compute_hash(template, collision_count)


async def claim_revisions(api: ApiClient, owner: TypedObject, owner_rt: ResourceType,
                          revisions: list[ControllerRevision], selector: Selector) -> list[ControllerRevision]:
    """ClaimControllerRevisions: the owner's revisions, in revision order, after adopting the orphaned ones
    its selector matches (left behind by an owner deleted with propagationPolicy=Orphan: a set recreated
    with the same template picks its history back up) and releasing its own that no longer match."""
    candidates = [r for r in revisions if r.metadata.namespace == owner.metadata.namespace]
    owned = await claim_all(api, owner, owner_rt, candidates, kinds.CONTROLLERREVISIONS,
                            lambda r: selector.matches(r.metadata.labels), what="controllerrevisions")
    return sorted(owned, key=lambda r: (r.revision or 0, r.metadata.name or ""))


def matching(revisions: list[ControllerRevision], data: dict[str, Any]) -> list[ControllerRevision]:
    """The revisions that hold exactly this template (history.FindEqualRevisions)."""
    return [r for r in revisions if r.data == data]


def max_revision(revisions: list[ControllerRevision]) -> int:
    return max((r.revision or 0 for r in revisions), default=0)


def to_truncate(revisions: list[ControllerRevision], *, limit: int, live_hashes: set[str],
                keep: set[str]) -> list[ControllerRevision]:
    """The oldest revisions past `limit` that no live pod was made from and that are not current (`keep`
    holds names): what kube's cleanupHistory / truncateHistory delete."""
    candidates = [r for r in revisions if r.metadata.name not in keep
                  and (r.metadata.labels or {}).get(HASH_LABEL) not in live_hashes]
    excess = len(revisions) - limit
    return candidates[:max(0, min(excess, len(candidates)))]


async def sync_revisions(api: ApiClient, owner: TypedObject, template: PodTemplateSpec | None,
                         existing: list[ControllerRevision], *, collision_count: int | None
                         ) -> tuple[ControllerRevision, list[ControllerRevision]]:
    """The revision of `owner`'s current template (created, or an equal one renumbered as the newest),
    and all its revisions after that. The owner's annotations are copied (`kubectl rollout history`
    shows their kubernetes.io/change-cause)."""
    data = revision_data(template)
    revisions = list(existing)
    equal = matching(revisions, data)
    newest = max_revision(revisions)
    if equal:
        current = equal[-1]
        if (current.revision or 0) < newest:
            copy = current.model_copy(deep=True)
            copy.revision = newest + 1
            updated: ControllerRevision = await api.update(kinds.CONTROLLERREVISIONS, copy)
            revisions = [updated if r.metadata.uid == updated.metadata.uid else r for r in revisions]
            current = updated
        return current, revisions
    digest = template_hash(template, collision_count)
    labels = {**((template.metadata.labels if template and template.metadata else None) or {}), HASH_LABEL: digest}
    revision = ControllerRevision(
        api_version="apps/v1", kind="ControllerRevision",
        metadata=ObjectMeta(name=f"{owner.metadata.name}-{digest}", namespace=owner.metadata.namespace,
                            labels=labels, annotations=dict(owner.metadata.annotations or {}) or None,
                            owner_references=[new_controller_ref(owner)]),
        data=data, revision=newest + 1)
    try:
        created: ControllerRevision = await api.create(kinds.CONTROLLERREVISIONS, revision, owner.metadata.namespace)
    except AlreadyExists:
        found: ControllerRevision = await api.get(kinds.CONTROLLERREVISIONS, revision.metadata.name or "",
                                                  owner.metadata.namespace)
        # Equal data is the same revision whoever owns it (kube's CreateControllerRevision compares the
        # bytes only): one orphaned a moment ago by a delete with propagationPolicy Orphan, which this
        # owner's cache had not yet seen go, is taken as it is, not duplicated under a bumped collision count.
        if found.data != data:
            raise HashCollision(f"hash collision for {owner.kind} {owner.key}: {revision.metadata.name} "
                                "holds another template") from None
        created = found
    return created, [*revisions, created]


class HashCollision(RuntimeError):
    """A revision of that name holds another template: the owner's status.collisionCount must grow."""


async def delete_revisions(api: ApiClient, revisions: list[ControllerRevision]) -> None:
    for revision in revisions:
        try:
            await api.delete(kinds.CONTROLLERREVISIONS, revision.metadata.name or "", revision.metadata.namespace)
        except NotFound:
            continue

"""Server-side apply (PATCH with application/apply-patch+yaml): a configuration merged into the live
object through the field manager, which records the applier's fields and refuses to change fields
another manager owns unless forced; an apply to an object that does not exist creates it. kube does this
in its patch handler with structured-merge-diff; here the router parses the request and this module owns
what the apply means."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubelab import timeutil, validation
from kubelab.kinds import ResourceType

from .. import errors, managedfields, offload
from ..managedfields.fieldpath import path_string
from ..patch import strategic_merge_patch
from .customresources import is_custom
from .store import Registry

Merge = Callable[[Any, Any], Any]


def apply_merge(rt: ResourceType) -> Merge:
    """How apply merges a configuration into the live object: by the kind's patch strategies for built-in
    kinds; for custom objects by the version's structural schema (x-kubernetes-list-type, -list-map-keys,
    -map-type), as structured-merge-diff merges them."""
    if is_custom(rt):
        type_name = managedfields.type_name(rt)
        return lambda live, cfg: managedfields.merge(live, cfg, type_name)
    return lambda live, cfg: strategic_merge_patch(live, cfg, rt.kind)


async def server_side_apply(registry: Registry, rt: ResourceType, namespace: str | None, name: str, config: Any, *,
                            manager: str, force: bool = False, subresource: str | None = None,
                            dry_run: bool = False) -> tuple[dict[str, Any], int]:
    """Apply `config` as `manager` to the object `name` (or its `subresource`); the object and the status
    code kube answers with (200 merged, 201 created). 409 with FieldManagerConflict causes when another
    manager owns a field the configuration changes and `force` is off."""
    if not manager:
        raise errors.invalid_options("PatchOptions", [validation.required(
            "fieldManager", "is required for apply patch")])
    if not isinstance(config, dict):
        raise errors.bad_request("apply patches must be objects")
    meta = config.get("metadata") if isinstance(config.get("metadata"), dict) else None
    if meta and meta.get("name") and meta["name"] != name:
        # checkName: otherwise an apply to a missing object would create one of another name (and a node
        # allowed to write only its own Node could create any).
        raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                 f"({name})")
    config = {**config, "metadata": {**(meta or {}), "name": (meta or {}).get("name") or name}}
    precondition = (meta or {}).get("resourceVersion")

    def applied(current: dict[str, Any] | None) -> dict[str, Any]:
        entries = managedfields.decode_entries(((current or {}).get("metadata") or {}).get("managedFields"))
        try:
            return managedfields.apply(managedfields.type_name(rt), current, config, entries, manager=manager,
                                       api_version=rt.api_version, force=force, now=timeutil.rfc3339(),
                                       merge=apply_merge(rt), subresource=subresource or "")
        except managedfields.ApplyConflict as exc:
            raise errors.apply_conflict(str(exc), [(f"conflict with {c.entry.describe()}", path_string(c.path))
                                                   for c in exc.conflicts]) from None

    try:
        return await registry.guaranteed_update(rt, namespace, name, applied, subresource=subresource,
                                                dry_run=dry_run, precondition=precondition), 200
    except errors.StatusError as exc:
        if exc.code != 404 or subresource or exc.details is None or exc.details.get("name") != name:
            raise
    # Apply to an object that does not exist creates it, owned by the applier.
    created = await registry.create(rt, namespace, await offload.run(offload.body_bytes(), applied, None),
                                    dry_run=dry_run)
    return created, 201

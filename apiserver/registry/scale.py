"""The scale subresource (autoscaling/v1 Scale) of the kinds that have one, built-in or custom (kube's
ScaleREST per kind, and the custom resource handler's scale paths): reading an object as its Scale, and
writing a new replica count back into the object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubelab import validation
from kubelab.kinds import ResourceType

from .. import errors, gojson
from .apps import scale_of as builtin_scale_of
from .customresources import custom_scale, is_custom, with_replicas
from .store import Registry


def scale_of(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale of an object: the kind's replicas fields, or a custom kind's scale paths."""
    if is_custom(rt):
        return custom_scale(obj, rt)
    return builtin_scale_of(obj, (rt.api_version, rt.kind))


async def rescale(registry: Registry, rt: ResourceType, namespace: str | None, name: str,
                  replicas_of: Callable[[dict[str, Any]], Any], *, precondition: str | None = None,
                  dry_run: bool = False, manager: str | None = None) -> dict[str, Any]:
    """PUT or PATCH of the scale subresource: `replicas_of(current Scale)` becomes the parent's replicas;
    the new Scale. A Scale's resourceVersion is its parent's, so a stale one gets the parent's 409."""

    def mutate(current: dict[str, Any]) -> dict[str, Any]:
        replicas = replicas_of(scale_of(rt, current))
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            raise errors.bad_request(f'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal '
                                     f'{gojson.type_name(replicas)} into Go struct field ScaleSpec.spec.replicas '
                                     f'of type int32')
        if replicas < 0:
            raise errors.invalid(rt, name, [validation.invalid("spec.replicas", replicas,
                                                               "must be greater than or equal to 0")])
        if is_custom(rt):
            return with_replicas(current, rt, replicas)
        return {**current, "spec": {**(current.get("spec") or {}), "replicas": replicas}}

    obj = await registry.guaranteed_update(rt, namespace, name, mutate, dry_run=dry_run, precondition=precondition,
                                           manager=manager, field_subresource="scale")
    return scale_of(rt, obj)

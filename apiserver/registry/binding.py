"""pods/NAME/binding: what the scheduler POSTs to place a pod on a node (kube's BindingREST in
pkg/registry/core/pod/storage): the Binding checked, then the pod's nodeName, PodScheduled condition and
the Binding's annotations written in one guaranteed update, with kube's conflicts."""

from __future__ import annotations

from typing import Any

import pydantic

from kubelab import kinds, validation
from kubelab.kinds import ResourceType
from kubelab.models import Binding, Pod

from .. import errors
from . import decoding
from .pods import bind
from .store import Registry

# Bindings are only ever POSTed to pods/NAME/binding; this describes them for the decoder's messages.
_BINDINGS = ResourceType("", "v1", "bindings", "Binding", True, Binding)


def parse_binding(name: str, body: Any) -> tuple[str, Binding]:
    """The node a Binding names, and the Binding; kube's 400 and 422 for what cannot bind `name`."""
    if not isinstance(body, dict):
        raise decoding.not_an_object(_BINDINGS, body)
    try:
        binding = Binding.model_validate(body)
    except pydantic.ValidationError as exc:
        raise decoding.type_error(_BINDINGS, exc) from exc
    if binding.metadata.name and binding.metadata.name != name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    node = binding.target.name if binding.target else None
    if not node:
        raise errors.invalid(kinds.PODS, name, [validation.required("target.name")])
    if binding.target and binding.target.kind not in (None, "", "Node"):
        raise errors.invalid(kinds.PODS, name, [validation.not_supported("target.kind", binding.target.kind, ["Node"])])
    return node, binding


async def bind_pod(registry: Registry, namespace: str | None, name: str, body: Any, *, dry_run: bool = False) -> None:
    """Bind pod `name` as the Binding `body` says: refused (409) when the pod is being deleted, already
    on a node, or not the one the Binding's UID names."""
    node, binding = parse_binding(name, body)
    uid = binding.metadata.uid

    def mutate(current: dict[str, Any]) -> Any:
        pod = Pod.model_validate(current)
        if uid and pod.metadata.uid != uid:
            raise errors.conflict(kinds.PODS, name, f"Precondition failed: UID in precondition: {uid}, UID in "
                                                    f"object meta: {pod.metadata.uid}")
        # BindingREST.assignPod turns these plain errors into NewConflict(Resource("pods/binding"), ...).
        if pod.metadata.deletion_timestamp:
            raise errors.conflict(kinds.PODS, name, f"pod {name} is being deleted, cannot be assigned to a host",
                                  subresource="binding")
        if pod.spec and pod.spec.node_name:
            raise errors.conflict(kinds.PODS, name, f'pod {name} is already assigned to node "{pod.spec.node_name}"',
                                  subresource="binding")
        bind(pod, node)
        if binding.metadata.annotations:
            pod.metadata.annotations = {**(pod.metadata.annotations or {}), **binding.metadata.annotations}
        return pod

    await registry.guaranteed_update(kinds.PODS, namespace, name, mutate, subresource="binding", dry_run=dry_run)

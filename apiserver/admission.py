"""Admission after routing: what the authorizer let through may still be refused once the request is
known to name a served resource, as kube-apiserver's admission plugins run inside the REST handler (a
request with no route is a 404 or 405, never an admission refusal).

The only plugin here is NodeRestriction, for node users (`authz.admit_node_write` decides; `NodeAdmission`
gathers what it needs: the body of a create, the stored pod a node deletes or reports on or binds a
token to, the node's own uid). The ServiceAccount plugin on pod creates is saadmission.py's. The authentication layer (auth.py) puts the request's admission into its ASGI scope; the resource
router (routers/resources.py) runs it between resolving the target and serving it.
"""

from __future__ import annotations

from typing import Any, Protocol

from starlette.requests import Request
from starlette.types import Scope

from kubelab import kinds

from . import codecs, errors
from .authz import admit_node_write, bound_pod_name
from .requestinfo import RequestInfo

SCOPE_KEY = "kubelab.admission"


class Admission(Protocol):
    async def __call__(self, request: Request, info: RequestInfo) -> None:
        """Raise the StatusError that refuses the request; return to let it go on."""


def of(scope: Scope) -> Admission | None:
    admission: Admission | None = scope.get(SCOPE_KEY)
    return admission


class NodeAdmission:
    """NodeRestriction for one node's request. `registry` answers the lookups (the app's Registry)."""

    def __init__(self, node: str, registry: Any) -> None:
        self.node = node
        self.registry = registry

    async def __call__(self, request: Request, info: RequestInfo) -> None:
        if not info.is_resource or info.is_read:
            return
        body: Any = None
        stored: dict[str, Any] | None = None
        node_uid: str | None = None
        core = info.group == ""
        if info.verb == "create" and (core and info.resource in ("pods", "nodes") and not info.subresource
                                      or (info.group, info.resource) == ("coordination.k8s.io", "leases")):
            # Read once: the handler then decodes the same bytes (codecs.read_body keeps them).
            body = codecs.decode(codecs.media_type(request), await codecs.read_body(request))
            if core and info.resource == "pods":
                node_uid = ((await self._lookup(kinds.NODES, None, self.node)) or {}).get("metadata", {}).get("uid")
        elif core and info.resource == "pods" and info.name and (info.verb == "delete" or info.subresource == "status"):
            stored = await self._lookup(kinds.PODS, info.namespace, info.name)
        elif core and info.verb == "create" and (info.resource, info.subresource) == ("serviceaccounts", "token"):
            body = codecs.decode(codecs.media_type(request), await codecs.read_body(request))
            pod = bound_pod_name(body)
            if pod is not None:
                stored = await self._lookup(kinds.PODS, info.namespace, pod)
                if stored is None:  # admitServiceAccount returns the pod lookup's NotFound
                    raise errors.not_found(kinds.PODS, pod)
        refusal = admit_node_write(self.node, info, body=body, stored=stored, node_uid=node_uid)
        if refusal is not None:
            raise refusal

    async def _lookup(self, rt: kinds.ResourceType, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self.registry.get(rt, namespace, name)
        except errors.StatusError as exc:
            if exc.code == 404:
                return None  # the request goes on, and the registry answers it with the same 404
            raise
        return obj


__all__ = ["SCOPE_KEY", "Admission", "NodeAdmission", "of"]

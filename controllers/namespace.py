"""The namespace controller: empties a namespace that is being deleted, then lets it go.

Deleting a namespace only marks it Terminating (the API server refuses new content in it from that
moment). This controller deletes everything namespaced in it — pods go through graceful deletion, so
it waits for their kubelets — and when nothing is left it removes the `kubernetes` finalizer through
the namespace's /finalize subresource, which completes the deletion (kube's NamespacedResourcesDeleter).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from kubelab import customresources, kinds
from kubelab.client import ApiClient, ApiError, Informer, NotFound, WorkQueue
from kubelab.models import Namespace

from .queuecontroller import QueueController

log = logging.getLogger(__name__)

FINALIZER = "kubernetes"


class NamespaceController(QueueController):
    name = "namespace-controller"
    max_workers = 1

    def __init__(self, api: ApiClient, namespaces: Informer[Namespace], *, resources: tuple[Any, ...] | None = None,
                 recheck: float = 1.0) -> None:
        self.api = api
        self.namespaces = namespaces
        self.resources = resources or tuple(rt for rt in kinds.BUILTIN if rt.namespaced)
        self.recheck = recheck
        self.queue = WorkQueue(self.name)
        namespaces.add_handler(self._on_namespace)

    def _on_namespace(self, event: str, old: Namespace | None, new: Namespace | None) -> None:
        if new is not None and new.metadata.deletion_timestamp:
            self.queue.add(new.metadata.name or "")

    async def reconcile(self, name: str) -> None:
        ns = self.namespaces.get(name)
        if ns is None or not ns.metadata.deletion_timestamp:
            return
        remaining = 0
        for rt in (*self.resources, *await self._custom_resources()):
            items, _ = await self.api.list(rt, name)
            for item in items:
                remaining += 1
                if item.metadata.deletion_timestamp:
                    continue  # already on its way out (a terminating pod waits for its kubelet)
                try:
                    await self.api.delete(rt, item.metadata.name or "", name)
                except NotFound:
                    pass
        if remaining:
            log.info("namespace: %s still holds %d objects; checking again", name, remaining)
            self.queue.add_after(name, self.recheck)
            return
        finalizers = [f for f in (ns.spec.finalizers if ns.spec else None) or [] if f != FINALIZER]
        body = ns.to_dict()
        body.setdefault("spec", {})["finalizers"] = finalizers
        try:
            await self.api.request("PUT", kinds.NAMESPACES.path(None, name, "finalize"), body=body)
            log.info("namespace: %s is empty and finalized", name)
        except NotFound:
            pass
        except ApiError as exc:
            log.warning("namespace: finalizing %s failed: %s", name, exc)
            raise

    async def _custom_resources(self) -> tuple[Any, ...]:
        """The namespaced kinds CustomResourceDefinitions serve (kube's deleter finds them through
        discovery), each in its storage version."""
        crds, _ = await self.api.list(kinds.CUSTOMRESOURCEDEFINITIONS)
        found = []
        for crd in crds:
            data = crd.to_dict()
            rt = customresources.storage_type(data)
            if rt is not None and rt.namespaced and customresources.served_types(data):
                found.append(rt)
        return tuple(found)

    def caches(self) -> Sequence[Informer[Any]]:
        return (self.namespaces,)

    def initial_keys(self) -> Iterable[str]:
        return [ns.metadata.name or "" for ns in self.namespaces.items() if ns.metadata.deletion_timestamp]

"""The service-account controller: a `default` ServiceAccount in every namespace, put back when deleted.

kube-controller-manager's serviceaccounts-controller (pkg/controller/serviceaccount) watches namespaces
and service accounts; a namespace that is active and lacks one of the accounts it must hold gets it
created. A namespace being deleted is left alone (the namespace controller is emptying it, and the API
server refuses new objects in it anyway).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from kubelab import kinds
from kubelab.client import AlreadyExists, ApiClient, ApiError, Informer, NotFound, WorkQueue
from kubelab.models import Namespace, ServiceAccount

from .queuecontroller import QueueController

log = logging.getLogger(__name__)

DEFAULT_ACCOUNTS = ("default",)  # kube-controller-manager's ServiceAccountsControllerOptions default


class ServiceAccountsController(QueueController):
    name = "serviceaccounts-controller"
    max_workers = 1

    def __init__(self, api: ApiClient, namespaces: Informer[Namespace], accounts: Informer[ServiceAccount], *,
                 names: tuple[str, ...] = DEFAULT_ACCOUNTS) -> None:
        self.api = api
        self.namespaces = namespaces
        self.accounts = accounts
        self.names = names
        self.queue = WorkQueue(self.name)
        namespaces.add_handler(self._on_namespace)
        accounts.add_handler(self._on_account)

    def _on_namespace(self, event: str, old: Namespace | None, new: Namespace | None) -> None:
        if new is not None:
            self.queue.add(new.metadata.name or "")

    def _on_account(self, event: str, old: ServiceAccount | None, new: ServiceAccount | None) -> None:
        # Only a deletion can leave a namespace without its account (serviceAccountDeleted).
        if new is None and old is not None and old.metadata.name in self.names:
            self.queue.add(old.metadata.namespace or "")

    async def reconcile(self, namespace: str) -> None:
        ns = self.namespaces.get(namespace)
        if ns is None or ns.metadata.deletion_timestamp or (ns.status and ns.status.phase == "Terminating"):
            return
        for name in self.names:
            if self.accounts.get(f"{namespace}/{name}") is not None:
                continue
            try:
                await self.api.create(kinds.SERVICEACCOUNTS, {"metadata": {"name": name}}, namespace)
                log.info("serviceaccounts: created %s/%s", namespace, name)
            except AlreadyExists:
                pass  # the cache had not seen it yet
            except NotFound:
                pass  # the namespace went away meanwhile
            except ApiError as exc:
                if exc.code == 403:
                    return  # the namespace is terminating (NamespaceLifecycle)
                raise

    def caches(self) -> Sequence[Informer[Any]]:
        return (self.namespaces, self.accounts)

    def initial_keys(self) -> Iterable[str]:
        return [ns.metadata.name or "" for ns in self.namespaces.items()]

"""The root CA publisher: ConfigMap `kube-root-ca.crt` (key `ca.crt`) in every namespace, holding the CA
that signs the certificate the API server shows to pods.

kube-controller-manager's root-ca-cert-publisher (pkg/controller/certificates/rootcacertpublisher)
keeps it from --root-ca-file: created when missing, its data and description annotation put back when
someone changes them, re-created when deleted. The ServiceAccount admission plugin projects it into
every pod as `ca.crt` next to the token, which is how in-cluster clients trust the API server. A
namespace being deleted is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from kubelab import kinds
from kubelab.client import AlreadyExists, ApiClient, ApiError, Informer, NotFound, WorkQueue
from kubelab.models import ConfigMap, Namespace

from .queuecontroller import QueueController

log = logging.getLogger(__name__)

CONFIGMAP_NAME = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
               "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
               "distributions of Kubernetes clusters.")


def wanted_data(ca: str) -> dict[str, str]:
    return {"ca.crt": ca}


def is_current(cm: ConfigMap, ca: str) -> bool:
    """Whether the stored ConfigMap already says what the publisher would write."""
    annotations = cm.metadata.annotations or {}
    return cm.data == wanted_data(ca) and annotations.get(DESCRIPTION_ANNOTATION) == DESCRIPTION


class RootCACertPublisher(QueueController):
    name = "root-ca-cert-publisher"
    max_workers = 1

    def __init__(self, api: ApiClient, namespaces: Informer[Namespace], configmaps: Informer[ConfigMap], *,
                 ca: str) -> None:
        self.api = api
        self.namespaces = namespaces
        self.configmaps = configmaps
        self.ca = ca
        self.queue = WorkQueue(self.name)
        namespaces.add_handler(self._on_namespace)
        configmaps.add_handler(self._on_configmap)

    def _on_namespace(self, event: str, old: Namespace | None, new: Namespace | None) -> None:
        if new is not None:
            self.queue.add(new.metadata.name or "")

    def _on_configmap(self, event: str, old: ConfigMap | None, new: ConfigMap | None) -> None:
        cm = new or old
        if cm is not None and cm.metadata.name == CONFIGMAP_NAME:
            self.queue.add(cm.metadata.namespace or "")

    async def reconcile(self, namespace: str) -> None:
        ns = self.namespaces.get(namespace)
        if ns is None or ns.metadata.deletion_timestamp or (ns.status and ns.status.phase == "Terminating"):
            return
        cm = self.configmaps.get(f"{namespace}/{CONFIGMAP_NAME}")
        try:
            if cm is None:
                await self.api.create(kinds.CONFIGMAPS, {
                    "metadata": {"name": CONFIGMAP_NAME, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                    "data": wanted_data(self.ca)}, namespace)
                log.info("root-ca-cert-publisher: created %s/%s", namespace, CONFIGMAP_NAME)
            elif not is_current(cm, self.ca):
                # The data and the annotation are the publisher's (it replaces the data whole, as kube's
                # does); labels and other annotations stay. The resourceVersion makes it a compare-and-swap.
                await self.api.patch(kinds.CONFIGMAPS, CONFIGMAP_NAME, {
                    "metadata": {"annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION},
                                 "resourceVersion": cm.metadata.resource_version},
                    "data": {**{k: None for k in cm.data or {} if k != "ca.crt"}, **wanted_data(self.ca)}},
                    namespace)
        except (AlreadyExists, NotFound):
            pass  # the cache is behind; the watch event requeues the namespace
        except ApiError as exc:
            if exc.code != 403:  # 403: the namespace is terminating (NamespaceLifecycle)
                raise

    def caches(self) -> Sequence[Informer[Any]]:
        return (self.namespaces, self.configmaps)

    def initial_keys(self) -> Iterable[str]:
        return [ns.metadata.name or "" for ns in self.namespaces.items()]

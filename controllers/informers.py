"""The informers every controller shares, one per kind (client-go's SharedInformerFactory), with the
indexes and lookups several controllers need (pods by namespace, Services selecting a pod, ...)."""

from __future__ import annotations

from typing import Any

from kubelab import kinds, wellknown
from kubelab.client import ApiClient, Informer, WorkQueue
from kubelab.client.informer import Handler
from kubelab.models import (
    ConfigMap,
    ControllerRevision,
    CronJob,
    DaemonSet,
    Deployment,
    Endpoints,
    EndpointSlice,
    Job,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    ReplicaSet,
    ReplicationController,
    Service,
    ServiceAccount,
    StatefulSet,
)
from kubelab.selectors import selector_from_map


class SharedInformers:
    """One informer per kind, shared by every controller (client-go's SharedInformerFactory)."""

    def __init__(self, api: ApiClient) -> None:
        self.services: Informer[Service] = Informer(api, kinds.SERVICES, name="controllers-services")
        self.pods: Informer[Pod] = Informer(api, kinds.PODS, name="controllers-pods")
        self.endpoints: Informer[Endpoints] = Informer(api, kinds.ENDPOINTS, name="controllers-endpoints")
        self.slices: Informer[EndpointSlice] = Informer(api, kinds.ENDPOINTSLICES, name="controllers-slices")
        self.nodes: Informer[Node] = Informer(api, kinds.NODES, name="controllers-nodes")
        self.namespaces: Informer[Namespace] = Informer(api, kinds.NAMESPACES, name="controllers-namespaces")
        self.deployments: Informer[Deployment] = Informer(api, kinds.DEPLOYMENTS, name="controllers-deployments")
        self.replicasets: Informer[ReplicaSet] = Informer(api, kinds.REPLICASETS, name="controllers-replicasets")
        self.serviceaccounts: Informer[ServiceAccount] = Informer(api, kinds.SERVICEACCOUNTS,
                                                                  name="controllers-serviceaccounts")
        self.configmaps: Informer[ConfigMap] = Informer(api, kinds.CONFIGMAPS, name="controllers-configmaps")
        self.budgets: Informer[PodDisruptionBudget] = Informer(api, kinds.PODDISRUPTIONBUDGETS,
                                                               name="controllers-poddisruptionbudgets")
        self.jobs: Informer[Job] = Informer(api, kinds.JOBS, name="controllers-jobs")
        self.cronjobs: Informer[CronJob] = Informer(api, kinds.CRONJOBS, name="controllers-cronjobs")
        self.daemonsets: Informer[DaemonSet] = Informer(api, kinds.DAEMONSETS, name="controllers-daemonsets")
        self.statefulsets: Informer[StatefulSet] = Informer(api, kinds.STATEFULSETS, name="controllers-statefulsets")
        self.controllerrevisions: Informer[ControllerRevision] = Informer(api, kinds.CONTROLLERREVISIONS,
                                                                          name="controllers-controllerrevisions")
        self.replicationcontrollers: Informer[ReplicationController] = Informer(
            api, kinds.REPLICATIONCONTROLLERS, name="controllers-replicationcontrollers")
        self._pods_by_ns: dict[str, dict[str, Pod]] = {}
        self._slices_by_ns: dict[str, dict[str, EndpointSlice]] = {}
        self.pods.add_handler(lambda e, old, new: self._index(self._pods_by_ns, old, new))
        self.slices.add_handler(lambda e, old, new: self._index(self._slices_by_ns, old, new))

    @staticmethod
    def _index(index: dict[str, dict[str, Any]], old: Any, new: Any) -> None:
        if new is None:
            index.get(old.metadata.namespace or "", {}).pop(old.metadata.name or "", None)
        else:
            index.setdefault(new.metadata.namespace or "", {})[new.metadata.name or ""] = new

    def all(self) -> list[Informer[Any]]:
        return [self.services, self.pods, self.endpoints, self.slices, self.nodes, self.namespaces, self.deployments,
                self.replicasets, self.serviceaccounts, self.configmaps, self.budgets,
                self.jobs, self.cronjobs, *self.apps_informers()]

    def apps_informers(self) -> list[Informer[Any]]:
        """DaemonSets, StatefulSets, their ControllerRevisions and ReplicationControllers."""
        return [self.daemonsets, self.statefulsets, self.controllerrevisions, self.replicationcontrollers]

    def pods_in(self, namespace: str) -> list[Pod]:
        return list(self._pods_by_ns.get(namespace, {}).values())

    def slices_in(self, namespace: str) -> list[EndpointSlice]:
        return list(self._slices_by_ns.get(namespace, {}).values())

    def nodes_by_name(self) -> dict[str, Node]:
        return dict(self.nodes.cache)

    def services_selecting(self, pod: Pod) -> list[str]:
        keys = []
        for svc in self.services.items():
            if svc.metadata.namespace != pod.metadata.namespace or not svc.spec or svc.spec.selector is None:
                continue
            if selector_from_map(svc.spec.selector).matches(pod.metadata.labels):
                keys.append(svc.key)
        return keys


def enqueue_services(informers: SharedInformers, queue: WorkQueue) -> Handler:
    """The queue of a controller keyed by Service (Endpoints, EndpointSlices): a Service's own events, and
    a pod's for every Service selecting it before or after the change, put the Service's key on `queue`.
    Returns the handler for the objects the controller owns (Endpoints, or EndpointSlices by their
    kubernetes.io/service-name label), to register on that informer."""
    def on_service(event: str, old: Service | None, new: Service | None) -> None:
        queue.add((new or old).key)  # type: ignore[union-attr]

    def on_pod(event: str, old: Pod | None, new: Pod | None) -> None:
        keys = set()
        for pod in (old, new):
            if pod is not None:
                keys.update(informers.services_selecting(pod))
        for key in keys:
            queue.add(key)

    def on_owned(event: str, old: Any, new: Any) -> None:
        obj = new or old
        service = (obj.metadata.labels or {}).get(wellknown.SERVICE_NAME) if obj.kind == "EndpointSlice" \
            else obj.metadata.name
        if service:
            queue.add(f"{obj.metadata.namespace}/{service}")

    informers.services.add_handler(on_service)
    informers.pods.add_handler(on_pod)
    return on_owned

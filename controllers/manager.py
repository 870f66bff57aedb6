"""The controller manager: one work queue per controller over the shared informers (informers.py),
supervised tasks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from kubelab import addressing, kinds, satokenkey, wellknown
from kubelab.client import ApiClient, Informer, WorkQueue
from kubelab.client.informer import Handler
from kubelab.client.queuemetrics import WorkQueueMetricsProvider
from kubelab.client.tracereport import TraceReporter
from kubelab.models import (
    Pod,
    Service,
)

from .informers import SharedInformers

log = logging.getLogger(__name__)


class Controller(Protocol):
    name: str

    async def reconcile(self, key: str) -> None: ...


def _service_handlers(informers: SharedInformers, queue: WorkQueue) -> Handler:
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


async def run(api: ApiClient, *, workers: int = 2, node_monitor_grace_period: float = 50.0,
              node_monitor_period: float = 5.0, lb_pool: str | None = addressing.LB_POOL,
              metrics: WorkQueueMetricsProvider | None = None, ready: Callable[[], None] | None = None,
              root_ca: str | None = None, service_account_private_key_file: str | None = None,
              terminated_pod_gc_threshold: int = 12500) -> None:
    """`root_ca`: the CA bundle (PEM) the root CA publisher puts in every namespace's kube-root-ca.crt
    (kube-controller-manager's --root-ca-file); None runs no publisher. `service_account_private_key_file`:
    the key the token controller signs legacy token Secrets with (--service-account-private-key-file, the
    API server's signing key); None runs no token controller. `lb_pool`: the addresses the LoadBalancer controller hands out ("FIRST-LAST" or a CIDR);
    None runs no LoadBalancer controller (LoadBalancer Services then stay <pending>). `metrics`
    receives every work queue's workqueue_* metrics (the caller serves its registry).
    `terminated_pod_gc_threshold`: how many terminated pods the pod garbage collector keeps
    (--terminated-pod-gc-threshold; 0 or less keeps them all). `ready()` is
    called once the caches have synced (`kubelab up` prints it)."""
    from . import garbagecollector
    from .clusterroleaggregation import ClusterRoleAggregationController
    from .cronjob import CronJobController
    from .deployment import DeploymentController
    from .disruption import DisruptionController
    from .endpoints import EndpointsController
    from .endpointslices import EndpointSliceController
    from .job import JobController
    from .loadbalancer import LoadBalancerController, Pool
    from .namespace import NamespaceController
    from .nodelifecycle import NodeLifecycleController
    from .podgc import PodGCController
    from .replicaset import ReplicaSetController
    from .rootcacert import RootCACertPublisher
    from .serviceaccounts import ServiceAccountsController
    from .tokens import TokensController

    informers = SharedInformers(api)
    # The workload controllers keep their own queues (their handlers lower expectations, too).
    workloads: list[ReplicaSetController | DeploymentController] = [ReplicaSetController(api, informers),
                                                                    DeploymentController(api, informers)]
    batch: list[JobController | CronJobController] = [JobController(api, informers), CronJobController(api, informers)]
    apps_controllers = _apps_controllers(api, informers)
    # The garbage collector sees every kind but events, which kube's ignores (DefaultIgnoredResources): an
    # informer on them decoded every Scheduled event of a burst for nothing. The shared informers, and
    # its own for the rest.
    shared = {informer.rt: informer for informer in informers.all()}
    gc_informers = [shared.get(rt) or Informer(api, rt, name=f"gc-{rt.plural}") for rt in kinds.BUILTIN
                    if rt not in garbagecollector.IGNORED]
    gc = garbagecollector.GarbageCollector(api, gc_informers)
    aggregation = ClusterRoleAggregationController(api, next(i for i in gc_informers if i.rt == kinds.CLUSTERROLES))
    controllers: list[tuple[Controller, WorkQueue]] = []
    traces = TraceReporter(api)
    for controller_class, owned in ((EndpointsController, informers.endpoints),
                                    (EndpointSliceController, informers.slices)):
        service_controller = controller_class(api, informers)
        service_controller.traces = traces
        queue = WorkQueue(service_controller.name)
        on_owned = _service_handlers(informers, queue)
        owned.add_handler(on_owned)
        controllers.append((service_controller, queue))
    lb_controller = LoadBalancerController(api, informers.services, Pool.parse(lb_pool)) if lb_pool else None
    lb_queue = WorkQueue("loadbalancer-controller")
    namespaced: list[ServiceAccountsController | RootCACertPublisher | TokensController] = [
        ServiceAccountsController(api, informers.namespaces, informers.serviceaccounts)]
    if root_ca is not None:
        namespaced.append(RootCACertPublisher(api, informers.namespaces, informers.configmaps, ca=root_ca))
    disruption = DisruptionController(api, informers.pods, informers.budgets)
    if service_account_private_key_file is not None:
        secrets = next(i for i in gc_informers if i.rt == kinds.SECRETS)  # the garbage collector's, shared
        namespaced.append(TokensController(api, secrets, informers.serviceaccounts, root_ca=root_ca,
                                           key=satokenkey.load_key(service_account_private_key_file)))
    if metrics is not None:
        for queue in ([q for _, q in controllers] + [lb_queue, gc.queue, disruption.queue, aggregation.queue]
                      + [w.queue for w in workloads]
                      + [c.queue for c in apps_controllers]
                      + [c.queue for c in namespaced] + [b.queue for b in batch]):
            queue.metrics = metrics.for_queue(queue.name)
    if lb_controller is not None:
        def on_lb_service(event: str, old: Service | None, new: Service | None) -> None:
            for key in lb_controller.keys_to_reconcile(old, new):
                lb_queue.add(key)

        informers.services.add_handler(on_lb_service)
    async with asyncio.TaskGroup() as tg:
        tg.create_task(traces.run(), name="controllers-trace-reporter")
        for informer in informers.all():
            tg.create_task(informer.run(), name=f"{informer.name}-informer")
        for informer in informers.all():
            await informer.wait_synced()
        log.info("caches synced (%d services, %d pods)", len(informers.services.cache),
                 len(informers.pods.cache))
        if ready is not None:
            ready()
        for controller, queue in controllers:
            for svc in informers.services.items():
                queue.add(svc.key)
            for ep in informers.endpoints.items():
                queue.add(ep.key)  # orphaned Endpoints of deleted Services get removed
            for _ in range(workers):
                tg.create_task(queue.run_worker(controller.reconcile), name=f"{controller.name}-worker")
        if lb_controller is not None:
            for svc in informers.services.items():
                lb_queue.add(svc.key)
            # One worker: addresses come from the cache, one writer at a time keeps them unique.
            tg.create_task(lb_queue.run_worker(lb_controller.reconcile), name=f"{lb_controller.name}-worker")
        lifecycle = NodeLifecycleController(api, informers.nodes, informers.pods, monitor_period=node_monitor_period,
                                            grace_period=node_monitor_grace_period)
        tg.create_task(lifecycle.run(), name="node-lifecycle-controller")
        tg.create_task(NamespaceController(api, informers.namespaces).run(), name="namespace-controller")
        podgc = PodGCController(api, informers.nodes, informers.pods,
                                terminated_pod_threshold=terminated_pod_gc_threshold)
        tg.create_task(podgc.run(), name=podgc.name)
        tg.create_task(disruption.run(workers), name=disruption.name)
        tg.create_task(aggregation.run(), name=aggregation.name)
        for each in namespaced:
            tg.create_task(each.run(), name=each.name)
        for workload in workloads:
            for obj in (informers.replicasets if isinstance(workload, ReplicaSetController)
                        else informers.deployments).items():
                workload.queue.add(obj.key)
            for _ in range(workers):
                tg.create_task(workload.queue.run_worker(workload.reconcile), name=f"{workload.name}-worker")
        for each_batch in batch:
            for key in (informers.jobs if isinstance(each_batch, JobController) else informers.cronjobs).cache:
                each_batch.queue.add(key)
            for _ in range(workers):
                tg.create_task(each_batch.queue.run_worker(each_batch.reconcile), name=f"{each_batch.name}-worker")
        for apps_controller in apps_controllers:
            for obj in apps_controller.owners():
                apps_controller.queue.add(obj.key)
            for _ in range(workers):
                tg.create_task(apps_controller.queue.run_worker(apps_controller.reconcile),
                               name=f"{apps_controller.name}-worker")
        for informer in gc_informers:
            if informer.rt not in shared:
                tg.create_task(informer.run(), name=f"{informer.name}-informer")
        tg.create_task(garbagecollector.run(gc, workers=workers), name="garbage-collector")


class _AppsController(Protocol):
    name: str
    queue: WorkQueue

    def owners(self) -> list[Any]: ...

    async def reconcile(self, key: str) -> None: ...


def _apps_controllers(api: ApiClient, informers: SharedInformers) -> list[_AppsController]:
    """The DaemonSet, StatefulSet and ReplicationController controllers: each keeps its own queue, and
    `owners()` lists what to sync once the caches are in."""
    from .daemonset import DaemonSetController
    from .replicationcontroller import ReplicationManager
    from .statefulset import StatefulSetController

    return [DaemonSetController(api, informers), StatefulSetController(api, informers),
            ReplicationManager(api, informers)]

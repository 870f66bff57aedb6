"""The controller manager: builds every controller over the shared informers (informers.py) and runs it,
each a QueueController (queuecontroller.py) but the two periodic loops and the garbage collector, as
supervised tasks of one TaskGroup."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kubelab import addressing, kinds, satokenkey
from kubelab.client import ApiClient, Informer
from kubelab.client.queuemetrics import WorkQueueMetricsProvider
from kubelab.client.tracereport import TraceReporter

from . import garbagecollector
from .clusterroleaggregation import ClusterRoleAggregationController
from .cronjob import CronJobController
from .daemonset import DaemonSetController
from .deployment import DeploymentController
from .disruption import DisruptionController
from .endpoints import EndpointsController
from .endpointslices import EndpointSliceController
from .informers import SharedInformers
from .job import JobController
from .loadbalancer import LoadBalancerController, Pool
from .namespace import NamespaceController
from .nodelifecycle import NodeLifecycleController
from .podgc import PodGCController
from .queuecontroller import QueueController
from .replicaset import ReplicaSetController
from .replicationcontroller import ReplicationManager
from .rootcacert import RootCACertPublisher
from .serviceaccounts import ServiceAccountsController
from .statefulset import StatefulSetController
from .tokens import TokensController

log = logging.getLogger(__name__)


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
    informers = SharedInformers(api)
    traces = TraceReporter(api)
    # The garbage collector sees every kind but events, which kube's ignores (DefaultIgnoredResources): an
    # informer on them decoded every Scheduled event of a burst for nothing. The shared informers, and
    # its own for the rest.
    shared = {informer.rt: informer for informer in informers.all()}
    gc_informers = [shared.get(rt) or Informer(api, rt, name=f"gc-{rt.plural}") for rt in kinds.BUILTIN
                    if rt not in garbagecollector.IGNORED]
    gc = garbagecollector.GarbageCollector(api, gc_informers)
    own = {informer.rt: informer for informer in gc_informers}
    controllers: list[QueueController] = [
        EndpointsController(api, informers, traces=traces),
        EndpointSliceController(api, informers, traces=traces),
        ReplicaSetController(api, informers), DeploymentController(api, informers),
        JobController(api, informers), CronJobController(api, informers),
        DaemonSetController(api, informers), StatefulSetController(api, informers), ReplicationManager(api, informers),
        DisruptionController(api, informers.pods, informers.budgets),
        ClusterRoleAggregationController(api, own[kinds.CLUSTERROLES]),
        ServiceAccountsController(api, informers.namespaces, informers.serviceaccounts),
        NamespaceController(api, informers.namespaces),
    ]
    if lb_pool:
        controllers.append(LoadBalancerController(api, informers.services, Pool.parse(lb_pool)))
    if root_ca is not None:
        controllers.append(RootCACertPublisher(api, informers.namespaces, informers.configmaps, ca=root_ca))
    if service_account_private_key_file is not None:
        controllers.append(TokensController(api, own[kinds.SECRETS], informers.serviceaccounts, root_ca=root_ca,
                                            key=satokenkey.load_key(service_account_private_key_file)))
    if metrics is not None:
        for queue in [c.queue for c in controllers] + [gc.queue]:
            queue.metrics = metrics.for_queue(queue.name)
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
        for controller in controllers:
            tg.create_task(controller.run(workers), name=controller.name)
        lifecycle = NodeLifecycleController(api, informers.nodes, informers.pods, monitor_period=node_monitor_period,
                                            grace_period=node_monitor_grace_period)
        tg.create_task(lifecycle.run(), name="node-lifecycle-controller")
        podgc = PodGCController(api, informers.nodes, informers.pods,
                                terminated_pod_threshold=terminated_pod_gc_threshold)
        tg.create_task(podgc.run(), name=podgc.name)
        for informer in gc_informers:
            if informer.rt not in shared:
                tg.create_task(informer.run(), name=f"{informer.name}-informer")
        tg.create_task(garbagecollector.run(gc, workers=workers), name="garbage-collector")

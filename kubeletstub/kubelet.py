"""The kubelet stub's main loop: register the node, heartbeat, run the pods bound to it, route pod CIDRs."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

from kubelab import kinds
from kubelab.client import AlreadyExists, ApiClient, Conflict, Informer, NotFound, WorkQueue
from kubelab.events import EventRecorder
from kubelab.models import Node, Pod
from kubelab.netnsthread import run_in_netns

from .dataplane import Dataplane, RenderDataplane
from .node import NodeConfig, allocatable, build_node, refreshed_status, renew_lease
from .pods import PodManager, remember_newest
from .server import KubeletApiConfig, KubeletServer, server_context

log = logging.getLogger(__name__)


class Kubelet:
    def __init__(self, api: ApiClient, config: NodeConfig, dataplane: Dataplane | None = None) -> None:
        self.api = api
        self.config = config
        self.dataplane = dataplane or RenderDataplane()
        self.events = EventRecorder(api, "kubelet", config.name)
        self.pods: Informer[Pod] = Informer(api, kinds.PODS, name=f"kubelet-{config.name}-pods",
                                            field_selector=f"spec.nodeName={config.name}")
        self.nodes: Informer[Node] = Informer(api, kinds.NODES, name=f"kubelet-{config.name}-nodes")
        self.queue = WorkQueue(f"kubelet-{config.name}")
        self.manager = PodManager(api, config.name, config.ip, config.pod_cidr, self.dataplane, self.events,
                                  requeue=self.queue.add, dns=(config.cluster_dns, config.cluster_domain),
                                  allocatable=allocatable(config))
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(lambda *_: self._routes_changed.set())
        self._routes_changed = asyncio.Event()
        self.registered = asyncio.Event()

    def _on_pod(self, event: str, old: Pod | None, new: Pod | None) -> None:
        pod = new or old
        assert pod is not None
        if new is None:
            self.manager.cache.pop(pod.key, None)
        else:
            remember_newest(self.manager.cache, new)
        self.queue.add(pod.key)

    async def register(self) -> None:
        node = build_node(self.config)
        while True:
            try:
                created = await self.api.create(kinds.NODES, node)
                self.events.event(created, "Normal", "Starting", "Starting kubelet.")
                self.events.event(created, "Normal", "NodeReady", f"Node {self.config.name} status is now: NodeReady")
                log.info("%s: registered (%s, %s)", self.config.name, self.config.ip, self.config.pod_cidr)
                break
            except AlreadyExists:
                await self.heartbeat()
                current = await self.api.get(kinds.NODES, self.config.name)
                self.events.event(current, "Normal", "Starting", "Starting kubelet.")
                log.info("%s: node exists, status refreshed", self.config.name)
                break
            except Exception as exc:  # noqa: BLE001 - the API server may not be up yet
                log.warning("%s: registration failed (%s), retrying", self.config.name, exc)
                await asyncio.sleep(1)
        self.registered.set()

    async def heartbeat(self) -> None:
        for _ in range(5):
            try:
                current = await self.api.get(kinds.NODES, self.config.name)
                await self.api.update_status(kinds.NODES, refreshed_status(current, self.config))
                return
            except Conflict:
                continue
            except NotFound:
                await self.api.create(kinds.NODES, build_node(self.config))
                return

    async def _status_loop(self) -> None:
        """nodeStatusReportFrequency: the Node's status is re-posted every 5 minutes (or sooner when the
        kubelet has something new to say); the Lease below is the frequent heartbeat."""
        while True:
            await asyncio.sleep(self.config.status_report_interval)
            try:
                await self.heartbeat()
            except Exception as exc:  # noqa: BLE001 - keep trying; the node lifecycle controller will notice
                log.warning("%s: posting node status failed: %s", self.config.name, exc)

    async def _lease_loop(self) -> None:
        """The node Lease in kube-node-lease, renewed every 10 s (a quarter of its 40 s duration)."""
        lease = None
        while True:
            try:
                lease = await renew_lease(self.api, self.config.name, lease)
            except Exception as exc:  # noqa: BLE001 - retried at the next renewal
                log.warning("%s: renewing the node lease failed: %s", self.config.name, exc)
                lease = None
            await asyncio.sleep(self.config.lease_renew_interval)

    async def _route_loop(self) -> None:
        """flannel host-gw: a route to every other node's pod CIDR via that node's InternalIP."""
        while True:
            await self._routes_changed.wait()
            self._routes_changed.clear()
            routes = {}
            for node in self.nodes.items():
                if node.metadata.name == self.config.name or not node.spec or not node.spec.pod_cidr:
                    continue
                ip = node.internal_ip()
                if ip:
                    routes[node.spec.pod_cidr] = ip
            try:
                await self.dataplane.sync_routes(routes)
            except Exception as exc:  # noqa: BLE001 - retried on the next node change
                log.warning("%s: syncing routes failed: %s", self.config.name, exc)
                await asyncio.sleep(1)
                self._routes_changed.set()

    async def serve_api(self) -> KubeletServer | None:
        """The kubelet API on the node's address and kubelet port, its socket made in the node's network
        namespace; None when it has none (see NodeConfig). A port of 0 becomes the one the kernel picked,
        which the Node then advertises."""
        port = self.config.kubelet_port
        if port is None:
            return None
        address = self.config.kubelet_address or self.config.ip

        def bind() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((address, port))
            except BaseException:
                sock.close()
                raise
            return sock

        sock = await asyncio.to_thread(run_in_netns, self.dataplane.node_netns, bind,
                                       name=f"kubelet-api-{self.config.name}")
        tls = None
        if self.config.tls_cert_file and self.config.tls_private_key_file and self.config.client_ca_file:
            tls = server_context(self.config.tls_cert_file, self.config.tls_private_key_file, self.config.client_ca_file)
        # The logs are where the node's runtime writes them; a configured root is for a dataplane without one.
        runtime = getattr(self.dataplane, "runtime", None)
        log_root = runtime.log_root if runtime is not None else \
            Path(self.config.log_root) if self.config.log_root else None
        server = KubeletServer(KubeletApiConfig(self.config.name, self.manager.cache, self.dataplane, log_root),
                               ssl_context=tls)
        await server.start(sock)
        self.config.kubelet_port = sock.getsockname()[1]
        log.info("%s: kubelet API on %s://%s:%d", self.config.name, "https" if tls else "http", address,
                 self.config.kubelet_port)
        return server

    async def run(self) -> None:
        await self.dataplane.start_node()
        api_server = await self.serve_api()
        try:
            await self._run()
        finally:
            self.manager.prober.stop_all()
            if api_server is not None:
                await api_server.close()

    async def _run(self) -> None:
        await self.register()
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.pods.run(), name=f"kubelet-{self.config.name}-pods")
            tg.create_task(self.nodes.run(), name=f"kubelet-{self.config.name}-nodes")
            tg.create_task(self._status_loop(), name=f"kubelet-{self.config.name}-status")
            tg.create_task(self._lease_loop(), name=f"kubelet-{self.config.name}-lease")
            tg.create_task(self._route_loop(), name=f"kubelet-{self.config.name}-routes")
            await self.pods.wait_synced()
            self.manager.adopt(self.pods.items())
            tg.create_task(self.queue.run_per_key(self.manager.sync, tg), name=f"kubelet-{self.config.name}-pod-workers")


async def run(api: ApiClient, config: NodeConfig, dataplane: Dataplane | None = None) -> None:
    await Kubelet(api, config, dataplane).run()

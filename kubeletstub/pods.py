"""Pod lifecycle on one node: from bound to Running and Ready, and gone again when deleted.

Level-triggered like the real kubelet's pod workers: `sync(key)` compares the pod's API object with
what runs here and acts on the difference — start its network and processes, report its status,
or stop and release it.
"""

from __future__ import annotations

import logging
import uuid

from kubelab import kinds, timeutil
from kubelab.client import ApiClient, Conflict, NotFound
from kubelab.events import EventRecorder
from kubelab.models import ContainerStatus, Pod, PodCondition, PodIP, PodStatus

from .dataplane import Dataplane
from .ipam import PodIPAllocator

log = logging.getLogger(__name__)


def declared_ports(pod: Pod) -> list[tuple[int, str]]:
    ports = []
    for c in (pod.spec.containers if pod.spec else None) or []:
        for p in c.ports or []:
            if p.container_port:
                ports.append((p.container_port, p.protocol or "TCP"))
    return sorted(set(ports))


def running_status(pod: Pod, *, ip: str, host_ip: str, started: str) -> PodStatus:
    """The status a kubelet reports for a pod whose containers all run and are ready (§8.3)."""
    previous = pod.status or PodStatus()
    before = {c.type: c for c in previous.conditions or []}

    def condition(type_: str) -> PodCondition:
        old = before.get(type_)
        transition = old.last_transition_time if old is not None and old.status == "True" else timeutil.rfc3339()
        return PodCondition(type=type_, status="True", last_transition_time=transition)

    conditions = [condition(t) for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")]
    conditions.append(before.get("PodScheduled") or condition("PodScheduled"))
    statuses = []
    existing = {s.name: s for s in previous.container_statuses or []}
    for c in sorted((pod.spec.containers if pod.spec else None) or [], key=lambda c: c.name or ""):
        old = existing.get(c.name)
        image = c.image or ""
        statuses.append(ContainerStatus(
            name=c.name, image=image if "/" in image else f"docker.io/library/{image}",
            image_id=old.image_id if old else f"docker.io/library/{image.split(':')[0]}@sha256:{uuid.uuid4().hex * 2}",
            container_id=old.container_id if old else f"containerd://{uuid.uuid4().hex * 2}",
            ready=True, started=True, restart_count=0,
            state={"running": {"startedAt": started}}, last_state={}))
    return PodStatus(phase="Running", conditions=conditions, host_ip=host_ip, host_ips=[PodIP(ip=host_ip)],
                     pod_ip=ip, pod_ips=[PodIP(ip=ip)], start_time=previous.start_time or started,
                     container_statuses=statuses, qos_class=previous.qos_class)


class PodManager:
    def __init__(self, api: ApiClient, node_name: str, node_ip: str, pod_cidr: str, dataplane: Dataplane,
                 events: EventRecorder) -> None:
        self.api = api
        self.node_name = node_name
        self.node_ip = node_ip
        self.ipam = PodIPAllocator(pod_cidr)
        self.dataplane = dataplane
        self.events = events
        self.cache: dict[str, Pod] = {}
        self._running: set[str] = set()

    def adopt(self, pods: list[Pod]) -> None:
        """After a restart: keep the addresses pods already have, so they never change under them."""
        for pod in pods:
            if pod.pod_ip:
                self.ipam.reserve(pod.key, pod.pod_ip)

    async def sync(self, key: str) -> None:
        pod = self.cache.get(key)
        if pod is None or pod.is_terminal() or pod.node_name != self.node_name:
            await self._stop(key)
            return
        if pod.metadata.deletion_timestamp:
            # Graceful deletion: stop, then remove the object as the kubelet's status manager does.
            await self._stop(key)
            try:
                await self.api.delete(kinds.PODS, pod.metadata.name or "", pod.metadata.namespace,
                                      grace_period_seconds=0, uid=pod.metadata.uid)
            except NotFound:
                pass
            return
        ip = self.ipam.ip_of(key) or self.ipam.allocate(key)
        if key not in self._running or not self.dataplane.pod_running(key):
            await self.dataplane.start_pod(key, ip, declared_ports(pod))
            if key not in self._running:
                for c in (pod.spec.containers if pod.spec else None) or []:
                    path = f"spec.containers{{{c.name}}}"
                    self.events.event(pod, "Normal", "Pulled", f'Container image "{c.image}" already present on '
                                                               "machine", field_path=path)
                    self.events.event(pod, "Normal", "Created", f"Created container: {c.name}", field_path=path)
                    self.events.event(pod, "Normal", "Started", f"Started container {c.name}", field_path=path)
            self._running.add(key)
        started = timeutil.rfc3339()
        want = running_status(pod, ip=ip, host_ip=self.node_ip, started=started)
        have = pod.status or PodStatus()
        if (have.phase == "Running" and have.pod_ip == ip and pod.is_ready()
                and len(have.container_statuses or []) == len(want.container_statuses or [])):
            return
        pod.status = want
        try:
            await self.api.update_status(kinds.PODS, pod)
        except Conflict:
            raise  # the cache is behind; the worker retries with the next version
        except NotFound:
            await self._stop(key)
            return
        log.info("kubelet %s: pod %s running at %s", self.node_name, key, ip)

    async def _stop(self, key: str) -> None:
        if key in self._running or self.dataplane.pod_running(key):
            await self.dataplane.stop_pod(key)
            log.info("kubelet %s: pod %s stopped", self.node_name, key)
        self._running.discard(key)
        self.ipam.release(key)

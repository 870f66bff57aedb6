"""Pod lifecycle on one node: Pending -> Running (Ready when its probes say so) -> terminated and gone.

Level-triggered like the kubelet's pod workers: `sync(key)` compares the pod's API object with what
runs here and acts on the difference — report ContainerCreating, start the pod's network and process,
report Running and readiness, or, once the API server has set a deletionTimestamp, run the preStop
hook, stop the process, report the containers terminated and delete the object for good (the final
DELETE with gracePeriodSeconds=0 and a UID precondition, as the kubelet's status manager does).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from kubelab import kinds, timeutil, validation
from kubelab.client import ApiClient, Conflict, NotFound
from kubelab.events import EventRecorder
from kubelab.models import Container, ContainerStatus, Pod, PodCondition, PodIP, PodStatus

from . import crilog
from .containerexec import ExecTarget
from .containers import ContainerManager
from .dataplane import Dataplane
from .dns import pod_resolv_conf
from .envvars import pod_hostname
from .ipam import PodIPAllocator
from .podstatus import pod_status, preserved_conditions
from .prober import Prober, ProbeSpec, run_probe
from .volumes import MountError, VolumeManager

log = logging.getLogger(__name__)


def remember_newest(cache: dict[str, Pod], pod: Pod) -> None:
    """Put `pod` in the kubelet's copy of its pods unless the copy already holds a newer version of it. Both
    the informer's events and the kubelet's own status writes' answers come here, in either order: a watch
    event often arrives before the writer's own answer, so an answer that is older than an event already
    taken must not replace it, and a late event must not undo a write's answer. Either would put every next
    status write on a stale resourceVersion, a 409 Conflict each time, forever once the pod stops changing
    (a pod left Pending: tests/faults/test_etcd_restart.py under churn; 1,630 status PUTs for 200 pods in
    bench/density.py). kube's kubelet never sees this: its status manager PATCHes the status with only the
    pod's UID as precondition."""
    cached = cache.get(pod.key)
    if cached is not None and cached.metadata.uid == pod.metadata.uid:
        try:
            if int(pod.metadata.resource_version or 0) < int(cached.metadata.resource_version or 0):
                return
        except ValueError:  # not an etcd revision: no order to go by
            pass
    cache[pod.key] = pod


def declared_ports(pod: Pod) -> list[tuple[int, str]]:
    """The ports the built-in server answers on: those of the containers that have no command of their own
    (a container with a command listens where its command does)."""
    ports = []
    for c in (pod.spec.containers if pod.spec else None) or []:
        if c.command or c.args:
            continue
        for p in c.ports or []:
            if p.container_port:
                ports.append((p.container_port, p.protocol or "TCP"))
    return sorted(set(ports))


def _host_network(pod: Pod) -> bool:
    return bool(pod.spec and pod.spec.host_network)


def _containers(pod: Pod) -> list[Container]:
    return sorted((pod.spec.containers if pod.spec else None) or [], key=lambda c: c.name or "")


def _image(container: Container) -> str:
    image = container.image or ""
    return image if "/" in image else f"docker.io/library/{image}"


def _conditions(pod: Pod, values: dict[str, tuple[str, str | None, str | None]]) -> list[PodCondition]:
    """Conditions in kubelet's order; lastTransitionTime changes only when a status changes."""
    before = {c.type: c for c in (pod.status.conditions if pod.status else None) or []}
    now = timeutil.rfc3339()
    result = preserved_conditions(pod.status)
    for type_ in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"):
        status, reason, message = values[type_]
        old = before.get(type_)
        when = old.last_transition_time if old is not None and old.status == status else now
        result.append(PodCondition(type=type_, status=status, reason=reason, message=message, last_transition_time=when))
    result.append(before.get("PodScheduled") or PodCondition(type="PodScheduled", status="True",
                                                              last_transition_time=now))
    return result


def pending_status(pod: Pod, host_ip: str) -> PodStatus:
    """What the kubelet reports the moment it accepts a pod: Pending, containers being created, and the
    node's address (kubelet's generateAPIPodStatus sets hostIP in every status it writes)."""
    names = " ".join(c.name or "" for c in _containers(pod))
    not_ready = ("False", "ContainersNotReady", f"containers with unready status: [{names}]")
    status = PodStatus(phase="Pending", conditions=_conditions(pod, {
        "PodReadyToStartContainers": ("False", None, None), "Initialized": ("True", None, None),
        "Ready": not_ready, "ContainersReady": not_ready}),
        host_ip=host_ip, host_ips=[PodIP(ip=host_ip)], start_time=timeutil.rfc3339(),
        qos_class=pod.status.qos_class if pod.status else None)
    status.container_statuses = [ContainerStatus(name=c.name, image=c.image, image_id="", ready=False, started=False,
                                                 restart_count=0, state={"waiting": {"reason": "ContainerCreating"}},
                                                 last_state={}) for c in _containers(pod)]
    return status


def running_status(pod: Pod, *, ip: str, host_ip: str, ready: dict[str, bool], started: str) -> PodStatus:
    """Running, with Ready/ContainersReady from the containers' readiness (§8.3)."""
    previous = pod.status or PodStatus()
    existing = {s.name: s for s in previous.container_statuses or []}
    unready = [c.name or "" for c in _containers(pod) if not ready.get(c.name or "", True)]
    readiness = ("True", None, None) if not unready else \
        ("False", "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
    statuses = []
    for c in _containers(pod):
        old = existing.get(c.name)
        running = (old.state or {}).get("running") if old else None
        statuses.append(ContainerStatus(
            name=c.name, image=_image(c),
            image_id=old.image_id if old and old.image_id else
            f"{_image(c).rsplit(':', 1)[0]}@sha256:{uuid.uuid5(uuid.NAMESPACE_URL, c.image or '').hex * 2}",
            container_id=old.container_id if old and old.container_id else f"containerd://{uuid.uuid4().hex * 2}",
            ready=ready.get(c.name or "", True), started=True, restart_count=0,
            state={"running": running or {"startedAt": started}}, last_state={}))
    return PodStatus(phase="Running", conditions=_conditions(pod, {
        "PodReadyToStartContainers": ("True", None, None), "Initialized": ("True", None, None),
        "Ready": readiness, "ContainersReady": readiness}),
        host_ip=host_ip, host_ips=[PodIP(ip=host_ip)], pod_ip=ip, pod_ips=[PodIP(ip=ip)],
        start_time=previous.start_time or started, container_statuses=statuses, qos_class=previous.qos_class)


def terminated_status(pod: Pod, *, finished: str) -> PodStatus:
    """Every container exited 0 after SIGTERM: Succeeded, containers Completed (§8.5)."""
    previous = pod.status or PodStatus()
    statuses = []
    for s in previous.container_statuses or []:
        started = ((s.state or {}).get("running") or {}).get("startedAt") or finished
        statuses.append(ContainerStatus(
            name=s.name, image=s.image, image_id=s.image_id, container_id=s.container_id, ready=False, started=False,
            restart_count=s.restart_count or 0, last_state={},
            state={"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": finished,
                                  "containerID": s.container_id}}))
    done = ("False", "PodCompleted", None)
    status = previous.model_copy(update={"phase": "Succeeded", "container_statuses": statuses or None})
    status.conditions = _conditions(pod, {"PodReadyToStartContainers": ("False", None, None),
                                          "Initialized": ("True", "PodCompleted", None),
                                          "Ready": done, "ContainersReady": done})
    return status


def _same(have: PodStatus | None, want: PodStatus) -> bool:
    """Equal but for timestamps: the fields a status write would change."""
    if have is None:
        return False

    def strip(status: PodStatus) -> dict[str, Any]:
        data = status.to_dict()
        data.pop("startTime", None)
        for cond in data.get("conditions") or []:
            cond.pop("lastTransitionTime", None)
        return data

    return strip(have) == strip(want)


# The Pulled event of a container without a command: kubelab has no images, and says what runs instead.
BUILTIN_PULLED = ('Container image "{image}" already present on machine (kubelab pulls no image: this container '
                  "has no command, so kubelab's built-in HTTP server runs in its place)")
# kubelet's syncFrequency: how often a running pod's configMap/secret/downwardAPI volumes are rewritten
# from their sources (kubelet's is 1 min, plus its object cache's TTL).
VOLUME_REFRESH_PERIOD = 60.0
# Seconds between attempts to set up a pod's volumes (kubelet retries with its own back-off).
MOUNT_RETRY_DELAY = 3.0
# kubelet's minimumGracePeriodInSeconds: a container killed for a failed probe gets at least this long.
MINIMUM_GRACE = 2.0
# Seconds before a termination that failed (its status write or its final DELETE) is tried again.
TERMINATE_RETRY_DELAY = 1.0


class PodManager:
    def __init__(self, api: ApiClient, node_name: str, node_ip: str, pod_cidr: str, dataplane: Dataplane,
                 events: EventRecorder, requeue: Any = None,
                 dns: tuple[tuple[str, ...], str] | None = None,
                 allocatable: dict[str, str] | None = None) -> None:
        self.api = api
        self.node_name = node_name
        self.node_ip = node_ip
        self.ipam = PodIPAllocator(pod_cidr)
        self.dataplane = dataplane
        self.events = events
        self.requeue = requeue or (lambda key: None)
        self.dns = dns  # (cluster DNS IPs, cluster domain) for pods' resolv.conf; None: leave the node's
        self.cache: dict[str, Pod] = {}
        self._running: set[str] = set()
        self._terminating: dict[str, asyncio.Task[None]] = {}
        self._refused: set[str] = set()  # pods left alone for their names, each logged once
        self.runtime = dataplane.runtime
        self.prober = Prober(dataplane.node_argv, self.container_target, self.requeue, self._probe_failed,
                             current_run=lambda key, name: self.containers.current_run(key, name),
                             on_unhealthy=self._unhealthy)
        self._killing: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.runtime.on_exit = self.requeue
        self.volumes = VolumeManager(api, node_ip=node_ip, allocatable=allocatable or {})
        self.containers = ContainerManager(api, self.runtime, events, node_ip=node_ip, allocatable=allocatable or {},
                                           requeue=self.requeue, readiness=self.prober.readiness,
                                           started=self.prober.started,
                                           volume_mounts=lambda pod, c: self.volumes.mounts(
                                               pod, c, self.runtime.pod_dir(pod.metadata.uid or "")),
                                           netns=dataplane.pod_netns, node_name=node_name, cluster_domain=dns[1] if dns else "cluster.local",
                                           resolv_conf=lambda pod: pod_resolv_conf(pod, *self.dns) if self.dns else None)
        self._uids: dict[str, str] = {}  # pod key -> uid, to find its files once the pod is gone
        self._mounted: set[str] = set()  # pods whose volumes are set up
        self._refreshed: dict[str, float] = {}  # pods with volumes kept current -> when they last were
        self._refresh_timers: dict[str, asyncio.TimerHandle] = {}
        self._mount_retry: dict[str, asyncio.TimerHandle] = {}

    def adopt(self, pods: list[Pod]) -> None:
        """After a restart: keep the addresses pods already have, so they never change under them."""
        for pod in pods:
            if pod.pod_ip and not _host_network(pod):
                self.ipam.reserve(pod.key, pod.pod_ip)
            if pod.metadata.uid and self.runtime.has_pod(pod.key):
                self._uids[pod.key] = pod.metadata.uid  # its files are found again when it goes

    def container_target(self, pod_key: str, container: str, cmd: Sequence[str]) -> ExecTarget | None:
        """Where exec probes and preStop hooks run, as CRI ExecSync runs them: inside the container when it
        runs a command of its own (its namespaces and root, its environment and working directory), else
        in the pod's network namespace on the node's filesystem (the built-in server's world)."""
        try:
            argv, env, cwd = self.runtime.exec_command(pod_key, container, cmd)
        except LookupError:
            pod_argv = self.dataplane.pod_argv(pod_key, cmd)
            return ExecTarget(pod_argv) if pod_argv is not None else None
        return ExecTarget(argv, env, cwd)

    def _probe_failed(self, pod_key: str, container: str, probe: str, output: str) -> None:
        pod = self.cache.get(pod_key)
        if pod is not None:
            self.events.event(pod, "Warning", "Unhealthy", f"{probe} probe failed: {output}",
                              field_path=f"spec.containers{{{container}}}")

    def _unhealthy(self, pod_key: str, container: str, probe: str, container_id: str, spec: ProbeSpec) -> None:
        """A liveness or startup probe failed failureThreshold times: kubelet kills the container (its
        SyncPod's computePodActions), with the pod's terminationGracePeriodSeconds or the probe's own, at
        least 2 s, and starts it again if the restart policy says so. A pod being deleted is left to its
        termination (kubelet stops those probes then)."""
        pod = self.cache.get(pod_key)
        ident = (pod_key, container)
        if pod is None or pod.metadata.deletion_timestamp or pod_key in self._terminating or ident in self._killing:
            return
        spec_c = next((c for c in (pod.spec.containers if pod.spec else None) or [] if c.name == container), None)
        if spec_c is None or not (spec_c.command or spec_c.args):
            # The built-in server runs for the whole pod (the dataplane's): it is not restarted on its own.
            log.info("%s: %s probe of %s/%s failed; the built-in server is not restarted", self.node_name, probe,
                     pod_key, container)
            return
        policy = (pod.spec.restart_policy if pod.spec else None) or "Always"
        message = f"Container {container} failed {probe.lower()} probe"
        if policy != "Never":
            message += ", will be restarted"
        grace = spec.termination_grace
        if grace is None:
            given = pod.spec.termination_grace_period_seconds if pod.spec else None
            grace = float(30 if given is None else given)
        task = asyncio.get_running_loop().create_task(
            self._kill(pod, spec_c, container_id=container_id, message=message, grace=grace),
            name=f"kill-{pod_key}-{container}")
        self._killing[ident] = task
        task.add_done_callback(lambda t: self._killing.pop(ident, None) if self._killing.get(ident) is t else None)

    async def _kill(self, pod: Pod, container: Container, *, container_id: str, message: str, grace: float) -> None:
        """killContainer: the preStop hook, then SIGTERM with what is left of the grace period (at least
        kubelet's minimum of 2 s), SIGKILL after it."""
        began = asyncio.get_running_loop().time()
        current = self.containers.current_run(pod.key, container.name or "")
        if current is None or current.container_id != container_id:
            return
        try:
            await asyncio.wait_for(self._pre_stop_one(pod, container, grace), timeout=max(grace, 0))
        except TimeoutError:
            log.info("%s: preStop of %s/%s outlived its grace period", self.node_name, pod.key, container.name)
        left = max(grace - (asyncio.get_running_loop().time() - began), MINIMUM_GRACE)
        await self.containers.kill(pod, container.name or "", container_id=container_id, message=message, grace=left)

    def _runnable(self, pod: Pod) -> bool:
        """A pod's namespace and name become a network namespace's name, a file under /var/run/netns,
        and its resolv.conf's search list: the API server refuses names that could not be any of those,
        but a pod stored without validation is left alone here, and logged once, rather than retried
        forever or let near the host's files."""
        key = pod.key
        if validation.is_dns1123_label(pod.metadata.namespace or "") and \
                validation.is_dns1123_subdomain(pod.metadata.name or ""):
            self._refused.discard(key)
            return True
        if key not in self._refused:
            self._refused.add(key)
            log.warning("%s: not running pod %r: its namespace or name is not a valid DNS name", self.node_name, key)
        return False

    async def sync(self, key: str) -> None:
        pod = self.cache.get(key)
        # Deletion goes ahead whatever the name: the final DELETE touches no file, and a pod that is never
        # deleted would keep its namespace Terminating.
        if pod is not None and not pod.metadata.deletion_timestamp and not self._runnable(pod):
            return
        if pod is None or pod.node_name != self.node_name:
            self._refused.discard(key)
            if key not in self._terminating:
                await self._stop(key)
            return
        if pod.metadata.deletion_timestamp:
            if key not in self._terminating:
                task = asyncio.get_running_loop().create_task(self._terminate(pod), name=f"terminate-{key}")
                self._terminating[key] = task

                def forget(t: asyncio.Task[None], key: str = key) -> None:
                    if self._terminating.get(key) is t:
                        self._terminating.pop(key, None)

                task.add_done_callback(forget)
            return
        if pod.is_terminal():
            await self._stop(key, keep_logs=True)
            return
        if key not in self._running or not self.dataplane.pod_running(key):
            await self._start(pod)
            pod = self.cache.get(key, pod)  # _start may have written a Pending status
        ip = self._pod_ip(pod)
        assert ip is not None
        if await self._mount_volumes(pod, ip):
            await self.containers.sync(pod, ip)
        want = self._status(pod, ip)
        if _same(pod.status, want):
            return
        await self._write_status(pod, want)

    async def _mount_volumes(self, pod: Pod, ip: str) -> bool:
        """kubelet waits for a pod's volumes before starting any container: a failure is a FailedMount
        event, and the pod stays ContainerCreating until a later attempt succeeds."""
        key = pod.key
        if not self.runtime.namespaces:
            return True  # render: no mount namespaces, containers with volumeMounts are refused
        if key in self._mounted:
            await self._refresh_volumes(pod, ip)
            return True
        try:
            refreshable = await self.volumes.setup(pod, self.runtime.pod_dir(pod.metadata.uid or ""), ip)
        except MountError as exc:
            self.events.event(pod, "Warning", "FailedMount", str(exc))
            if key not in self._mount_retry:
                def retry(key: str = key) -> None:
                    self._mount_retry.pop(key, None)
                    self.requeue(key)

                self._mount_retry[key] = asyncio.get_running_loop().call_later(MOUNT_RETRY_DELAY, retry)
            return False
        self._mounted.add(key)
        if refreshable:
            self._refreshed[key] = asyncio.get_running_loop().time()
            self._schedule_refresh(key)
        return True

    async def _refresh_volumes(self, pod: Pod, ip: str) -> None:
        """kubelet's periodic sync keeps configMap, secret and downwardAPI volumes current (about a minute
        behind); a source that is gone or unreadable leaves the files as they were."""
        key = pod.key
        last = self._refreshed.get(key)
        if last is None or asyncio.get_running_loop().time() - last < VOLUME_REFRESH_PERIOD:
            return
        self._refreshed[key] = asyncio.get_running_loop().time()
        try:
            await self.volumes.setup(pod, self.runtime.pod_dir(pod.metadata.uid or ""), ip, refresh=True)
        except MountError as exc:
            log.info("%s: refreshing the volumes of %s: %s", self.node_name, key, exc)
        self._schedule_refresh(key)

    def _schedule_refresh(self, key: str) -> None:
        old = self._refresh_timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._refresh_timers[key] = asyncio.get_running_loop().call_later(VOLUME_REFRESH_PERIOD, self.requeue, key)

    def _pod_ip(self, pod: Pod) -> str | None:
        """The pod's IP: from the node's pod CIDR, or for a hostNetwork pod the node's InternalIP (kubelet
        reports podIP = hostIP for those)."""
        return self.node_ip if _host_network(pod) else self.ipam.ip_of(pod.key)

    def _status(self, pod: Pod, ip: str) -> PodStatus:
        init, main = self.containers.observed(pod, builtin_running=True)
        now = timeutil.rfc3339()
        return pod_status(pod, init=init, main=main, ip=ip, host_ip=self.node_ip, sandbox_ready=True, now=now,
                          started=now)

    async def _start(self, pod: Pod) -> None:
        key = pod.key
        if key not in self._running and self.dataplane.pod_running(key) and pod.phase == "Running" and pod.pod_ip:
            # A restarted kubelet finds the pod still running: adopt it, do not start it again.
            self._running.add(key)
            self.prober.start(pod, pod.pod_ip)
            return
        first = key not in self._running
        if first and (pod.status is None or pod.status.phase != "Pending" or not pod.status.container_statuses):
            await self._write_status(pod, pending_status(pod, self.node_ip))
        host_network = _host_network(pod)
        ip = self.node_ip if host_network else self.ipam.ip_of(key) or self.ipam.allocate(key)
        resolv_conf = pod_resolv_conf(pod, self.dns[0], self.dns[1]) if self.dns else None
        builtin = [c.name or "" for c in _containers(pod) if not (c.command or c.args)]
        # The built-in server logs its requests into the log of the (first) container it stands for.
        request_log = str(crilog.container_log_path(
            self.runtime.log_root, pod.metadata.namespace or "", pod.metadata.name or "", pod.metadata.uid or "",
            builtin[0], 0)) if builtin else None
        await self.dataplane.start_pod(key, ip, declared_ports(pod), resolv_conf=resolv_conf, request_log=request_log,
                                       host_network=host_network)
        self._uids[key] = pod.metadata.uid or ""
        await self.runtime.run_sandbox(key, self.node_name if host_network else pod_hostname(pod.to_dict()))
        if first:
            for c in _containers(pod):
                if c.command or c.args:
                    continue  # started (and its events written) by the container manager
                path = f"spec.containers{{{c.name}}}"
                self.events.event(pod, "Normal", "Pulled", BUILTIN_PULLED.format(image=c.image),
                                  field_path=path)
                self.events.event(pod, "Normal", "Created", f"Created container: {c.name}", field_path=path)
                self.events.event(pod, "Normal", "Started", f"Started container {c.name}", field_path=path)
        self._running.add(key)
        self.prober.start(pod, ip)
        log.info("%s: pod %s running at %s", self.node_name, key, ip)

    async def _write_status(self, pod: Pod, status: PodStatus) -> None:
        update = pod.model_copy(update={"status": status})
        try:
            remember_newest(self.cache, await self.api.update_status(kinds.PODS, update))
        except Conflict:
            raise  # our copy is behind; the worker retries with the informer's newer one
        except NotFound:
            await self._stop(pod.key)

    async def _terminate(self, pod: Pod) -> None:
        """Graceful deletion (§8.5): preStop within the grace period, SIGTERM, final status, final DELETE."""
        key = pod.key
        grace = pod.metadata.deletion_grace_period_seconds
        grace = 30 if grace is None else grace
        try:
            if key in self._running:
                for c in _containers(pod):
                    self.events.event(pod, "Normal", "Killing", f"Stopping container {c.name}",
                                      field_path=f"spec.containers{{{c.name}}}")
                began = asyncio.get_running_loop().time()
                try:
                    await asyncio.wait_for(self._pre_stop(pod), timeout=max(grace, 0))
                except TimeoutError:
                    log.info("%s: preStop of %s outlived its grace period", self.node_name, key)
                # kubelet's killContainer: what is left of the grace period after preStop, at least 2 s.
                left = max(grace - (asyncio.get_running_loop().time() - began), 2.0 if grace > 0 else 0.0)
                await self.containers.stop_all(pod, left)
            final = self._final_status(pod) if key in self._running else None
            await self._stop(key)
            if final is not None and pod.status is not None and pod.status.phase in ("Running", "Pending"):
                try:
                    await self._write_status(pod, final)
                except Conflict:
                    current = self.cache.get(key)
                    if current is not None:
                        await self._write_status(current, final)
            await self.api.delete(kinds.PODS, pod.metadata.name or "", pod.metadata.namespace,
                                  grace_period_seconds=0, uid=pod.metadata.uid)
            log.info("%s: pod %s terminated and deleted", self.node_name, key)
        except NotFound:
            await self._stop(key)
        except Exception as exc:  # noqa: BLE001 - try again on the next sync of this pod
            log.warning("%s: terminating %s failed: %s", self.node_name, key, exc)
            # The API may be out (etcd restarting): wait before trying again rather than spin. Then this
            # termination is over *before* the requeue, or the sync it causes could find it still going
            # and do nothing, and the pod would stay terminating, its final DELETE never retried.
            await asyncio.sleep(TERMINATE_RETRY_DELAY)
            if self._terminating.get(key) is asyncio.current_task():
                del self._terminating[key]
            self.requeue(key)

    async def _pre_stop(self, pod: Pod) -> None:
        """lifecycle.preStop of every container, one after the other."""
        for c in _containers(pod):
            await self._pre_stop_one(pod, c, float(pod.metadata.deletion_grace_period_seconds or 30))

    async def _pre_stop_one(self, pod: Pod, c: Container, timeout: float) -> None:
        """lifecycle.preStop: `sleep` (PodLifecycleSleepAction) or `exec` inside the container."""
        hook = ((c.model_extra or {}).get("lifecycle") or {}).get("preStop") or {}
        if "sleep" in hook:
            await asyncio.sleep(float((hook["sleep"] or {}).get("seconds") or 0))
        elif "exec" in hook:
            command = (hook["exec"] or {}).get("command") or []
            target = self.container_target(pod.key, c.name or "", [str(a) for a in command]) if command else None
            if target is not None:
                await run_probe(target.argv, timeout, env=target.env, cwd=target.cwd)

    def _final_status(self, pod: Pod) -> PodStatus:
        """After every container stopped: each terminated (the built-in server exits 0 on SIGTERM), the
        phase Succeeded when all exited 0, else Failed, as kubelet reports a deleted pod."""
        never = pod.model_copy(deep=True)
        assert never.spec is not None
        never.spec.restart_policy = "Never"
        now = timeutil.rfc3339()
        init, main = self.containers.observed(never, builtin_running=False, builtin_finished=now)
        return pod_status(pod, init=init, main=main, ip=self._pod_ip(pod) or pod.pod_ip,
                          host_ip=self.node_ip, sandbox_ready=False, now=now, started=now)

    async def _stop(self, key: str, *, keep_logs: bool = False) -> None:
        self.prober.stop(key)
        for ident in [k for k in self._killing if k[0] == key]:
            self._killing.pop(ident).cancel()
        if key in self._running or self.dataplane.pod_running(key):
            await self.dataplane.stop_pod(key)
            log.info("%s: pod %s stopped", self.node_name, key)
        uid = self._uids.get(key)
        self._mounted.discard(key)
        self._refreshed.pop(key, None)
        timer = self._refresh_timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        retry = self._mount_retry.pop(key, None)
        if retry is not None:
            retry.cancel()
        if self.runtime.has_pod(key) or uid:
            await self.containers.stop_all_of(key)
            if uid:
                self.volumes.teardown(self.runtime.pod_dir(uid))
                self.volumes.forget(uid)
            await self.runtime.remove_pod(key, uid, grace=0, keep_logs=keep_logs)
        if not keep_logs:
            self._uids.pop(key, None)
            self.containers.forget(key, uid)
        self._running.discard(key)
        self.ipam.release(key)

"""The kubelet's side of a pod's containers (pkg/kubelet/kuberuntime/kuberuntime_manager.go, SyncPod):
which container to start or restart next, with what environment, files and back-off, and what each one
looks like for the pod's status. The runtime (`runtime.py`) runs them; this module decides.

- Init containers run one at a time, in order; the next starts when the previous exited 0; one that
  fails is restarted (restartPolicy OnFailure/Always) or fails the pod (Never).
- Then every container with a command is started; an exited one is restarted when restartPolicy says
  so (Always; OnFailure and a non-zero exit), after kubelet's back-off: the first restart at once, then
  10 s doubling to 5 min (reset once a run lasted 10 min), waiting as CrashLoopBackOff meanwhile.
- A container without a command is kubelab's built-in server (run by the dataplane with the pod's
  network): it is reported running from when the pod started.
- Environment (`envvars.py`, read through `containerfiles.py`) is resolved from the API when a container starts: a missing ConfigMap or
  Secret leaves it waiting as CreateContainerConfigError and is tried again.
- terminationMessagePath (default /dev/termination-log) is a file per run bind-mounted there; its first
  4096 bytes become state.terminated.message, or with FallbackToLogsOnError and an empty file and a
  failure, the last 80 lines (at most 2048 bytes) of the log (`containerfiles.py` writes and reads them).
- A container whose liveness or startup probe failed (`prober.py`) is killed (`kill`) and then restarted
  like one that exited.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubelab import timeutil
from kubelab.client import ApiClient
from kubelab.events import EventRecorder
from kubelab.models import Container as ContainerModel
from kubelab.models import Pod

from . import containerfiles, envvars, podstatus
from .podstatus import Observed
from .prober import Run
from .runtime import Container, ContainerRuntime, ContainerSpec, Mount

log = logging.getLogger(__name__)

BACKOFF_INITIAL = 10.0
BACKOFF_MAX = 300.0
# flowcontrol.Backoff forgets an entry not touched for twice the maximum: a container that ran 10 min
# starts over at 10 s.
BACKOFF_RESET = 2 * BACKOFF_MAX
CONFIG_ERROR_RETRY = 5.0

# (pod key, container name, pod uid) -> mounts for its volumes; provided by the volume manager.
VolumeMounts = Callable[[Pod, ContainerModel], list[Mount]]


def _has_command(c: ContainerModel) -> bool:
    return bool(c.command or c.args)


def _extra(c: ContainerModel, key: str) -> Any:
    return (c.model_extra or {}).get(key)


@dataclass
class _Backoff:
    delay: float
    last: float


class ContainerManager:
    def __init__(self, api: ApiClient, runtime: ContainerRuntime, events: EventRecorder, *, node_ip: str,
                 allocatable: Mapping[str, str], requeue: Callable[[str], None],
                 readiness: Callable[[str, str, str | None], bool], volume_mounts: VolumeMounts | None = None,
                 netns: Callable[[str], str | None] = lambda key: None,
                 resolv_conf: Callable[[Pod], str | None] = lambda pod: None,
                 cluster_domain: str = "cluster.local", node_name: str = "",
                 started: Callable[[str, str, str | None], bool] = lambda key, name, cid: True) -> None:
        self.api = api
        self.runtime = runtime
        self.events = events
        self.node_ip = node_ip
        self.allocatable = allocatable
        self.requeue = requeue
        self.readiness = readiness
        self.started = started
        self.volume_mounts = volume_mounts or (lambda pod, c: [])
        self.netns = netns
        self.resolv_conf = resolv_conf
        self.cluster_domain = cluster_domain
        self.node_name = node_name
        self._backoff: dict[tuple[str, str], _Backoff] = {}
        self._waiting: dict[tuple[str, str], tuple[str, str]] = {}
        self._builtin: dict[str, tuple[str, str]] = {}  # pod key -> (startedAt, container ID prefix)
        self._builtin_mono: dict[str, float] = {}  # pod key -> when this kubelet saw its built-in server start
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        # A run's terminated state, read once (its termination message file goes with the pod).
        self._terminations: dict[tuple[str, str], dict[str, Any]] = {}

    # --- starting -------------------------------------------------------------------------------

    async def sync(self, pod: Pod, ip: str) -> None:
        """Start or restart what the pod's spec and restart policy call for now."""
        key = pod.key
        spec = pod.spec
        assert spec is not None
        if key not in self._builtin:
            self._builtin[key] = _builtin_identity(pod)
            self._builtin_mono[key] = time.monotonic()
        policy = spec.restart_policy or "Always"
        for c in spec.init_containers or []:
            cur = self.runtime.container(key, c.name or "")
            if cur is None:
                await self._start(pod, c, ip, restart=0)
                return
            if not cur.done:
                return
            if cur.exit_code == 0:
                continue
            if policy != "Never" and not self._backing_off(pod, c, cur):
                await self._start(pod, c, ip, restart=cur.spec.restart + 1)
            return
        for c in spec.containers or []:
            if not _has_command(c):
                continue
            cur = self.runtime.container(key, c.name or "")
            if cur is None:
                await self._start(pod, c, ip, restart=0)
                continue
            if not cur.done or not podstatus.will_restart(policy, cur.exit_code or 0):
                continue
            if not self._backing_off(pod, c, cur):
                await self._start(pod, c, ip, restart=cur.spec.restart + 1)

    def _backing_off(self, pod: Pod, c: ContainerModel, cur: Container) -> bool:
        """kubelet's doBackOff: in back-off while less than the delay has passed since the last exit."""
        name = c.name or ""
        bkey = (pod.metadata.uid or "", name)
        entry = self._backoff.get(bkey)
        now = time.monotonic()
        since = now - cur.finished_mono
        if entry is not None and since < entry.delay:
            pod_ref = f"{pod.metadata.name}_{pod.metadata.namespace}({pod.metadata.uid})"
            message = f"back-off {podstatus.go_duration(entry.delay)} restarting failed container={name} pod={pod_ref}"
            if self._waiting.get((pod.key, name)) != ("CrashLoopBackOff", message):
                self.events.event(pod, "Warning", "BackOff",
                                  f"Back-off restarting failed container {name} in pod {pod_ref}",
                                  field_path=self._field_path(pod, name))
            self._waiting[(pod.key, name)] = ("CrashLoopBackOff", message)
            self._later(pod.key, name, entry.delay - since)
            return True
        if entry is None or cur.finished_mono - entry.last > BACKOFF_RESET:
            self._backoff[bkey] = _Backoff(BACKOFF_INITIAL, now)
        else:
            self._backoff[bkey] = _Backoff(min(entry.delay * 2, BACKOFF_MAX), now)
        return False

    def _later(self, pod_key: str, name: str, delay: float) -> None:
        old = self._timers.pop((pod_key, name), None)
        if old is not None:
            old.cancel()
        self._timers[(pod_key, name)] = asyncio.get_running_loop().call_later(
            max(delay, 0.05), self.requeue, pod_key)

    @staticmethod
    def _field_path(pod: Pod, name: str) -> str:
        init = {c.name for c in (pod.spec.init_containers if pod.spec else None) or []}
        return f"spec.initContainers{{{name}}}" if name in init else f"spec.containers{{{name}}}"

    async def _start(self, pod: Pod, c: ContainerModel, ip: str, *, restart: int) -> None:
        key, name = pod.key, c.name or ""
        path = self._field_path(pod, name)
        raw_pod = pod.to_dict()
        raw_c = c.to_dict()
        # A hostNetwork pod shares the node's network and UTS namespaces: the node's name is its hostname.
        host_network = bool(pod.spec and pod.spec.host_network)
        hostname = self.node_name if host_network and self.node_name else envvars.pod_hostname(raw_pod)
        try:
            env = await containerfiles.resolve_environment(self.api, pod, raw_pod, raw_c, ip=ip, hostname=hostname,
                                                           node_ip=self.node_ip, allocatable=self.allocatable)
        except envvars.EnvError as exc:
            message = str(exc)
            if self._waiting.get((key, name)) != ("CreateContainerConfigError", message):
                self.events.event(pod, "Warning", "Failed", f"Error: {message}", field_path=path)
            self._waiting[(key, name)] = ("CreateContainerConfigError", message)
            self._later(key, name, CONFIG_ERROR_RETRY)
            return
        argv = envvars.command_line(raw_c, env) or []
        uid = pod.metadata.uid or ""
        if not self.runtime.namespaces and any(not _is_service_account_mount(m) for m in raw_c.get("volumeMounts") or []):
            # The render dataplane runs commands as plain processes: no mount namespace to put volumes in.
            # The service account token the admission plugin mounts into every pod is left out there (no
            # pod reaches the API without a network of its own), not refused: it is no choice of the user's.
            message = ("volumeMounts need the netns dataplane (root): the render dataplane runs commands as "
                       "plain processes on the host")
            if self._waiting.get((key, name)) != ("CreateContainerError", message):
                self.events.event(pod, "Warning", "Failed", f"Error: {message}", field_path=path)
            self._waiting[(key, name)] = ("CreateContainerError", message)
            return
        try:
            pod_files = containerfiles.write_pod_files(
                self.runtime.pod_dir(uid), raw_pod, ip=ip, hostname=hostname, cluster_domain=self.cluster_domain,
                resolv_conf=self.resolv_conf(pod))
            mounts = pod_files + list(self.volume_mounts(pod, c))
        except ValueError as exc:  # a subPath that leaves its volume
            self._waiting[(key, name)] = ("CreateContainerConfigError", str(exc))
            return
        term_path = _extra(c, "terminationMessagePath") or containerfiles.DEFAULT_TERMINATION_MESSAGE_PATH
        term_file = self.runtime.pod_dir(uid) / "containers" / name / f"{restart}.termination-log"
        term_file.parent.mkdir(parents=True, exist_ok=True)
        term_file.write_bytes(b"")
        term_file.chmod(0o666)
        mounts.append(Mount(str(term_file), term_path))
        self._waiting.pop((key, name), None)
        if restart == 0:
            self.events.event(pod, "Normal", "Pulled",
                              f'Container image "{c.image}" already present on machine (kubelab pulls no image: '
                              "the command runs on the node's filesystem)", field_path=path)
        spec = ContainerSpec(pod_key=key, pod_uid=uid, name=name, restart=restart, argv=argv, env=env,
                             working_dir=_extra(c, "workingDir"), mounts=mounts, netns=self.netns(key),
                             termination_file=str(term_file), stdin=bool(_extra(c, "stdin")),
                             tty=bool(_extra(c, "tty")))
        self.events.event(pod, "Normal", "Created", f"Created container: {name}", field_path=path)
        started = await self.runtime.start(spec)
        if started.reason == "StartError":
            self.events.event(pod, "Warning", "Failed", f"Error: {started.message}", field_path=path)
        else:
            self.events.event(pod, "Normal", "Started", f"Started container {name}", field_path=path)

    # --- observing ------------------------------------------------------------------------------

    def observed(self, pod: Pod, *, builtin_running: bool, builtin_finished: str | None = None
                 ) -> tuple[list[Observed], list[Observed]]:
        spec = pod.spec
        assert spec is not None
        policy = spec.restart_policy or "Always"
        init = [self._observe(pod, c, policy, init=True) for c in spec.init_containers or []]
        init_ok = podstatus.init_done(init)
        main = []
        for c in spec.containers or []:
            if _has_command(c):
                main.append(self._observe(pod, c, policy, init=False, pending_init=not init_ok))
                continue
            started, cid = self._builtin.get(pod.key, (timeutil.rfc3339(), secrets.token_hex(32)))
            if builtin_finished is not None:
                state: dict[str, Any] = {"terminated": podstatus.terminated(
                    exit_code=0, reason="Completed", started=started, finished=builtin_finished,
                    container_id=f"containerd://{cid}")}
            elif builtin_running and init_ok:
                state = {"running": {"startedAt": started}}
            else:
                state = {"waiting": {"reason": "PodInitializing" if not init_ok else "ContainerCreating"}}
            main.append(Observed(name=c.name or "", image=podstatus.container_image(c), state=state,
                                 ready=self.readiness(pod.key, c.name or "", f"containerd://{cid}"),
                                 started=self.started(pod.key, c.name or "", f"containerd://{cid}"),
                                 container_id=None if "waiting" in state else f"containerd://{cid}"))
        return init, main

    def _observe(self, pod: Pod, c: ContainerModel, policy: str, *, init: bool,
                 pending_init: bool = False) -> Observed:
        name = c.name or ""
        image = podstatus.container_image(c)
        cur = self.runtime.container(pod.key, name)
        waiting = self._waiting.get((pod.key, name))
        if cur is None:
            reason, message = waiting or (("PodInitializing", "") if pending_init or init else
                                          ("ContainerCreating", ""))
            state: dict[str, Any] = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
            return Observed(name=name, image=image, state=state)
        prev = self.runtime.previous(pod.key, name)
        last = {"terminated": self._terminated(c, prev)} if prev is not None and prev.done else {}
        if not cur.done:
            if cur.started_at and cur.exit_code is None:
                return Observed(name=name, image=image, state={"running": {"startedAt": cur.started_at}},
                                last_state=last, restart_count=cur.spec.restart, container_id=cur.container_id,
                                ready=True if init else self.readiness(pod.key, name, cur.container_id),
                                started=True if init else self.started(pod.key, name, cur.container_id))
            return Observed(name=name, image=image, state={"waiting": {"reason": "ContainerCreating"}},
                            last_state=last, restart_count=cur.spec.restart)
        term = self._terminated(c, cur)
        restarts = cur.exit_code != 0 if init else podstatus.will_restart(policy, cur.exit_code or 0)
        if init and policy == "Never":
            restarts = False
        if restarts and waiting is not None:
            reason, message = waiting
            return Observed(name=name, image=image, state={"waiting": {"reason": reason, "message": message}},
                            last_state={"terminated": term}, restart_count=cur.spec.restart,
                            container_id=cur.container_id, will_restart=True)
        return Observed(name=name, image=image, state={"terminated": term}, last_state=last,
                        restart_count=cur.spec.restart, container_id=cur.container_id, will_restart=restarts)

    def _terminated(self, c: ContainerModel, run: Container) -> dict[str, Any]:
        cached = self._terminations.get((run.spec.pod_key, run.container_id))
        if cached is not None:
            return dict(cached)
        message = run.message if run.reason == "StartError" else containerfiles.termination_message(
            run.spec.termination_file, run.log_path, exit_code=run.exit_code,
            policy=_extra(c, "terminationMessagePolicy"))
        data = podstatus.terminated(exit_code=run.exit_code if run.exit_code is not None else 0, reason=run.reason,
                                    started=run.started_at, finished=run.finished_at, container_id=run.container_id,
                                    message=message)
        self._terminations[(run.spec.pod_key, run.container_id)] = data
        return dict(data)

    def current_run(self, pod_key: str, name: str) -> Run | None:
        """The running run of a container, for its probes: the runtime's, or the built-in server's (which
        runs from the pod's start)."""
        cur = self.runtime.container(pod_key, name)
        if cur is not None:
            return Run(cur.container_id, cur.started_mono) if cur.running else None
        builtin = self._builtin.get(pod_key)
        if builtin is None:
            return None
        return Run(f"containerd://{builtin[1]}", self._builtin_mono.get(pod_key, 0.0))

    # --- stopping -------------------------------------------------------------------------------

    async def kill(self, pod: Pod, name: str, *, container_id: str, message: str, grace: float) -> bool:
        """kubelet's killContainer for one container of a running pod (a failed liveness or startup probe):
        the `Killing` event with `message`, SIGTERM, SIGKILL after `grace` seconds. The sync that its exit
        causes restarts it as the restart policy says. False when that run is no longer the current one."""
        cur = self.runtime.container(pod.key, name)
        if cur is None or cur.container_id != container_id or not cur.running:
            return False
        self.events.event(pod, "Normal", "Killing", message, field_path=self._field_path(pod, name))
        await self.runtime.stop(pod.key, name, grace)
        return True

    async def stop_all(self, pod: Pod, grace: float) -> None:
        key = pod.key
        names = [c.name or "" for c in ((pod.spec.containers if pod.spec else None) or [])
                 + ((pod.spec.init_containers if pod.spec else None) or [])]
        await asyncio.gather(*(self.runtime.stop(key, n, grace) for n in names))

    async def stop_all_of(self, pod_key: str) -> None:
        """SIGKILL whatever still runs of the pod (its volumes are about to go)."""
        names = self.runtime.container_names(pod_key)
        await asyncio.gather(*(self.runtime.stop(pod_key, n, 0) for n in names))

    def forget(self, pod_key: str, uid: str | None) -> None:
        for k in [k for k in self._timers if k[0] == pod_key]:
            self._timers.pop(k).cancel()
        for k in [k for k in self._waiting if k[0] == pod_key]:
            self._waiting.pop(k)
        if uid:
            for k in [k for k in self._backoff if k[0] == uid]:
                self._backoff.pop(k)
        self._builtin.pop(pod_key, None)
        self._builtin_mono.pop(pod_key, None)
        for k in [k for k in self._terminations if k[0] == pod_key]:
            self._terminations.pop(k)


def _builtin_identity(pod: Pod) -> tuple[str, str]:
    """(startedAt, container ID) of the pod's built-in server: as its status already says (a restarted
    kubelet finds the server still running), else new."""
    commandless = {c.name for c in (pod.spec.containers if pod.spec else None) or [] if not _has_command(c)}
    for status in (pod.status.container_statuses if pod.status else None) or []:
        running = (status.state or {}).get("running")
        if status.name in commandless and running and status.container_id:
            return str(running.get("startedAt") or timeutil.rfc3339()), status.container_id.removeprefix("containerd://")
    return timeutil.rfc3339(), secrets.token_hex(32)


# Where the ServiceAccount admission plugin mounts a pod's token (kube's kube-api-access-<5> volume).
SERVICE_ACCOUNT_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


def _is_service_account_mount(mount: dict[str, Any]) -> bool:
    return str(mount.get("name") or "").startswith("kube-api-access-") and mount.get("mountPath") == SERVICE_ACCOUNT_MOUNT_PATH


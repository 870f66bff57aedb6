"""Probes as kubelet's prober workers run them (pkg/kubelet/prober/worker.go): readiness, liveness and
startup; httpGet, tcpSocket and exec; on kubelet's schedule (§8.3 of the reference).

httpGet, tcpSocket and grpc probes start from the node, as kubelet's do: `python -m kubeletstub.probe` runs
inside the node's network namespace and connects to the pod IP. exec probes run their command inside
the container, as CRI ExecSync does: its namespaces and root, its environment and working directory
(`containerexec.ExecTarget`), killed after timeoutSeconds (kubelet's ExecProbeTimeout; plus a second for
the spawn).

One worker per container and probe type. Like kubelet's, a worker follows the container's current run
(its container ID): a new run starts over from the probe type's initial result (readiness: failure,
liveness: success, startup: unknown), waits initialDelaySeconds from the run's start, then probes every
periodSeconds; a result counts once it held successThreshold (success) or failureThreshold (failure)
times in a row. Every failed probe is an `Unhealthy` event (`Liveness probe failed: ...`). A startup probe
gates the others: until it succeeded, readiness and liveness are not probed and the container is neither
`started` nor ready. A liveness or startup failure hands the run to `on_unhealthy` (the kubelet kills and
restarts it) and the worker holds until the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

from kubelab import validation
from kubelab.models import Container, Pod

from .containerexec import ExecTarget

log = logging.getLogger(__name__)

_SOURCE_ROOT = str(Path(__file__).resolve().parents[1])
_PROBE_ENV = {"PYTHONPATH": _SOURCE_ROOT, "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
# An exec probe's command is killed timeoutSeconds after it started, as kubelet's ExecSync deadline; the
# start (a process spawned from the event loop, then nsenter) is allowed this long on top, so that a loaded
# node does not fail probes, and kill containers, for its own slowness.
EXEC_LAUNCH_ALLOWANCE = 1.0
# While a worker has nothing to probe (no run yet, or the startup probe has not passed), it looks again
# this often, so that a container that starts is probed without waiting a whole period.
IDLE_POLL = 0.5

ProbeType = Literal["Readiness", "Liveness", "Startup"]
PROBE_TYPES: tuple[tuple[ProbeType, str], ...] = (
    ("Startup", "startupProbe"), ("Readiness", "readinessProbe"), ("Liveness", "livenessProbe"))

NodeArgv = Callable[[Sequence[str]], list[str] | None]
# (pod key, container, command) -> how to run the command in that container; asked before every exec
# probe, since a restarted container is a new process.
PodTarget = Callable[[str, str, Sequence[str]], ExecTarget | None]


@dataclass(frozen=True)
class Run:
    """The run of a container a worker probes: its ID and when it started (time.monotonic)."""

    container_id: str
    started: float


# (pod key, container) -> its current running run, None while it is not running.
CurrentRun = Callable[[str, str], Run | None]


@dataclass(frozen=True)
class ProbeSpec:
    kind: str  # http | tcp | grpc | exec
    target: tuple[str, ...]  # http: (url, header=value...), tcp: (host, port), grpc: (host, port, service),
    # exec: command
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3
    termination_grace: float | None = None  # the probe's terminationGracePeriodSeconds (liveness, startup)


class _Timing(TypedDict):
    """ProbeSpec's timing fields, passed as keywords."""

    initial_delay: float
    period: float
    timeout: float
    success_threshold: int
    failure_threshold: int
    termination_grace: float | None


def _resolve_port(port: Any, container: Container) -> int | None:
    if isinstance(port, int):
        return port
    if isinstance(port, str):
        if validation.is_ascii_digits(port):  # "٣" is a digit to str.isdigit, not to kube
            return int(port)
        for cp in container.ports or []:
            if cp.name == port:
                return cp.container_port
    return None


def container_probe(container: Container, field: str) -> dict[str, Any] | None:
    """The container's readinessProbe, livenessProbe or startupProbe, as the spec gives it."""
    if field == "readinessProbe":
        return container.readiness_probe
    if field == "livenessProbe":
        return container.liveness_probe
    probe = (container.model_extra or {}).get(field)
    return probe if isinstance(probe, dict) else None


def probe_spec(probe: dict[str, Any], container: Container, pod_ip: str) -> ProbeSpec | None:
    """The probe of a container spec, with kube's defaults (period 10 s, timeout 1 s, failure 3)."""
    grace = probe.get("terminationGracePeriodSeconds")
    common: _Timing = {"initial_delay": float(probe.get("initialDelaySeconds") or 0),
                       "period": float(probe.get("periodSeconds") or 10),
                       "timeout": float(probe.get("timeoutSeconds") or 1),
                       "success_threshold": int(probe.get("successThreshold") or 1),
                       "failure_threshold": int(probe.get("failureThreshold") or 3),
                       "termination_grace": float(grace) if isinstance(grace, int) else None}
    if "httpGet" in probe:
        get = probe["httpGet"] or {}
        port = _resolve_port(get.get("port"), container)
        if port is None:
            return None
        host = get.get("host") or pod_ip
        path = get.get("path") or "/"
        if not path.startswith("/"):
            path = "/" + path
        scheme = (get.get("scheme") or "HTTP").lower()
        headers = tuple(f"{h.get('name')}={h.get('value', '')}" for h in get.get("httpHeaders") or [])
        return ProbeSpec("http", (f"{scheme}://{host}:{port}{path}", *headers), **common)
    if "tcpSocket" in probe:
        sock = probe["tcpSocket"] or {}
        port = _resolve_port(sock.get("port"), container)
        if port is None:
            return None
        return ProbeSpec("tcp", (sock.get("host") or pod_ip, str(port)), **common)
    if "grpc" in probe:
        grpc = probe["grpc"] or {}
        port = grpc.get("port")
        if not isinstance(port, int):
            return None
        return ProbeSpec("grpc", (pod_ip, str(port), str(grpc.get("service") or "")), **common)
    if "exec" in probe:
        command = (probe["exec"] or {}).get("command") or []
        return ProbeSpec("exec", tuple(str(c) for c in command), **common) if command else None
    return None


def probe_argv(spec: ProbeSpec, node_argv: NodeArgv) -> list[str] | None:
    """The command that performs one httpGet, tcpSocket or grpc probe from the node, or None where the
    dataplane cannot run it (render mode)."""
    module = [sys.executable, "-m", "kubeletstub.probe"]
    if spec.kind == "grpc":
        return node_argv([*module, "grpc", *spec.target, str(spec.timeout)])
    if spec.kind == "http":
        return node_argv([*module, "http", spec.target[0], str(spec.timeout), *spec.target[1:]])
    return node_argv([*module, "tcp", spec.target[0], spec.target[1], str(spec.timeout)])


def timed_out_message(command: Sequence[str]) -> str:
    """kubelet's words for an exec probe that outlived timeoutSeconds (`command %q timed out`)."""
    return f"command {json.dumps(' '.join(command), ensure_ascii=False)} timed out"


async def run_probe(argv: list[str], timeout: float, *, env: dict[str, str] | None = None, cwd: str | None = None,
                    hard_timeout: bool = False) -> tuple[bool, str]:
    """Run one probe (or hook) command: (exited 0, its combined output). With `hard_timeout` (exec
    probes), the command and whatever it started are SIGKILLed after `timeout` seconds and the probe
    fails with kubelet's `command ... timed out`; otherwise the command enforces its own timeout and is
    given 5 s more."""
    try:
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT,
                                                    env=_PROBE_ENV if env is None else env, cwd=cwd,
                                                    start_new_session=True)
    except OSError as exc:
        return False, str(exc)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout if hard_timeout else timeout + 5)
    except TimeoutError:
        # Its own process group: an exec'd command's children (inside the container) go with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        return False, f"command timed out after {timeout:g}s"
    return proc.returncode == 0, out.decode(errors="replace").strip()


# Unhealthy(pod key, container, probe type, container ID, spec): a liveness or startup probe failed for
# good on that run.
Unhealthy = Callable[[str, str, ProbeType, str, ProbeSpec], None]
# Failed(pod key, container, probe type, output): one probe failed (the Unhealthy event).
Failed = Callable[[str, str, ProbeType, str], None]


class Prober:
    """The probe workers of the pods of one node, and what they found (per container run)."""

    def __init__(self, node_argv: NodeArgv, pod_target: PodTarget, on_change: Callable[[str], None],
                 on_failure: Failed, *, current_run: CurrentRun | None = None,
                 on_unhealthy: Unhealthy | None = None) -> None:
        self.node_argv = node_argv
        self.pod_target = pod_target
        self.on_change = on_change
        self.on_failure = on_failure
        self.current_run: CurrentRun = current_run or (lambda key, name: None)
        self.on_unhealthy: Unhealthy = on_unhealthy or (lambda *_: None)
        # (pod key, container, probe type) -> (container ID, result) of the last run the worker judged
        self._results: dict[tuple[str, str, ProbeType], tuple[str, bool | None]] = {}
        self._probed: set[tuple[str, str, ProbeType]] = set()
        self._tasks: dict[str, list[asyncio.Task[None]]] = {}

    def is_probed(self, pod_key: str) -> bool:
        return pod_key in self._tasks

    def _passed(self, pod_key: str, container: str, ptype: ProbeType, container_id: str | None) -> bool:
        if (pod_key, container, ptype) not in self._probed:
            return True  # no such probe: kubelet counts the container as started / ready once running
        result = self._results.get((pod_key, container, ptype))
        return result is not None and result[0] == container_id and result[1] is True

    def readiness(self, pod_key: str, container: str, container_id: str | None = None) -> bool:
        """Ready: no readiness probe, or the probe passed on this very run (a new run starts unready)."""
        return self._passed(pod_key, container, "Readiness", container_id)

    def started(self, pod_key: str, container: str, container_id: str | None = None) -> bool:
        """containerStatuses[].started: no startup probe, or it passed on this run."""
        return self._passed(pod_key, container, "Startup", container_id)

    def start(self, pod: Pod, pod_ip: str) -> None:
        key = pod.key
        if key in self._tasks:
            return
        tasks = []
        loop = asyncio.get_running_loop()
        runnable = self.node_argv(["true"]) is not None  # render mode: nothing runs, nothing is probed
        for container in (pod.spec.containers if pod.spec else None) or []:
            name = container.name or ""
            for ptype, field in PROBE_TYPES:
                raw = container_probe(container, field)
                spec = probe_spec(raw, container, pod_ip) if raw else None
                if spec is None or not runnable:
                    continue
                self._probed.add((key, name, ptype))
                tasks.append(loop.create_task(self._worker(key, name, ptype, spec),
                                              name=f"probe-{ptype.lower()}-{key}-{name}"))
        self._tasks[key] = tasks

    def stop(self, pod_key: str) -> None:
        for task in self._tasks.pop(pod_key, []):
            task.cancel()
        for ident in [k for k in self._probed if k[0] == pod_key]:
            self._probed.discard(ident)
            self._results.pop(ident, None)

    def stop_all(self) -> None:
        """Every worker ends (the kubelet stops): they are tasks of their own, which the kubelet's
        cancellation does not reach."""
        for pod_key in list(self._tasks):
            self.stop(pod_key)

    async def probe_once(self, pod_key: str, container: str, spec: ProbeSpec) -> tuple[bool, str] | None:
        """One probe now: (succeeded, output), None when it cannot run (the container is not there)."""
        if spec.kind == "exec":
            target = self.pod_target(pod_key, container, spec.target)
            if target is None:
                return None
            ok, output = await run_probe(target.argv, spec.timeout + EXEC_LAUNCH_ALLOWANCE, env=target.env,
                                         cwd=target.cwd, hard_timeout=True)
            if not ok and output.startswith("command timed out after"):
                output = timed_out_message(spec.target)
            return ok, output
        argv = probe_argv(spec, self.node_argv)
        return None if argv is None else await run_probe(argv, spec.timeout)

    async def _worker(self, pod_key: str, container: str, ptype: ProbeType, spec: ProbeSpec) -> None:
        ident = (pod_key, container, ptype)
        initial: bool | None = {"Readiness": False, "Liveness": True, "Startup": None}[ptype]
        container_id = ""
        on_hold = False
        last: bool | None = None
        streak = 0
        while True:
            run = self.current_run(pod_key, container)
            if run is None:
                await asyncio.sleep(min(spec.period, IDLE_POLL))
                continue
            if run.container_id != container_id:  # a new run: start over
                container_id, on_hold, last, streak = run.container_id, False, None, 0
                before = self._results.get(ident)
                self._results[ident] = (container_id, initial)
                if before is not None and before[1] != initial:
                    self.on_change(pod_key)
            if on_hold:
                await asyncio.sleep(min(spec.period, IDLE_POLL))
                continue
            wait = run.started + spec.initial_delay - time.monotonic()
            if wait > 0:
                await asyncio.sleep(min(wait, spec.period))
                continue
            started = self.started(pod_key, container, container_id)
            if ptype == "Startup" and started:
                await asyncio.sleep(spec.period)
                continue
            if ptype != "Startup" and not started:
                await asyncio.sleep(min(spec.period, IDLE_POLL))
                continue
            outcome = await self.probe_once(pod_key, container, spec)
            current = self.current_run(pod_key, container)
            if current is None or current.container_id != container_id:
                continue  # the run ended meanwhile: its result means nothing
            if outcome is None:
                # Nothing to run it in (the pod's network or container just went, the run not yet seen
                # to end). probe_once returned without awaiting anything: look again after a pause, not
                # at once, or this loop never gives the event loop back (`kubelab up` hung at Ctrl-C
                # once the lab was torn down under a running exec probe).
                await asyncio.sleep(min(spec.period, IDLE_POLL))
                continue
            ok, output = outcome
            streak = streak + 1 if ok == last else 1
            last = ok
            if not ok:
                self.on_failure(pod_key, container, ptype, output)
            if streak >= (spec.success_threshold if ok else spec.failure_threshold):
                if self._results.get(ident) != (container_id, ok):
                    self._results[ident] = (container_id, ok)
                    log.info("prober: %s %s/%s %s", ptype, pod_key, container, "passed" if ok else f"failed: {output}")
                    self.on_change(pod_key)
                if not ok and ptype != "Readiness":
                    # kubelet holds the worker until a new run, so it does not probe one being killed.
                    on_hold, streak = True, 0
                    self.on_unhealthy(pod_key, container, ptype, container_id, spec)
                    continue
            await asyncio.sleep(spec.period)

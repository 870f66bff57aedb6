"""Readiness probes: httpGet, tcpSocket and exec, run on kubelet's schedule (§8.3 of the reference).

httpGet and tcpSocket probes start from the node, as kubelet's do: `python -m kubeletstub.probe` runs
inside the node's network namespace and connects to the pod IP. exec probes run their command inside
the pod's namespace, against the pod's own process. A container's readiness starts False, flips to True
after `successThreshold` successes and back after `failureThreshold` failures; each flip re-syncs the
pod so its Ready condition, its EndpointSlice conditions and every node's rules follow.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from kubelab import validation
from kubelab.models import Container, Pod

log = logging.getLogger(__name__)

_SOURCE_ROOT = str(Path(__file__).resolve().parents[1])

NodeArgv = Callable[[Sequence[str]], list[str] | None]
# (pod key, container, command) -> the argv that runs the command in that container; asked before every
# exec probe, since a restarted container is a new process.
PodArgv = Callable[[str, str, Sequence[str]], list[str] | None]


@dataclass(frozen=True)
class ProbeSpec:
    kind: str  # http | tcp | exec
    target: tuple[str, ...]  # http: (url, header=value...), tcp: (host, port), exec: command
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3


class _Timing(TypedDict):
    """ProbeSpec's timing fields, passed as keywords."""

    initial_delay: float
    period: float
    timeout: float
    success_threshold: int
    failure_threshold: int


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


def probe_spec(probe: dict[str, Any], container: Container, pod_ip: str) -> ProbeSpec | None:
    """The probe of a container spec, with kube's defaults (period 10 s, timeout 1 s, failure 3)."""
    common: _Timing = {"initial_delay": float(probe.get("initialDelaySeconds") or 0),
                       "period": float(probe.get("periodSeconds") or 10),
                       "timeout": float(probe.get("timeoutSeconds") or 1),
                       "success_threshold": int(probe.get("successThreshold") or 1),
                       "failure_threshold": int(probe.get("failureThreshold") or 3)}
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
    if "exec" in probe:
        command = (probe["exec"] or {}).get("command") or []
        return ProbeSpec("exec", tuple(str(c) for c in command), **common) if command else None
    return None


def probe_argv(spec: ProbeSpec, pod_key: str, node_argv: NodeArgv, pod_argv: PodArgv, container: str = ""
               ) -> list[str] | None:
    """The command that performs one probe, or None where the dataplane cannot run it (render mode)."""
    if spec.kind == "exec":
        return pod_argv(pod_key, container, spec.target)
    module = [sys.executable, "-m", "kubeletstub.probe"]
    if spec.kind == "http":
        return node_argv([*module, "http", spec.target[0], str(spec.timeout), *spec.target[1:]])
    return node_argv([*module, "tcp", spec.target[0], spec.target[1], str(spec.timeout)])


async def run_probe(argv: list[str], timeout: float) -> tuple[bool, str]:
    env = {"PYTHONPATH": _SOURCE_ROOT, "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    try:
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT, env=env)
    except OSError as exc:
        return False, str(exc)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout + 5)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return False, f"command timed out after {timeout}s"
    return proc.returncode == 0, out.decode(errors="replace").strip()


class Prober:
    """Per-container readiness workers for the pods of one node."""

    def __init__(self, node_argv: NodeArgv, pod_argv: PodArgv, on_change: Callable[[str], None],
                 on_failure: Callable[[str, str, str], None]) -> None:
        self.node_argv = node_argv
        self.pod_argv = pod_argv
        self.on_change = on_change
        self.on_failure = on_failure
        self._ready: dict[tuple[str, str], bool] = {}
        self._tasks: dict[str, list[asyncio.Task[None]]] = {}

    def is_probed(self, pod_key: str) -> bool:
        return pod_key in self._tasks

    def readiness(self, pod_key: str, container: str) -> bool:
        """A container without a readiness probe is ready once running; one with a probe once it passed."""
        return self._ready.get((pod_key, container), True)

    def start(self, pod: Pod, pod_ip: str) -> None:
        key = pod.key
        if key in self._tasks:
            return
        tasks = []
        for container in (pod.spec.containers if pod.spec else None) or []:
            if not container.readiness_probe:
                continue
            spec = probe_spec(container.readiness_probe, container, pod_ip)
            name = container.name or ""
            if spec is None:
                continue
            argv = probe_argv(spec, key, self.node_argv, self.pod_argv, name)
            if argv is None:
                continue  # render mode: nothing runs, nothing to probe; the container counts as ready
            self._ready[(key, name)] = False
            tasks.append(asyncio.get_running_loop().create_task(self._worker(key, name, spec, argv),
                                                                name=f"probe-{key}-{name}"))
        self._tasks[key] = tasks

    def stop(self, pod_key: str) -> None:
        for task in self._tasks.pop(pod_key, []):
            task.cancel()
        for ident in [k for k in self._ready if k[0] == pod_key]:
            del self._ready[ident]

    async def _worker(self, pod_key: str, container: str, spec: ProbeSpec, argv: list[str]) -> None:
        await asyncio.sleep(spec.initial_delay)
        successes = failures = 0
        while True:
            if spec.kind == "exec":  # the container's current process (it may have restarted)
                argv = probe_argv(spec, pod_key, self.node_argv, self.pod_argv, container) or argv
            ok, output = await run_probe(argv, spec.timeout)
            ident = (pod_key, container)
            if ok:
                successes, failures = successes + 1, 0
                if not self._ready.get(ident) and successes >= spec.success_threshold:
                    self._ready[ident] = True
                    log.info("prober: %s/%s ready", pod_key, container)
                    self.on_change(pod_key)
            else:
                successes, failures = 0, failures + 1
                self.on_failure(pod_key, container, output)
                if self._ready.get(ident) and failures >= spec.failure_threshold:
                    self._ready[ident] = False
                    log.info("prober: %s/%s not ready: %s", pod_key, container, output)
                    self.on_change(pod_key)
            await asyncio.sleep(spec.period)

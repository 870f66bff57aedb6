"""What the kubelet prepares for a container run and reads back after it (pkg/kubelet/kubelet_pods.go,
kuberuntime_container.go): its environment, resolved from the API when it starts (ConfigMaps, Secrets,
the Service variables); the pod's /etc/hosts, /etc/hostname and /etc/resolv.conf; and once it exited,
its termination message (the first 4096 bytes of the file bind-mounted at terminationMessagePath, or with
FallbackToLogsOnError and an empty file and a failure, the last 80 lines, at most 2048 bytes, of its log).
`containers.py` decides when; this module does it."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubelab import kinds
from kubelab.client import ApiClient, NotFound
from kubelab.models import Pod

from . import crilog, envvars, etchosts
from .runtime import Mount

DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
MAX_TERMINATION_MESSAGE = 4096
FALLBACK_LOG_LINES = 80
FALLBACK_LOG_BYTES = 2048


async def resolve_environment(api: ApiClient, pod: Pod, raw_pod: dict[str, Any], raw_c: dict[str, Any], *, ip: str,
                              hostname: str, node_ip: str, allocatable: Mapping[str, str]) -> dict[str, str]:
    """The container's environment as kubelet builds it (`raw_pod`, `raw_c`: the pod and container as
    dicts), reading what it refers to from the API; raises envvars.EnvError for a missing ConfigMap,
    Secret or key."""
    namespace = pod.metadata.namespace or "default"
    wanted: dict[str, set[str]] = {"configmap": set(), "secret": set()}
    for source in raw_c.get("envFrom") or []:
        if source.get("configMapRef"):
            wanted["configmap"].add(source["configMapRef"].get("name") or "")
        if source.get("secretRef"):
            wanted["secret"].add(source["secretRef"].get("name") or "")
    for var in raw_c.get("env") or []:
        ref = var.get("valueFrom") or {}
        if ref.get("configMapKeyRef"):
            wanted["configmap"].add(ref["configMapKeyRef"].get("name") or "")
        if ref.get("secretKeyRef"):
            wanted["secret"].add(ref["secretKeyRef"].get("name") or "")
    objects: dict[str, dict[str, Any]] = {"configmap": {}, "secret": {}}
    for kind, names in wanted.items():
        rt = kinds.CONFIGMAPS if kind == "configmap" else kinds.SECRETS
        for name in names:
            try:
                objects[kind][name] = await api.request("GET", rt.path(namespace, name))
            except NotFound:
                objects[kind][name] = None
    services: list[dict[str, Any]] = []
    enable_links = (raw_pod.get("spec") or {}).get("enableServiceLinks", True) is not False
    if enable_links:
        services += (await api.request("GET", kinds.SERVICES.path(namespace))).get("items") or []
    if namespace != "default" or not enable_links:
        with contextlib.suppress(NotFound):
            services.append(await api.request("GET", kinds.SERVICES.path("default", "kubernetes")))
    for svc in services:
        svc.setdefault("metadata", {}).setdefault("namespace", namespace)
    return envvars.container_env(raw_pod, raw_c, config_maps=objects["configmap"], secrets=objects["secret"],
                                 services=services, pod_ip=ip, host_ip=node_ip, hostname=hostname,
                                 allocatable=allocatable)


def write_pod_files(pod_dir: Path, raw_pod: Mapping[str, Any], *, ip: str, hostname: str, cluster_domain: str,
                    resolv_conf: str | None) -> list[Mount]:
    """/etc/hosts, /etc/hostname and /etc/resolv.conf (when given) of the pod, written in its directory;
    the bind mounts that put them in a container."""
    pod_dir.mkdir(parents=True, exist_ok=True)
    files = {"hosts": etchosts.hosts_file(raw_pod, ip=ip, hostname=hostname, cluster_domain=cluster_domain),
             "hostname": hostname + "\n"}
    if resolv_conf is not None:
        files["resolv.conf"] = resolv_conf
    mounts = []
    for name, text in files.items():
        path = pod_dir / f"etc-{name}"
        path.write_text(text)
        path.chmod(0o644)
        mounts.append(Mount(str(path), f"/etc/{name}"))
    return mounts


def termination_message(termination_file: str | None, log_path: Path, *, exit_code: int | None,
                        policy: str | None) -> str:
    """state.terminated.message of a run that exited."""
    text = b""
    if termination_file:
        with contextlib.suppress(OSError), open(termination_file, "rb") as f:
            text = f.read(MAX_TERMINATION_MESSAGE)
    if not text and exit_code != 0 and policy == "FallbackToLogsOnError":
        text = tail_log(log_path, FALLBACK_LOG_LINES, FALLBACK_LOG_BYTES)
    return text.decode("utf-8", "replace")


def tail_log(path: Path, lines: int, limit: int) -> bytes:
    """The last `lines` lines (at most `limit` bytes) of a CRI log file's content."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            raw = f.read()
    except OSError:
        return b""
    out = []
    for line in raw.splitlines()[-lines:]:
        with contextlib.suppress(ValueError):
            parsed = crilog.parse_line(line)
            out.append(parsed.content + (b"" if parsed.partial else b"\n"))
    return b"".join(out)[-limit:]

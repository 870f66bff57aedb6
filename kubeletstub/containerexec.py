"""How the kubelet API reaches inside a container: the one place that says how a process is started in
container C of pod P, and which network namespace a pod's ports are in.

A container that runs a command of its own is entered as the runtime says (`ContainerRuntime.exec_command`:
nsenter into its network, UTS, mount and PID namespaces and root, with its environment and working
directory); a container without one runs the built-in server, whose world is the pod's network namespace
on the host's filesystem (`ip netns exec <pod netns> <command>`; kubelab has no images). The kubelet API
(`server.py`) only ever asks this module what to start, with which environment, where.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kubelab.models import Pod

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # what containerd sets


class PodNamespaces(Protocol):
    """What the dataplane tells about a running pod (kubeletstub.dataplane.Dataplane has both)."""

    def pod_argv(self, pod_key: str, cmd: Sequence[str]) -> list[str] | None: ...

    def pod_netns(self, pod_key: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ExecTarget:
    """What to start for an exec: its argv, environment (None: the kubelet's) and working directory."""

    argv: list[str]
    env: dict[str, str] | None = None
    cwd: str | None = None


def exec_target(dataplane: PodNamespaces, pod: Pod, container: str, command: Sequence[str]) -> ExecTarget | None:
    """How to run `command` inside `container` of `pod`: the runtime's entry into a running container of
    its own, else (the built-in server) the pod's network namespace; None when it has nowhere to run
    (the pod is not running here: kubelet's `container not found`)."""
    runtime = getattr(dataplane, "runtime", None)
    if runtime is not None:
        try:
            argv, env, cwd = runtime.exec_command(pod.key, container, list(command))
        except LookupError:
            pass
        else:
            return ExecTarget(argv, env, cwd)
    argv = dataplane.pod_argv(pod.key, list(command))
    return ExecTarget(argv) if argv is not None else None


def container_path(pod: Pod, container: str) -> str:
    """The PATH a command is looked up in: the container's `env` PATH, else the runtime's default."""
    for c in (pod.spec.containers if pod.spec else None) or []:
        if c.name == container:
            for env in c.env or []:
                if env.get("name") == "PATH" and isinstance(env.get("value"), str) and env["value"]:
                    return str(env["value"])
    return DEFAULT_PATH


def missing_binary(command: Sequence[str], path: str) -> tuple[int, str] | None:
    """runc's refusal of an exec that cannot start, as (exit code a shell would give, runc's message): 127
    when the binary is not found, 126 when it is not executable; None when it can start."""
    name = command[0]
    if "/" in name:
        if not os.path.exists(name):
            return 127, f'exec: "{name}": stat {name}: no such file or directory'
        if os.path.isdir(name) or not os.access(name, os.X_OK):
            return 126, f'exec: "{name}": permission denied'
        return None
    if shutil.which(name, path=path) is None:
        return 127, f'exec: "{name}": executable file not found in $PATH'
    return None


def oci_message(detail: str, exec_id: str | None = None) -> str:
    """How containerd words a failed exec start (runc's error, wrapped in the CRI plugin's ExecSync/Exec
    errors with the exec process's ID)."""
    exec_id = exec_id or secrets.token_hex(32)
    return (f'failed to exec in container: failed to start exec "{exec_id}": OCI runtime exec failed: exec failed: '
            f"unable to start container process: {detail}: unknown")

"""Names of the netns lab's namespaces and interfaces, as pure functions (see netns.py for the topology).

Namespaces ``<prefix>-lab``, ``<prefix>-<node>``, ``<prefix>-<node>_<pod-ns>_<pod-name>``. Kubernetes names
never contain ``_``, so a pod's namespace can never be mistaken for a node's or another pod's; a name
longer than 64 characters keeps its first 51 and ends in ``~`` and 12 hex digits of its SHA-1 (``~``
appears in no untruncated name). Interfaces: ``eth0`` in nodes and pods, ``lab0`` (bridge), ``ln-<node>``
or ``ln<13 hex>`` (bridge ports), ``veth<11 hex>`` (pod host ends, as Calico names ``cali<11 hex>``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from kubelab import validation

LAB_BRIDGE = "lab0"
NODE_IFNAME = "eth0"
POD_IFNAME = "eth0"

_NETNS_NAME_MAX = 64
_IFNAMSIZ = 15  # usable characters of IFNAMSIZ (16 with the NUL)
# A lab prefix: a short DNS label (it starts every namespace and bridge name of the lab).
_PREFIX = validation.GoRegexp("[a-z0-9]([a-z0-9-]{0,18}[a-z0-9])?")

def lab_netns_name(prefix: str) -> str:
    return f"{prefix}-lab"


def node_netns_name(prefix: str, node: str) -> str:
    return _fit_netns_name(f"{prefix}-{node}")


def pod_netns_name(prefix: str, node: str, pod_key: str) -> str:
    namespace, name = split_pod_key(pod_key)
    return _fit_netns_name(f"{prefix}-{node}_{namespace}_{name}")


def lab_port_name(node: str) -> str:
    readable = f"ln-{node}"
    return readable if len(readable) <= _IFNAMSIZ else "ln" + _digest(node, _IFNAMSIZ - 2)


def pod_host_ifname(node: str, pod_key: str) -> str:
    return "veth" + _digest(f"{node}/{pod_key}", _IFNAMSIZ - 4)


def split_pod_key(pod_key: str) -> tuple[str, str]:
    """``"default/web-0"`` -> ``("default", "web-0")``, validated as Kubernetes names."""
    namespace, sep, name = pod_key.partition("/")
    if not sep or not validation.is_dns1123_label(namespace) or not validation.is_dns1123_subdomain(name):
        raise ValueError(f"invalid pod key {pod_key!r}: want <namespace>/<name> (lowercase DNS names)")
    return namespace, name


def exec_argv(netns: str, cmd: Sequence[str]) -> list[str]:
    """The argv that runs `cmd` inside the named network namespace (for ``kubelab exec``)."""
    if not netns or "/" in netns or netns in (".", ".."):
        raise ValueError(f"invalid network namespace name {netns!r}")
    if not cmd:
        raise ValueError("empty command")
    return ["ip", "netns", "exec", netns, *cmd]


def _fit_netns_name(name: str) -> str:
    if len(name) <= _NETNS_NAME_MAX:
        return name
    return f"{name[: _NETNS_NAME_MAX - 13]}~{_digest(name, 12)}"


def _digest(text: str, length: int) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:length]


def validate_prefix(prefix: str) -> None:
    if not _PREFIX.matches(prefix):
        raise ValueError(f"invalid prefix {prefix!r}: 1-20 characters of [a-z0-9-]")


def validate_node_name(node: str) -> None:
    if not validation.is_dns1123_subdomain(node):
        raise ValueError(f"invalid node name {node!r}: want a lowercase DNS subdomain")
    if node == "lab":
        raise ValueError("node name 'lab' is reserved for the lab network namespace")

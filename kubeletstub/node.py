"""The Node object: what a kubelet registers and how it keeps it fresh (reference §8.1).

Registration creates the Node with its labels, podCIDR, capacity, allocatable, conditions, addresses
and nodeInfo in one POST; a Node that already exists (a restarted kubelet) has its status refreshed.
Every `status_interval` seconds the conditions' lastHeartbeatTime is renewed, which is what the node
lifecycle controller watches.
"""

from __future__ import annotations

import hashlib
import platform
import uuid
from dataclasses import dataclass, field

from kubelab import kinds, quantity, timeutil
from kubelab.models import (Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, ObjectMeta,
                            Taint)

KUBELET_VERSION = "v1.32.0-kubelab"

CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


@dataclass
class NodeConfig:
    name: str
    ip: str
    pod_cidr: str
    cpu: str = "4"
    memory: str = "8Gi"
    ephemeral_storage: str = "100Gi"
    max_pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    status_interval: float = 10.0


def _ki(text: str) -> str:
    return f"{quantity.value(text) // 1024}Ki"


def capacity(config: NodeConfig) -> dict[str, str]:
    return {"cpu": config.cpu, "memory": _ki(config.memory), "pods": str(config.max_pods),
            "ephemeral-storage": _ki(config.ephemeral_storage), "hugepages-1Gi": "0", "hugepages-2Mi": "0"}


def allocatable(config: NodeConfig) -> dict[str, str]:
    """Capacity less the kubelet's default hard-eviction thresholds: 100Mi of memory, 10% of disk."""
    memory = quantity.value(config.memory) - 100 * 1024 * 1024
    storage = quantity.value(config.ephemeral_storage) * 9 // 10
    return {"cpu": config.cpu, "memory": f"{memory // 1024}Ki", "pods": str(config.max_pods),
            "ephemeral-storage": str(storage), "hugepages-1Gi": "0", "hugepages-2Mi": "0"}


def conditions(previous: list[NodeCondition] | None = None) -> list[NodeCondition]:
    now = timeutil.rfc3339()
    before = {c.type: c for c in previous or []}
    result = []
    for type_, status, reason, message in CONDITIONS:
        old = before.get(type_)
        transition = old.last_transition_time if old is not None and old.status == status else now
        result.append(NodeCondition(type=type_, status=status, reason=reason, message=message,
                                    last_heartbeat_time=now, last_transition_time=transition))
    return result


def node_info(config: NodeConfig) -> NodeSystemInfo:
    digest = hashlib.sha256(config.name.encode()).hexdigest()
    uname = platform.uname()
    return NodeSystemInfo(machine_id=digest[:32], system_uuid=str(uuid.UUID(digest[:32])),
                          boot_id=str(uuid.uuid4()), kernel_version=uname.release,
                          os_image="kubelab (Debian GNU/Linux 12)", container_runtime_version="kubelab://0.1.0",
                          kubelet_version=KUBELET_VERSION, kube_proxy_version="", operating_system="linux",
                          architecture="amd64" if uname.machine == "x86_64" else uname.machine)


def build_node(config: NodeConfig) -> Node:
    arch = "amd64" if platform.machine() == "x86_64" else platform.machine()
    labels = {"kubernetes.io/hostname": config.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": arch,
              "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": arch, **config.labels}
    return Node(api_version="v1", kind="Node",
                metadata=ObjectMeta(name=config.name, labels=labels,
                                    annotations={"volumes.kubernetes.io/controller-managed-attach-detach": "true",
                                                 "node.alpha.kubernetes.io/ttl": "0"}),
                spec=NodeSpec(pod_cidr=config.pod_cidr, pod_cidrs=[config.pod_cidr], taints=config.taints or None),
                status=NodeStatus(capacity=capacity(config), allocatable=allocatable(config),
                                  conditions=conditions(),
                                  addresses=[NodeAddress(type="InternalIP", address=config.ip),
                                             NodeAddress(type="Hostname", address=config.name)],
                                  daemon_endpoints={"kubeletEndpoint": {"Port": 10250}},
                                  node_info=node_info(config), images=[]))


def refreshed_status(node: Node, config: NodeConfig) -> Node:
    """The node with a heartbeat: conditions renewed, capacity and addresses as configured."""
    fresh = build_node(config)
    assert fresh.status is not None
    status = node.status or NodeStatus()
    status.capacity = fresh.status.capacity
    status.allocatable = fresh.status.allocatable
    status.addresses = fresh.status.addresses
    status.daemon_endpoints = fresh.status.daemon_endpoints
    status.node_info = status.node_info or fresh.status.node_info
    status.conditions = conditions(status.conditions)
    node.status = status
    return node


RESOURCE = kinds.NODES

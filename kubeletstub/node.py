"""The Node object: what a kubelet registers and how it keeps it fresh (reference §8.1).

Registration creates the Node with its labels, podCIDR, capacity, allocatable, conditions, addresses
and nodeInfo in one POST; a Node that already exists (a restarted kubelet) has its status refreshed.
The heartbeat is the node's Lease, renewed every 10 s; the status itself (with the conditions'
lastHeartbeatTime) is re-posted every 5 minutes. The node lifecycle controller watches both.
"""

from __future__ import annotations

import hashlib
import platform
import uuid
from dataclasses import dataclass, field

from kubelab import addressing, kinds, quantity, timeutil, wellknown
from kubelab.client import ApiClient, NotFound
from kubelab.models import (
    Lease,
    LeaseSpec,
    Node,
    NodeAddress,
    NodeCondition,
    NodeSpec,
    NodeStatus,
    NodeSystemInfo,
    ObjectMeta,
    OwnerReference,
    Taint,
)

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
    status_report_interval: float = 300.0  # kubelet's nodeStatusReportFrequency (5 min)
    lease_renew_interval: float = 10.0     # a quarter of the lease's 40 s duration
    lease_duration: int = 40
    cluster_dns: tuple[str, ...] = (addressing.CLUSTER_DNS_IP,)  # the kubelet's --cluster-dns
    cluster_domain: str = addressing.CLUSTER_DOMAIN  # the kubelet's --cluster-domain
    # The kubelet API (server.py): its port, advertised in status.daemonEndpoints.kubeletEndpoint (None: no
    # kubelet API, the default for a node made in code; 0: a free port, advertised once bound; kubelab up and
    # kubelab node give addressing.KUBELET_PORT where the node's address exists), and the address it binds
    # (None: the node's InternalIP, in the node's network namespace).
    kubelet_port: int | None = None
    kubelet_address: str | None = None
    log_root: str | None = None  # the container logs (crilog.py's layout); None: no logs to serve
    # kubelet's --tls-cert-file, --tls-private-key-file and --client-ca-file: with them the kubelet API is
    # HTTPS and wants the API server's client certificate (server.py).
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    client_ca_file: str | None = None


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
    labels = {wellknown.HOSTNAME: config.name, wellknown.OS: "linux", wellknown.ARCH: arch,
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
                                  daemon_endpoints={"kubeletEndpoint": {"Port": config.kubelet_port or 0}},
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


async def renew_lease(api: ApiClient, node_name: str, lease: Lease | None, *, duration: int = 40) -> Lease:
    """Create or renew `kube-node-lease/<node>` (§8.2): holderIdentity the node, renewTime now (MicroTime),
    owned by the Node so it goes with it."""
    now = timeutil.rfc3339_micro()
    if lease is None:
        try:
            lease = await api.get(kinds.LEASES, node_name, "kube-node-lease")
        except NotFound:
            node = await api.get(kinds.NODES, node_name)
            fresh = Lease(api_version="coordination.k8s.io/v1", kind="Lease",
                          metadata=ObjectMeta(name=node_name, namespace="kube-node-lease",
                                              owner_references=[OwnerReference(api_version="v1", kind="Node",
                                                                               name=node_name, uid=node.metadata.uid)]),
                          spec=LeaseSpec(holder_identity=node_name, lease_duration_seconds=duration, renew_time=now))
            created: Lease = await api.create(kinds.LEASES, fresh, "kube-node-lease")
            return created
    assert lease is not None
    lease.spec = lease.spec or LeaseSpec(holder_identity=node_name, lease_duration_seconds=duration)
    lease.spec.renew_time = now
    renewed: Lease = await api.update(kinds.LEASES, lease)
    return renewed

"""core/v1 kinds: Namespace, Node, Pod, Service, Endpoints, Event, Binding."""

from __future__ import annotations

from typing import Any

from .base import Model
from .meta import IntOrString, LabelSelector, ListMeta, ObjectMeta, TypedObject

# --- Namespace -----------------------------------------------------------------------------------

class NamespaceSpec(Model):
    finalizers: list[str] | None = None


class NamespaceStatus(Model):
    phase: str | None = None
    conditions: list[dict[str, Any]] | None = None


class Namespace(TypedObject):
    spec: NamespaceSpec | None = None
    status: NamespaceStatus | None = None


# --- Node ----------------------------------------------------------------------------------------

class Taint(Model):
    key: str | None = None
    value: str | None = None
    effect: str | None = None
    time_added: str | None = None


class NodeSpec(Model):
    pod_cidr: str | None = None
    pod_cidrs: list[str] | None = None
    provider_id: str | None = None
    unschedulable: bool | None = None
    taints: list[Taint] | None = None


class NodeCondition(Model):
    type: str | None = None
    status: str | None = None
    last_heartbeat_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class NodeAddress(Model):
    type: str | None = None
    address: str | None = None


class NodeSystemInfo(Model):
    machine_id: str | None = None
    system_uuid: str | None = None
    boot_id: str | None = None
    kernel_version: str | None = None
    os_image: str | None = None
    container_runtime_version: str | None = None
    kubelet_version: str | None = None
    kube_proxy_version: str | None = None
    operating_system: str | None = None
    architecture: str | None = None


class NodeStatus(Model):
    capacity: dict[str, str] | None = None
    allocatable: dict[str, str] | None = None
    phase: str | None = None
    conditions: list[NodeCondition] | None = None
    addresses: list[NodeAddress] | None = None
    daemon_endpoints: dict[str, Any] | None = None
    node_info: NodeSystemInfo | None = None
    images: list[dict[str, Any]] | None = None


class Node(TypedObject):
    spec: NodeSpec | None = None
    status: NodeStatus | None = None

    def condition(self, type_: str) -> NodeCondition | None:
        for cond in (self.status.conditions if self.status else None) or []:
            if cond.type == type_:
                return cond
        return None

    def is_ready(self) -> bool:
        cond = self.condition("Ready")
        return cond is not None and cond.status == "True"

    def internal_ip(self) -> str | None:
        for addr in (self.status.addresses if self.status else None) or []:
            if addr.type == "InternalIP":
                return addr.address
        return None


# --- Pod -----------------------------------------------------------------------------------------

class ContainerPort(Model):
    name: str | None = None
    container_port: int | None = None
    protocol: str | None = None
    host_port: int | None = None
    host_ip: str | None = None


class ResourceRequirements(Model):
    requests: dict[str, str] | None = None
    limits: dict[str, str] | None = None


class Container(Model):
    name: str | None = None
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    ports: list[ContainerPort] | None = None
    resources: ResourceRequirements | None = None
    restart_policy: str | None = None
    readiness_probe: dict[str, Any] | None = None
    liveness_probe: dict[str, Any] | None = None
    env: list[dict[str, Any]] | None = None


class Toleration(Model):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class PodSpec(Model):
    containers: list[Container] | None = None
    init_containers: list[Container] | None = None
    node_name: str | None = None
    node_selector: dict[str, str] | None = None
    affinity: dict[str, Any] | None = None
    tolerations: list[Toleration] | None = None
    scheduler_name: str | None = None
    priority: int | None = None
    overhead: dict[str, str] | None = None
    restart_policy: str | None = None
    termination_grace_period_seconds: int | None = None
    dns_policy: str | None = None
    hostname: str | None = None
    subdomain: str | None = None
    host_network: bool | None = None
    volumes: list[dict[str, Any]] | None = None


class PodCondition(Model):
    type: str | None = None
    status: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class PodIP(Model):
    ip: str | None = None


class ContainerStatus(Model):
    name: str | None = None
    image: str | None = None
    image_id: str | None = None
    container_id: str | None = None
    ready: bool | None = None
    started: bool | None = None
    restart_count: int | None = None
    state: dict[str, Any] | None = None
    last_state: dict[str, Any] | None = None


class PodStatus(Model):
    phase: str | None = None
    conditions: list[PodCondition] | None = None
    message: str | None = None
    reason: str | None = None
    host_ip: str | None = None
    host_ips: list[PodIP] | None = None
    pod_ip: str | None = None
    pod_ips: list[PodIP] | None = None
    start_time: str | None = None
    container_statuses: list[ContainerStatus] | None = None
    init_container_statuses: list[ContainerStatus] | None = None
    qos_class: str | None = None
    nominated_node_name: str | None = None


class Pod(TypedObject):
    spec: PodSpec | None = None
    status: PodStatus | None = None

    def condition(self, type_: str) -> PodCondition | None:
        for cond in (self.status.conditions if self.status else None) or []:
            if cond.type == type_:
                return cond
        return None

    def is_ready(self) -> bool:
        cond = self.condition("Ready")
        return cond is not None and cond.status == "True"

    @property
    def node_name(self) -> str:
        return (self.spec.node_name if self.spec else None) or ""

    @property
    def phase(self) -> str:
        return (self.status.phase if self.status else None) or ""

    @property
    def pod_ip(self) -> str:
        return (self.status.pod_ip if self.status else None) or ""

    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


# --- Service -------------------------------------------------------------------------------------

class ServicePort(Model):
    name: str | None = None
    protocol: str | None = None
    app_protocol: str | None = None
    port: int | None = None
    target_port: IntOrString | None = None
    node_port: int | None = None


class ClientIPConfig(Model):
    timeout_seconds: int | None = None


class SessionAffinityConfig(Model):
    client_ip: ClientIPConfig | None = None


class ServiceSpec(Model):
    type: str | None = None
    selector: dict[str, str] | None = None
    ports: list[ServicePort] | None = None
    cluster_ip: str | None = None
    cluster_ips: list[str] | None = None
    external_ips: list[str] | None = None
    external_name: str | None = None
    session_affinity: str | None = None
    session_affinity_config: SessionAffinityConfig | None = None
    external_traffic_policy: str | None = None
    internal_traffic_policy: str | None = None
    health_check_node_port: int | None = None
    load_balancer_ip: str | None = None
    load_balancer_source_ranges: list[str] | None = None
    load_balancer_class: str | None = None
    allocate_load_balancer_node_ports: bool | None = None
    publish_not_ready_addresses: bool | None = None
    ip_families: list[str] | None = None
    ip_family_policy: str | None = None
    traffic_distribution: str | None = None


class LoadBalancerIngress(Model):
    ip: str | None = None
    hostname: str | None = None
    ip_mode: str | None = None
    ports: list[dict[str, Any]] | None = None


class LoadBalancerStatus(Model):
    ingress: list[LoadBalancerIngress] | None = None


class ServiceStatus(Model):
    load_balancer: LoadBalancerStatus | None = None
    conditions: list[dict[str, Any]] | None = None


class Service(TypedObject):
    spec: ServiceSpec | None = None
    status: ServiceStatus | None = None


# --- Endpoints -----------------------------------------------------------------------------------

class ObjectReference(Model):
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    api_version: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class EndpointAddress(Model):
    ip: str | None = None
    hostname: str | None = None
    node_name: str | None = None
    target_ref: ObjectReference | None = None


class EndpointPort(Model):
    name: str | None = None
    port: int | None = None
    protocol: str | None = None
    app_protocol: str | None = None


class EndpointSubset(Model):
    addresses: list[EndpointAddress] | None = None
    not_ready_addresses: list[EndpointAddress] | None = None
    ports: list[EndpointPort] | None = None


class Endpoints(TypedObject):
    subsets: list[EndpointSubset] | None = None


# --- Event, Binding ------------------------------------------------------------------------------

class EventSource(Model):
    component: str | None = None
    host: str | None = None


class EventSeries(Model):
    """core/v1 and events.k8s.io/v1 EventSeries: how often an event recurred, and when it last did."""

    count: int | None = None
    last_observed_time: str | None = None


class Event(TypedObject):
    involved_object: ObjectReference | None = None
    reason: str | None = None
    message: str | None = None
    source: EventSource | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    count: int | None = None
    type: str | None = None
    event_time: str | None = None
    action: str | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None
    related: ObjectReference | None = None
    series: EventSeries | None = None


class Binding(TypedObject):
    target: ObjectReference | None = None


# --- Secret, ServiceAccount ----------------------------------------------------------------------

class Secret(TypedObject):
    data: dict[str, str] | None = None  # base64 text, as on the wire
    string_data: dict[str, str] | None = None
    type: str | None = None
    immutable: bool | None = None


class LocalObjectReference(Model):
    name: str | None = None


class ServiceAccount(TypedObject):
    secrets: list[ObjectReference] | None = None
    image_pull_secrets: list[LocalObjectReference] | None = None
    automount_service_account_token: bool | None = None


__all__ = [
    "Binding", "ClientIPConfig", "Container", "ContainerPort", "ContainerStatus", "EndpointAddress",
    "EndpointPort", "EndpointSubset", "Endpoints", "Event", "EventSeries", "EventSource", "LabelSelector", "ListMeta",
    "LoadBalancerIngress", "LoadBalancerStatus", "LocalObjectReference", "Namespace", "NamespaceSpec",
    "NamespaceStatus", "Node", "NodeAddress", "NodeCondition", "NodeSpec", "NodeStatus", "NodeSystemInfo",
    "ObjectMeta", "ObjectReference", "Pod", "PodCondition", "PodIP", "PodSpec", "PodStatus",
    "ResourceRequirements", "Secret", "Service", "ServiceAccount", "ServicePort", "ServiceSpec",
    "ServiceStatus", "SessionAffinityConfig", "Taint", "Toleration",
]

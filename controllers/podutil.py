"""Which pods back a Service, and on which port: the endpoints controllers' shared rules."""

from __future__ import annotations

from kubelab import validation
from kubelab.models import Pod, Service, ServicePort


def find_port(pod: Pod, port: ServicePort) -> int | None:
    """podutil.FindPort: a number is used as is; a name must match a container port's name and protocol,
    searched in the containers first, then (v1.32+) in sidecars, initContainers with restartPolicy Always.
    A string is always a name, even `"8080"` (the API refuses such a targetPort: it has no letter)."""
    target = port.target_port
    if target is None:
        return port.port
    if isinstance(target, int):
        return target
    protocol = port.protocol or "TCP"
    spec = pod.spec
    if spec is None:
        return None
    sidecars = [c for c in spec.init_containers or [] if c.restart_policy == "Always"]
    for container in list(spec.containers or []) + sidecars:
        for cp in container.ports or []:
            if cp.name == target and (cp.protocol or "TCP") == protocol:
                return cp.container_port
    return None


def is_ready(pod: Pod) -> bool:
    return pod.is_ready()


def should_include(pod: Pod, service: Service, *, include_terminating: bool) -> bool:
    """ShouldPodBeInEndpoints: no terminal pods, no pods without an IP; terminating pods only where asked
    (EndpointSlices keep them as serving/terminating) or when the Service publishes not-ready addresses."""
    if pod.is_terminal() or not pod.pod_ip or not has_valid_ip(pod):
        return False
    publish = bool(service.spec and service.spec.publish_not_ready_addresses)
    return not pod.metadata.deletion_timestamp or include_terminating or publish


def has_valid_ip(pod: Pod) -> bool:
    """The API refuses a status with an address Go cannot parse, but a pod stored without validation
    could still carry one; it is left out of the endpoints (as a pod without an IP is) rather than have
    every write of the Service's endpoints refused, which would freeze them for all its other pods."""
    try:
        validation.parse_ip(pod.pod_ip or "")
    except ValueError:
        return False
    return True


def endpoint_hostname(pod: Pod, service: Service) -> str | None:
    """The pod's hostname when it names an endpoint of `service` (spec.subdomain is the Service's name);
    one that is not a DNS label (only a pod stored without validation has one) is left out, not the
    pod."""
    spec = pod.spec
    if spec and spec.hostname and spec.subdomain == service.metadata.name:
        return spec.hostname if validation.is_dns1123_label(spec.hostname) else None
    return None


def endpoint_node_name(pod: Pod) -> str | None:
    """The node the endpoint runs on, if its name is one (a DNS subdomain), else unset."""
    name = pod.node_name
    return name if name and validation.is_dns1123_subdomain(name) else None


def is_headless(service: Service) -> bool:
    return bool(service.spec and service.spec.cluster_ip in ("None", ""))


def selects_pods(service: Service) -> bool:
    """ExternalName Services and Services without a selector are left to their users."""
    spec = service.spec
    return spec is not None and spec.type != "ExternalName" and spec.selector is not None

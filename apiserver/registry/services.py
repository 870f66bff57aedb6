"""Services: kube-apiserver's defaults, validation and ClusterIP/NodePort allocation."""

from __future__ import annotations

import ipaddress
import random

import orjson

from kubelab import validation
from kubelab.models import (
    ClientIPConfig,
    LoadBalancerStatus,
    Service,
    ServicePort,
    ServiceStatus,
    SessionAffinityConfig,
    TypedObject,
)
from kubelab.validation import FieldError, invalid, not_supported, required

from ..storage import Txn
from .allocation import IPRange, PortRange, ip_key, port_key
from .strategy import Allocation, Strategy

TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
IP_FAMILIES = ["IPv4", "IPv6"]
IP_FAMILY_POLICIES = ["PreferDualStack", "RequireDualStack", "SingleStack"]
IP_MODES = ["Proxy", "VIP"]  # a load-balancer ingress's ipMode
DEFAULT_AFFINITY_TIMEOUT = 10800


def needs_node_ports(svc: Service) -> bool:
    spec = svc.spec
    if spec is None:
        return False
    if spec.type == "NodePort":
        return True
    return spec.type == "LoadBalancer" and spec.allocate_load_balancer_node_ports is not False


def needs_health_check_port(svc: Service) -> bool:
    spec = svc.spec
    return spec is not None and spec.type == "LoadBalancer" and spec.external_traffic_policy == "Local"


def is_headless(svc: Service) -> bool:
    return svc.spec is not None and svc.spec.cluster_ip == "None"


class ServiceStrategy(Strategy):
    name_check = staticmethod(validation.dns1035_label_errors)

    def __init__(self, rt, *, ip_range: IPRange | None = None, port_range: PortRange | None = None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(rt)
        self.ip_range = ip_range or IPRange()
        self.port_range = port_range or PortRange()
        self.rng = random.Random()

    # --- defaults --------------------------------------------------------------------------------

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        assert isinstance(obj, Service)
        obj.status = ServiceStatus(load_balancer=LoadBalancerStatus())

    def fill_status(self, obj: TypedObject) -> None:
        # ServiceStatus.LoadBalancer is a struct, which Go's omitempty never omits: `{"loadBalancer": {}}`
        # also after a status write that left it out.
        assert isinstance(obj, Service)
        obj.status = obj.status or ServiceStatus()
        obj.status.load_balancer = obj.status.load_balancer or LoadBalancerStatus()

    def set_defaults(self, obj: TypedObject) -> None:
        assert isinstance(obj, Service)
        spec = obj.spec
        if spec is None:
            return
        spec.type = spec.type or "ClusterIP"
        spec.session_affinity = spec.session_affinity or "None"
        if spec.session_affinity == "ClientIP":
            cfg = spec.session_affinity_config or SessionAffinityConfig()
            cfg.client_ip = cfg.client_ip or ClientIPConfig()
            if cfg.client_ip.timeout_seconds is None:
                cfg.client_ip.timeout_seconds = DEFAULT_AFFINITY_TIMEOUT
            spec.session_affinity_config = cfg
        for port in spec.ports or []:
            port.protocol = port.protocol or "TCP"
            if port.target_port is None or port.target_port == 0 or port.target_port == "":
                port.target_port = port.port
        if spec.type in ("NodePort", "LoadBalancer") and not spec.external_traffic_policy:
            spec.external_traffic_policy = "Cluster"
        if spec.type != "ExternalName" and not spec.internal_traffic_policy:
            spec.internal_traffic_policy = "Cluster"
        if spec.type == "LoadBalancer" and spec.allocate_load_balancer_node_ports is None:
            spec.allocate_load_balancer_node_ports = True
        if spec.type != "ExternalName":
            spec.ip_families = spec.ip_families or ["IPv4"]
            spec.ip_family_policy = spec.ip_family_policy or "SingleStack"

    def prepare_update(self, new: TypedObject, old: TypedObject, subresource: str | None) -> None:
        super().prepare_update(new, old, subresource)
        assert isinstance(new, Service) and isinstance(old, Service)
        if subresource is None:
            _drop_type_dependent_fields(new, old)

    # --- validation ------------------------------------------------------------------------------

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, Service)
        return self.validate_meta(obj) + self.validate_spec(obj)

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, Service) and isinstance(old, Service)
        errs = super().validate_update(new, old, subresource) + self.validate_spec(new)
        if subresource == "status":
            errs += _load_balancer_status_errors(new)
        old_ip = old.spec.cluster_ip if old.spec else None
        new_ip = new.spec.cluster_ip if new.spec else None
        if old_ip and new_ip and old_ip != new_ip and "ExternalName" not in (
                (new.spec.type if new.spec else None), (old.spec.type if old.spec else None)):
            errs.append(invalid("spec.clusterIPs[0]", [new_ip], "may not change once set"))
        return errs

    def validate_spec(self, svc: Service) -> list[FieldError]:
        spec = svc.spec
        if spec is None:
            return [required("spec")]
        errs: list[FieldError] = []
        if spec.type not in TYPES:
            errs.append(not_supported("spec.type", spec.type, TYPES))
        ports = spec.ports or []
        if not ports and spec.type != "ExternalName" and spec.cluster_ip != "None":
            errs.append(required("spec.ports"))
        if spec.type == "ExternalName":
            if not spec.external_name:
                errs.append(required("spec.externalName"))
            else:
                errs += [invalid("spec.externalName", spec.external_name, p)
                         for p in validation.dns1123_subdomain_errors(spec.external_name.rstrip("."))]
        names: set[str] = set()
        seen: set[tuple[int | None, str | None]] = set()
        for i, port in enumerate(ports):
            errs += self._validate_port(spec.type or "", port, i, len(ports), names)
            ident = (port.port, port.protocol)
            if ident in seen:
                errs.append(validation.duplicate(f"spec.ports[{i}]", validation.GoLiteral(_go_service_port(port))))
            seen.add(ident)
        if spec.session_affinity not in ("None", "ClientIP"):
            errs.append(not_supported("spec.sessionAffinity", spec.session_affinity, ["ClientIP", "None"]))
        timeout = (spec.session_affinity_config.client_ip.timeout_seconds
                   if spec.session_affinity_config and spec.session_affinity_config.client_ip else None)
        if spec.session_affinity == "ClientIP" and timeout is not None and not 0 < timeout <= 86400:
            errs.append(invalid("spec.sessionAffinityConfig.clientIP.timeoutSeconds", timeout,
                                "must be greater than 0 and less than 86400"))
        for key, value in (spec.selector or {}).items():
            errs += [invalid("spec.selector", key, p) for p in validation.label_key_errors(key)]
            # ValidateLabels reports a bad value at the map itself, not at `[key]`.
            errs += [invalid("spec.selector", value, p) for p in validation.label_value_errors(value)]
        for i, ip in enumerate(spec.external_ips or []):
            if not validation.is_ip(ip):
                errs.append(invalid(f"spec.externalIPs[{i}]", ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
        if spec.external_traffic_policy not in (None, "Cluster", "Local"):
            errs.append(not_supported("spec.externalTrafficPolicy", spec.external_traffic_policy, ["Cluster", "Local"]))
        if spec.external_traffic_policy and spec.type not in ("NodePort", "LoadBalancer") and not spec.external_ips:
            errs.append(invalid("spec.externalTrafficPolicy", spec.external_traffic_policy,
                                "may only be set for externally-accessible services"))
        # validateIPFamilies / the policy's NotSupported: kube-proxy picks a Service's address by its family.
        for i, family in enumerate(spec.ip_families or []):
            if family not in IP_FAMILIES:
                errs.append(not_supported(f"spec.ipFamilies[{i}]", family, IP_FAMILIES))
        if spec.ip_family_policy not in (None, *IP_FAMILY_POLICIES):
            errs.append(not_supported("spec.ipFamilyPolicy", spec.ip_family_policy, IP_FAMILY_POLICIES))
        if spec.internal_traffic_policy not in (None, "Cluster", "Local"):
            errs.append(not_supported("spec.internalTrafficPolicy", spec.internal_traffic_policy, ["Cluster", "Local"]))
        if spec.cluster_ip not in (None, "", "None") and not validation.is_ip(spec.cluster_ip):
            errs.append(invalid("spec.clusterIPs[0]", spec.cluster_ip,
                                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
        for i, cidr in enumerate(spec.load_balancer_source_ranges or []):
            try:
                validation.parse_cidr(cidr.strip())
            except ValueError:
                errs.append(invalid(f"spec.loadBalancerSourceRanges[{i}]", cidr,
                                    "must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24 "))
        return errs

    def _validate_port(self, svc_type: str, port: ServicePort, i: int, count: int, names: set[str]) -> list[FieldError]:
        path = f"spec.ports[{i}]"
        errs: list[FieldError] = []
        if count > 1 and not port.name:
            errs.append(required(f"{path}.name"))
        if port.name:
            errs += [invalid(f"{path}.name", port.name, p) for p in validation.dns1123_label_errors(port.name)]
            if port.name in names:
                errs.append(validation.duplicate(f"{path}.name", port.name))
            names.add(port.name)
        if port.port is None:
            errs.append(required(f"{path}.port"))
        else:
            errs += [invalid(f"{path}.port", port.port, p) for p in validation.port_number_errors(port.port)]
        if port.protocol not in PROTOCOLS:
            errs.append(not_supported(f"{path}.protocol", port.protocol, PROTOCOLS))
        target = port.target_port
        if isinstance(target, int):
            errs += [invalid(f"{path}.targetPort", target, p) for p in validation.port_number_errors(target)]
        elif isinstance(target, str):
            errs += [invalid(f"{path}.targetPort", target, p) for p in validation.port_name_errors(target)]
        if port.node_port:
            if svc_type == "ClusterIP":
                errs.append(validation.forbidden(f"{path}.nodePort", "may not be used when `type` is 'ClusterIP'"))
            elif svc_type == "ExternalName":
                errs.append(validation.forbidden(f"{path}.nodePort", "may not be used when `type` is 'ExternalName'"))
            elif not self.port_range.contains(port.node_port):
                errs.append(invalid(f"{path}.nodePort", port.node_port,
                                    "provided port is not in the valid range. The range of valid ports is "
                                    f"{self.port_range}"))
        return errs

    # --- allocation ------------------------------------------------------------------------------

    def allocate(self, obj: TypedObject, old: TypedObject | None, *, avoid: set[str]) -> Allocation:
        """Fill in ClusterIP and NodePorts and return the reservation keys this write claims and releases."""
        assert isinstance(obj, Service)
        old_svc = old if isinstance(old, Service) else None
        alloc = Allocation()
        owner = orjson.dumps({"namespace": obj.metadata.namespace, "name": obj.metadata.name,
                              "uid": obj.metadata.uid})
        spec = obj.spec
        errs = alloc.errors
        if spec is None:
            return alloc
        old_spec = old_svc.spec if old_svc and old_svc.spec else None
        old_ip = old_spec.cluster_ip if old_spec and old_spec.cluster_ip not in ("", "None") else None
        old_ports = _node_ports(old_svc) if old_svc else set()

        # ClusterIP: patchAllocatedValues keeps the old address when an update leaves it out.
        if spec.type == "ExternalName":
            spec.cluster_ip, spec.cluster_ips = None, None
        elif not spec.cluster_ip:
            if old_ip:
                spec.cluster_ip = old_ip
            else:
                taken = {k.removeprefix("/registry/ranges/serviceips/") for k in avoid}
                spec.cluster_ip = self.ip_range.pick(taken, self.rng)
                alloc.txn.create[ip_key(spec.cluster_ip)] = owner
        elif spec.cluster_ip != "None" and spec.cluster_ip != old_ip:
            ip = str(ipaddress.ip_address(spec.cluster_ip))
            spec.cluster_ip = ip
            if not self.ip_range.contains(ip):
                errs.append(invalid("spec.clusterIPs", [ip], f"failed to allocate IP {ip}: the provided IP ({ip}) "
                                    f"is not in the valid range. The range of valid IPs is {self.ip_range.cidr}"))
            else:
                alloc.txn.create[ip_key(ip)] = owner
                alloc.taken_errors[ip_key(ip)] = invalid(
                    "spec.clusterIPs", [ip], f"failed to allocate IP {ip}: provided IP is already allocated")
        if spec.type != "ExternalName":
            spec.cluster_ips = [spec.cluster_ip] if spec.cluster_ip else None
        if old_ip and old_ip != spec.cluster_ip:
            alloc.txn.delete.append(ip_key(old_ip))

        # NodePorts.
        claimed: set[int] = set()
        if needs_node_ports(obj):
            old_by_port = {(p.port, p.protocol): p.node_port for p in (old_spec.ports if old_spec else None) or []
                           if p.node_port}
            taken_ports = {int(k.rsplit("/", 1)[1]) for k in avoid if "/servicenodeports/" in k}
            for i, port in enumerate(spec.ports or []):
                if not port.node_port:
                    reuse = old_by_port.get((port.port, port.protocol))
                    if reuse:
                        port.node_port = reuse
                    else:
                        port.node_port = self.port_range.pick(taken_ports | claimed | old_ports, self.rng)
                        if port.node_port not in claimed:
                            alloc.txn.create[port_key(port.node_port)] = owner
                elif port.node_port not in old_ports and port.node_port not in claimed:
                    alloc.txn.create[port_key(port.node_port)] = owner
                    alloc.taken_errors[port_key(port.node_port)] = invalid(
                        f"spec.ports[{i}].nodePort", port.node_port, "provided port is already allocated")
                claimed.add(port.node_port)
        else:
            for port in spec.ports or []:
                if spec.type in ("ClusterIP", "ExternalName") and old_spec is not None and port.node_port:
                    # An update to ClusterIP drops the node ports it no longer needs.
                    port.node_port = None
        if needs_health_check_port(obj):
            hc = spec.health_check_node_port or (old_spec.health_check_node_port if old_spec else None)
            if not hc:
                hc = self.port_range.pick(claimed | old_ports, self.rng)
                alloc.txn.create[port_key(hc)] = owner
            elif hc not in old_ports:
                alloc.txn.create[port_key(hc)] = owner
                alloc.taken_errors[port_key(hc)] = invalid("spec.healthCheckNodePort", hc,
                                                          "provided port is already allocated")
            spec.health_check_node_port = hc
            claimed.add(hc)
        else:
            spec.health_check_node_port = None
        for node_port in old_ports - claimed:
            alloc.txn.delete.append(port_key(node_port))
        return alloc

    def release(self, obj: TypedObject) -> Txn:
        assert isinstance(obj, Service)
        txn = Txn()
        if obj.spec and obj.spec.cluster_ip and obj.spec.cluster_ip != "None":
            txn.delete.append(ip_key(obj.spec.cluster_ip))
        txn.delete += [port_key(p) for p in sorted(_node_ports(obj))]
        return txn

    def field_labels(self, obj: dict) -> dict[str, str]:  # type: ignore[type-arg]
        fields = super().field_labels(obj)
        spec = obj.get("spec") or {}
        fields["spec.clusterIP"] = spec.get("clusterIP", "")
        fields["spec.type"] = spec.get("type", "")
        return fields

    def supported_fields(self) -> set[str]:
        return super().supported_fields() | {"spec.clusterIP", "spec.type"}


def _drop_type_dependent_fields(new: Service, old: Service) -> None:
    """kube-apiserver's dropTypeDependentFields: a type change wipes the values the old type had
    allocated or defaulted, when the update left them as they were. So `kubectl patch svc web -p
    '{"spec":{"type":"ClusterIP"}}'` demotes a NodePort Service instead of failing validation on
    the node ports it still carries; values the user changed in the same update are kept (and
    validated)."""
    ns, os_ = new.spec, old.spec
    if ns is None or os_ is None:
        return
    if needs_node_ports(old) and not needs_node_ports(new):
        # sameNodePorts: ports present before (by protocol and port) kept their nodePort.
        before = {(p.protocol, p.port): p.node_port for p in os_.ports or []}
        if all(before.get((p.protocol, p.port), p.node_port) == p.node_port for p in ns.ports or []):
            for port in ns.ports or []:
                port.node_port = None
    if needs_health_check_port(old) and not needs_health_check_port(new) and \
            ns.health_check_node_port == os_.health_check_node_port:
        ns.health_check_node_port = None
    if os_.type == "LoadBalancer" and ns.type != "LoadBalancer" and \
            ns.allocate_load_balancer_node_ports == os_.allocate_load_balancer_node_ports:
        ns.allocate_load_balancer_node_ports = None
    external = ("NodePort", "LoadBalancer")
    if os_.type in external and ns.type not in external and \
            ns.external_traffic_policy == os_.external_traffic_policy:
        ns.external_traffic_policy = None
    if os_.type != "ExternalName" and ns.type == "ExternalName":
        if ns.cluster_ip == os_.cluster_ip and ns.cluster_ips == os_.cluster_ips:
            ns.cluster_ip, ns.cluster_ips = None, None
        if ns.ip_families == os_.ip_families:
            ns.ip_families = None
        if ns.ip_family_policy == os_.ip_family_policy:
            ns.ip_family_policy = None
        if ns.internal_traffic_policy == os_.internal_traffic_policy:
            ns.internal_traffic_policy = None


def _node_ports(svc: Service) -> set[int]:
    if svc.spec is None:
        return set()
    ports = {p.node_port for p in svc.spec.ports or [] if p.node_port}
    if svc.spec.health_check_node_port:
        ports.add(svc.spec.health_check_node_port)
    return ports




def _load_balancer_status_errors(svc: Service) -> list[FieldError]:
    """ValidateLoadBalancerStatus: what a load-balancer controller reports must be an address (kube-proxy
    writes each ingress IP into its rules) or a DNS name, and a known ipMode."""
    lb = svc.status.load_balancer if svc.status else None
    errs: list[FieldError] = []
    for i, ingress in enumerate((lb.ingress if lb else None) or []):
        path = f"status.loadBalancer.ingress[{i}]"
        if ingress.ip and not validation.is_ip(ingress.ip):
            errs.append(invalid(f"{path}.ip", ingress.ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
        if ingress.ip_mode is not None and not ingress.ip:
            errs.append(validation.forbidden(f"{path}.ipMode", "may not be specified when `ip` is not set"))
        elif ingress.ip_mode is not None and ingress.ip_mode not in IP_MODES:
            errs.append(not_supported(f"{path}.ipMode", ingress.ip_mode, IP_MODES))
        if ingress.hostname:
            errs += [invalid(f"{path}.hostname", ingress.hostname, p)
                     for p in validation.dns1123_subdomain_errors(ingress.hostname)]
            if validation.is_ip(ingress.hostname):
                errs.append(invalid(f"{path}.hostname", ingress.hostname, "must be a DNS name, not an IP address"))
    return errs


def _go_service_port(port: ServicePort) -> str:
    target = port.target_port
    tp = f"intstr.IntOrString{{Type:0, IntVal:{target}, StrVal:\"\"}}" if isinstance(target, int) else \
        f"intstr.IntOrString{{Type:1, IntVal:0, StrVal:\"{target}\"}}"
    return (f'core.ServicePort{{Name:"{port.name or ""}", Protocol:"{port.protocol}", AppProtocol:(*string)(nil), '
            f"Port:{port.port}, TargetPort:{tp}, NodePort:{port.node_port or 0}}}")

"""networking.k8s.io/v1 NetworkPolicies: defaults, validation and generation as kube-apiserver's
networkpolicy strategy has them (pkg/apis/networking/validation, 1.32).

kube-apiserver stores and validates NetworkPolicies and enforces none: a network plugin (Calico, Cilium)
does. kubelab's dataplane has no policy engine, so a stored policy changes no traffic, as on a cluster
whose plugin ignores policies. Not modelled: the validation ratchet that keeps an invalid label value or
CIDR an older release stored (nothing kubelab stored can need it).
"""

from __future__ import annotations

from kubelab import validation
from kubelab.models import (
    IPBlock,
    LabelSelector,
    NetworkPolicy,
    NetworkPolicyPeer,
    NetworkPolicyPort,
    NetworkPolicySpec,
    TypedObject,
)
from kubelab.validation import FieldError, GoLiteral, forbidden, invalid, not_supported, required

from .servicecidrs import _sloppy_network  # netutils.ParseCIDRSloppy, shared with ServiceCIDR's checks
from .strategy import Strategy

PROTOCOLS = ["TCP", "UDP", "SCTP"]  # in ValidateNetworkPolicyPort's order
POLICY_TYPES = ["Ingress", "Egress"]


def label_selector_errors(selector: LabelSelector | None, path: str) -> list[FieldError]:
    """metav1validation.ValidateLabelSelector (invalid label values refused): matchLabels as labels, each
    expression's operator and values, its key as a label key, and its values as label values."""
    if selector is None:
        return []
    errs = validation.validate_labels(selector.match_labels, f"{path}.matchLabels")
    for i, expr in enumerate(selector.match_expressions or []):
        epath = f"{path}.matchExpressions[{i}]"
        values = expr.values or []
        if expr.operator in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{epath}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif expr.operator in ("Exists", "DoesNotExist"):
            if values:
                errs.append(forbidden(f"{epath}.values",
                                      "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            errs.append(invalid(f"{epath}.operator", expr.operator or "", "not a valid selector operator"))
        errs += [invalid(f"{epath}.key", expr.key or "", p) for p in validation.label_key_errors(expr.key or "")]
        for j, value in enumerate(values):
            errs += [invalid(f"{epath}.values[{j}]", value, p) for p in validation.label_value_errors(value)]
    return errs


class NetworkPolicyStrategy(Strategy):
    has_status = False
    counts_spec_generation = True

    def set_defaults(self, obj: TypedObject) -> None:
        """SetDefaults_NetworkPolicy and SetDefaults_NetworkPolicyPort: ports are TCP unless said, and a
        policy without policyTypes is an Ingress policy, and an Egress one too if it has egress rules.
        spec.podSelector is a struct in Go (never omitted): an empty one selects every pod."""
        assert isinstance(obj, NetworkPolicy)
        spec = obj.spec = obj.spec or NetworkPolicySpec()
        spec.pod_selector = spec.pod_selector or LabelSelector()
        for rule_ports in [r.ports for r in spec.ingress or []] + [r.ports for r in spec.egress or []]:
            for port in rule_ports or []:
                port.protocol = port.protocol if port.protocol is not None else "TCP"
        if not spec.policy_types:
            spec.policy_types = ["Ingress", "Egress"] if spec.egress else ["Ingress"]

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, NetworkPolicy)
        return self.validate_meta(obj) + network_policy_spec_errors(obj.spec or NetworkPolicySpec())

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, NetworkPolicy)
        return self.validate_meta_update(new, old) + network_policy_spec_errors(new.spec or NetworkPolicySpec())


def network_policy_spec_errors(spec: NetworkPolicySpec) -> list[FieldError]:
    """ValidateNetworkPolicySpec, in its order and words."""
    errs = label_selector_errors(spec.pod_selector, "spec.podSelector")
    for i, ingress in enumerate(spec.ingress or []):
        errs += [e for j, port in enumerate(ingress.ports or [])
                 for e in _port_errors(port, f"spec.ingress[{i}].ports[{j}]")]
        errs += [e for j, peer in enumerate(ingress.from_ or [])
                 for e in _peer_errors(peer, f"spec.ingress[{i}].from[{j}]")]
    for i, egress in enumerate(spec.egress or []):
        errs += [e for j, port in enumerate(egress.ports or [])
                 for e in _port_errors(port, f"spec.egress[{i}].ports[{j}]")]
        errs += [e for j, peer in enumerate(egress.to or [])
                 for e in _peer_errors(peer, f"spec.egress[{i}].to[{j}]")]
    types = spec.policy_types or []
    if len(types) > len(POLICY_TYPES):
        literal = "[]networking.PolicyType{" + ", ".join(validation.go_quote(t) for t in types) + "}"
        return errs + [invalid("spec.policyTypes", GoLiteral(literal), "may not specify more than two policyTypes")]
    return errs + [not_supported(f"spec.policyTypes[{i}]", t, POLICY_TYPES)
                   for i, t in enumerate(types) if t not in POLICY_TYPES]


def _port_errors(port: NetworkPolicyPort, path: str) -> list[FieldError]:
    """ValidateNetworkPolicyPort: a known protocol; a numeric port (with an endPort at or above it) or a
    named one (without an endPort)."""
    errs: list[FieldError] = []
    if port.protocol is not None and port.protocol not in PROTOCOLS:
        errs.append(not_supported(f"{path}.protocol", port.protocol, PROTOCOLS))
    if port.port is None:
        if port.end_port is not None:
            errs.append(invalid(f"{path}.endPort", port.end_port, "may not be specified when `port` is not specified"))
    elif isinstance(port.port, int):
        errs += [invalid(f"{path}.port", port.port, p) for p in validation.port_number_errors(port.port)]
        if port.end_port is not None:
            if port.end_port < port.port:
                errs.append(invalid(f"{path}.endPort", port.end_port, "must be greater than or equal to `port`"))
            errs += [invalid(f"{path}.endPort", port.end_port, p) for p in validation.port_number_errors(port.end_port)]
    else:
        if port.end_port is not None:
            errs.append(invalid(f"{path}.endPort", port.end_port, "may not be specified when `port` is non-numeric"))
        errs += [invalid(f"{path}.port", port.port, p) for p in validation.port_name_errors(port.port)]
    return errs


def _peer_errors(peer: NetworkPolicyPeer, path: str) -> list[FieldError]:
    """ValidateNetworkPolicyPeer: at least one of podSelector, namespaceSelector, ipBlock; ipBlock alone."""
    errs: list[FieldError] = []
    count = 0
    if peer.pod_selector is not None:
        count += 1
        errs += label_selector_errors(peer.pod_selector, f"{path}.podSelector")
    if peer.namespace_selector is not None:
        count += 1
        errs += label_selector_errors(peer.namespace_selector, f"{path}.namespaceSelector")
    if peer.ip_block is not None:
        count += 1
        errs += _ip_block_errors(peer.ip_block, f"{path}.ipBlock")
    if count == 0:
        errs.append(required(path, "must specify a peer"))
    elif count > 1 and peer.ip_block is not None:
        errs.append(forbidden(path, "may not specify both ipBlock and another peer"))
    return errs


def _ip_block_errors(block: IPBlock, path: str) -> list[FieldError]:
    """ValidateIPBlock as of 1.32: the CIDR as netutils.ParseCIDRSloppy reads it, and each except a CIDR
    strictly inside it (the first unparsable one ends the checks)."""
    if not block.cidr:
        return [required(f"{path}.cidr")]
    network = _sloppy_network(block.cidr)
    if network is None:
        return [invalid(f"{path}.cidr", block.cidr, "not a valid CIDR")]
    errs: list[FieldError] = []
    for i, text in enumerate(block.except_ or []):
        inner = _sloppy_network(text)
        if inner is None:
            return errs + [invalid(f"{path}.except[{i}]", text, "not a valid CIDR")]
        if (inner.version != network.version or inner.network_address not in network
                or network.prefixlen >= inner.prefixlen):
            errs.append(invalid(f"{path}.except[{i}]", text, "must be a strict subset of `cidr`"))
    return errs

"""networking.k8s.io/v1: ServiceCIDR, a range ClusterIPs are allocated from (GA in Kubernetes 1.33); Ingress,
IngressClass and NetworkPolicy, which kube-apiserver stores and validates for controllers it does not run.

kube-apiserver keeps one named `kubernetes` for its --service-cluster-ip-range; kube-proxy's nftables
mode drops traffic to addresses of every ServiceCIDR that no Service holds.
"""

from __future__ import annotations

from typing import Any

from .base import Model
from .meta import IntOrString, LabelSelector, TypedObject


class ServiceCIDRSpec(Model):
    cidrs: list[str] | None = None  # one per IP family at most; immutable


class ServiceCIDRStatus(Model):
    conditions: list[dict[str, Any]] | None = None  # metav1.Condition: "Ready"


class ServiceCIDR(TypedObject):
    spec: ServiceCIDRSpec | None = None
    status: ServiceCIDRStatus | None = None


# --- Ingress and IngressClass (networking.k8s.io/v1): served as kube-apiserver serves them; routing
# them is an ingress controller's work, which kube-apiserver does not do either. ---------------------

class ServiceBackendPort(Model):
    name: str | None = None
    number: int | None = None


class IngressServiceBackend(Model):
    name: str | None = None
    port: ServiceBackendPort | None = None


class TypedLocalObjectReference(Model):
    api_group: str | None = None
    kind: str | None = None
    name: str | None = None


class IngressBackend(Model):
    service: IngressServiceBackend | None = None
    resource: TypedLocalObjectReference | None = None


class HTTPIngressPath(Model):
    path: str | None = None
    path_type: str | None = None
    backend: IngressBackend | None = None


class HTTPIngressRuleValue(Model):
    paths: list[HTTPIngressPath] | None = None


class IngressRule(Model):
    host: str | None = None
    http: HTTPIngressRuleValue | None = None


class IngressTLS(Model):
    hosts: list[str] | None = None
    secret_name: str | None = None


class IngressSpec(Model):
    ingress_class_name: str | None = None
    default_backend: IngressBackend | None = None
    tls: list[IngressTLS] | None = None
    rules: list[IngressRule] | None = None


class IngressPortStatus(Model):
    port: int | None = None
    protocol: str | None = None
    error: str | None = None


class IngressLoadBalancerIngress(Model):
    ip: str | None = None
    hostname: str | None = None
    ports: list[IngressPortStatus] | None = None


class IngressLoadBalancerStatus(Model):
    ingress: list[IngressLoadBalancerIngress] | None = None


class IngressStatus(Model):
    load_balancer: IngressLoadBalancerStatus | None = None


class Ingress(TypedObject):
    spec: IngressSpec | None = None
    status: IngressStatus | None = None


class IngressClassParametersReference(Model):
    api_group: str | None = None
    kind: str | None = None
    name: str | None = None
    scope: str | None = None  # "Cluster" (the default) or "Namespace"
    namespace: str | None = None


class IngressClassSpec(Model):
    controller: str | None = None
    parameters: IngressClassParametersReference | None = None


class IngressClass(TypedObject):
    spec: IngressClassSpec | None = None


# --- NetworkPolicy (networking.k8s.io/v1): stored and served; enforcing it is a network plugin's work
# (kube-apiserver enforces nothing either, and kubelab's dataplane has no policy engine). -------------

class IPBlock(Model):
    cidr: str | None = None
    except_: list[str] | None = None


class NetworkPolicyPeer(Model):
    pod_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    ip_block: IPBlock | None = None


class NetworkPolicyPort(Model):
    protocol: str | None = None
    port: IntOrString | None = None
    end_port: int | None = None


class NetworkPolicyIngressRule(Model):
    ports: list[NetworkPolicyPort] | None = None
    from_: list[NetworkPolicyPeer] | None = None


class NetworkPolicyEgressRule(Model):
    ports: list[NetworkPolicyPort] | None = None
    to: list[NetworkPolicyPeer] | None = None


class NetworkPolicySpec(Model):
    pod_selector: LabelSelector | None = None
    ingress: list[NetworkPolicyIngressRule] | None = None
    egress: list[NetworkPolicyEgressRule] | None = None
    policy_types: list[str] | None = None


class NetworkPolicy(TypedObject):
    spec: NetworkPolicySpec | None = None

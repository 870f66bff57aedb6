"""networking.k8s.io/v1 ServiceCIDR: a range ClusterIPs are allocated from (GA in Kubernetes 1.33).

kube-apiserver keeps one named `kubernetes` for its --service-cluster-ip-range; kube-proxy's nftables
mode drops traffic to addresses of every ServiceCIDR that no Service holds.
"""

from __future__ import annotations

from typing import Any

from .base import Model
from .meta import TypedObject


class ServiceCIDRSpec(Model):
    cidrs: list[str] | None = None  # one per IP family at most; immutable


class ServiceCIDRStatus(Model):
    conditions: list[dict[str, Any]] | None = None  # metav1.Condition: "Ready"


class ServiceCIDR(TypedObject):
    spec: ServiceCIDRSpec | None = None
    status: ServiceCIDRStatus | None = None

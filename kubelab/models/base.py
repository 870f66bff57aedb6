"""The base of every API model: camelCase on the wire, snake_case in Python, unknown fields kept.

Kubernetes objects are open-ended; kubelab models the fields its components read and keeps the rest
(`extra="allow"`), so an object round-trips through the API server unchanged. Models are strict:
`"port": "443"` is refused as kube-apiserver refuses it, never silently coerced.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

# Go field names keep initialisms upper-case (`clusterIP`, `podCIDR`, `machineID`); pydantic's
# camel-caser does not know that, so these are spelled out.
_SPECIAL_ALIASES = {
    "cluster_ip": "clusterIP",
    "cluster_ips": "clusterIPs",
    "external_ips": "externalIPs",
    "load_balancer_ip": "loadBalancerIP",
    "pod_ip": "podIP",
    "pod_ips": "podIPs",
    "host_ip": "hostIP",
    "host_ips": "hostIPs",
    "pod_cidr": "podCIDR",
    "pod_cidrs": "podCIDRs",
    "machine_id": "machineID",
    "system_uuid": "systemUUID",
    "boot_id": "bootID",
    "image_id": "imageID",
    "container_id": "containerID",
    "provider_id": "providerID",
    "uid": "uid",
    "client_ip": "clientIP",
    "ip_families": "ipFamilies",
    "ip_family_policy": "ipFamilyPolicy",
    "ip_mode": "ipMode",
    "ip": "ip",
    "continue_": "continue",
    "except_": "except",  # NetworkPolicy's ipBlock.except and ingress[].from: Python keywords
    "from_": "from",
    "insecure_skip_tls_verify": "insecureSkipTLSVerify",
    "non_resource_urls": "nonResourceURLs",
}


def to_wire(name: str) -> str:
    """The JSON name of a Python field name."""
    return _SPECIAL_ALIASES.get(name) or to_camel(name)


class Model(BaseModel):
    """Base of all kubelab API models."""

    model_config = ConfigDict(
        alias_generator=to_wire,
        populate_by_name=True,
        extra="allow",
        strict=True,
        validate_default=False,
    )

    def to_dict(self) -> dict[str, Any]:
        """The object as Kubernetes JSON (camelCase, unset fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return cls.model_validate(data)

    def copy_deep(self) -> Self:
        return self.model_copy(deep=True)

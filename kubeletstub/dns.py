"""A pod's resolv.conf, as the kubelet computes it (pkg/kubelet/network/dns: GetPodDNS). Pure.

`dnsPolicy: ClusterFirst` (the default) points the pod at the cluster DNS Service with Kubernetes'
search path and `ndots:5`; `Default` leaves the node's resolv.conf (nothing is written); `None` uses
only `spec.dnsConfig`, which is otherwise merged last (nameservers and searches appended without
duplicates, options merged by name, the pod's value winning).

One deliberate difference: the kubelet appends the node's own search domains after the cluster's.
The lab has no upstream resolver (names outside the cluster domain are refused), so they would only
add lookups that must fail; kubelab leaves them out.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubelab.models import Pod

MAX_NAMESERVERS = 3
MAX_SEARCH = 32
MAX_SEARCH_CHARS = 2048


def _options(pairs: list[tuple[str, str | None]]) -> list[str]:
    merged: dict[str, str | None] = {}
    for name, value in pairs:
        merged[name] = value
    return [name if value is None else f"{name}:{value}" for name, value in merged.items()]


def pod_resolv_conf(pod: Pod, cluster_dns: Sequence[str], cluster_domain: str) -> str | None:
    """The resolv.conf text for `pod`, or None to leave the node's own."""
    spec = pod.spec
    policy = (spec.dns_policy if spec else None) or "ClusterFirst"
    host_network = bool(spec and spec.host_network)
    extra = ((spec.model_extra or {}).get("dnsConfig") if spec else None) or {}
    nameservers: list[str] = []
    searches: list[str] = []
    options: list[tuple[str, str | None]] = []
    if policy == "ClusterFirstWithHostNet" or (policy == "ClusterFirst" and not host_network):
        if not cluster_dns:
            return None  # MissingClusterDNS: the kubelet falls back to Default
        namespace = pod.metadata.namespace or "default"
        nameservers = list(cluster_dns)
        searches = [f"{namespace}.svc.{cluster_domain}", f"svc.{cluster_domain}", cluster_domain]
        options = [("ndots", "5")]
    elif policy != "None":
        return None  # Default (or ClusterFirst on the host network): the node's own resolv.conf
    for server in extra.get("nameservers") or []:
        if server not in nameservers:
            nameservers.append(str(server))
    for domain in extra.get("searches") or []:
        if domain not in searches:
            searches.append(str(domain))
    for option in extra.get("options") or []:
        if isinstance(option, dict) and option.get("name"):
            value = option.get("value")
            options.append((str(option["name"]), None if value is None else str(value)))
    searches = [s for s in searches if len(s) <= 253][:MAX_SEARCH]
    while searches and len(" ".join(searches)) > MAX_SEARCH_CHARS:
        searches.pop()
    lines = []
    if searches:
        lines.append("search " + " ".join(searches))
    lines += [f"nameserver {server}" for server in nameservers[:MAX_NAMESERVERS]]
    if options:
        lines.append("options " + " ".join(_options(options)))
    return "\n".join(lines) + "\n"

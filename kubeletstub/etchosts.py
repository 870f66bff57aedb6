"""The files kubelet writes for every pod and mounts into each of its containers: /etc/hosts (kubelet's
managed hosts file, pkg/kubelet/kubelet_pods.go managedHostsFileContent), /etc/hostname, and
/etc/resolv.conf (`dns.py` computes it). Pure text; the container manager writes them into the pod's
directory (kubelet's /var/lib/kubelet/pods/<uid>/etc-hosts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def hosts_file(pod: Mapping[str, Any], *, ip: str, hostname: str, cluster_domain: str) -> str:
    """kubelet's managed hosts file: localhost entries, the pod's own address and name (its FQDN first
    when it has a subdomain), then spec.hostAliases."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    lines = ["# Kubernetes-managed hosts file.", "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
             "fe00::0\tip6-localnet", "fe00::0\tip6-mcastprefix", "fe00::1\tip6-allnodes", "fe00::2\tip6-allrouters"]
    if ip:
        subdomain = spec.get("subdomain")
        if subdomain:
            fqdn = f"{hostname}.{subdomain}.{meta.get('namespace') or 'default'}.svc.{cluster_domain}"
            lines.append(f"{ip}\t{fqdn}\t{hostname}")
        else:
            lines.append(f"{ip}\t{hostname}")
    aliases = spec.get("hostAliases") or []
    if aliases:
        lines.append("")
        lines.append("# Entries added by HostAliases.")
        for alias in aliases:
            lines.append(f"{alias.get('ip')}\t" + "\t".join(alias.get("hostnames") or []))
    return "\n".join(lines) + "\n"

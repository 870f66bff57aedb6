"""Names in kube-proxy's nftables table: the one place they come from.

Unlike the iptables mode's `KUBE-SVC-<16 chars>` (hashing.py), nftables chains carry a readable
name after a short hash (pkg/proxy/nftables/proxier.go, `hashAndTruncate`,
`servicePortChainNameBase`, `servicePortEndpointChainNameBase`):

    base(name)  = base32(sha256(name))[:8] + "-" + name      # truncated to 240 chars with "..."
    service     = "<namespace>/<service>/<protocol>/<port name>"
    endpoint    = service + "__<ip>/<port>"                   # ":" of an IPv6 address -> "."

    service-<base>, local-<base>, external-<base>, firewall-<base>   per service port
    endpoint-<base>, affinity-<base> (a set)                         per endpoint

e.g. "ns1/svc1/tcp/p80" -> service-ULMVA6XW-ns1/svc1/tcp/p80, and its endpoint 10.180.0.1:80 ->
endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 (upstream's TestOverallNFTablesRules).
The "/" marks a per-service chain: no fixed chain has one, which is how kube-proxy tells the chains
it may delete as stale (`isServiceChainName`). Pure: no clock, no I/O.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from dataclasses import dataclass

SERVICE_PREFIX = "service-"
LOCAL_PREFIX = "local-"
EXTERNAL_PREFIX = "external-"
FIREWALL_PREFIX = "firewall-"
ENDPOINT_PREFIX = "endpoint-"
AFFINITY_PREFIX = "affinity-"

# knftables.NameLengthMax (256) less the longest prefix kube-proxy reserves (16, hyphen included).
NAME_LENGTH_MAX = 256
CHAIN_NAME_PREFIX_LENGTH_MAX = 16
CHAIN_NAME_BASE_LENGTH_MAX = NAME_LENGTH_MAX - CHAIN_NAME_PREFIX_LENGTH_MAX


@functools.lru_cache(maxsize=1 << 18)
def hash_and_truncate(name: str) -> str:
    """`hashAndTruncate`: the first 8 characters of the standard base32 of SHA-256(name), a hyphen,
    the name; cut to 240 characters ending in "..." if longer. The hash keeps a cut name unique and
    makes endpoint chains that differ in one digit easy to tell apart. Pure (memoized).

    8 base32 characters are exactly the encoding of the digest's first 5 bytes.
    """
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    out = base64.b32encode(digest[:5]).decode("ascii") + "-" + name
    if len(out) > CHAIN_NAME_BASE_LENGTH_MAX:
        out = out[:CHAIN_NAME_BASE_LENGTH_MAX - 3] + "..."
    return out


def service_port_base(namespace: str, name: str, protocol: str, port_name: str) -> str:
    """`servicePortChainNameBase`: "HASH-ns/svc/proto/port". Namespace, Service and port names are
    DNS labels and the protocol is tcp/udp/sctp, so all may appear in a chain name as they are; "/"
    (allowed in chain names, never in those inputs) separates them."""
    return hash_and_truncate(f"{namespace}/{name}/{protocol.lower()}/{port_name}")


def endpoint_base(namespace: str, name: str, protocol: str, port_name: str, ip: str, port: int) -> str:
    """`servicePortEndpointChainNameBase`: "HASH-ns/svc/proto/port__ip/port". An IPv6 address's
    colons are not allowed in a chain name and become dots (fd00:10:180::1 -> fd00.10.180..1)."""
    return hash_and_truncate(f"{namespace}/{name}/{protocol.lower()}/{port_name}__{ip.replace(':', '.')}/{port}")


@dataclass(frozen=True)
class ServicePortChains:
    """The four per-service-port chain names; they share one base."""

    cluster: str  # service-: endpoints under "Cluster" traffic policy
    local: str  # local-: endpoints under "Local" traffic policy
    external: str  # external-: NodePort, externalIPs and load-balancer IPs land here
    firewall: str  # firewall-: loadBalancerSourceRanges


def service_port_chains(namespace: str, name: str, protocol: str, port_name: str) -> ServicePortChains:
    base = service_port_base(namespace, name, protocol, port_name)
    return ServicePortChains(cluster=SERVICE_PREFIX + base, local=LOCAL_PREFIX + base,
                             external=EXTERNAL_PREFIX + base, firewall=FIREWALL_PREFIX + base)


def is_service_chain(chain: str) -> bool:
    """`isServiceChainName`: every per-service and per-endpoint chain has a "/" in it."""
    return "/" in chain


def is_affinity_set(name: str) -> bool:
    """`isAffinitySetName`."""
    return name.startswith(AFFINITY_PREFIX)

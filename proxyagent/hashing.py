"""Chain names for kube-proxy's iptables mode: the one place they come from.

kube-proxy names its per-service and per-endpoint chains after a hash so that names stay under
iptables' 28-character limit and are stable across restarts (pkg/proxy/iptables/proxier.go,
`portProtoHash` and `servicePortEndpointChainName`):

    hash16(s) = base32(sha256(s))[:16]        # RFC 4648 alphabet, like Go's base32.StdEncoding

    KUBE-SVC-/KUBE-SVL-/KUBE-EXT-/KUBE-FW-  + hash16(svcPortName + protocol)
    KUBE-SEP-                                + hash16(svcPortName + protocol + "ip:port")

e.g. "ns1/svc1:p80" + "tcp" -> KUBE-SVC-XPGD46QRK7WJZT7O, and with "10.180.0.1:80" appended
-> KUBE-SEP-SXIVWICOYRO3J4NJ.

Everything here is pure: no clock, no I/O; `hash16` is memoized, which changes its cost only.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from dataclasses import dataclass

SVC_PREFIX = "KUBE-SVC-"
SVL_PREFIX = "KUBE-SVL-"
EXT_PREFIX = "KUBE-EXT-"
FW_PREFIX = "KUBE-FW-"
SEP_PREFIX = "KUBE-SEP-"

# The chains kube-proxy owns for stale-chain deletion (`isServiceChainName`): any nat chain with
# one of these prefixes that is not active after a sync is flushed and deleted.
SERVICE_CHAIN_PREFIXES: tuple[str, ...] = (SVC_PREFIX, SVL_PREFIX, SEP_PREFIX, FW_PREFIX, EXT_PREFIX)


# Chain names repeat from one sync to the next, so remembering them saves most of a sync's hashing;
# the bound keeps a long-lived agent with a lot of churn from growing without limit.
_HASH_CACHE_SIZE = 1 << 18


@functools.lru_cache(maxsize=_HASH_CACHE_SIZE)
def hash16(s: str) -> str:
    """First 16 characters of the standard base32 encoding of SHA-256(s). Pure.

    Base32 turns every 5 bytes into 8 characters, so the first 16 characters of the encoded
    32-byte digest are exactly the encoding of its first 10 bytes (no padding): encoding only those
    is the same string at a third of the cost.
    """
    return base64.b32encode(hashlib.sha256(s.encode("utf-8")).digest()[:10]).decode("ascii")


@dataclass(frozen=True)
class ServiceChains:
    """The four per-service-port chain names; they share one hash."""

    svc: str  # KUBE-SVC-: dispatch to endpoints under "Cluster" traffic policy
    svl: str  # KUBE-SVL-: dispatch to local endpoints under "Local" traffic policy
    ext: str  # KUBE-EXT-: "external destinations" (NodePort, externalIPs, LB IPs)
    fw: str  # KUBE-FW-: loadBalancerSourceRanges firewall


def _proto(protocol: str) -> str:
    # kube-proxy lower-cases the protocol before hashing (strings.ToLower in newServiceInfo and
    # newEndpointInfo); "TCP" would give a different, never-used hash.
    return protocol.lower()


def service_chain_names(svc_port_name: str, protocol: str) -> ServiceChains:
    """Chain names for a service port, e.g. ("ns1/svc1:p80", "tcp"). Pure."""
    h = hash16(svc_port_name + _proto(protocol))
    return ServiceChains(svc=SVC_PREFIX + h, svl=SVL_PREFIX + h, ext=EXT_PREFIX + h, fw=FW_PREFIX + h)


def endpoint_chain_name(svc_port_name: str, protocol: str, endpoint: str) -> str:
    """KUBE-SEP chain for one endpoint; `endpoint` is "ip:port" ("[ip]:port" for IPv6). Pure."""
    return SEP_PREFIX + hash16(svc_port_name + _proto(protocol) + endpoint)


def is_service_chain(chain: str) -> bool:
    """True for the nat chains kube-proxy creates per service/endpoint (and may delete)."""
    return chain.startswith(SERVICE_CHAIN_PREFIXES)

"""Where pods/proxy and services/proxy send a request: kube-apiserver's ResourceLocation for pods
(pkg/registry/core/pod/strategy.go) and for services (pkg/registry/core/service/storage/storage.go),
with their checks and their words.

The name in the path carries an optional scheme and port, `[scheme:]name[:port]`
(utilnet.SplitSchemeNamePort): `web`, `web:80`, `web:http`, `https:web:443`. A pod's port defaults to
its first container's first declared port (none: the scheme's default); a service's port, when a
number, is looked up among the Service's ports and replaced by that port's name, which then picks the
endpoint port of the same name. The address is a ready endpoint address (Endpoints `subsets[].addresses`,
never `notReadyAddresses`) backed by a pod that still has that IP, picked at random as kube picks it.

Pure: the objects are read by the caller (routers/proxy.py), which fetches exactly what kube's
ResourceLocation fetches, in the same order, so a missing object is kube's NotFound for that object.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubelab.validation import go_quote, is_ascii_digits

from . import errors

VALID_SCHEMES = frozenset({"", "http", "https"})


@dataclass(frozen=True, slots=True)
class ProxyTarget:
    """Scheme ("" is http), host (an IP) and port ("" for the scheme's default) of a proxied request."""

    scheme: str
    host: str
    port: str

    @property
    def default_port(self) -> int:
        return 443 if self.scheme == "https" else 80

    @property
    def tcp_port(self) -> int:
        return int(self.port) if self.port else self.default_port

    @property
    def netloc(self) -> str:
        """net.JoinHostPort, or the bare host when no port was given (as kube's location keeps it)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}" if self.port else host

    @property
    def dial_netloc(self) -> str:
        """The address a dial error names (Go's `dial tcp HOST:PORT`): always with the port."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.tcp_port}"


def split_scheme_name_port(text: str) -> tuple[str, str, str] | None:
    """utilnet.SplitSchemeNamePort: (scheme, name, port) of `name`, `name:port` or `scheme:name:port`;
    None when there are more parts, the name is empty or the scheme is neither http nor https."""
    parts = text.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        return None
    if not name or scheme not in VALID_SCHEMES:
        return None
    return scheme, name, port


def parse_id(resource: str, text: str) -> tuple[str, str, str]:
    """The request's `[scheme:]name[:port]`, or kube's 400 (`invalid pod request "a:b:c:d"`)."""
    parsed = split_scheme_name_port(text)
    if parsed is None:
        raise errors.bad_request(f"invalid {resource} request {go_quote(text)}")
    return parsed


def _is_global_unicast(text: str) -> bool:
    """net.IP.IsGlobalUnicast: not unspecified, loopback, link-local, multicast or the IPv4 broadcast."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    if ip.is_unspecified or ip.is_loopback or ip.is_link_local or ip.is_multicast:
        return False
    return not (isinstance(ip, ipaddress.IPv4Address) and ip == ipaddress.IPv4Address("255.255.255.255"))


def pod_ip(pod: Mapping[str, Any]) -> str:
    """getPodIP: the first of status.podIPs ("" when it has none)."""
    status = pod.get("status") or {}
    ips = [entry.get("ip") for entry in status.get("podIPs") or [] if isinstance(entry, dict)]
    if ips and isinstance(ips[0], str):
        return ips[0]
    single = status.get("podIP")  # a pod written before podIPs existed
    return single if isinstance(single, str) else ""


def pod_location(pod: Mapping[str, Any], *, scheme: str, port: str) -> ProxyTarget:
    """pod.ResourceLocation once the pod is read: the port defaults to the first port any container
    declares; the pod's IP must be a global unicast address (kube's 400 "address not allowed": a pod
    without an IP yet, or one claiming the API server's own loopback)."""
    if not port:
        for container in (pod.get("spec") or {}).get("containers") or []:
            ports = container.get("ports") if isinstance(container, dict) else None
            if ports and isinstance(ports[0], dict) and ports[0].get("containerPort") is not None:
                port = str(ports[0]["containerPort"])
                break
    ip = pod_ip(pod)
    if not _is_global_unicast(ip):
        raise errors.bad_request("address not allowed")
    return ProxyTarget(scheme, ip, port)


def service_port_name(service: Mapping[str, Any], name: str, number: int) -> str:
    """The name of the Service port numbered `number`, or kube's 503."""
    for entry in (service.get("spec") or {}).get("ports") or []:
        if isinstance(entry, dict) and entry.get("port") == number:
            return str(entry.get("name") or "")
    raise errors.StatusError(503, "ServiceUnavailable", f"no service port {number} found for service {go_quote(name)}")


def numeric_port(port: str) -> int | None:
    """strconv.ParseInt(port, 10, 64) when it succeeds (a leading sign is allowed), else None."""
    text = port[1:] if port[:1] in ("+", "-") else port
    if not is_ascii_digits(text):
        return None
    value = int(port)
    return value if -(2**63) <= value < 2**63 else None


def no_endpoints(name: str) -> errors.StatusError:
    return errors.StatusError(503, "ServiceUnavailable", f"no endpoints available for service {go_quote(name)}")


def service_candidates(endpoints: Mapping[str, Any], *, name: str, port_name: str,
                       rng: random.Random | None = None) -> Iterator[tuple[dict[str, Any], int]]:
    """The rest of the service's ResourceLocation once its Endpoints are read, as the (address, port)
    pairs it tries in order: from a random subset on, the endpoint port named `port_name` and the ready
    addresses from a random one on. The caller takes the first whose pod still has the address
    (`is_valid_address`) and answers `no_endpoints(request id)` when none does; no subsets at all is
    503 at once."""
    pick = rng or random
    subsets = [s for s in endpoints.get("subsets") or [] if isinstance(s, dict)]
    if not subsets:
        raise no_endpoints(name)
    seed = pick.randrange(len(subsets))
    for offset in range(len(subsets)):
        subset = subsets[(seed + offset) % len(subsets)]
        addresses = [a for a in subset.get("addresses") or [] if isinstance(a, dict)]
        if not addresses:
            continue
        for entry in subset.get("ports") or []:
            if not isinstance(entry, dict) or (entry.get("name") or "") != port_name:
                continue
            if not isinstance(entry.get("port"), int):
                continue
            start = pick.randrange(len(addresses))
            for attempt in range(len(addresses)):
                yield addresses[(start + attempt) % len(addresses)], entry["port"]


def address_pod(address: Mapping[str, Any], namespace: str) -> str | None:
    """The pod an endpoint address names, if it is a pod of the service's own namespace (isValidAddress's
    first checks); None: the address is skipped."""
    ref = address.get("targetRef")
    if not isinstance(ref, dict) or ref.get("namespace") != namespace or not ref.get("name"):
        return None
    return str(ref["name"])


def all_pod_ips(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """Every IP of status.podIPs (the pod's single podIP for one written without them)."""
    status = pod.get("status") or {}
    ips = tuple(str(e.get("ip")) for e in status.get("podIPs") or [] if isinstance(e, dict) and e.get("ip"))
    return ips or ((str(status["podIP"]),) if status.get("podIP") else ())


__all__ = ["ProxyTarget", "address_pod", "all_pod_ips", "no_endpoints", "numeric_port", "parse_id", "pod_location",
           "service_candidates", "service_port_name", "split_scheme_name_port"]

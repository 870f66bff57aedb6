"""What an object must be before any of it reaches an iptables rule, and the objects left out for it.

kube-proxy trusts the API server's validation: every name, port and protocol it writes into a rule was
checked when the object was stored. kubelab checks again here, with the same validators, because one
object that slipped past (written straight into etcd, or stored by an older, laxer server) would
otherwise reach the payload, and iptables-restore refuses a payload as a whole: a Service named
"evil\\n" once left every node without rules for every Service, retrying the same failing restore
each sync period. An object that fails is left out, as if it had been deleted; everything else is
programmed as usual.

`service_problems` and `slice_problems` are pure. `Screen` remembers which objects are left out, so
that each is logged once when it is first left out (not on every sync) and once when it comes back,
and counts them for the agent's metrics.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from kubelab import validation
from kubelab.models import EndpointSlice, Service

log = logging.getLogger(__name__)

PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})
MAX_STICKY_SECONDS = 86400  # ValidateService: 0 < sessionAffinityConfig.clientIP.timeoutSeconds <= 86400


def _name_problems(what: str, value: str | None, check: Callable[[str], list[str]]) -> list[str]:
    return [f"{what} {value!r}: {p}" for p in check(value or "")]


def _port_number_problems(what: str, value: int | None, *, zero_ok: bool = False) -> list[str]:
    if value is None or (zero_ok and value == 0) or 1 <= value <= 65535:
        return []
    return [f"{what} {value}: must be between 1 and 65535, inclusive"]


def _protocol_problems(what: str, value: str | None) -> list[str]:
    return [] if value is None or value in PROTOCOLS else [f"{what} {value!r}: not one of SCTP, TCP, UDP"]


def service_problems(service: Service) -> list[str]:
    """Why `service` must not reach a rule, in kube's words; empty if it may. Checks every field the
    rules spell out as text: the namespace and name (comments, chain hashes), the port names, protocols
    and numbers, and the affinity timeout. Addresses need no check here: the renderer parses and
    re-prints them, and drops what does not parse. Pure."""
    problems = _name_problems("namespace", service.metadata.namespace, validation.dns1123_label_errors)
    problems += _name_problems("name", service.metadata.name, validation.dns1035_label_errors)
    spec = service.spec
    if spec is None:
        return problems
    for i, port in enumerate(spec.ports or []):
        if port.name:
            problems += _name_problems(f"spec.ports[{i}].name", port.name, validation.dns1123_label_errors)
        problems += _protocol_problems(f"spec.ports[{i}].protocol", port.protocol)
        if port.port is None:
            problems.append(f"spec.ports[{i}].port: Required value")
        problems += _port_number_problems(f"spec.ports[{i}].port", port.port)
        problems += _port_number_problems(f"spec.ports[{i}].nodePort", port.node_port, zero_ok=True)
    problems += _port_number_problems("spec.healthCheckNodePort", spec.health_check_node_port, zero_ok=True)
    config = spec.session_affinity_config
    timeout = config.client_ip.timeout_seconds if config and config.client_ip else None
    if spec.session_affinity == "ClientIP" and timeout is not None and not 0 < timeout <= MAX_STICKY_SECONDS:
        problems.append(f"spec.sessionAffinityConfig.clientIP.timeoutSeconds {timeout}: must be greater than 0 "
                        f"and less than {MAX_STICKY_SECONDS}")
    return problems


def slice_problems(es: EndpointSlice) -> list[str]:
    """Why the endpoints of `es` must not reach a rule; empty if they may. The rules spell out each
    endpoint's address (parsed and re-printed by the renderer) and port, and the port's name and
    protocol pick the Service port it belongs to. Pure."""
    problems = _name_problems("namespace", es.metadata.namespace, validation.dns1123_label_errors)
    for i, port in enumerate(es.ports or []):
        if port.name:
            problems += _name_problems(f"ports[{i}].name", port.name, validation.dns1123_label_errors)
        problems += _protocol_problems(f"ports[{i}].protocol", port.protocol)
        problems += _port_number_problems(f"ports[{i}].port", port.port)
    return problems


@dataclass
class Screen:
    """The objects now left out of the rules, by (kind, "namespace/name"), with their problems."""

    node_name: str = ""
    skipped: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    on_skip: Callable[[str], None] | None = None  # called with the kind each time an object is left out

    def admit(self, kind: str, key: str, problems: list[str]) -> bool:
        """Record the verdict on the newest version of an object: True if it may be programmed. Logs a
        change of verdict (or of the problems) once, never a verdict it already gave."""
        before = self.skipped.get((kind, key))
        if not problems:
            if before is not None:
                del self.skipped[(kind, key)]
                log.info("%s: %s %r is valid again; programming it", self.node_name, kind, key)
            return True
        if before != problems:
            self.skipped[(kind, key)] = problems
            log.warning("%s: leaving %s %r out of the proxy rules, it is invalid: %s", self.node_name, kind,
                        key, "; ".join(problems))
            if before is None and self.on_skip is not None:
                self.on_skip(kind)
        return False

    def forget(self, kind: str, key: str) -> None:
        """The object was deleted: it is no longer left out."""
        if self.skipped.pop((kind, key), None) is not None:
            log.info("%s: invalid %s %r was deleted", self.node_name, kind, key)

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.skipped if k == kind)

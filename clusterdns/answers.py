"""Answers: one DNS query in, one DNS response out, from a `Zone` (CoreDNS's kubernetes plugin, as kubeadm
configures it). Pure: dnspython builds and parses every message; nothing here touches a socket.

Names under `<zone>` (default cluster.local), matched case-insensitively:

    <svc>.<ns>.svc.<zone>               A/AAAA: the ClusterIP(s); headless: every ready endpoint (NXDOMAIN
                                        when there is none); ExternalName: a CNAME; SRV: one per port
    <ep>.<svc>.<ns>.svc.<zone>          A: the ready endpoint whose hostname (or dashed IP) is <ep>
    _<port>._<proto>.<svc>.<ns>.svc...  SRV for a named port (priority 0, weight floor(100/N) but at least
                                        1), the targets' addresses in the additional section
    a-b-c-d.<ns>.pod.<zone>             A a.b.c.d whenever <ns> exists (`pods insecure`, kubeadm's choice)
    dns-version.<zone>                  TXT "1.1.0"

A name that exists without the asked type is NODATA (NOERROR, empty answer), an unknown one NXDOMAIN;
both carry the zone's SOA in the authority section. PTR answers the reverse of ClusterIPs and of
endpoints with a hostname. Everything else is REFUSED: kubelab has no upstream to forward to, and no
query may leave the lab. Before the informers have listed, every answer is SERVFAIL.

TTL: 30 s, kubeadm's Corefile (`ttl 30`), not the plugin's default of 5: kubelab follows kubeadm's
shapes (10.96.0.10, `pods insecure`), and pods resolve through glibc, which caches nothing anyway.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.reversename
import dns.rrset

from .zone import EndpointAddress, Port, ServiceRecord, Zone

TTL = 30
VERSION_TTL = 28800
SPEC_VERSION = "1.1.0"
DNS_SERVICE = ("kube-system", "kube-dns")

A, AAAA, SRV, TXT, SOA, NS, CNAME, PTR, ANY = (dns.rdatatype.A, dns.rdatatype.AAAA, dns.rdatatype.SRV,
                                               dns.rdatatype.TXT, dns.rdatatype.SOA, dns.rdatatype.NS,
                                               dns.rdatatype.CNAME, dns.rdatatype.PTR, dns.rdatatype.ANY)


@dataclass
class Records:
    """What exists at one name: record texts by type, and the additional section for SRV targets."""

    by_type: dict[dns.rdatatype.RdataType, list[str]] = field(default_factory=dict)
    ttl: int = TTL
    additional: list[tuple[str, dns.rdatatype.RdataType, str]] = field(default_factory=list)

    def add(self, rdtype: dns.rdatatype.RdataType, text: str) -> None:
        self.by_type.setdefault(rdtype, [])
        if text not in self.by_type[rdtype]:
            self.by_type[rdtype].append(text)


def _address_type(ip: str) -> dns.rdatatype.RdataType:
    return A if ipaddress.ip_address(ip).version == 4 else AAAA


def _fqdn(*labels: str) -> str:
    return ".".join(labels) + "."


def _srv(records: Records, targets: list[tuple[int, str, str]]) -> None:
    """SRV records for (port, target, target IP). CoreDNS's weight is floor(100/N), at least 1, with N
    counted before identical records are merged (kube-dns's 53/UDP and 53/TCP give one record of 33)."""
    weight = max(1, 100 // len(targets)) if targets else 0
    for port, target, ip in dict.fromkeys(targets):
        records.add(SRV, f"0 {weight} {port} {target}")
        extra = (target, _address_type(ip), ip)
        if extra not in records.additional:
            records.additional.append(extra)


def _port_matches(port: Port, name: str, protocol: str) -> bool:
    wild = ("*", "any")
    return ((name in wild or port.name.lower() == name)
            and (protocol in wild or port.protocol.lower() == protocol))


def service_records(zone: Zone, svc: ServiceRecord, *, port: str | None = None, protocol: str | None = None
                    ) -> Records | None:
    """The records at `<svc>.<ns>.svc.<zone>`, or at `_<port>._<proto>.<svc>...` when port and protocol
    are given. None means NXDOMAIN."""
    records = Records()
    name = _fqdn(svc.name, svc.namespace, "svc", zone.domain)
    if svc.external_name:
        if port is not None:
            return None  # ExternalName Services have no SRV records
        records.add(CNAME, svc.external_name + ".")
        return records
    ports = [p for p in svc.ports if port is None or _port_matches(p, port, protocol or "")]
    if port is not None and not ports:
        return None
    if not svc.headless:
        for ip in svc.cluster_ips:
            records.add(_address_type(ip), ip)
        _srv(records, [(p.port, name, ip) for p in ports for ip in svc.cluster_ips[:1]])
        return records
    endpoints = list(svc.endpoints)
    if port is not None:
        endpoints = [e for e in endpoints if any(_port_matches(p, port, protocol or "") for p in e.ports)]
    if not endpoints:
        return None  # a headless Service without a ready endpoint does not exist
    targets = []
    for endpoint in endpoints:
        records.add(_address_type(endpoint.ip), endpoint.ip)
        for p in endpoint.ports:
            if port is None or _port_matches(p, port, protocol or ""):
                targets.append((p.port, _fqdn(endpoint.label, svc.name, svc.namespace, "svc", zone.domain),
                                endpoint.ip))
    _srv(records, targets)
    return records


def _endpoint_records(svc: ServiceRecord, label: str) -> Records | None:
    matches: list[EndpointAddress] = [e for e in svc.endpoints if e.label.lower() == label]
    if not matches:
        return None
    records = Records()
    for endpoint in matches:
        records.add(_address_type(endpoint.ip), endpoint.ip)
    return records


def _pod_records(zone: Zone, dashed: str, namespace: str) -> Records | None:
    if namespace not in zone.namespaces:
        return None
    try:
        ip = ipaddress.IPv4Address(dashed.replace("-", "."))
    except ValueError:
        return None
    records = Records()
    records.add(A, str(ip))
    return records


def lookup(zone: Zone, labels: list[str]) -> Records | None:
    """Every record at the name `labels` (relative to the zone, lowercase, leftmost first); None for
    NXDOMAIN. A Records without types is a name that exists with nothing to answer (NODATA)."""
    if not labels:
        records = Records()
        records.add(SOA, soa_text(zone))
        records.add(NS, _fqdn("ns", "dns", zone.domain))
        return records
    if labels == ["dns-version"]:
        records = Records(ttl=VERSION_TTL)
        records.add(TXT, f'"{SPEC_VERSION}"')
        return records
    if labels == ["ns", "dns"]:
        dns_service = zone.services.get(DNS_SERVICE)
        records = Records()
        for ip in dns_service.cluster_ips if dns_service else ():
            records.add(_address_type(ip), ip)
        return records
    kind = labels[-1]
    if kind not in ("svc", "pod"):
        return None
    if len(labels) == 1:
        return Records()
    namespace = labels[-2]
    if len(labels) == 2:
        return Records() if namespace in zone.namespaces else None
    if kind == "pod":
        return _pod_records(zone, labels[0], namespace) if len(labels) == 3 else None
    svc = zone.services.get((namespace, labels[-3]))
    if svc is None:
        return None
    if len(labels) == 3:
        return service_records(zone, svc)
    if len(labels) == 4:
        return _endpoint_records(svc, labels[0])
    if len(labels) == 5:
        return service_records(zone, svc, port=labels[0].removeprefix("_"),
                               protocol=labels[1].removeprefix("_"))
    return None


def soa_text(zone: Zone, ttl: int = TTL) -> str:
    """CoreDNS's SOA: ns.dns.<zone>. hostmaster.<zone>. serial 7200 1800 86400 <ttl>."""
    return f"ns.dns.{zone.domain}. hostmaster.{zone.domain}. {zone.serial} 7200 1800 86400 {ttl}"


def reverse_lookup(zone: Zone, address: str) -> list[str]:
    """PTR targets for an IP: the Service of a ClusterIP, or `<hostname>.<svc>...` of an endpoint that
    has a hostname (CoreDNS gives an endpoint without one no PTR)."""
    found = []
    for svc in zone.services.values():
        if address in svc.cluster_ips:
            found.append(_fqdn(svc.name, svc.namespace, "svc", zone.domain))
        for endpoint in svc.endpoints:
            if endpoint.ip == address and endpoint.hostname:
                found.append(_fqdn(endpoint.hostname, svc.name, svc.namespace, "svc", zone.domain))
    return found


def _rrset(name: dns.name.Name | str, ttl: int, rdtype: dns.rdatatype.RdataType, texts: list[str]
           ) -> dns.rrset.RRset:
    return dns.rrset.from_text_list(name, ttl, dns.rdataclass.IN, rdtype, texts)


def answer(zone: Zone, query: dns.message.Message, *, ttl: int = TTL) -> dns.message.Message:
    """The response to `query`. Pure."""
    response = dns.message.make_response(query)
    if query.opcode() != dns.opcode.QUERY:
        response.set_rcode(dns.rcode.NOTIMP)
        return response
    if len(query.question) != 1:
        response.set_rcode(dns.rcode.FORMERR)
        return response
    question = query.question[0]
    qname, qtype = question.name, question.rdtype
    origin = dns.name.from_text(zone.domain)
    if qtype in (dns.rdatatype.AXFR, dns.rdatatype.IXFR) or question.rdclass != dns.rdataclass.IN:
        response.set_rcode(dns.rcode.REFUSED)
        return response
    if qname.is_subdomain(dns.name.from_text("in-addr.arpa.")) or qname.is_subdomain(
            dns.name.from_text("ip6.arpa.")):
        return _answer_reverse(zone, response, qname, qtype, ttl)
    if not qname.is_subdomain(origin):
        response.set_rcode(dns.rcode.REFUSED)
        return response
    if not zone.synced:
        response.set_rcode(dns.rcode.SERVFAIL)
        return response
    response.flags |= dns.flags.AA
    labels = [label.decode(errors="replace").lower() for label in qname.relativize(origin).labels]
    records = lookup(zone, labels)
    soa = _rrset(origin, min(ttl, 300), SOA, [soa_text(zone, ttl)])
    if records is None:
        response.set_rcode(dns.rcode.NXDOMAIN)
        response.authority.append(soa)
        return response
    record_ttl = records.ttl if records.ttl != TTL else ttl
    wanted = list(records.by_type) if qtype == ANY else [qtype]
    if qtype not in records.by_type and CNAME in records.by_type:
        wanted = [CNAME]  # the alias answers every type; the target is outside the cluster's zone
    for rdtype in wanted:
        texts = records.by_type.get(rdtype)
        if texts:
            rr_ttl = min(ttl, 300) if rdtype == SOA else record_ttl
            response.answer.append(_rrset(qname, rr_ttl, rdtype, texts))
    if not response.answer:
        response.authority.append(soa)  # NODATA
        return response
    if SRV in wanted:
        for target, rdtype, text in records.additional:
            response.additional.append(_rrset(target, ttl, rdtype, [text]))
    return response


def _answer_reverse(zone: Zone, response: dns.message.Message, qname: dns.name.Name,
                    qtype: dns.rdatatype.RdataType, ttl: int) -> dns.message.Message:
    try:
        address = dns.reversename.to_address(qname)
    except (dns.exception.SyntaxError, ValueError):
        address = ""
    targets = reverse_lookup(zone, address) if address and zone.synced else []
    if not targets or qtype not in (PTR, ANY):
        # kubeadm hands reverse misses to `forward`; kubelab has no upstream, so it declines.
        response.set_rcode(dns.rcode.REFUSED)
        return response
    response.flags |= dns.flags.AA
    response.answer.append(_rrset(qname, ttl, PTR, targets))
    return response

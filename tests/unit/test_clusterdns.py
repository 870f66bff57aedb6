"""Cluster DNS answers from an in-memory zone (clusterdns.zone + clusterdns.answers), and a pod's resolv.conf.

Queries and responses are real DNS messages built and parsed by dnspython; the server's framing is
checked through DnsServer.handle with wire bytes.
"""

from __future__ import annotations

from typing import Any

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from clusterdns.answers import answer
from clusterdns.server import DnsServer
from clusterdns.zone import Zone, build_zone
from kubelab.models import EndpointSlice, Namespace, Pod, Service
from kubeletstub.dns import pod_resolv_conf


def service(name: str, namespace: str = "default", *, cluster_ip: str = "10.96.0.20",
            ports: list[dict[str, Any]] | None = None, **spec: Any) -> Service:
    return Service.model_validate({"metadata": {"name": name, "namespace": namespace},
                                   "spec": {"clusterIP": cluster_ip, "clusterIPs": [cluster_ip] if cluster_ip != "None"
                                            else ["None"], "ports": ports or [], **spec}})


def endpoint_slice(service_name: str, endpoints: list[dict[str, Any]], ports: list[dict[str, Any]],
                   namespace: str = "default") -> EndpointSlice:
    return EndpointSlice.model_validate({
        "metadata": {"name": f"{service_name}-x", "namespace": namespace,
                     "labels": {"kubernetes.io/service-name": service_name}},
        "addressType": "IPv4", "endpoints": endpoints, "ports": ports})


def ep(ip: str, *, ready: bool | None = True, hostname: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"addresses": [ip]}
    if ready is not None:
        data["conditions"] = {"ready": ready}
    if hostname:
        data["hostname"] = hostname
    return data


@pytest.fixture
def zone() -> Zone:
    web = service("web", ports=[{"name": "http", "port": 80, "protocol": "TCP"},
                                {"name": "dns", "port": 53, "protocol": "UDP"}, {"port": 8080, "protocol": "TCP"}])
    db = service("db", cluster_ip="None", ports=[{"name": "pg", "port": 5432, "protocol": "TCP"}])
    empty = service("empty", cluster_ip="None", ports=[{"name": "pg", "port": 5432, "protocol": "TCP"}])
    alias = service("alias", cluster_ip="", type="ExternalName", externalName="db.example.com")
    slices = [endpoint_slice("db", [ep("10.244.2.5", hostname="db-0"), ep("10.244.1.5"), ep("10.244.3.5", ready=False),
                                    ep("10.244.3.6", ready=None)],
                             [{"name": "pg", "port": 5432, "protocol": "TCP"}]),
              endpoint_slice("empty", [ep("10.244.1.9", ready=False)], [{"name": "pg", "port": 5432}]),
              endpoint_slice("web", [ep("10.244.1.7")], [{"name": "http", "port": 8000, "protocol": "TCP"}])]
    namespaces = [Namespace.model_validate({"metadata": {"name": n}}) for n in ("default", "kube-system", "quiet")]
    return build_zone([web, db, empty, alias], slices, namespaces, serial=1700000000)


def ask(zone: Zone, name: str, rdtype: str) -> dns.message.Message:
    return answer(zone, dns.message.make_query(name, rdtype))


def records(response: dns.message.Message, section: str = "answer") -> list[str]:
    return sorted(f"{rrset.name} {rrset.ttl} {dns.rdatatype.to_text(rrset.rdtype)} {rd.to_text()}"
                  for rrset in getattr(response, section) for rd in rrset)


SOA = "cluster.local. 30 SOA ns.dns.cluster.local. hostmaster.cluster.local. 1700000000 7200 1800 86400 30"


def test_service_a_record(zone: Zone) -> None:
    response = ask(zone, "web.default.svc.cluster.local.", "A")
    assert response.rcode() == dns.rcode.NOERROR
    assert response.flags & dns.flags.AA
    assert records(response) == ["web.default.svc.cluster.local. 30 A 10.96.0.20"]


def test_names_match_case_insensitively_and_keep_the_asked_case(zone: Zone) -> None:
    assert records(ask(zone, "WEB.Default.SVC.cluster.local.", "A")) == [
        "WEB.Default.SVC.cluster.local. 30 A 10.96.0.20"]


@pytest.mark.parametrize(("name", "rdtype"), [
    pytest.param("web.default.svc.cluster.local.", "AAAA", id="AAAA of an IPv4 Service"),
    pytest.param("web.default.svc.cluster.local.", "TXT", id="TXT of a Service"),
    pytest.param("default.svc.cluster.local.", "A", id="an existing namespace"),
    pytest.param("svc.cluster.local.", "A", id="svc"),
    pytest.param("cluster.local.", "A", id="the zone apex"),
    pytest.param("10-1-2-3.default.pod.cluster.local.", "AAAA", id="AAAA of a pod record"),
])
def test_nodata_is_noerror_with_the_soa(zone: Zone, name: str, rdtype: str) -> None:
    response = ask(zone, name, rdtype)
    assert response.rcode() == dns.rcode.NOERROR
    assert records(response) == []
    assert records(response, "authority") == [SOA]


@pytest.mark.parametrize("name", [
    pytest.param("nope.default.svc.cluster.local.", id="unknown Service"),
    pytest.param("web.nowhere.svc.cluster.local.", id="unknown namespace"),
    pytest.param("nowhere.svc.cluster.local.", id="unknown namespace alone"),
    pytest.param("empty.default.svc.cluster.local.", id="headless without a ready endpoint"),
    pytest.param("a.b.c.web.default.svc.cluster.local.", id="too many labels"),
    pytest.param("web.default.xyz.cluster.local.", id="neither svc nor pod"),
    pytest.param("10-1-2-3.nowhere.pod.cluster.local.", id="pod record in an unknown namespace"),
    pytest.param("not-an-ip.default.pod.cluster.local.", id="pod record that is no IP"),
    pytest.param("10-244-9-9.db.default.svc.cluster.local.", id="unknown endpoint"),
])
def test_nxdomain_with_the_soa(zone: Zone, name: str) -> None:
    response = ask(zone, name, "A")
    assert response.rcode() == dns.rcode.NXDOMAIN
    assert records(response, "authority") == [SOA]


def test_headless_service_answers_its_ready_endpoints(zone: Zone) -> None:
    # ready unset counts as ready (CoreDNS); ready false does not.
    assert records(ask(zone, "db.default.svc.cluster.local.", "A")) == [
        "db.default.svc.cluster.local. 30 A 10.244.1.5", "db.default.svc.cluster.local. 30 A 10.244.2.5",
        "db.default.svc.cluster.local. 30 A 10.244.3.6"]


def test_endpoint_names(zone: Zone) -> None:
    assert records(ask(zone, "db-0.db.default.svc.cluster.local.", "A")) == [
        "db-0.db.default.svc.cluster.local. 30 A 10.244.2.5"]
    assert records(ask(zone, "10-244-1-5.db.default.svc.cluster.local.", "A")) == [
        "10-244-1-5.db.default.svc.cluster.local. 30 A 10.244.1.5"]
    # CoreDNS answers endpoint names of ClusterIP Services too.
    assert records(ask(zone, "10-244-1-7.web.default.svc.cluster.local.", "A")) == [
        "10-244-1-7.web.default.svc.cluster.local. 30 A 10.244.1.7"]


def test_srv_for_a_named_port(zone: Zone) -> None:
    response = ask(zone, "_http._tcp.web.default.svc.cluster.local.", "SRV")
    assert records(response) == [("_http._tcp.web.default.svc.cluster.local. 30 SRV 0 100 80 "
                                  "web.default.svc.cluster.local.")]
    assert records(response, "additional") == ["web.default.svc.cluster.local. 30 A 10.96.0.20"]
    assert records(ask(zone, "_dns._udp.web.default.svc.cluster.local.", "SRV")) == [
        "_dns._udp.web.default.svc.cluster.local. 30 SRV 0 100 53 web.default.svc.cluster.local."]


def test_srv_needs_a_matching_name_and_protocol(zone: Zone) -> None:
    assert ask(zone, "_http._udp.web.default.svc.cluster.local.", "SRV").rcode() == dns.rcode.NXDOMAIN
    assert ask(zone, "_8080._tcp.web.default.svc.cluster.local.", "SRV").rcode() == dns.rcode.NXDOMAIN


def test_headless_srv_one_per_endpoint_with_weights(zone: Zone) -> None:
    response = ask(zone, "_pg._tcp.db.default.svc.cluster.local.", "SRV")
    assert records(response) == [
        "_pg._tcp.db.default.svc.cluster.local. 30 SRV 0 33 5432 10-244-1-5.db.default.svc.cluster.local.",
        "_pg._tcp.db.default.svc.cluster.local. 30 SRV 0 33 5432 10-244-3-6.db.default.svc.cluster.local.",
        "_pg._tcp.db.default.svc.cluster.local. 30 SRV 0 33 5432 db-0.db.default.svc.cluster.local."]
    assert "db-0.db.default.svc.cluster.local. 30 A 10.244.2.5" in records(response, "additional")


def test_srv_of_a_service_name_lists_every_port(zone: Zone) -> None:
    assert records(ask(zone, "web.default.svc.cluster.local.", "SRV")) == [
        "web.default.svc.cluster.local. 30 SRV 0 33 53 web.default.svc.cluster.local.",
        "web.default.svc.cluster.local. 30 SRV 0 33 80 web.default.svc.cluster.local.",
        "web.default.svc.cluster.local. 30 SRV 0 33 8080 web.default.svc.cluster.local."]


def test_external_name_is_a_cname(zone: Zone) -> None:
    assert records(ask(zone, "alias.default.svc.cluster.local.", "A")) == [
        "alias.default.svc.cluster.local. 30 CNAME db.example.com."]


def test_pod_records_insecure(zone: Zone) -> None:
    assert records(ask(zone, "10-244-7-7.quiet.pod.cluster.local.", "A")) == [
        "10-244-7-7.quiet.pod.cluster.local. 30 A 10.244.7.7"]


def test_spec_version_and_soa(zone: Zone) -> None:
    assert records(ask(zone, "dns-version.cluster.local.", "TXT")) == ['dns-version.cluster.local. 28800 TXT "1.1.0"']
    assert records(ask(zone, "cluster.local.", "SOA")) == [SOA]


def test_reverse_lookup_of_a_cluster_ip(zone: Zone) -> None:
    assert records(ask(zone, "20.0.96.10.in-addr.arpa.", "PTR")) == [
        "20.0.96.10.in-addr.arpa. 30 PTR web.default.svc.cluster.local."]
    assert records(ask(zone, "5.2.244.10.in-addr.arpa.", "PTR")) == [
        "5.2.244.10.in-addr.arpa. 30 PTR db-0.db.default.svc.cluster.local."]


@pytest.mark.parametrize(("name", "rdtype"), [
    pytest.param("example.com.", "A", id="outside the cluster domain: nothing is forwarded"),
    pytest.param("9.9.9.9.in-addr.arpa.", "PTR", id="a reverse miss"),
    pytest.param("cluster.local.", "AXFR", id="zone transfer"),
])
def test_refused(zone: Zone, name: str, rdtype: str) -> None:
    response = ask(zone, name, rdtype)
    assert response.rcode() == dns.rcode.REFUSED
    assert records(response) == []


def test_servfail_before_the_informers_have_listed() -> None:
    assert ask(Zone(), "web.default.svc.cluster.local.", "A").rcode() == dns.rcode.SERVFAIL


def test_server_frames_and_truncates(zone: Zone) -> None:
    many = [service(f"s{i}", cluster_ip=f"10.96.1.{i}") for i in range(1, 3)]
    big = build_zone(many + [service("big", cluster_ip="None", ports=[{"name": "p", "port": 1}])],
                     [endpoint_slice("big", [ep(f"10.244.{i // 200}.{i % 200 + 1}") for i in range(60)],
                                     [{"name": "p", "port": 1}])],
                     [Namespace.model_validate({"metadata": {"name": "default"}})])
    server = DnsServer(lambda q: answer(big, q))
    query = dns.message.make_query("big.default.svc.cluster.local.", "A")
    over_udp = dns.message.from_wire(server.handle(query.to_wire(), tcp=False))
    assert over_udp.flags & dns.flags.TC and not over_udp.answer
    over_tcp = dns.message.from_wire(server.handle(query.to_wire(), tcp=True))
    assert not over_tcp.flags & dns.flags.TC and len(list(over_tcp.answer[0])) == 60
    assert server.handle(b"\x12\x34" + b"\x00" * 3, tcp=False) is None  # not even a header
    garbled = dns.message.from_wire(server.handle(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\xff", tcp=False))
    assert garbled.id == 0x1234 and garbled.rcode() == dns.rcode.FORMERR


def pod(namespace: str = "team-a", **spec: Any) -> Pod:
    return Pod.model_validate({"metadata": {"name": "p", "namespace": namespace},
                               "spec": {"containers": [{"name": "c"}], **spec}})


def test_pod_resolv_conf_cluster_first() -> None:
    assert pod_resolv_conf(pod(), ["10.96.0.10"], "cluster.local") == (
        "search team-a.svc.cluster.local svc.cluster.local cluster.local\n"
        "nameserver 10.96.0.10\n"
        "options ndots:5\n")


def test_pod_resolv_conf_policies() -> None:
    assert pod_resolv_conf(pod(dnsPolicy="Default"), ["10.96.0.10"], "cluster.local") is None
    assert pod_resolv_conf(pod(hostNetwork=True), ["10.96.0.10"], "cluster.local") is None
    assert pod_resolv_conf(pod(), [], "cluster.local") is None  # no cluster DNS: the node's
    custom = pod(dnsPolicy="None", dnsConfig={"nameservers": ["1.2.3.4"], "searches": ["x.test"],
                                              "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]})
    assert pod_resolv_conf(custom, ["10.96.0.10"], "cluster.local") == (
        "search x.test\nnameserver 1.2.3.4\noptions ndots:2 edns0\n")
    merged = pod(dnsConfig={"searches": ["svc.cluster.local", "extra.test"],
                            "options": [{"name": "ndots", "value": "1"}]})
    assert pod_resolv_conf(merged, ["10.96.0.10"], "cluster.local") == (
        "search team-a.svc.cluster.local svc.cluster.local cluster.local extra.test\n"
        "nameserver 10.96.0.10\noptions ndots:1\n")

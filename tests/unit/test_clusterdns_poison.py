"""Cluster DNS answers every other name while objects stored without validation sit in its caches: a
Service whose name or ExternalName could not be a DNS name is left out of the zone, an endpoint hostname
that is not a DNS label is dropped, an address with an IPv6 zone is not an address. Before, such names
reached dnspython's record parser, and a query touching them (the headless Service's SRV answer, the
reverse lookup of any cluster IP) failed with no answer at all."""

from __future__ import annotations

import dns.message
import dns.rcode
import dns.reversename
from test_clusterdns import endpoint_slice, ep, service

from clusterdns.answers import answer
from clusterdns.zone import build_zone
from kubelab.models import Namespace


def test_bad_names_are_left_out_and_every_other_answer_stands() -> None:
    db = service("db", cluster_ip="None", ports=[{"name": "pg", "port": 5432, "protocol": "TCP"}])
    evil = service("evil\n", cluster_ip="10.96.0.66", ports=[{"name": "http", "port": 80, "protocol": "TCP"}])
    alias = service("alias", cluster_ip="", type="ExternalName", externalName="a b.example.com")
    web = service("web", ports=[{"name": "http", "port": 80, "protocol": "TCP"}])
    slices = [endpoint_slice("db", [ep("10.244.2.5", hostname="db-0"), ep("10.244.2.6", hostname="x y\n"),
                                    ep("fe80::1%eth0")], [{"name": "pg", "port": 5432, "protocol": "TCP"}])]
    namespaces = [Namespace.model_validate({"metadata": {"name": "default"}})]
    zone = build_zone([db, evil, alias, web], slices, namespaces, serial=1)
    srv = answer(zone, dns.message.make_query("_pg._tcp.db.default.svc.cluster.local", "SRV"))
    assert srv.rcode() == dns.rcode.NOERROR
    targets = sorted(rd.target.to_text() for rrset in srv.answer for rd in rrset)
    assert targets == ["10-244-2-6.db.default.svc.cluster.local.", "db-0.db.default.svc.cluster.local."]
    ptr = answer(zone, dns.message.make_query(dns.reversename.from_address("10.96.0.20"), "PTR"))
    assert [rd.target.to_text() for rrset in ptr.answer for rd in rrset] == ["web.default.svc.cluster.local."]
    assert answer(zone, dns.message.make_query("alias.default.svc.cluster.local", "A")).rcode() == dns.rcode.NXDOMAIN
    assert zone.skipped == {"default/evil\n": "name 'evil\\n' is not a DNS-1035 label",
                            "default/alias": "externalName 'a b.example.com' is not a DNS name"}

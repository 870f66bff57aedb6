"""kubelab/ui/nft.py: a Service's path read from a node's nftables table, as `nft -j list table ip
kube-proxy` prints it (the shapes below are nft 1.0.6's output for kube-proxy's table on the netns lab)."""

from __future__ import annotations

import json
from typing import Any

from kubelab.ui.nft import parse_table, service_of, service_path

SVC = "service-VQUKRDEP-default/web/tcp/http"
EXT = "external-VQUKRDEP-default/web/tcp/http"
EP1 = "endpoint-Q34ZUF7W-default/web/tcp/http__10.244.1.2/8080"
EP2 = "endpoint-JPDK3MEJ-default/web/tcp/http__10.244.2.2/8080"
OTHER = "service-AAAAAAAA-default/web2/tcp/http"


def _rule(chain: str, *expr: dict[str, Any]) -> dict[str, Any]:
    return {"rule": {"family": "ip", "table": "kube-proxy", "chain": chain, "handle": 1, "expr": list(expr)}}


def _endpoint(chain: str, ip: str) -> list[dict[str, Any]]:
    return [_rule(chain, {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": ip}},
                  {"jump": {"target": "mark-for-masquerade"}}),
            _rule(chain, {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "tcp"}},
                  {"dnat": {"addr": ip, "port": 8080}})]


def _numgen(chain: str, *targets: str) -> dict[str, Any]:
    return _rule(chain, {"vmap": {"key": {"numgen": {"mode": "random", "mod": len(targets), "offset": 0}},
                                  "data": {"set": [[i, {"goto": {"target": t}}] for i, t in enumerate(targets)]}}})


TABLE = {"nftables": [
    {"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
    {"table": {"family": "ip", "name": "kube-proxy", "handle": 1}},
    {"map": {"family": "ip", "name": "service-ips", "table": "kube-proxy", "type": ["ipv4_addr", "inet_proto", "inet_service"],
             "map": "verdict", "elem": [[{"concat": ["10.96.0.20", "tcp", 80]}, {"goto": {"target": SVC}}],
                                        [{"concat": ["10.96.0.21", "tcp", 80]}, {"goto": {"target": OTHER}}]]}},
    {"map": {"family": "ip", "name": "service-nodeports", "table": "kube-proxy", "type": ["inet_proto", "inet_service"],
             "map": "verdict", "elem": [[{"concat": ["tcp", 30080]}, {"goto": {"target": EXT}}]]}},
    {"map": {"family": "ip", "name": "no-endpoint-services", "table": "kube-proxy", "map": "verdict"}},
    _rule(EXT, {"jump": {"target": "mark-for-masquerade"}}),
    _rule(EXT, {"goto": {"target": SVC}}),
    _rule(SVC, {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "10.96.0.20"}},
          {"jump": {"target": "mark-for-masquerade"}}),
    _numgen(SVC, EP1, EP2),
    *_endpoint(EP1, "10.244.1.2"), *_endpoint(EP2, "10.244.2.2"),
]}


def test_map_elements_lead_through_the_vmap_to_each_endpoint() -> None:
    [port] = service_path(parse_table(json.dumps(TABLE)), "default/web")
    assert port["port"] == "http" and port["chain"] == SVC and port["numgen"] == "numgen random mod 2"
    assert [(e["kind"], e["destination"], e["protocol"], e["port"], e["chain"]) for e in port["entries"]] == [
        ("cluster IP", "10.96.0.20", "tcp", "80", SVC), ("nodePort", None, "tcp", "30080", EXT)]
    assert port["branches"] == [
        {"chain": EP1, "index": 0, "share": "1/2", "probability": None, "destination": "10.244.1.2:8080"},
        {"chain": EP2, "index": 1, "share": "1/2", "probability": None, "destination": "10.244.2.2:8080"}]


def test_a_service_is_matched_by_its_whole_name_only() -> None:
    table = parse_table(json.dumps(TABLE))
    assert service_path(table, "default/we") == [] and service_path(table, "default/web2")[0]["entries"][0]["chain"] == OTHER
    assert service_path(table, "default/web2")[0]["branches"] == []  # no chain of it in the table: nothing drawn


def test_chain_names_give_the_service_port() -> None:
    assert service_of(SVC) == ("default/web", "tcp", "http")
    assert service_of("endpoint-Q34ZUF7W-default/web/tcp/http__10.244.1.2/8080") is None
    assert service_of("service-VQUKRDEP-default/web/tcp/") == ("default/web", "tcp", "")
    assert service_of("services") is None and service_of("mark-for-masquerade") is None


def test_no_table_and_odd_shapes_draw_nothing() -> None:
    assert service_path(parse_table(""), "default/web") == []
    odd = {"nftables": [{"map": {"name": "service-ips", "elem": [[{"concat": ["10.96.0.20", "tcp", 80]}, "accept"]]}},
                        {"rule": {"chain": SVC, "expr": [{"vmap": {"key": {"numgen": {"mod": 1}}, "data": "@x"}}]}},
                        {"rule": {"chain": OTHER}}]}
    assert service_path(parse_table(json.dumps(odd)), "default/web") == []

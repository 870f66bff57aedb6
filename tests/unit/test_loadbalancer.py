"""The LoadBalancer controller's pure parts: the pool and who gets which address."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.loadbalancer import DEFAULT_POOL, Pool, assign_addresses, is_managed
from kubelab.models import Service

POOL = Pool.parse("172.18.255.200-172.18.255.202")


def lb(name: str, *, created: str = "2024-01-01T00:00:00Z", ip: str | None = None, requested: str | None = None,
       lb_class: str | None = None, svc_type: str = "LoadBalancer", families: list[str] | None = None) -> Service:
    spec: dict[str, Any] = {"type": svc_type, "ports": [{"port": 80}]}
    if requested:
        spec["loadBalancerIP"] = requested
    if lb_class:
        spec["loadBalancerClass"] = lb_class
    if families:
        spec["ipFamilies"] = families
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Service", "spec": spec,
                           "metadata": {"namespace": "default", "name": name, "creationTimestamp": created}}
    if ip:
        obj["status"] = {"loadBalancer": {"ingress": [{"ip": ip, "ipMode": "VIP"}]}}
    return Service.from_dict(obj)


@pytest.mark.parametrize(("text", "first", "last", "size"), [
    pytest.param(DEFAULT_POOL, "172.18.255.200", "172.18.255.250", 51, id="default range"),
    pytest.param("172.18.255.192/29", "172.18.255.193", "172.18.255.198", 6, id="CIDR without network/broadcast"),
    pytest.param("10.0.0.7/32", "10.0.0.7", "10.0.0.7", 1, id="single address"),
    pytest.param(" fd00::10 - fd00::12 ", "fd00::10", "fd00::12", 3, id="IPv6 range"),
])
def test_pool_parse(text: str, first: str, last: str, size: int) -> None:
    pool = Pool.parse(text)
    assert (str(pool.first), str(pool.last), len(list(pool))) == (first, last, size)
    assert first in pool and "172.18.254.1" not in pool and "nonsense" not in pool


@pytest.mark.parametrize("text", ["172.18.255.250-172.18.255.200", "10.0.0.1-fd00::1", "not-a-pool", "10.0.0.0/33"])
def test_bad_pools_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        Pool.parse(text)


CASES = [
    pytest.param([lb("a"), lb("b")], {"default/a": "172.18.255.200", "default/b": "172.18.255.201"},
                 id="lowest free address, oldest first (ties by name)"),
    pytest.param([lb("new", created="2024-02-01T00:00:00Z"), lb("old", created="2024-01-01T00:00:00Z")],
                 {"default/old": "172.18.255.200", "default/new": "172.18.255.201"}, id="older Service first"),
    pytest.param([lb("a"), lb("b", ip="172.18.255.200", created="2024-03-01T00:00:00Z")],
                 {"default/b": "172.18.255.200", "default/a": "172.18.255.201"},
                 id="an address a Service has stays its own"),
    pytest.param([lb("a", requested="172.18.255.202"), lb("b")],
                 {"default/a": "172.18.255.202", "default/b": "172.18.255.200"}, id="loadBalancerIP honoured"),
    pytest.param([lb("a", ip="172.18.255.200"), lb("b", requested="172.18.255.200", created="2024-02-01T00:00:00Z")],
                 {"default/a": "172.18.255.200", "default/b": None}, id="a requested address in use: wait"),
    pytest.param([lb("a", requested="10.1.2.3")], {"default/a": None}, id="a requested address outside the pool"),
    pytest.param([lb("a", ip="172.18.255.201", requested="172.18.255.202")], {"default/a": "172.18.255.202"},
                 id="a new loadBalancerIP moves the Service"),
    pytest.param([lb("a", ip="172.18.255.201"), lb("b", ip="172.18.255.201", created="2024-02-01T00:00:00Z")],
                 {"default/a": "172.18.255.201", "default/b": "172.18.255.200"},
                 id="two statuses claim one address: the older Service keeps it"),
    pytest.param([lb("a", ip="192.0.2.9")], {"default/a": "172.18.255.200"}, id="an address outside the pool is replaced"),
    pytest.param([lb(n, created=f"2024-01-0{i + 1}T00:00:00Z") for i, n in enumerate("abcd")],
                 {"default/a": "172.18.255.200", "default/b": "172.18.255.201", "default/c": "172.18.255.202",
                  "default/d": None}, id="pool exhausted"),
    pytest.param([lb("a", lb_class="example.com/other"), lb("b", svc_type="NodePort"),
                  lb("c", families=["IPv6"]), lb("d")], {"default/d": "172.18.255.200"},
                 id="other classes, other types and other families are not ours"),
]


@pytest.mark.parametrize(("services", "expected"), CASES)
def test_assign_addresses(services: list[Service], expected: dict[str, str | None]) -> None:
    assigned = assign_addresses(services, POOL)
    assert assigned == expected
    given = [ip for ip in assigned.values() if ip is not None]
    assert len(given) == len(set(given)), "an address went to two Services"


def test_is_managed() -> None:
    assert is_managed(lb("a"))
    assert not is_managed(lb("a", lb_class="example.com/other"))
    assert not is_managed(lb("a", svc_type="ClusterIP"))

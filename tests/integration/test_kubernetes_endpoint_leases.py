"""The `default/kubernetes` Service's Endpoints and EndpointSlices follow the live API servers (kube's lease
endpoint reconciler, apiserver/endpointreconciler.py): real API servers on the shared real etcd, each
keeping a master lease under /registry/masterleases/ on an etcd lease.

Other modules' API servers share this etcd, so the checks are about the ports of the servers started here
(present or absent), never about the whole list."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import orjson
import pytest
from apitools import ns_path
from polling import wait_for

from apiserver import endpointreconciler
from apiserver.storage import Storage
from kubelab.etcd import Etcd

FAST = {"endpoint_reconciler_interval": 0.3, "endpoint_reconciler_ttl": 3}


def _ports(api: httpx.Client) -> set[int]:
    subsets = api.get(ns_path("endpoints", "default", "kubernetes")).json()["subsets"] or []
    return {p["port"] for subset in subsets for p in subset["ports"]}


def _slices(api: httpx.Client) -> dict[str, dict[str, Any]]:
    listed = api.get(ns_path("endpointslices", "default", group="discovery.k8s.io/v1"),
                     params={"labelSelector": "kubernetes.io/service-name=kubernetes"}).json()["items"]
    return {s["metadata"]["name"]: s for s in listed}


def _slice_ports(api: httpx.Client) -> set[int]:
    return {p["port"] for s in _slices(api).values() for p in s["ports"]}


@pytest.fixture
def two(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]]) -> Iterator[tuple[str, str]]:
    with start_apiserver(etcd.url, **FAST) as first, start_apiserver(etcd.url, **FAST) as second:
        yield first, second


def test_every_live_apiserver_is_an_endpoint_of_the_kubernetes_service(two: tuple[str, str]) -> None:
    first, second = two
    ports = {httpx.URL(first).port, httpx.URL(second).port}
    with httpx.Client(base_url=first, timeout=10) as api:
        wait_for("both servers in the Endpoints", lambda: ports <= _ports(api))
        subsets = api.get(ns_path("endpoints", "default", "kubernetes")).json()["subsets"]
        for subset in subsets:  # one port per subset, named as the Service's port
            assert subset["addresses"] == [{"ip": "127.0.0.1"}]
            assert [(p["name"], p["protocol"]) for p in subset["ports"]] == [("https", "TCP")]
        assert [s["ports"][0]["port"] for s in subsets] == sorted(s["ports"][0]["port"] for s in subsets)
        wait_for("both servers in the EndpointSlices", lambda: ports <= _slice_ports(api))
        slices = _slices(api)
        assert "kubernetes" in slices
        for name, eps in slices.items():
            port = eps["ports"][0]["port"]
            assert name == ("kubernetes" if port == min(_slice_ports(api)) else f"kubernetes-{port}")
            assert eps["endpoints"] == [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]
        # The lease endpoint reconciler keeps the Endpoints itself: the mirroring controller must skip them.
        labels = api.get(ns_path("endpoints", "default", "kubernetes")).json()["metadata"]["labels"]
        assert labels["endpointslice.kubernetes.io/skip-mirror"] == "true"


def test_a_stopped_apiserver_leaves_the_endpoints_at_once(
        etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]]) -> None:
    # A long TTL: the entry can only go this soon through RemoveEndpoints on the clean stop.
    slow = {"endpoint_reconciler_interval": 0.3, "endpoint_reconciler_ttl": 3600}
    with start_apiserver(etcd.url, **slow) as first, httpx.Client(base_url=first, timeout=10) as api:
        with start_apiserver(etcd.url, **slow) as second:
            gone = httpx.URL(second).port
            wait_for("the second server in the Endpoints", lambda: gone in _ports(api) and gone in _slice_ports(api))
        assert gone not in _ports(api)
        assert gone not in _slice_ports(api)
        assert f"kubernetes-{gone}" not in _slices(api)
        assert httpx.URL(first).port in _ports(api)


def test_a_lease_nobody_renews_is_dropped_after_its_ttl(etcd: Etcd, apiserver: str,
                                                        start_apiserver: Callable[..., AbstractContextManager[str]]
                                                        ) -> None:
    # A server that died: its lease (written as it writes one) is never renewed; port 1 is nobody's.
    dead = ("127.0.0.1", 1)

    async def write() -> None:
        storage = Storage([etcd.url])
        try:
            await storage.put_expiring(endpointreconciler.lease_key(dead), endpointreconciler.lease_value(dead), 3)
        finally:
            await storage.close()

    with start_apiserver(etcd.url, **FAST) as live, httpx.Client(base_url=live, timeout=10) as api:
        asyncio.run(write())
        wait_for("the dead server listed while its lease lives", lambda: 1 in _ports(api), timeout=30)
        wait_for("the dead server dropped once its lease expired", lambda: 1 not in _ports(api)
                 and 1 not in _slice_ports(api), timeout=60)
        assert "kubernetes-1" not in _slices(api)
        assert httpx.URL(live).port in _ports(api)


def test_garbage_under_masterleases_is_ignored(etcd: Etcd,
                                               start_apiserver: Callable[..., AbstractContextManager[str]]) -> None:
    """Values that are not a server's lease (written straight into etcd) name no endpoint and fail nothing."""
    def lease(ip: object, port: object) -> bytes:
        return orjson.dumps({"subsets": [{"addresses": [{"ip": ip}], "ports": [{"port": port}]}]})

    hostile = [b"", b"{", b"null", b"[]", b'{"subsets": 5}', lease("x", 1), lease("10.0.0.9", 70000),
               lease("10.0.0.9", True), lease("10.0.0.9", "443"), lease("10.0.0.9", 0), b"\xff\xfe"]

    async def put(keys: list[str]) -> None:
        storage = Storage([etcd.url])
        try:
            for key, value in zip(keys, hostile, strict=True):
                await storage.put_expiring(key, value, 60)
        finally:
            await storage.close()

    async def delete(keys: list[str]) -> None:
        storage = Storage([etcd.url])
        try:
            for key in keys:
                await storage.delete_raw(key)
        finally:
            await storage.close()

    keys = [f"{endpointreconciler.PREFIX}garbage-{i}" for i in range(len(hostile))]
    asyncio.run(put(keys))
    try:
        with start_apiserver(etcd.url, **FAST) as live, httpx.Client(base_url=live, timeout=10) as api:
            port = httpx.URL(live).port
            wait_for("the live server listed", lambda: port in _ports(api))
            ips = {a["ip"] for s in api.get(ns_path("endpoints", "default", "kubernetes")).json()["subsets"]
                   for a in s["addresses"]}
            assert "10.0.0.9" not in ips and "x" not in ips
    finally:
        asyncio.run(delete(keys))

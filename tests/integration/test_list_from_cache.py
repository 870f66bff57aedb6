"""LISTs served from the watch cache (apiserver/cacher.py), as kube-apiserver's cacher serves them: with
resourceVersion "0", with a resourceVersion to be not older than, and (kube 1.31+, ConsistentListFromCache)
without one, once the cache has caught up to etcd's current revision. What they answer is what etcd holds:
right after a write made straight into etcd, past the API server; and a page's continue token goes on at
the same snapshot, read from etcd. The API server's own etcd_requests_total shows which LISTs read etcd."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import orjson
import pytest
from apitools import CORE, unique_name

from apiserver.storage import Storage
from kubelab.etcd import Etcd


@pytest.fixture
def server(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]]) -> Iterator[str]:
    with start_apiserver(etcd.url) as url:
        yield url


def etcd_lists(server: str) -> float:
    """How many times the API server has read a range of configmaps from etcd."""
    text = httpx.get(f"{server}/metrics", timeout=10).text
    match = re.search(r'^etcd_requests_total\{operation="list",type="configmaps"\} (\S+)$', text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def configmap(ns: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": name},
            "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4()),
                         "creationTimestamp": "2026-01-01T00:00:00Z"}}


def put_straight_into_etcd(etcd: Etcd, objects: list[dict[str, Any]]) -> int:
    """Write the objects into etcd past the API server; returns etcd's revision after the last."""

    async def main() -> int:
        storage = Storage([etcd.url])
        try:
            for obj in objects:
                meta = obj["metadata"]
                await storage.put_raw(f"/registry/configmaps/{meta['namespace']}/{meta['name']}", orjson.dumps(obj))
            return await storage.revision()
        finally:
            await storage.close()

    return asyncio.run(main())


def names(doc: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in doc["items"]]


@pytest.fixture
def namespace(server: str) -> Iterator[tuple[httpx.Client, str]]:
    ns = unique_name("lcache")
    with httpx.Client(base_url=server, timeout=30) as api:
        assert api.post(f"{CORE}/namespaces", json={"metadata": {"name": ns}}).status_code == 201
        try:
            yield api, ns
        finally:
            api.delete(f"{CORE}/namespaces/{ns}")


def test_lists_come_from_the_cache_and_hold_what_etcd_holds_right_after_a_write(
        server: str, etcd: Etcd, namespace: tuple[httpx.Client, str]) -> None:
    api, ns = namespace
    path = f"{CORE}/namespaces/{ns}/configmaps"
    for i in range(3):
        assert api.post(path, json={"metadata": {"name": f"cm-{i}"}, "data": {"k": str(i)}}).status_code == 201
    # The cache of configmaps starts with the first watch or LIST served from it.
    assert api.get(path, params={"resourceVersion": "0"}).status_code == 200
    before = etcd_lists(server)
    # Written past the API server: only etcd's watch tells the cache.
    revision = put_straight_into_etcd(etcd, [configmap(ns, f"raw-{i}") for i in range(20)])
    consistent = api.get(path)
    assert consistent.status_code == 200
    doc = consistent.json()
    # The consistent read waited for the cache to reach etcd's revision: every object written is there.
    assert names(doc) == [f"cm-{i}" for i in range(3)] + sorted(f"raw-{i}" for i in range(20))
    assert int(doc["metadata"]["resourceVersion"]) >= revision
    assert doc["kind"] == "ConfigMapList"
    any_version = api.get(path, params={"resourceVersion": "0"}).json()
    assert names(any_version) == names(doc)
    not_older = api.get(path, params={"resourceVersion": str(revision)}).json()
    assert names(not_older) == names(doc)
    assert int(not_older["metadata"]["resourceVersion"]) >= revision
    selected = api.get(path, params={"fieldSelector": "metadata.name=raw-7"}).json()
    assert names(selected) == ["raw-7"]
    # None of these read a range of configmaps from etcd (only its current revision, one key).
    assert etcd_lists(server) == before
    # An exact resourceVersion is etcd's to answer, as kube's cacher delegates it.
    exact = api.get(path, params={"resourceVersion": doc["metadata"]["resourceVersion"],
                                  "resourceVersionMatch": "Exact"})
    assert exact.status_code == 200 and names(exact.json()) == names(doc)
    assert etcd_lists(server) > before


def test_a_page_from_the_cache_continues_at_its_snapshot(server: str, namespace: tuple[httpx.Client, str]) -> None:
    api, ns = namespace
    path = f"{CORE}/namespaces/{ns}/configmaps"
    for i in range(5):
        assert api.post(path, json={"metadata": {"name": f"cm-{i}"}}).status_code == 201
    assert api.get(path, params={"resourceVersion": "0"}).status_code == 200  # the cache is running
    for params in ({"limit": "2", "resourceVersion": "0"}, {"limit": "2"}):
        before = etcd_lists(server)
        first = api.get(path, params=params).json()
        assert etcd_lists(server) == before  # the first page came from the cache
        assert names(first) == ["cm-0", "cm-1"]
        assert first["metadata"]["remainingItemCount"] == 3
        snapshot = first["metadata"]["resourceVersion"]
        # After the first page: one object goes, one comes; the pages still show the first page's state.
        assert api.delete(f"{path}/cm-3").status_code == 200
        assert api.post(path, json={"metadata": {"name": "cm-2a"}}).status_code == 201
        seen = names(first)
        token = first["metadata"]["continue"]
        while token:
            page = api.get(path, params={"limit": "2", "continue": token})
            assert page.status_code == 200, page.text
            assert page.json()["metadata"]["resourceVersion"] == snapshot
            seen += names(page.json())
            token = page.json()["metadata"].get("continue")
        assert seen == ["cm-0", "cm-1", "cm-2", "cm-3", "cm-4"]
        # Back to five for the next round.
        assert api.delete(f"{path}/cm-2a").status_code == 200
        assert api.post(path, json={"metadata": {"name": "cm-3"}}).status_code == 201
    # A selector filters the cache's page; the page is full, and no count is given (kube gives it only
    # without selectors).
    page = api.get(path, params={"limit": "2", "fieldSelector": "metadata.name!=cm-0"}).json()
    assert names(page) == ["cm-1", "cm-2"] and "remainingItemCount" not in page["metadata"]
    rest = api.get(path, params={"limit": "10", "continue": page["metadata"]["continue"],
                                 "fieldSelector": "metadata.name!=cm-0"}).json()
    assert names(rest) == ["cm-3", "cm-4"]

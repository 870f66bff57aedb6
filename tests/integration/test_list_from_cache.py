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

from apiserver.cacher import progress_requests_reliable
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


def progress_reliable(etcd: Etcd) -> bool:
    """Whether this etcd's progress notifications may be trusted, hence whether kube (and kubelab) serve
    LISTs without a resourceVersion from the watch cache (etcd >= 3.4.31 / 3.5.13)."""

    async def main() -> list[str]:
        storage = Storage([etcd.url])
        try:
            return await storage.versions()
        finally:
            await storage.close()

    return all(progress_requests_reliable(v) for v in asyncio.run(main()))


def watch_until(server: str, path: str, since: str, name: str) -> None:
    """Read a watch from `since` (one the watch cache serves) until `name` shows up: from then on the cache
    holds every write up to that object's."""
    with httpx.stream("GET", f"{server}{path}", params={"watch": "1", "resourceVersion": since}, timeout=30) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line and orjson.loads(line)["object"]["metadata"].get("name") == name:
                return
    raise AssertionError(f"the watch ended before {name} showed up")


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
    started = api.get(path, params={"resourceVersion": "0"})
    assert started.status_code == 200 and names(started.json()) == [f"cm-{i}" for i in range(3)]
    before = etcd_lists(server)
    # Written past the API server: only etcd's watch tells the cache.
    revision = put_straight_into_etcd(etcd, [configmap(ns, f"raw-{i}") for i in range(20)])
    consistent = api.get(path)
    assert consistent.status_code == 200
    doc = consistent.json()
    # The consistent read waited for the cache to reach etcd's revision (or read etcd): every object
    # written is there.
    assert names(doc) == [f"cm-{i}" for i in range(3)] + sorted(f"raw-{i}" for i in range(20))
    assert int(doc["metadata"]["resourceVersion"]) >= revision
    assert doc["kind"] == "ConfigMapList"
    # From the cache only when etcd's progress notifications can be trusted, as kube decides (and once the
    # API server knows etcd's version: it asks in the background, from its first LIST on).
    if progress_reliable(etcd):
        assert etcd_lists(server) <= before + 1
    else:
        assert etcd_lists(server) == before + 1
    watch_until(server, path, started.json()["metadata"]["resourceVersion"], "raw-19")
    before = etcd_lists(server)
    any_version = api.get(path, params={"resourceVersion": "0"}).json()
    assert names(any_version) == names(doc)
    not_older = api.get(path, params={"resourceVersion": str(revision)}).json()
    assert names(not_older) == names(doc)
    assert int(not_older["metadata"]["resourceVersion"]) >= revision
    selected = api.get(path, params={"fieldSelector": "metadata.name=raw-7", "resourceVersion": "0"}).json()
    assert names(selected) == ["raw-7"]
    # Once the cache has seen the writes, none of these read a range of configmaps from etcd.
    assert etcd_lists(server) == before
    # An exact resourceVersion is etcd's to answer, as kube's cacher delegates it.
    exact = api.get(path, params={"resourceVersion": doc["metadata"]["resourceVersion"],
                                  "resourceVersionMatch": "Exact"})
    assert exact.status_code == 200 and names(exact.json()) == names(doc)
    assert etcd_lists(server) > before


def test_a_page_from_the_cache_continues_at_its_snapshot(server: str, etcd: Etcd,
                                                       namespace: tuple[httpx.Client, str]) -> None:
    api, ns = namespace
    reliable = progress_reliable(etcd)
    path = f"{CORE}/namespaces/{ns}/configmaps"
    for i in range(5):
        assert api.post(path, json={"metadata": {"name": f"cm-{i}"}}).status_code == 201
    assert api.get(path, params={"resourceVersion": "0"}).status_code == 200  # the cache is running
    for params in ({"limit": "2", "resourceVersion": "0"}, {"limit": "2"}):
        before = etcd_lists(server)
        first = api.get(path, params=params).json()
        # The first page came from the cache (without a resourceVersion: only on an etcd to trust).
        assert (etcd_lists(server) == before) == (reliable or params.get("resourceVersion") == "0")
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


def test_every_list_option_answers_what_etcd_holds_at_the_answers_revision(
        server: str, namespace: tuple[httpx.Client, str]) -> None:
    """A grid of resourceVersion x resourceVersionMatch x limit x selector, good and bad values: never a
    5xx, and every 200 holds exactly what etcd holds at the revision it names (read back with Exact, which
    the cache leaves to etcd), page by page."""
    api, ns = namespace
    path = f"{CORE}/namespaces/{ns}/configmaps"
    for i in range(7):
        labels = {"odd": "yes"} if i % 2 else {}
        assert api.post(path, json={"metadata": {"name": f"cm-{i}", "labels": labels}}).status_code == 201
    current = api.get(path).json()["metadata"]["resourceVersion"]
    versions = ["", "0", "1", current, "abc", "-1"]
    matches = [None, "NotOlderThan", "Exact", "Sometimes"]
    limits = [None, "0", "1", "3", "-1", "x"]
    selectors: list[dict[str, str]] = [{}, {"labelSelector": "odd=yes"}, {"fieldSelector": "metadata.name!=cm-2"}]
    tried = 0
    for rv in versions:
        for match in matches:
            for limit in limits:
                for selector in selectors:
                    params = {**selector, **({"resourceVersion": rv} if rv else {}),
                              **({"resourceVersionMatch": match} if match else {}),
                              **({"limit": limit} if limit is not None else {})}
                    resp = api.get(path, params=params)
                    tried += 1
                    assert resp.status_code < 500, (params, resp.text)
                    if resp.status_code != 200:
                        assert resp.json()["kind"] == "Status"
                        continue
                    doc = resp.json()
                    got = names(doc)
                    token = doc["metadata"].get("continue")
                    while token:
                        page = api.get(path, params={**selector, "continue": token, "limit": "2"}).json()
                        got += names(page)
                        token = page["metadata"].get("continue")
                    truth = api.get(path, params={**selector, "resourceVersion": doc["metadata"]["resourceVersion"],
                                                  "resourceVersionMatch": "Exact"})
                    assert truth.status_code == 200, (params, truth.text)
                    assert got == names(truth.json()), params
    assert tried == len(versions) * len(matches) * len(limits) * len(selectors)
    # A version etcd has not reached: the cache waits for it (3 s), then kube's 504 asking to retry.
    future = api.get(path, params={"resourceVersion": str(int(current) + 10_000)})
    assert future.status_code == 504 and future.json()["reason"] == "Timeout", future.text
    assert future.json()["message"].startswith("Timeout: Too large resource version")



def test_a_cache_that_starts_under_writes_never_answers_a_list_etcd_did_not_hold(
        etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]]) -> None:
    """The first LISTs of every kind go to a cache that has never been started, as at a component's start,
    while another writer keeps adding objects straight into etcd. Each answer (consistent, resourceVersion
    "0", not-older-than, a first page and its continuation) holds exactly what etcd held at the revision it
    names. On etcd < 3.4.31 / 3.5.13 a requested progress notification may overtake the events it covers
    (etcd-io/etcd#15220, #17507): a consistent LIST served once the cache "caught up" that way answered the
    cache's first list, labelled with a later revision, and cluster DNS started without its Services."""
    ns = unique_name("lfresh")
    prefix = f"/registry/configmaps/{ns}/"
    wrong: list[str] = []
    answers = 0

    async def truth(storage: Storage, revision: int) -> list[str]:
        held = await storage.list_range(prefix, prefix[:-1] + "0", revision=revision)
        return [s.obj["metadata"]["name"] for s in held.items]

    async def round_on_a_fresh_server(storage: Storage, url: str, written: list[int]) -> None:
        nonlocal answers
        path = f"{CORE}/namespaces/{ns}/configmaps"
        stop = asyncio.Event()

        async def writer() -> None:
            while not stop.is_set():
                meta = {"name": f"cm-{len(written):05d}", "namespace": ns}
                await storage.put_raw(prefix + meta["name"], orjson.dumps({**configmap(ns, meta["name"])}))
                written.append(await storage.revision())

        async def reader(client: httpx.AsyncClient, params: dict[str, str]) -> None:
            nonlocal answers
            resp = await client.get(path, params=params)
            assert resp.status_code == 200, (params, resp.text)
            doc = resp.json()
            got = names(doc)
            token = doc["metadata"].get("continue")
            while token:
                page = await client.get(path, params={"continue": token, "limit": "50"})
                assert page.status_code == 200, page.text
                got += names(page.json())
                token = page.json()["metadata"].get("continue")
            revision = int(doc["metadata"]["resourceVersion"])
            held = await truth(storage, revision)
            answers += 1
            if got != held:
                wrong.append(f"{params}: {len(got)} items at {revision}, etcd held {len(held)}")

        task = asyncio.create_task(writer())
        try:
            while len(written) < 5:
                await asyncio.sleep(0.01)
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                current = str(written[-1])
                await asyncio.gather(*(reader(client, params) for params in (
                    {}, {}, {"resourceVersion": "0"}, {}, {"resourceVersion": current},
                    {"resourceVersion": current, "resourceVersionMatch": "NotOlderThan"}, {"limit": "7"},
                    {"resourceVersion": "0", "limit": "7"}, {})))
                for _ in range(3):
                    await asyncio.gather(*(reader(client, {}) for _ in range(4)))
        finally:
            stop.set()
            await task

    async def main(url: str, written: list[int]) -> None:
        storage = Storage([etcd.url])
        try:
            await round_on_a_fresh_server(storage, url, written)
        finally:
            await storage.close()

    written: list[int] = []
    for _ in range(6):
        with start_apiserver(etcd.url) as url:
            asyncio.run(main(url, written))
    assert answers == 6 * 21
    assert wrong == [], "\n".join(wrong)


def test_read_your_writes_from_a_cache_that_starts_now(server: str, namespace: tuple[httpx.Client, str]) -> None:
    """Every consistent LIST sees every write acknowledged before it was sent, including the first LISTs of
    a cache that has never been started, while other writers keep etcd's revision moving."""
    api, ns = namespace
    path = f"{CORE}/namespaces/{ns}/configmaps"
    for i in range(50):
        assert api.post(path, json={"metadata": {"name": f"pre-{i}"}}).status_code == 201
    missing: list[str] = []

    async def writer_then_reader(client: httpx.AsyncClient, worker: int) -> None:
        for i in range(6):
            name = f"w{worker}-{i}"
            created = await client.post(path, json={"metadata": {"name": name}})
            assert created.status_code == 201, created.text
            for params in ({}, {"resourceVersion": created.json()["metadata"]["resourceVersion"]},
                           {"resourceVersion": created.json()["metadata"]["resourceVersion"],
                            "resourceVersionMatch": "NotOlderThan"}, {"limit": "500"}):
                listed = await client.get(path, params=params)
                assert listed.status_code == 200, listed.text
                got = set(names(listed.json()))
                if name not in got or not {f"pre-{j}" for j in range(50)} <= got:
                    missing.append(f"{name} {params} rv={listed.json()['metadata']['resourceVersion']}")

    async def main() -> None:
        async with httpx.AsyncClient(base_url=server, timeout=30) as client:
            await asyncio.gather(*(writer_then_reader(client, w) for w in range(8)))

    asyncio.run(main())
    assert missing == []

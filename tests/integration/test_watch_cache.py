"""The watch cache (apiserver/cacher.py) against a real etcd: many HTTP watchers of a resource share one
etcd watch stream, each gets exactly the events its selector allows, and a watch from a revision the
cache has not seen yet (a write to another resource) is served once the cache has caught up."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import orjson
import pytest
from apitools import CORE, unique_name

from kubelab.etcd import Etcd

WATCHERS = 40


@pytest.fixture
def server(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]]) -> Iterator[str]:
    with start_apiserver(etcd.url) as url:
        yield url


def etcd_gauge(etcd: Etcd, name: str) -> float:
    text = httpx.get(f"{etcd.url}/metrics", timeout=10).text
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert match, name
    return float(match.group(1))


def registered(server: str, kind: str) -> float:
    text = httpx.get(f"{server}/metrics", timeout=10).text
    match = re.search(rf'^apiserver_registered_watchers{{group="",kind="{kind}",version="v1"}} (\S+)$', text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


async def collect(http: httpx.AsyncClient, path: str, params: dict[str, Any], want: int,
                  out: list[tuple[str, str]], started: asyncio.Event | None = None) -> None:
    async with http.stream("GET", path, params={"watch": "true", **params}) as resp:
        assert resp.status_code == 200
        if started is not None:
            started.set()
        buffer = b""
        async for chunk in resp.aiter_raw():
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                event = orjson.loads(line)
                out.append((event["type"], event["object"]["metadata"]["name"]))
                if len(out) >= want:
                    return


def test_many_watchers_share_one_etcd_stream_and_keep_their_selectors(server: str, etcd: Etcd) -> None:
    ns = unique_name("wcache")

    async def main() -> None:
        async with httpx.AsyncClient(base_url=server, timeout=httpx.Timeout(10, read=30)) as http:
            assert (await http.post(f"{CORE}/namespaces", json={"metadata": {"name": ns}})).status_code == 201
            try:
                rv = (await http.get(f"{CORE}/namespaces/{ns}/configmaps")).json()["metadata"]["resourceVersion"]
                streams_before = etcd_gauge(etcd, "etcd_debugging_mvcc_watch_stream_total")
                everything: list[list[tuple[str, str]]] = [[] for _ in range(WATCHERS // 2)]
                labelled: list[list[tuple[str, str]]] = [[] for _ in range(WATCHERS // 2)]
                tasks = [asyncio.create_task(collect(http, f"{CORE}/namespaces/{ns}/configmaps",
                                                     {"resourceVersion": rv}, 2, out)) for out in everything]
                tasks += [asyncio.create_task(collect(http, f"{CORE}/namespaces/{ns}/configmaps",
                                                      {"resourceVersion": rv, "labelSelector": "pick=yes"}, 1, out))
                          for out in labelled]
                for _ in range(200):
                    if registered(server, "ConfigMap") >= WATCHERS:
                        break
                    await asyncio.sleep(0.05)
                assert registered(server, "ConfigMap") >= WATCHERS
                streams = etcd_gauge(etcd, "etcd_debugging_mvcc_watch_stream_total")
                assert streams - streams_before <= 1, (streams_before, streams)
                for name, labels in (("plain", {}), ("picked", {"pick": "yes"})):
                    body = {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}
                    assert (await http.post(f"{CORE}/namespaces/{ns}/configmaps", json=body)).status_code == 201
                await asyncio.wait_for(asyncio.gather(*tasks), 30)
                assert all(out == [("ADDED", "plain"), ("ADDED", "picked")] for out in everything), everything
                assert all(out == [("ADDED", "picked")] for out in labelled), labelled
            finally:
                await http.delete(f"{CORE}/namespaces/{ns}")

    asyncio.run(main())


def test_a_watch_from_another_resources_revision_waits_for_the_cache(server: str) -> None:
    ns = unique_name("wfresh")

    async def main() -> None:
        async with httpx.AsyncClient(base_url=server, timeout=httpx.Timeout(10, read=30)) as http:
            created = await http.post(f"{CORE}/namespaces", json={"metadata": {"name": ns}})
            try:
                # Start the configmap cache, then write elsewhere: the namespace's revision is newer than
                # anything the configmap cache has seen.
                warm: list[tuple[str, str]] = []
                started = asyncio.Event()
                warming = asyncio.create_task(collect(http, f"{CORE}/configmaps", {}, 10**6, warm, started))
                await asyncio.wait_for(started.wait(), 10)
                other = await http.post(f"{CORE}/namespaces/{ns}/serviceaccounts", json={"metadata": {"name": "sa"}})
                rv = other.json()["metadata"]["resourceVersion"]
                seen: list[tuple[str, str]] = []
                watching = asyncio.create_task(collect(http, f"{CORE}/namespaces/{ns}/configmaps",
                                                       {"resourceVersion": rv}, 1, seen))
                await asyncio.sleep(0.2)
                body = {"metadata": {"name": "after"}, "data": {}}
                assert (await http.post(f"{CORE}/namespaces/{ns}/configmaps", json=body)).status_code == 201
                await asyncio.wait_for(watching, 20)
                assert seen == [("ADDED", "after")]
                warming.cancel()
                await asyncio.gather(warming, return_exceptions=True)
            finally:
                if created.status_code == 201:
                    await http.delete(f"{CORE}/namespaces/{ns}")

    asyncio.run(main())

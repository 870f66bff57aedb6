"""Events expire, as kube-apiserver's --event-ttl makes them: etcd deletes an event a TTL after its last
write (under a lease the API server shares between the events of a short window), a watcher hears
DELETED, and no other kind expires. Here the TTL is 2 s (the API server's `event_ttl`); the default is
an hour."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest

from apiserver.storage import Leases, Storage
from kubelab.etcd import Etcd

TTL = 2
NS = "event-ttl"


@pytest.fixture(scope="module")
def api(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]]) -> Iterator[httpx.Client]:
    with start_apiserver(etcd.url, event_ttl=TTL) as url, httpx.Client(base_url=url, timeout=10) as client:
        assert client.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).status_code == 201
        yield client


def event(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": NS}, "reason": "Scheduled",
            "message": "Successfully assigned", "type": "Normal"}


def leases_of(etcd: Etcd, keys: list[str]) -> list[int]:
    async def read() -> list[int]:
        storage = Storage([etcd.url])
        try:
            found = [await storage.client.get(key.encode()) for key in keys]
            return [kv.lease if kv is not None else -1 for kv in found]
        finally:
            await storage.close()

    return asyncio.run(read())


def wait_gone(api: httpx.Client, path: str, within: float = 30.0) -> float:
    """Seconds until GET `path` answers 404 (polling); fails if it never does."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        if api.get(path).status_code == 404:
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"{path} still there after {within}s")


def test_an_event_is_deleted_after_the_ttl_and_watchers_hear_of_it(api: httpx.Client) -> None:
    rv = api.get(f"/api/v1/namespaces/{NS}/events").json()["metadata"]["resourceVersion"]
    seen: list[dict[str, Any]] = []

    def watch() -> None:
        params = {"watch": "true", "resourceVersion": rv, "fieldSelector": "metadata.name=gone", "timeoutSeconds": "30"}
        with httpx.Client(base_url=str(api.base_url), timeout=40) as client, \
                client.stream("GET", f"/api/v1/namespaces/{NS}/events", params=params) as resp:
            for line in resp.iter_lines():
                if line.strip():
                    seen.append(json.loads(line))
                    if seen[-1]["type"] == "DELETED":
                        return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    time.sleep(0.5)
    created = api.post(f"/api/v1/namespaces/{NS}/events", json=event("gone"))
    assert created.status_code == 201, created.text
    wait_gone(api, f"/api/v1/namespaces/{NS}/events/gone")
    watcher.join(30)
    assert [e["type"] for e in seen] == ["ADDED", "DELETED"]
    assert seen[1]["object"]["metadata"]["name"] == "gone"


def test_events_written_together_share_one_lease_and_other_kinds_none(api: httpx.Client, etcd: Etcd) -> None:
    names = [f"burst-{i}" for i in range(5)]
    for name in names:
        assert api.post(f"/api/v1/namespaces/{NS}/events", json=event(name)).status_code == 201
    cm = api.post(f"/api/v1/namespaces/{NS}/configmaps", json={"metadata": {"name": "stays"}, "data": {"a": "b"}})
    assert cm.status_code == 201
    leases = leases_of(etcd, [f"/registry/events/{NS}/{n}" for n in names] + [f"/registry/configmaps/{NS}/stays"])
    assert len(set(leases[:5])) == 1 and leases[0] > 0, leases  # one lease, well within its reuse window
    assert leases[5] == 0  # a ConfigMap lives until deleted
    for name in names:
        wait_gone(api, f"/api/v1/namespaces/{NS}/events/{name}")
    time.sleep(TTL + Leases.reuse_window(TTL))
    assert api.get(f"/api/v1/namespaces/{NS}/configmaps/stays").status_code == 200


def test_an_update_puts_the_event_under_a_lease_of_its_own_time(api: httpx.Client, etcd: Etcd) -> None:
    # A put without a lease would detach the key (it would never expire); an update after the reuse
    # window gets a lease granted then, so the event lives a TTL after its last write.
    path = f"/api/v1/namespaces/{NS}/events/updated"
    key = f"/registry/events/{NS}/updated"
    assert api.post(f"/api/v1/namespaces/{NS}/events", json=event("updated")).status_code == 201
    [first] = leases_of(etcd, [key])
    time.sleep(Leases.reuse_window(TTL) + 0.2)
    patched = api.patch(path, json={"count": 2}, headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    [second] = leases_of(etcd, [key])
    assert first > 0 and second > 0 and second != first
    wait_gone(api, path)

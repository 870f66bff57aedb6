"""The watch cache is bounded by bytes: the reported case, 600 updates of a ~1 MB ConfigMap and then its
deletion, against `kubelab apiserver` in a process of its own (so its resident set is its own) with one
watcher that reads everything and one that opened its stream and never reads.

Before the byte budget the cache kept every event with its object and its JSON line for as long as it
lived: the API server grew by ~1.2 GB and stayed there after the object was deleted. Now its growth is
bounded by the budget (apiserver/cacher.py DEFAULT_BUDGET per resource; the stalled watcher is closed
once it is a budget behind), a watch from a resourceVersion the ring let go is 410 Expired, and one from
a recent resourceVersion still streams every change after it. The bound asserted is memory, which is
deterministic enough to assert; how long the run took is only recorded.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from faultkit import ApiServerProcess, Figures, OwnedEtcd
from polling import wait_for

from apiserver.cacher import DEFAULT_BUDGET

UPDATES = 600
SIZE = 1_000_000
MIB = 1024 * 1024
CM = "/api/v1/namespaces/big/configmaps"


@pytest.fixture
def memory_etcd(tmp_path: Path) -> Iterator[OwnedEtcd]:
    """An etcd whose data lives in memory when the machine has a tmpfs: 600 MB of revisions written with
    an fsync each take minutes on a disk, and the disk is not what this test is about."""
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="kubelab-wcm-", dir=shm)) if shm.is_dir() else tmp_path
    etcd = OwnedEtcd(base / "etcd" / "data")
    try:
        etcd.start()
        yield etcd
    finally:
        etcd.stop()
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)
        assert not etcd.alive(), f"etcd processes left running: {etcd.alive()}"


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def watchers_registered(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    match = re.search(r'^apiserver_registered_watchers\{group="",kind="ConfigMap",version="v1"} (\S+)$', text,
                      re.MULTILINE)
    return float(match.group(1)) if match else 0.0


async def read_watch(http: httpx.AsyncClient, params: dict[str, str], out: list[dict[str, Any]],
                     until: Callable[[dict[str, Any]], bool]) -> None:
    async with http.stream("GET", CM, params={"watch": "true", **params}) as resp:
        assert resp.status_code == 200
        buffer = b""
        async for chunk in resp.aiter_raw():
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                event = orjson.loads(line)
                out.append(event)
                if until(event):
                    return


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("resourceVersion", "")) for e in events]


def test_a_megabyte_configmap_updated_600_times_then_deleted_leaves_the_cache_within_its_budget(
        memory_etcd: OwnedEtcd, apiserver_process: Callable[..., ApiServerProcess], figures: Figures) -> None:
    server = apiserver_process(memory_etcd.url)
    assert server.proc is not None
    pid = server.proc.pid

    async def main() -> None:
        timeout = httpx.Timeout(60, read=300)
        async with httpx.AsyncClient(base_url=server.url, timeout=timeout) as http, \
                httpx.AsyncClient(base_url=server.url, timeout=timeout) as stalled_http:
            assert (await http.post("/api/v1/namespaces", json={"metadata": {"name": "big"}})).status_code == 201
            start_rv = (await http.get(CM)).json()["metadata"]["resourceVersion"]
            seen: list[dict[str, Any]] = []
            reader = asyncio.create_task(read_watch(http, {"resourceVersion": start_rv}, seen,
                                                    lambda e: e["type"] in ("DELETED", "ERROR")))
            # A client that opens a watch and never reads it: the server must not keep every event for it.
            async with stalled_http.stream("GET", CM, params={"watch": "true", "resourceVersion": start_rv}) as stalled:
                assert stalled.status_code == 200
                await asyncio.to_thread(wait_for, "both watchers registered",
                                        lambda: watchers_registered(server.url) >= 2, 60)
                base = rss(pid)
                peak = base
                data = "x" * SIZE
                created = await http.post(CM, json={"metadata": {"name": "cm"}, "data": {"a": data}})
                assert created.status_code == 201, created.text
                revisions = [created.json()["metadata"]["resourceVersion"]]
                started = time.monotonic()
                for i in range(UPDATES):
                    body = {"metadata": {"name": "cm"}, "data": {"a": data[:-8] + f"{i:08}"}}
                    resp = await http.put(f"{CM}/cm", json=body)
                    assert resp.status_code == 200, resp.text[:500]
                    revisions.append(resp.json()["metadata"]["resourceVersion"])
                    if i % 50 == 0:
                        peak = max(peak, rss(pid))
                deleted = await http.delete(f"{CM}/cm")
                assert deleted.status_code == 200, deleted.text[:500]
                await asyncio.wait_for(reader, 120)
                seconds = time.monotonic() - started
                after = rss(pid)
                peak = max(peak, after)

            # Every change reached the reading watcher, in order.
            assert [t for t, _ in summary(seen)] == ["ADDED"] + ["MODIFIED"] * UPDATES + ["DELETED"]
            assert [rv for _, rv in summary(seen)][:-1] == revisions

            # The server holds at most a few budgets more than before: the ring's budget, what the
            # stalled watcher held until it was closed, allocator slack. It was ~1.2 GB.
            growth = after - base
            figures.update(updates=UPDATES, object_bytes=SIZE, rss_base_mib=round(base / MIB),
                           rss_peak_mib=round(peak / MIB), rss_after_delete_mib=round(after / MIB),
                           growth_mib=round(growth / MIB), budget_mib=DEFAULT_BUDGET // MIB,
                           seconds=round(seconds, 1))
            assert growth < 3 * DEFAULT_BUDGET, f"the API server grew by {growth / MIB:.0f} MiB"

            # A watch from an update the ring let go is 410 Expired, as kube's watch cache answers ...
            expired: list[dict[str, Any]] = []
            await asyncio.wait_for(read_watch(http, {"resourceVersion": revisions[1]}, expired, lambda e: True), 60)
            assert expired[0]["type"] == "ERROR", summary(expired)
            status = expired[0]["object"]
            assert (status["code"], status["reason"]) == (410, "Expired"), status
            assert status["message"].startswith(f"too old resource version: {revisions[1]} ("), status

            # ... while a watch from a recent one replays every change after it, the deletion last.
            recent: list[dict[str, Any]] = []
            await asyncio.wait_for(read_watch(http, {"resourceVersion": revisions[-5]}, recent,
                                              lambda e: e["type"] in ("DELETED", "ERROR")), 60)
            assert summary(recent)[:-1] == [("MODIFIED", rv) for rv in revisions[-4:]]
            assert recent[-1]["type"] == "DELETED"

    asyncio.run(main())

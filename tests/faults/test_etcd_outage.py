"""etcd goes away under a running API server: every request gets a 503 or 504 Status in bounded time,
an open watch ends with an ERROR event carrying one, and when etcd is back the same server process
answers again, without a restart.

Two outages: etcd killed (connections are refused: the API answers 503 at once) and etcd hung with
SIGSTOP (it holds its port and answers nothing: the storage timeout, 10 s, turns each call into a
504, and gRPC keepalive ends open watch streams). The bound checked is a generous 60 s that only a
hang would cross; the measured latencies are recorded for RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from faultkit import ApiServerProcess, Figures, OwnedEtcd, configmap

HANG_BOUND = 60.0  # seconds: far above the 10 s storage timeout; only a hang crosses it
CM = "/api/v1/namespaces/default/configmaps"



async def timed(what: str, request: Callable[[], Any]) -> tuple[str, float, httpx.Response]:
    start = time.monotonic()
    resp = await asyncio.wait_for(request(), HANG_BOUND)
    return what, time.monotonic() - start, resp


async def read_watch(client: httpx.AsyncClient, url: str, ready: asyncio.Event | None = None
                     ) -> tuple[int, list[dict[str, Any]]]:
    """Open a watch and read it to its end: the HTTP status and every event."""
    async with client.stream("GET", url, timeout=httpx.Timeout(10, read=HANG_BOUND)) as resp:
        if ready is not None:
            ready.set()
        events = [json.loads(line) async for line in resp.aiter_lines() if line.strip()]
        return resp.status_code, events


async def probe_everything(client: httpx.AsyncClient, rv: str) -> dict[str, tuple[float, int, dict[str, Any]]]:
    """Every kind of request at once, while etcd is out: {what: (seconds, HTTP code, Status)}."""

    async def watch(query: str) -> httpx.Response:
        code, events = await read_watch(client, f"{CM}?watch=true&{query}")
        assert code == 200 and len(events) == 1 and events[0]["type"] == "ERROR", events
        return httpx.Response(events[0]["object"]["code"], json=events[0]["object"])

    probes = [
        timed("get", lambda: client.get(f"{CM}/present")),
        timed("list", lambda: client.get(CM)),
        timed("create", lambda: client.post(CM, json=configmap("during-outage"))),
        timed("update", lambda: client.put(f"{CM}/present", json={**configmap("present", "2"),
                                                                  "metadata": {"name": "present",
                                                                               "resourceVersion": rv}})),
        timed("patch", lambda: client.patch(f"{CM}/present", json={"data": {"v": "3"}},
                                            headers={"Content-Type": "application/merge-patch+json"})),
        timed("delete", lambda: client.delete(f"{CM}/present")),
        timed("new watch from now", lambda: watch("")),
        timed("new watch from a version", lambda: watch(f"resourceVersion={rv}")),
    ]
    results = {}
    for what, seconds, resp in await asyncio.gather(*probes):
        results[what] = (seconds, resp.status_code, resp.json())
    return results


def check_statuses(results: dict[str, tuple[float, int, dict[str, Any]]]) -> None:
    for what, (_, code, status) in results.items():
        assert code in (503, 504), (what, code, status)
        assert status["kind"] == "Status" and status["code"] == code, (what, status)
        assert status["reason"] == ("ServiceUnavailable" if code == 503 else "Timeout"), (what, status)


async def wait_until_answering(client: httpx.AsyncClient) -> float:
    """Seconds until the server answers a list with 200 again."""
    start = time.monotonic()
    while time.monotonic() - start < HANG_BOUND:
        if (await client.get(CM, timeout=HANG_BOUND)).status_code == 200:
            return time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"the API server still fails {HANG_BOUND}s after etcd came back")


@pytest.mark.parametrize(("outage", "lasting"), [
    pytest.param("killed", 0.0, id="killed"),
    # gRPC's reconnect backoff would have grown to ~10 s by now; it is capped at 1 s (storage.py).
    pytest.param("killed", 20.0, id="killed for 20s"),
    pytest.param("hung", 0.0, id="hung")])
def test_requests_fail_fast_and_the_server_recovers(outage: str, lasting: float, own_etcd: OwnedEtcd,
                                                    apiserver_process: Callable[..., ApiServerProcess],
                                                    figures: Figures) -> None:
    server = apiserver_process(own_etcd.url)

    async def main() -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=HANG_BOUND) as client:
            created = await client.post(CM, json=configmap("present"))
            assert created.status_code == 201, created.text
            rv = created.json()["metadata"]["resourceVersion"]
            watching = asyncio.Event()
            open_watch = asyncio.create_task(read_watch(client, f"{CM}?watch=true&resourceVersion={rv}", watching))
            await watching.wait()
            await asyncio.sleep(0.5)  # the watch is open on etcd too

            began = time.monotonic()
            own_etcd.kill() if outage == "killed" else own_etcd.pause()
            results = await probe_everything(client, rv)
            health = await timed("readyz", lambda: client.get("/readyz"))
            code, events = await asyncio.wait_for(open_watch, HANG_BOUND)
            watch_ended = time.monotonic() - began
            check_statuses(results)
            assert health[2].status_code == 500 and "[-]etcd failed" in health[2].text, health[2].text
            assert code == 200 and [e["type"] for e in events] == ["ERROR"], events
            assert events[0]["object"]["code"] in (503, 504), events

            while time.monotonic() - began < lasting:  # clients keep asking all along
                assert (await client.get(CM)).status_code in (503, 504)
                await asyncio.sleep(1)
            own_etcd.start() if outage == "killed" else own_etcd.resume()
            recovered = await wait_until_answering(client)
            # The same server process: writes, reads and watches work again.
            again = await client.post(CM, json=configmap("after-outage"))
            assert again.status_code == 201, again.text
            code, events = await read_watch(client, f"{CM}?watch=true&resourceVersion={rv}&timeoutSeconds=1")
            names = [e["object"]["metadata"]["name"] for e in events]
            assert code == 200 and "after-outage" in names, events
            # A write that timed out (504) may have landed, but whole or not at all: never half.
            during = await client.get(f"{CM}/during-outage")
            assert during.status_code == 404 or during.json()["data"] == {"v": "1"}, during.text

            figures.update(per_request={k: [round(v[0], 2), v[1]] for k, v in results.items()}, outage=outage, outage_s=round(time.monotonic() - began - recovered, 1), requests=len(results) + 1, statuses=sorted({r[1] for r in results.values()}),
                           slowest_answer_s=round(max(r[0] for r in results.values()), 2),
                           readyz_s=round(health[1], 2), open_watch_ended_s=round(watch_ended, 2),
                           recovered_s_after_etcd_back=round(recovered, 2), server_restarts=0)

    asyncio.run(main())
    assert server.proc is not None and server.proc.poll() is None, "the API server process died"

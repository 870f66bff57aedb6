"""A highly available control plane on a real 3-member etcd cluster (kubelab/etcdcluster.py) with several
real `kubelab apiserver` processes, and the real ApiClient given every API server (`--server A,B,C`):

* SIGKILL one of three API servers during 2,000 creates: the client moves to the others; every create that
  was acknowledged (201, or 409 AlreadyExists when a create cut off by the kill is sent again) is stored:
  0 lost, counted.
* One etcd member of three stopped: writes go on. Two stopped: the API answers a 503 Status, never a 500;
  the members started again, writes go on without restarting any API server.
* An API server whose etcd cannot be reached answers 503; the client asks the next server (reads at once,
  writes from the next request).
* A failover does not load the system trust store again (it used to, for the new server's HTTP client).

Timings (the longest pause in acknowledgements, time to recover) are measured for the report, never
asserted."""

from __future__ import annotations

import asyncio
import itertools
import ssl
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from faultkit import ApiServerProcess, Figures
from polling import wait_for

from kubelab.client import AlreadyExists, ApiClient, ApiError
from kubelab.etcd import free_port
from kubelab.etcdcluster import EtcdCluster
from kubelab.kinds import CONFIGMAPS, NAMESPACES

CREATES = 2000
WORKERS = 8


def _configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"n": name}}


async def _namespace(api: ApiClient, name: str) -> None:
    try:
        await api.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except AlreadyExists:
        pass


def _stored_names(url: str, namespace: str) -> set[str]:
    with httpx.Client(base_url=url, timeout=60) as api:
        items = api.get(f"/api/v1/namespaces/{namespace}/configmaps").json()["items"]
    return {item["metadata"]["name"] for item in items}


def test_sigkill_one_of_three_apiservers_during_2000_creates_loses_no_acknowledged_write(
        etcd_cluster: EtcdCluster, apiserver_process: Callable[..., ApiServerProcess], figures: Figures) -> None:
    urls = ",".join(etcd_cluster.urls)
    servers = [apiserver_process(urls) for _ in range(3)]
    namespace = "ha-creates"
    acknowledged: set[str] = set()
    counts = {"created": 0, "already_existed_on_retry": 0, "retried": 0}
    ack_times: list[float] = []
    killed = asyncio.Event()

    async def run() -> None:
        async with ApiClient([s.url for s in servers], timeout=60) as api:
            await _namespace(api, namespace)
            names = [f"cm-{i:04d}" for i in range(CREATES)]

            async def worker(mine: list[str]) -> None:
                for name in mine:
                    sent_before = False
                    while True:
                        try:
                            await api.create(CONFIGMAPS, _configmap(name), namespace)
                            counts["created"] += 1
                        except AlreadyExists:
                            # Only this worker creates `name`: an earlier try, cut off by the kill, landed.
                            assert sent_before, f"{name} existed before it was ever sent"
                            counts["already_existed_on_retry"] += 1
                        except (httpx.TransportError, ApiError) as exc:
                            if isinstance(exc, ApiError) and exc.code < 500:
                                raise
                            sent_before = True  # it may have landed: send it again, as a client would
                            counts["retried"] += 1
                            await asyncio.sleep(0.05)
                            continue
                        acknowledged.add(name)
                        ack_times.append(time.monotonic())
                        if len(acknowledged) == CREATES // 4 and not killed.is_set():
                            killed.set()
                        break

            async def killer() -> None:
                await killed.wait()
                figures["killed_after_acks"] = len(acknowledged)
                await asyncio.to_thread(servers[0].kill)  # the one the client was using

            await asyncio.gather(killer(), *(worker(names[i::WORKERS]) for i in range(WORKERS)))
            assert api.server != servers[0].url

    asyncio.run(run())
    stored = _stored_names(servers[1].url, namespace)
    lost = acknowledged - stored
    gaps = [b - a for a, b in itertools.pairwise(ack_times)]
    figures.update(acknowledged=len(acknowledged), stored=len(stored), lost=len(lost), **counts,
                   longest_ack_pause_s=round(max(gaps), 3) if gaps else None)
    assert len(acknowledged) == CREATES
    assert not lost, sorted(lost)[:20]
    assert stored == acknowledged  # nothing unacknowledged either: every name was retried until acknowledged


def _write(api: httpx.Client, namespace: str, name: str) -> httpx.Response:
    return api.post(f"/api/v1/namespaces/{namespace}/configmaps", json=_configmap(name))


def test_etcd_members_stopped_one_then_two_then_back(
        etcd_cluster: EtcdCluster, apiserver_process: Callable[..., ApiServerProcess], figures: Figures) -> None:
    server = apiserver_process(",".join(etcd_cluster.urls))
    namespace = "ha-quorum"
    written: set[str] = set()
    seen: dict[int, int] = {}
    counter = iter(range(10**6))

    def attempt(api: httpx.Client) -> httpx.Response:
        name = f"cm-{next(counter)}"
        resp = _write(api, namespace, name)
        seen[resp.status_code] = seen.get(resp.status_code, 0) + 1
        assert resp.status_code != 500, resp.text
        if resp.status_code == 201:
            written.add(name)
        return resp

    with httpx.Client(base_url=server.url, timeout=120) as api:
        api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": namespace}}).raise_for_status()
        for _ in range(20):
            assert attempt(api).status_code == 201
        # One member down (the first, which the API server dials first): writes go on.
        etcd_cluster.members[0].stop()
        stopped = time.monotonic()
        wait_for("a write with one member of three stopped", lambda: attempt(api).status_code == 201, 120)
        figures["one_down_first_write_s"] = round(time.monotonic() - stopped, 2)
        failed_with_one_down = sum(n for code, n in seen.items() if code != 201)
        for _ in range(20):
            assert attempt(api).status_code == 201
        # Two down: no quorum. The API answers 503 with a Status, never a 500 or a hang past its timeout.
        etcd_cluster.members[1].stop()
        answer = wait_for("a 503 with two members of three stopped",
                          lambda: (r := attempt(api)).status_code == 503 and r, 180)
        status = answer.json()
        assert (status["kind"], status["status"], status["code"], status["reason"]) == (
            "Status", "Failure", 503, "ServiceUnavailable")
        assert status["message"].startswith("etcd is unavailable")
        # Both back, the API server untouched: writes go on.
        for member in etcd_cluster.members[:2]:
            member.launch()
        back = time.monotonic()
        for member in etcd_cluster.members[:2]:
            member.wait_healthy(120)
        wait_for("a write once the members are back", lambda: attempt(api).status_code == 201, 180)
        figures["recovered_first_write_s"] = round(time.monotonic() - back, 2)
        for _ in range(20):
            assert attempt(api).status_code == 201
        assert server.proc is not None and server.proc.poll() is None  # never restarted
        # Every write answered 201 is stored.
        assert written <= _stored_names(server.url, namespace)
    figures.update(writes_by_status={str(k): v for k, v in sorted(seen.items())}, written=len(written),
                   failed_with_one_down=failed_with_one_down)


def test_the_client_moves_on_from_an_apiserver_answering_503(
        etcd_cluster: EtcdCluster, apiserver_process: Callable[..., ApiServerProcess], figures: Figures) -> None:
    # One API server reaches etcd only through the first member; the other through the two others (a
    # quorum). With the first member stopped, the first API server answers 503.
    lonely = apiserver_process(etcd_cluster.urls[0])
    other = apiserver_process(",".join(etcd_cluster.urls[1:]))
    namespace = "ha-503"
    etcd_cluster.members[0].stop()
    wait_for("the lonely API server to answer 503", lambda: httpx.get(
        f"{lonely.url}/api/v1/namespaces/default/configmaps", timeout=60).status_code == 503, 120)

    async def run() -> tuple[int, int]:
        async with ApiClient([lonely.url, other.url], timeout=60) as api:
            listed, _ = await api.list(CONFIGMAPS, "default")  # a read: asked of the next server at once
            assert api.server == other.url
            await _namespace(api, namespace)
            await api.create(CONFIGMAPS, _configmap("after-503"), namespace)
            return len(listed), len(_stored_names(other.url, namespace))

    _, stored = asyncio.run(run())
    assert stored == 1
    figures["lonely_server_answered"] = 503


def test_a_failover_does_not_load_the_trust_store_again(
        etcd_cluster: EtcdCluster, apiserver_process: Callable[..., ApiServerProcess], figures: Figures,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The first URL refuses connections (nothing listens there); the client moves to the live server with
    # a new HTTP client. Loading the system trust store again for it cost a failover 1.2 s at load 30
    # (bench/apiserver_failover.py): the context made when the client was made must serve every server.
    live = apiserver_process(",".join(etcd_cluster.urls))
    refused = f"http://127.0.0.1:{free_port()}"
    loads: list[object] = []
    real_load = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        real_load(self, *args, **kwargs)

    async def run() -> str:
        async with ApiClient([refused, live.url], timeout=60) as api:
            monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
            await api.list(CONFIGMAPS, "default")  # refused: not sent, so asked of the next server at once
            return api.server

    assert asyncio.run(run()) == live.url
    assert loads == []
    figures["trust_store_loads_per_failover"] = len(loads)

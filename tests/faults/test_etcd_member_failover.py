"""One etcd member of three goes away while kubelab's client streams creates through a real `kubelab apiserver`
(given all three members in --etcd-servers, dialling the first, which is the one that goes).

The member is stopped (SIGTERM), killed (SIGKILL) or paused (SIGSTOP: it holds its port and answers
nothing). While the API server moves to another member, a create may fail, but only with a Kubernetes
Status: 503 (etcd unavailable), 504 (the storage timeout) or 500; never a plain-text body. Each create is
sent again until acknowledged (201, or 409 AlreadyExists when a try cut off earlier had landed), and at the
end every acknowledged name is stored, and nothing else.

Before the storage failed over once per broken connection (apiserver/storage.py), the first request to
fail closed the gRPC channel the others were still waiting on; gRPC cancelled them, and each CancelledError
reached uvicorn, which answered a plain-text `500 Internal Server Error`: killed, 32 of 32 concurrent
creates; paused, 31.

Timings are figures for RELIABILITY.md, never asserted."""

from __future__ import annotations

import asyncio
import collections
import itertools
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from faultkit import ApiServerProcess, Figures, configmap

from kubelab.client import AlreadyExists, ApiClient, ApiError
from kubelab.etcdcluster import EtcdCluster
from kubelab.kinds import CONFIGMAPS, NAMESPACES

WORKERS = 32
BEFORE = 200  # acknowledged creates before the member goes
AFTER = 400  # and after it went: the API server must have moved on to serve them
NAMESPACE = "member-failover"


def _take_away(cluster: EtcdCluster, how: str) -> None:
    member = cluster.members[0]
    assert member.process is not None
    if how == "stopped":
        member.stop()
    elif how == "killed":
        member.process.kill()
        member.process.wait()
    else:
        member.process.send_signal(signal.SIGSTOP)


@pytest.mark.parametrize("how", ["stopped", "killed", "paused"])
def test_one_member_of_three_goes_away_during_creates(
        etcd_cluster: EtcdCluster, tmp_path: Path, figures: Figures, how: str) -> None:
    server = ApiServerProcess(",".join(etcd_cluster.urls), tmp_path / "apiserver.log")
    try:
        # A generous start: on two loaded cores the interpreter alone took over a minute to import it.
        server.start(timeout=300)
        _creates_while_a_member_goes(etcd_cluster, server, figures, how)
    finally:
        server.stop()


def _creates_while_a_member_goes(etcd_cluster: EtcdCluster, server: ApiServerProcess, figures: Figures,
                                 how: str) -> None:
    acknowledged: set[str] = set()
    errors: collections.Counter[tuple[int, str]] = collections.Counter()
    not_status: list[str] = []
    counts = {"created": 0, "already_existed_on_retry": 0, "transport_errors": 0}
    ack_times: list[float] = []
    went: dict[str, Any] = {}
    enough = asyncio.Event()
    names = (f"cm-{i:05d}" for i in itertools.count())

    async def run() -> None:
        async with ApiClient(server.url, timeout=120) as api:
            await api.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

            async def worker() -> None:
                while not enough.is_set():
                    name = next(names)
                    sent_before = False
                    while True:
                        try:
                            await api.create(CONFIGMAPS, configmap(name), NAMESPACE)
                            counts["created"] += 1
                        except AlreadyExists:
                            # Only this worker sends `name`: an earlier try, answered with an error, landed.
                            assert sent_before, f"{name} existed before it was ever sent"
                            counts["already_existed_on_retry"] += 1
                        except ApiError as exc:
                            if exc.status.get("kind") != "Status":
                                not_status.append(f"{exc.code} {exc.message[:200]!r}")
                            errors[(exc.code, exc.reason)] += 1
                            sent_before = True  # it may have landed: send it again, as a client would
                            await asyncio.sleep(0.05)
                            continue
                        except httpx.TransportError:
                            counts["transport_errors"] += 1
                            sent_before = True
                            await asyncio.sleep(0.05)
                            continue
                        acknowledged.add(name)
                        ack_times.append(time.monotonic())
                        if "at" in went and len(acknowledged) >= went["acks"] + AFTER:
                            enough.set()
                        break

            async def take_away() -> None:
                while len(acknowledged) < BEFORE:
                    await asyncio.sleep(0.05)
                await asyncio.to_thread(_take_away, etcd_cluster, how)
                # Counted from here: creates acknowledged while the member was being stopped (seconds, on
                # a loaded machine) are not creates served without it.
                went.update(acks=len(acknowledged), at=time.monotonic())

            await asyncio.gather(take_away(), *(worker() for _ in range(WORKERS)))

    asyncio.run(run())
    with httpx.Client(base_url=server.url, timeout=120) as api:
        listed = api.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps")
    assert listed.status_code == 200, listed.text
    stored = {item["metadata"]["name"] for item in listed.json()["items"]}
    after = [t for t in ack_times if t >= went["at"]]
    gaps = [b - a for a, b in itertools.pairwise([went["at"], *after])]
    figures.update(how=how, acknowledged=len(acknowledged), stored=len(stored),
                   lost=len(acknowledged - stored), errors={f"{c} {r}": n for (c, r), n in sorted(errors.items())},
                   not_status=len(not_status), **counts,
                   first_ack_after_s=round(after[0] - went["at"], 2) if after else None,
                   longest_ack_pause_s=round(max(gaps), 2) if gaps else None)
    assert not not_status, not_status[:5]
    assert {code for code, _ in errors} <= {500, 503, 504}, errors
    assert counts["transport_errors"] == 0  # the API server answered every request
    assert len(after) >= AFTER
    assert not acknowledged - stored, sorted(acknowledged - stored)[:20]
    assert stored == acknowledged  # nothing unacknowledged either: every name was sent until acknowledged
    assert "Exception in ASGI application" not in server.log()
    assert server.proc is not None and server.proc.poll() is None

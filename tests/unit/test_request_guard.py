"""RequestGuard's seats, exemptions and timeout, driven through its ASGI interface: an application that
holds each request until the test lets it go shows exactly which requests got a seat."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apiserver.auth import USER_SCOPE_KEY
from apiserver.flowcontrol import RequestGuard
from apiserver.serving import INTERNAL_KEY, ServingOptions
from kubelab.tokenfile import UserInfo

MASTER = UserInfo("alice", "1", ("system:masters", "system:authenticated"))
NODE = UserInfo("system:node:n1", "2", ("system:nodes", "system:authenticated"))
BOB = UserInfo("bob", "3", ("system:authenticated",))


class Holding:
    """An ASGI app that answers 200 once `release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.entered += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def call(guard: RequestGuard, method: str, path: str, query: str = "", *, user: UserInfo | None = None,
               internal: bool = False) -> tuple[asyncio.Task[None], list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    scope: dict[str, Any] = {"type": "http", "method": method, "path": path, "query_string": query.encode(),
                             "headers": []}
    if user is not None:
        scope[USER_SCOPE_KEY] = user
    if internal:
        scope[INTERNAL_KEY] = True

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    task = asyncio.create_task(guard(scope, receive, send))
    for _ in range(5):
        await asyncio.sleep(0)
    return task, sent


def status(sent: list[dict[str, Any]]) -> int | None:
    return next((m["status"] for m in sent if m["type"] == "http.response.start"), None)


def widths(seats: int) -> Any:
    return lambda scope, info: seats if info.resource == "pods" else 1


async def test_a_big_list_takes_its_seats() -> None:
    app = Holding()
    guard = RequestGuard(app, ServingOptions(max_requests_inflight=10), width=widths(10))
    big, _ = await call(guard, "GET", "/api/v1/pods", user=BOB)
    _, refused = await call(guard, "GET", "/api/v1/namespaces", user=BOB)
    assert status(refused) == 429
    assert app.entered == 1
    app.release.set()
    await big
    done, answered = await call(guard, "GET", "/api/v1/namespaces", user=BOB)
    await done
    assert status(answered) == 200


async def test_writes_and_reads_have_pools_of_their_own() -> None:
    app = Holding()
    guard = RequestGuard(app, ServingOptions(max_requests_inflight=1, max_mutating_requests_inflight=1))
    held = [await call(guard, "POST", "/api/v1/namespaces/default/configmaps", user=BOB),
            await call(guard, "GET", "/api/v1/namespaces/default/configmaps/x", user=BOB)]
    assert status((await call(guard, "PUT", "/api/v1/namespaces/default/configmaps/x", user=BOB))[1]) == 429
    assert status((await call(guard, "GET", "/api/v1/namespaces/default/configmaps", user=BOB))[1]) == 429
    # Exempt: watches, probes, system:masters, the private socket; a node has seats of its own.
    exempt = [await call(guard, "GET", "/api/v1/namespaces/default/configmaps", "watch=true", user=BOB),
              await call(guard, "GET", "/healthz", user=BOB),
              await call(guard, "POST", "/api/v1/namespaces/default/configmaps", user=MASTER),
              await call(guard, "POST", "/api/v1/namespaces/default/configmaps", internal=True),
              await call(guard, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", user=NODE)]
    assert app.entered == 2 + len(exempt)
    app.release.set()
    for task, sent in held + exempt:
        await task
        assert status(sent) == 200


async def test_without_users_a_heartbeat_is_a_nodes() -> None:
    """An open API (no token file) has no users: a node's Lease and Node status are classified by path."""
    app = Holding()
    # node-high gets a sixth of both limits: 2 seats here, for 1 write.
    guard = RequestGuard(app, ServingOptions(max_requests_inflight=11, max_mutating_requests_inflight=1))
    await call(guard, "POST", "/api/v1/namespaces/default/configmaps")
    lease = await call(guard, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1")
    node = await call(guard, "PATCH", "/api/v1/nodes/n1/status")
    assert status((await call(guard, "POST", "/api/v1/namespaces/default/configmaps"))[1]) == 429
    assert app.entered == 3
    app.release.set()
    for task, sent in (lease, node):
        await task
        assert status(sent) == 200


async def test_past_the_request_timeout_a_request_is_504() -> None:
    app = Holding()
    guard = RequestGuard(app, ServingOptions(request_timeout=0.05))
    task, sent = await call(guard, "GET", "/api/v1/namespaces", user=BOB)
    await task
    assert status(sent) == 504
    assert b'"reason":"Timeout"' in sent[1]["body"]


@pytest.mark.parametrize("path", ["/api/v1/namespaces/default/pods/web/exec", "/api/v1/watch/pods"])
async def test_long_running_requests_have_no_timeout(path: str) -> None:
    app = Holding()
    guard = RequestGuard(app, ServingOptions(request_timeout=0.05, max_requests_inflight=1,
                                             max_mutating_requests_inflight=1))
    task, sent = await call(guard, "GET" if "watch" in path else "POST", path, user=BOB)
    await asyncio.sleep(0.2)
    assert not task.done() and sent == []
    app.release.set()
    await task
    assert status(sent) == 200


async def test_big_lists_take_a_lane_and_queue_for_it() -> None:
    """LISTs of the most seats are served `big_lists` at a time; another waits for a lane (a quarter of the
    request timeout, APF's queue wait) and then gets 429, while small requests go by."""
    app = Holding()
    guard = RequestGuard(app, ServingOptions(big_lists=1, request_timeout=8.0), width=widths(10))
    first = await call(guard, "GET", "/api/v1/pods", user=BOB)
    second_task, second = await call(guard, "GET", "/api/v1/pods", user=BOB)
    small = await call(guard, "GET", "/api/v1/namespaces", user=BOB)
    assert app.entered == 2  # the first big LIST and the small one; the second big one waits
    await second_task
    assert status(second) == 429
    app.release.set()
    for task, sent in (first, small):
        await task
        assert status(sent) == 200

"""EventRecorder.event() as client-go's record broadcaster behaves, against the real API server: events
wait in one queue of at most 1000 (maxQueuedEvents; further ones are dropped, never waited for) and are
posted in order, one at a time, so a component that emits a burst (500 nodes registering: a
RegisteredNode event each) never has more than one event request in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from kubelab import kinds
from kubelab.client import ApiClient
from kubelab.events import MAX_QUEUED_EVENTS, EventRecorder
from kubelab.models import Pod

NS = "event-recorder"


@pytest.fixture(scope="module")
def server(apiserver: str) -> Iterator[str]:
    with httpx.Client(base_url=apiserver, timeout=10) as client:
        assert client.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).status_code == 201
    yield apiserver


def pod(i: int) -> Pod:
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": f"web-{i}", "namespace": NS, "uid": f"uid-{i}"},
                               "spec": {"containers": [{"name": "c", "image": "pause"}]}})


def test_a_burst_is_queued_up_to_1000_and_the_rest_dropped(server: str) -> None:
    async def burst() -> tuple[int, list[str]]:
        async with ApiClient(server, fast_requests=True) as api:
            recorder = EventRecorder(api, "burst-controller")
            for i in range(MAX_QUEUED_EVENTS + 500):  # all at once, before the poster has run
                recorder.event(pod(i), "Normal", "Burst", f"event {i}")
            await recorder.flush()
            events, _ = await api.list(kinds.EVENTS, NS)
            return recorder.dropped, [e.message for e in events if e.reason == "Burst"]

    dropped, messages = asyncio.run(burst())
    assert dropped == 500
    assert len(messages) == MAX_QUEUED_EVENTS
    assert set(messages) == {f"event {i}" for i in range(MAX_QUEUED_EVENTS)}  # the first 1000, none later


def test_events_are_posted_one_at_a_time_in_order(server: str) -> None:
    async def record() -> list[str]:
        async with ApiClient(server, fast_requests=True) as api:
            recorder = EventRecorder(api, "order-controller")
            for i in range(20):
                recorder.event(pod(i), "Normal", "InOrder", f"event {i:02}")
            await recorder.flush()
            events, _ = await api.list(kinds.EVENTS, NS)
            ordered = sorted((e for e in events if e.reason == "InOrder"),
                             key=lambda e: int(e.metadata.resource_version or 0))
            return [e.message for e in ordered]

    # One poster: each event is created after the one before it has been answered, so etcd's revisions
    # follow the order they were recorded in (a task per event would race them).
    assert asyncio.run(record()) == [f"event {i:02}" for i in range(20)]

"""The events.k8s.io/v1 recorder (kubelab/eventseries.py) and the scheduler that writes through it, against
a real API server: a repeat becomes a series (count 2 at once, the final count when the series ends, as
client-go's tools/events writes them), a series whose event has gone is created anew, and the
scheduler's Scheduled and FailedScheduling events are events.k8s.io/v1 events kube-scheduler's shape that
core/v1 readers see with reason, message and reportingComponent."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from schedulerkit import (
    cleanup,
    create_namespace,
    fresh_nodes,
    node_body,
    pod_body,
    running_scheduler,
    unique,
    wait_for,
)

from kubelab import kinds
from kubelab.client import ApiClient
from kubelab.eventseries import FINISH_TIME, SeriesRecorder
from kubelab.models import Pod
from scheduler import reporting
from scheduler.reporting import Reporter


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def api(apiserver: str) -> AsyncIterator[ApiClient]:
    async with ApiClient(apiserver) as client:
        yield client


def a_pod(name: str, namespace: str = "default") -> Pod:
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "7"}})


async def core_event(apiserver: str, name: str, namespace: str = "default") -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=apiserver) as http:
        resp = await http.get(f"/api/v1/namespaces/{namespace}/events/{name}")
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()
        return body


async def events_of(api: ApiClient, regarding: str, namespace: str = "default") -> list[dict[str, Any]]:
    events, _ = await api.list(kinds.EVENTS_V1, namespace)
    return [e.to_dict() for e in events if (e.regarding.name if e.regarding else None) == regarding]


async def test_a_repeat_becomes_a_series_and_its_end_writes_the_count(api: ApiClient, apiserver: str) -> None:
    clock = Clock()
    recorder = SeriesRecorder(api, "example-controller", instance="example-controller-host", clock=clock)
    pod = a_pod(unique("web"))
    await recorder.post(pod, "Warning", "FailedMount", "no such volume", action="Mounting")
    [event] = await events_of(api, pod.metadata.name or "")
    assert event["metadata"]["name"] == f"{pod.metadata.name}.{int(clock.now * 1e9):x}"
    assert "series" not in event
    assert event["regarding"] == {"kind": "Pod", "namespace": "default", "name": pod.metadata.name,
                                  "uid": pod.metadata.uid, "apiVersion": "v1", "resourceVersion": "7"}
    assert (event["eventTime"], event["reportingController"], event["reportingInstance"], event["action"]) == (
        "2027-01-15T08:00:00.000000Z", "example-controller", "example-controller-host", "Mounting")

    clock.now += 10
    await recorder.post(pod, "Warning", "FailedMount", "another note counts as the same", action="Mounting")
    clock.now += 10
    await recorder.post(pod, "Warning", "FailedMount", "no such volume", action="Mounting")
    [event] = await events_of(api, pod.metadata.name or "")
    # The second occurrence is written at once; the third only counted, as client-go does.
    assert event["series"] == {"count": 2, "lastObservedTime": "2027-01-15T08:00:10.000000Z"}
    assert event["note"] == "no such volume"
    core = await core_event(apiserver, event["metadata"]["name"])
    assert core["series"] == event["series"] and "count" not in core
    assert core["reportingComponent"] == "example-controller" and core["message"] == "no such volume"

    # Another reason (or object) is another event.
    await recorder.post(pod, "Normal", "Mounted", "ok", action="Mounting")
    assert len(await events_of(api, pod.metadata.name or "")) == 2

    # Six minutes without an occurrence end the series: its final count is written and it is forgotten.
    clock.now += FINISH_TIME + 1
    await recorder.finish_series()
    [series] = [e for e in await events_of(api, pod.metadata.name or "") if e["reason"] == "FailedMount"]
    assert series["series"] == {"count": 3, "lastObservedTime": "2027-01-15T08:00:20.000000Z"}
    assert recorder.cache == {}
    await recorder.post(pod, "Warning", "FailedMount", "no such volume", action="Mounting")
    assert len([e for e in await events_of(api, pod.metadata.name or "") if e["reason"] == "FailedMount"]) == 2


async def test_a_series_whose_event_has_gone_is_created_again(api: ApiClient) -> None:
    clock = Clock()
    recorder = SeriesRecorder(api, "example-controller", instance="i", clock=clock)
    pod = a_pod(unique("web"))
    await recorder.post(pod, "Warning", "BackOff", "back-off", action="Restarting")
    [event] = await events_of(api, pod.metadata.name or "")
    await api.delete(kinds.EVENTS_V1, event["metadata"]["name"], "default")  # expired (--event-ttl)
    clock.now += 1
    await recorder.post(pod, "Warning", "BackOff", "back-off", action="Restarting")
    [again] = await events_of(api, pod.metadata.name or "")
    assert again["metadata"]["name"] == event["metadata"]["name"]
    assert again["series"]["count"] == 2


async def test_the_scheduler_writes_events_v1(apiserver: str) -> None:
    async with ApiClient(apiserver) as api:
        await fresh_nodes(api)
        ns, name = unique("sched-ev"), unique("test-scheduler")
        node = unique("node")
        await create_namespace(api, ns)
        try:
            await api.create(kinds.NODES, node_body(node, cpu="1"))
            async with running_scheduler(apiserver, name):
                await api.create(kinds.PODS, pod_body("small", name, cpu="100m"), ns)
                await api.create(kinds.PODS, pod_body("big", name, cpu="2"), ns)

                async def scheduler_events() -> dict[str, dict[str, Any]] | None:
                    events, _ = await api.list(kinds.EVENTS_V1, ns)
                    found = {e.reason or "": e.to_dict() for e in events}
                    return found if {"Scheduled", "FailedScheduling"} <= set(found) else None

                found = await wait_for(scheduler_events, "the scheduler's events")
            scheduled, failed = found["Scheduled"], found["FailedScheduling"]
            assert (scheduled["action"], scheduled["type"], scheduled["note"]) == (
                "Binding", "Normal", f"Successfully assigned {ns}/small to {node}")
            assert (failed["action"], failed["type"]) == ("Scheduling", "Warning")
            assert failed["note"] == "0/1 nodes are available: 1 Insufficient cpu."
            for event in (scheduled, failed):
                assert event["reportingController"] == name
                assert event["reportingInstance"] == f"{name}-{socket.gethostname()}"
                assert event["eventTime"] and "deprecatedSource" not in event
                assert event["regarding"]["kind"] == "Pod" and event["regarding"]["namespace"] == ns
            # core/v1 readers (kubectl describe, `kubectl get events`) see the same event in their names.
            core = await core_event(apiserver, failed["metadata"]["name"], ns)
            assert (core["reason"], core["message"], core["reportingComponent"], core["type"]) == (
                "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.", name, "Warning")
            assert core["involvedObject"]["name"] == "big"
        finally:
            await cleanup(api, ns, [node])


async def _scheduled_then_failed(api: ApiClient, prefix: str, scheduled: int) -> tuple[str, Reporter]:
    """A new namespace and a reporter (workers not started) with `scheduled` Scheduled events queued for
    web-0.. and then a FailedScheduling one for "big"."""
    ns = unique(prefix)
    await create_namespace(api, ns)
    reporter = Reporter(api, unique("test-scheduler"))
    for i in range(scheduled):
        reporter.event(a_pod(f"web-{i}", ns), "Normal", "Scheduled", f"Successfully assigned {ns}/web-{i} to n",
                       "Binding")
    reporter.event(a_pod("big", ns), "Warning", "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.",
                   "Scheduling")
    return ns, reporter


async def _written(api: ApiClient, ns: str, reporter: Reporter, count: int) -> list[dict[str, Any]]:
    """Run the reporter's workers until `count` events are in `ns`; those events. The namespace goes after."""
    worker = asyncio.create_task(reporter.run())
    try:
        async def all_written() -> list[dict[str, Any]] | None:
            events, _ = await api.list(kinds.EVENTS_V1, ns)
            return [e.to_dict() for e in events] if len(events) == count else None

        events: list[dict[str, Any]] = await wait_for(all_written, f"the {count} events")
        return events
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
        await cleanup(api, ns, [])


async def test_a_warning_is_written_before_the_normal_events_queued_ahead_of_it(
        api: ApiClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """During a burst the Scheduled events of the bindings queue up; a FailedScheduling event does not
    wait behind them. One worker makes the order the queue's: the Warning queued last is written first."""
    monkeypatch.setattr(reporting, "EVENT_WORKERS", 1)
    ns, reporter = await _scheduled_then_failed(api, "warn-first", 20)
    events = await _written(api, ns, reporter, 21)
    written = sorted(events, key=lambda e: int(e["metadata"]["resourceVersion"]))
    assert [e["reason"] for e in written] == ["FailedScheduling"] + ["Scheduled"] * 20
    assert [e["regarding"]["name"] for e in written[1:]] == [f"web-{i}" for i in range(20)]


async def test_a_full_queue_drops_a_normal_event_rather_than_a_warning(
        api: ApiClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The queue full of Scheduled events (a 5,000-node burst's bindings): a FailedScheduling event takes
    the oldest one's place instead of being dropped, and a further Normal event is dropped."""
    monkeypatch.setattr(reporting, "MAX_QUEUED_EVENTS", 5)
    ns, reporter = await _scheduled_then_failed(api, "warn-kept", 5)
    reporter.event(a_pod("web-5", ns), "Normal", "Scheduled", f"Successfully assigned {ns}/web-5 to n", "Binding")
    assert reporter.dropped_events == 2
    events = await _written(api, ns, reporter, 5)
    kept = {(e["reason"], e["regarding"]["name"]) for e in events}
    assert kept == {("FailedScheduling", "big")} | {("Scheduled", f"web-{i}") for i in range(1, 5)}

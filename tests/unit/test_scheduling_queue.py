"""kube-scheduler's scheduling queue (reference/scheduler-and-nodes.md §4) on a hand-moved clock:
priority then time in activeQ, 1 s doubling to 10 s backoff from the last failure, parked pods moved
back only by events their rejecting plugins care about (and the hint agrees), by their own update,
or after 5 minutes; an event during an attempt is not lost."""

from __future__ import annotations

from typing import Any

import pytest

from kubelab.models import Pod
from scheduler import queue as q
from scheduler.fit import NODE_AFFINITY_PLUGIN, NODE_RESOURCES_FIT_PLUGIN, TAINT_TOLERATION_PLUGIN

FIT = frozenset({NODE_RESOURCES_FIT_PLUGIN})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, *, priority: int | None = None, labels: dict[str, str] | None = None, **spec: Any) -> Pod:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}], **spec}
    if priority is not None:
        body["priority"] = priority
    return Pod.from_dict({"metadata": {"name": name, "namespace": "ns", "labels": labels or {},
                                       "resourceVersion": "1"},
                          "spec": body, "status": {"phase": "Pending"}})


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def queue(clock: Clock) -> q.SchedulingQueue:
    return q.SchedulingQueue(clock=clock)


def pop_names(queue: q.SchedulingQueue) -> list[str]:
    names = []
    while (qp := queue.pop_nowait()) is not None:
        names.append(qp.pod.metadata.name or "")
    return names


def fail(queue: q.SchedulingQueue, name: str, plugins: frozenset[str] = FIT) -> q.QueuedPod:
    qp = queue.pop_nowait()
    assert qp is not None and qp.pod.metadata.name == name
    queue.add_unschedulable(qp, plugins)
    return qp


def test_priority_first_then_arrival(queue: q.SchedulingQueue, clock: Clock) -> None:
    for name, prio in (("a", 0), ("b", 10), ("c", None), ("d", 10)):
        queue.add(pod(name, priority=prio))
        clock.now += 1
    assert pop_names(queue) == ["b", "d", "a", "c"]


@pytest.mark.parametrize(("attempts", "seconds"), [
    pytest.param(0, 0.0, id="never tried: no backoff"),
    pytest.param(1, 1.0, id="first failure: 1 s"),
    pytest.param(2, 2.0, id="doubles"),
    pytest.param(4, 8.0, id="8 s"),
    pytest.param(5, 10.0, id="capped at 10 s"),
    pytest.param(30, 10.0, id="stays capped"),
])
def test_backoff_duration(queue: q.SchedulingQueue, attempts: int, seconds: float) -> None:
    assert queue.backoff_duration(attempts) == seconds


def test_parked_pod_needs_an_interesting_event(queue: q.SchedulingQueue) -> None:
    queue.add(pod("web"))
    fail(queue, "web")
    assert queue.where("ns/web") == "unschedulable"
    assert queue.move([q.NODE_LABEL_CHANGE]) == 0  # NodeAffinity's event; cpu was the problem
    assert queue.move([q.ASSIGNED_POD_DELETE], hint=lambda p: False) == 0  # the hint says it still won't fit
    assert queue.where("ns/web") == "unschedulable"
    assert queue.move([q.ASSIGNED_POD_DELETE], hint=lambda p: True) == 1
    assert queue.where("ns/web") == "backoff"  # moved at once, but still inside its 1 s backoff


def test_backoff_runs_from_the_last_failure(queue: q.SchedulingQueue, clock: Clock) -> None:
    queue.add(pod("web"))
    fail(queue, "web")
    clock.now += 0.5
    queue.move([q.NODE_ADD])
    queue.flush_backoff_completed()
    assert queue.where("ns/web") == "backoff"
    clock.now += 0.5  # 1 s after the failure
    assert queue.flush_backoff_completed() == 1
    qp = queue.pop_nowait()
    assert qp is not None and qp.attempts == 2


def test_second_failure_backs_off_two_seconds(queue: q.SchedulingQueue, clock: Clock) -> None:
    queue.add(pod("web"))
    fail(queue, "web")
    clock.now += 1
    queue.move([q.NODE_ADD])
    assert queue.where("ns/web") == "active"  # past its backoff: straight to activeQ
    fail(queue, "web")  # attempt 2
    queue.move([q.NODE_ADD])
    clock.now += 1.5
    queue.flush_backoff_completed()
    assert queue.where("ns/web") == "backoff"
    clock.now += 0.5
    queue.flush_backoff_completed()
    assert queue.where("ns/web") == "active"


def test_node_events_only_reach_the_plugins_that_registered_them(queue: q.SchedulingQueue) -> None:
    for name, plugin in (("fit", NODE_RESOURCES_FIT_PLUGIN), ("taint", TAINT_TOLERATION_PLUGIN),
                         ("affinity", NODE_AFFINITY_PLUGIN)):
        queue.add(pod(name))
        fail(queue, name, frozenset({plugin}))
    queue.move([q.NODE_TAINT_CHANGE])
    assert [queue.where(f"ns/{n}") for n in ("fit", "taint", "affinity")] == \
        ["unschedulable", "backoff", "unschedulable"]
    queue.move([q.NODE_ADD])  # a new node could suit any of them
    assert queue.where("ns/fit") == queue.where("ns/affinity") == "backoff"


def test_own_update_moves_it_but_a_status_change_does_not(queue: q.SchedulingQueue, clock: Clock) -> None:
    original = pod("web")
    queue.add(original)
    fail(queue, "web")
    with_status = original.model_copy(update={"metadata": original.metadata.model_copy(
        update={"resource_version": "2"})})
    assert with_status.status is not None
    with_status.status.message = "the scheduler's own PodScheduled patch"
    queue.update(original, with_status)
    assert queue.where("ns/web") == "unschedulable"
    clock.now += 5
    queue.update(with_status, pod("web", labels={"tier": "web"}))
    assert queue.where("ns/web") == "active"


def test_an_event_during_the_attempt_is_not_lost(queue: q.SchedulingQueue) -> None:
    queue.add(pod("web"))
    qp = queue.pop_nowait()
    assert qp is not None
    queue.move([q.ASSIGNED_POD_DELETE])  # nothing parked yet, but it is remembered
    queue.add_unschedulable(qp, FIT)
    assert queue.where("ns/web") == "backoff"


def test_five_minutes_parked_is_enough(queue: q.SchedulingQueue, clock: Clock) -> None:
    queue.add(pod("web"))
    fail(queue, "web")
    clock.now += 299
    assert queue.flush_unschedulable_leftover() == 0
    clock.now += 2
    assert queue.flush_unschedulable_leftover() == 1
    assert queue.where("ns/web") == "active"


def test_gated_pods_wait_for_their_gates_to_go(queue: q.SchedulingQueue, clock: Clock) -> None:
    gated = pod("web", schedulingGates=[{"name": "example.com/wait"}])
    queue.add(gated)
    assert queue.where("ns/web") == "unschedulable"
    queue.move([q.NODE_ADD])
    clock.now += 400
    queue.flush_unschedulable_leftover()
    assert pop_names(queue) == []
    queue.update(gated, pod("web"))
    assert pop_names(queue) == ["web"]


def test_errors_go_to_backoff_and_deleted_pods_stay_gone(queue: q.SchedulingQueue) -> None:
    queue.add(pod("web"))
    fail(queue, "web", frozenset())  # no rejecting plugin: an error, retried after backoff
    assert queue.where("ns/web") == "backoff"
    queue.add(pod("gone"))
    qp = queue.pop_nowait()
    assert qp is not None
    queue.delete("ns/gone")  # deleted while being scheduled
    queue.add_unschedulable(qp, FIT)
    assert queue.where("ns/gone") is None


def test_a_binding_failure_comes_back_through_backoff(queue: q.SchedulingQueue) -> None:
    queue.add(pod("web"))
    qp = queue.pop_nowait()
    assert qp is not None
    queue.done("ns/web")  # assumed
    assert queue.where("ns/web") is None
    queue.add_after_error(qp)
    assert queue.where("ns/web") == "backoff"

"""The de-duplicating work queue with client-go's semantics: a key waits at most once, a key re-added
while a worker holds it is processed again exactly once afterwards, failures back off exponentially
(base x 2^failures, capped) until forgotten. Delays are checked as values handed to the timer, never
by measuring time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kubelab.client.workqueue import WorkQueue


class Timers:
    """Stands in for loop.call_later: records each timer and fires it when the test says so."""

    def __init__(self) -> None:
        self.pending: list[tuple[float, Callable[[], Any], asyncio.TimerHandle]] = []

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        handle = asyncio.TimerHandle(0.0, callback, args, asyncio.get_running_loop())
        self.pending.append((delay, lambda: callback(*args), handle))
        return handle

    def fire_all(self) -> None:
        due, self.pending = self.pending, []
        for _, fire, handle in due:
            if not handle.cancelled():
                fire()


@pytest.fixture
async def timers(monkeypatch: pytest.MonkeyPatch) -> Timers:
    fake = Timers()
    monkeypatch.setattr(asyncio.get_running_loop(), "call_later", fake.call_later)
    return fake


async def drain(q: WorkQueue) -> list[str]:
    """Every key waiting now, each marked done at once."""
    keys = []
    while len(q):
        key = await q.get()
        keys.append(key)
        q.done(key)
    return keys


async def test_adds_of_a_waiting_key_collapse() -> None:
    q = WorkQueue()
    for key in ("ns/a", "ns/b", "ns/a", "ns/a", "ns/b"):
        q.add(key)
    assert len(q) == 2
    assert await drain(q) == ["ns/a", "ns/b"]  # first-come order, one each


async def test_key_re_added_while_processing_runs_again_once() -> None:
    q = WorkQueue()
    q.add("ns/a")
    key = await q.get()
    q.add("ns/a")
    q.add("ns/a")
    assert len(q) == 0  # never handed to a second worker while the first holds it
    q.done(key)
    assert len(q) == 1
    assert await drain(q) == ["ns/a"]
    assert len(q) == 0


async def test_done_without_new_adds_does_not_requeue() -> None:
    q = WorkQueue()
    q.add("ns/a")
    q.done(await q.get())
    assert len(q) == 0


@pytest.mark.parametrize(("base", "cap", "delays"), [
    pytest.param(0.005, 30.0, [0.005, 0.01, 0.02, 0.04, 0.08], id="client-go default: 5 ms doubling"),
    pytest.param(1.0, 10.0, [1.0, 2.0, 4.0, 8.0, 10.0, 10.0], id="scheduler backoff: 1 s doubling to 10 s"),
])
async def test_rate_limited_delays_grow(monkeypatch: pytest.MonkeyPatch, base: float, cap: float,
                                        delays: list[float]) -> None:
    q = WorkQueue(base_delay=base, max_delay=cap)
    seen: list[float] = []
    monkeypatch.setattr(q, "add_after", lambda key, delay: seen.append(delay))
    for _ in delays:
        q.add_rate_limited("ns/a")
    assert seen == delays
    assert q.retries("ns/a") == len(delays)


async def test_forget_resets_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    q = WorkQueue(base_delay=0.005)
    seen: list[float] = []
    monkeypatch.setattr(q, "add_after", lambda key, delay: seen.append(delay))
    q.add_rate_limited("ns/a")
    q.add_rate_limited("ns/a")
    q.add_rate_limited("ns/b")  # every key backs off on its own
    q.forget("ns/a")
    q.add_rate_limited("ns/a")
    assert seen == [0.005, 0.01, 0.005, 0.005]
    assert (q.retries("ns/a"), q.retries("ns/b")) == (1, 1)


async def test_rate_limited_key_comes_back_when_its_timer_fires(timers: Timers) -> None:
    q = WorkQueue(base_delay=0.25)
    q.add_rate_limited("ns/a")
    assert len(q) == 0  # not yet: it waits for its delay
    assert [delay for delay, _, _ in timers.pending] == [0.25]
    timers.fire_all()
    assert await drain(q) == ["ns/a"]


async def test_zero_delay_adds_at_once() -> None:
    q = WorkQueue()
    q.add_after("ns/a", 0)
    assert len(q) == 1


async def test_a_pending_retry_is_not_doubled(timers: Timers) -> None:
    q = WorkQueue()
    q.add_after("ns/a", 1.0)
    q.add_after("ns/a", 2.0)
    assert [delay for delay, _, _ in timers.pending] == [1.0]  # the earlier timer stands
    timers.fire_all()
    assert await drain(q) == ["ns/a"]
    q.add_after("ns/a", 3.0)  # once fired, a new retry may be scheduled
    assert [delay for delay, _, _ in timers.pending] == [3.0]


async def test_shutdown_stops_adds_and_timers(timers: Timers) -> None:
    q = WorkQueue()
    q.add_after("ns/a", 1.0)
    q.shutdown()
    q.add("ns/b")
    timers.fire_all()
    assert len(q) == 0


async def test_worker_retries_failures_and_forgets_on_success() -> None:
    q = WorkQueue("test", base_delay=0.001)
    calls: list[str] = []
    succeeded = asyncio.Event()

    async def reconcile(key: str) -> None:
        calls.append(key)
        if len(calls) < 3:
            raise RuntimeError("apiserver unavailable")
        succeeded.set()

    worker = asyncio.get_running_loop().create_task(q.run_worker(reconcile), name="test-worker")
    try:
        q.add("ns/a")
        await succeeded.wait()
    finally:
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker
    assert calls == ["ns/a", "ns/a", "ns/a"]
    assert q.retries("ns/a") == 0


async def test_per_key_workers_run_every_key_at_once_and_each_key_alone() -> None:
    """kubelet's pod workers: the tenth pod's sync starts while the first nine are still in theirs, and an
    add of a key being synced waits for that sync to end, then runs it once more."""
    q = WorkQueue("test")
    release = asyncio.Event()
    running: set[str] = set()
    started: list[str] = []
    all_in = asyncio.Event()
    second_a = asyncio.Event()
    overlaps: list[str] = []  # kept here: the queue catches a reconcile's exceptions (and retries the key)

    async def reconcile(key: str) -> None:
        if key in running:
            overlaps.append(key)
        running.add(key)
        started.append(key)
        if len(running) == 10:
            all_in.set()
        if started.count("ns/p0") == 2:
            second_a.set()
        try:
            await release.wait()
        finally:
            running.discard(key)

    async with asyncio.TaskGroup() as tg:
        dispatcher = tg.create_task(q.run_per_key(reconcile, tg))
        for i in range(10):
            q.add(f"ns/p{i}")
        await all_in.wait()  # ten syncs in flight: no fixed number of workers holds the tenth back
        q.add("ns/p0")  # dirty while in flight: not run beside the first
        await asyncio.sleep(0)
        assert started.count("ns/p0") == 1
        release.set()
        await second_a.wait()
        dispatcher.cancel()
    assert not overlaps, f"{overlaps} synced twice at once"
    assert sorted(started) == sorted([f"ns/p{i}" for i in range(10)] + ["ns/p0"])

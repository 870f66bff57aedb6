"""The BoundedFrequencyRunner and its token bucket: when kube-proxy syncs."""

from __future__ import annotations

import asyncio

import pytest
from proxytimer import FakeTimer

from proxyagent.runner import BoundedFrequencyRunner, TokenBucket


def test_token_bucket_allows_a_burst_then_one_per_interval() -> None:
    bucket = TokenBucket(rate=1.0, burst=2, now=0.0)  # minSyncPeriod 1 s, burstSyncs 2

    assert [bucket.try_accept(0.0) for _ in range(3)] == [True, True, False]
    assert not bucket.try_accept(0.5)
    assert bucket.try_accept(1.0)
    assert not bucket.try_accept(1.0)
    # Idle for long: the bucket holds at most `burst` tokens.
    assert [bucket.try_accept(60.0) for _ in range(3)] == [True, True, False]


def test_token_bucket_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate=0.0, burst=2, now=0.0)
    with pytest.raises(ValueError):
        BoundedFrequencyRunner(lambda: asyncio.sleep(0), min_interval=10, max_interval=1)


async def _runner(timer: FakeTimer, min_interval: float, max_interval: float) -> tuple[BoundedFrequencyRunner,
                                                                                         list[float], asyncio.Task[None]]:
    runs: list[float] = []

    async def fn() -> None:
        runs.append(timer.now())

    runner = BoundedFrequencyRunner(fn, min_interval=min_interval, max_interval=max_interval, burst=2, timer=timer)
    loop = asyncio.create_task(runner.loop())
    await timer.idle()  # the loop waits for its first request
    return runner, runs, loop


async def _stop(loop: asyncio.Task[None]) -> None:
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)


async def test_requests_are_coalesced_and_rate_limited() -> None:
    timer = FakeTimer()
    runner, runs, loop = await _runner(timer, min_interval=2.0, max_interval=60.0)
    try:
        for _ in range(40):  # 40 requests within 0.4 s
            await timer.step(runner.run, advance=0.01)
        burst = len(runs)
        for _ in range(200):  # 2 s more: the rest is coalesced into one run once the bucket refills
            await timer.step(advance=0.01)
    finally:
        await _stop(loop)

    assert burst == 2
    assert len(runs) == 3
    assert runs[2] - runs[0] >= 1.9  # not before the bucket had a token again
    assert runs[2] - runs[1] == pytest.approx(2.0, abs=0.011)  # and as soon as it had one (minSyncPeriod)


async def test_runs_at_least_every_max_interval_and_on_retry() -> None:
    timer = FakeTimer()
    runner, runs, loop = await _runner(timer, min_interval=0.05, max_interval=0.3)
    try:
        for _ in range(100):
            await timer.step(advance=0.01)
        periodic = len(runs)
        before = len(runs)
        await timer.step(lambda: runner.retry_after(0.05))
        for _ in range(15):
            await timer.step(advance=0.01)
        retried = len(runs) - before
    finally:
        await _stop(loop)

    assert periodic == 3  # at 0.3, 0.6 and 0.9 s with nobody asking
    assert runs == pytest.approx([0.3, 0.6, 0.9, 1.05], abs=0.011)
    assert retried == 1


async def test_a_failing_function_does_not_stop_the_loop() -> None:
    calls = 0

    async def fn() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    timer = FakeTimer()
    runner = BoundedFrequencyRunner(fn, min_interval=0.0, max_interval=60.0, timer=timer)
    loop = asyncio.create_task(runner.loop())
    try:
        await timer.idle()
        for _ in range(3):
            await timer.step(runner.run)
    finally:
        await _stop(loop)
    assert calls == 3

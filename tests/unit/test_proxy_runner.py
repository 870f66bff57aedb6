"""The BoundedFrequencyRunner and its token bucket: when kube-proxy syncs."""

from __future__ import annotations

import asyncio
import time

import pytest

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


async def _runner(min_interval: float, max_interval: float, work: float = 0.0) -> tuple[BoundedFrequencyRunner,
                                                                                          list[float]]:
    runs: list[float] = []

    async def fn() -> None:
        runs.append(time.monotonic())
        await asyncio.sleep(work)

    return BoundedFrequencyRunner(fn, min_interval=min_interval, max_interval=max_interval, burst=2), runs


async def test_requests_are_coalesced_and_rate_limited() -> None:
    runner, runs = await _runner(min_interval=2.0, max_interval=60.0, work=0.02)
    loop = asyncio.create_task(runner.loop())
    try:
        start = time.monotonic()
        for _ in range(40):  # 40 requests within ~0.4 s
            runner.run()
            await asyncio.sleep(0.01)
        burst = len(runs)
        window = time.monotonic() - start
        await asyncio.sleep(2.4)  # the rest is coalesced into one run once the bucket refills
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)

    assert window < 2.0, "the requests took longer than min_interval; the bound below would not hold"
    assert burst == 2
    assert len(runs) == 3
    assert runs[2] - runs[0] >= 1.9  # not before the bucket had a token again


async def test_runs_at_least_every_max_interval_and_on_retry() -> None:
    runner, runs = await _runner(min_interval=0.05, max_interval=0.3)
    loop = asyncio.create_task(runner.loop())
    try:
        await asyncio.sleep(1.0)
        periodic = len(runs)
        runner.retry_after(0.05)
        before = len(runs)
        await asyncio.sleep(0.15)
        retried = len(runs) - before
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)

    assert 2 <= periodic <= 4  # every 0.3 s with nobody asking
    assert retried >= 1


async def test_a_failing_function_does_not_stop_the_loop() -> None:
    calls = 0

    async def fn() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    runner = BoundedFrequencyRunner(fn, min_interval=0.0, max_interval=60.0)
    loop = asyncio.create_task(runner.loop())
    try:
        for _ in range(3):
            runner.run()
            await asyncio.sleep(0.02)
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
    assert calls == 3

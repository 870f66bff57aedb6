"""The pure parts of leader election (kubelab/leaderelection.py): which record a try writes, when another
holder's Lease still stands, client-go's configuration checks, and the write fence's clock."""

from __future__ import annotations

import re

import pytest

from kubelab import leaderelection as le
from kubelab.client import ApiClient

HELD = le.Record("other_1", 15, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:10.000000Z", 3)


@pytest.mark.parametrize(("current", "leading", "expected"), [
    pytest.param(HELD, True, le.Record("me", 15, HELD.acquire_time, "NOW", 3), id="renew keeps acquireTime and transitions"),
    pytest.param(HELD, False, le.Record("me", 15, "NOW", "NOW", 4), id="a takeover counts a transition"),
    pytest.param(le.Record("", 1, "T", "T", 7), False, le.Record("me", 15, "NOW", "NOW", 8),
                 id="a released lease is taken with one more transition"),
])
def test_next_record(current: le.Record, leading: bool, expected: le.Record) -> None:
    assert le.next_record(current, identity="me", leading=leading, lease_duration=15.0, now="NOW") == expected


@pytest.mark.parametrize(("observed", "observed_at", "now", "held"), [
    pytest.param(HELD, 100.0, 114.9, True, id="changed 14.9 s ago: still held"),
    pytest.param(HELD, 100.0, 115.0, False, id="unchanged for the whole lease duration: expired"),
    pytest.param(le.Record("", 1, None, None, 3), 100.0, 100.0, False, id="released (no holder)"),
    pytest.param(le.Record("me", 15, None, None, 3), 100.0, 100.0, False, id="held by us"),
    pytest.param(le.Record("other_1", 60, None, None, 0), 100.0, 150.0, True,
                 id="the holder's own leaseDurationSeconds counts, not ours"),
])
def test_held_by_other(observed: le.Record, observed_at: float, now: float, held: bool) -> None:
    assert le.held_by_other(observed, identity="me", observed_at=observed_at, now=now) is held


@pytest.mark.parametrize(("durations", "errors"), [
    pytest.param((15, 10, 2), [], id="kube's defaults"),
    pytest.param((10, 10, 2), ["leaseDuration must be greater than renewDeadline"], id="lease = deadline"),
    pytest.param((15, 2.4, 2), ["renewDeadline must be greater than retryPeriod*JitterFactor"], id="no retry fits"),
    pytest.param((15, 10, 0), ["retryPeriod must be greater than zero"], id="zero retry"),
])
def test_config_errors(durations: tuple[float, float, float], errors: list[str]) -> None:
    assert le.config_errors(*durations) == errors


def test_identity_is_hostname_underscore_uuid_and_new_each_time() -> None:
    first, second = le.new_identity(), le.new_identity()
    assert re.fullmatch(r".+_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", first)
    assert first != second


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_fence_closes_renew_deadline_after_the_last_renewal_started() -> None:
    clock = Clock()
    elector = le.LeaderElector(ApiClient("http://127.0.0.1:1"), le.Config("kube-system", "x", "me"), clock=clock)
    with pytest.raises(le.NotLeading):
        elector.check()  # never acquired
    elector._observe(le.Record("me", 15, "T", "T", 0), clock.now, renewed=True)
    elector._leading = True
    clock.now += 9.999
    elector.check()
    clock.now += 0.001  # renewDeadline (10 s) after the renewal was sent: someone may take over in 5 s
    with pytest.raises(le.NotLeading):
        elector.check()


async def test_a_fenced_client_sends_no_write() -> None:
    """The write is refused before any connection is tried (port 1 would fail differently); reads pass."""
    def fence() -> None:
        raise le.NotLeading("no")

    async with ApiClient("http://127.0.0.1:1", write_fence=fence, timeout=1) as api:
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            with pytest.raises(le.NotLeading):
                await api.request(method, "/api/v1/namespaces/default/pods", body={})
        with pytest.raises(Exception) as read:
            await api.request("GET", "/api/v1/namespaces/default/pods")
        assert not isinstance(read.value, le.NotLeading)

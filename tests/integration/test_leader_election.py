"""LeaderElector against the real API server and etcd (kubelab/leaderelection.py): who gets the Lease,
what it holds, how it is handed over and fenced, and what `kubectl get lease` shows. Clocks that decide
expiry are the test's (the elector takes a clock), so nothing here waits out a real lease duration."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from kubectltools import Kubectl

from kubelab import kinds
from kubelab import leaderelection as le
from kubelab.client import ApiClient, NotFound

NAMESPACE = "kube-system"


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def electors(url: str, name: str, count: int, **timings: float) -> AsyncIterator[list[le.LeaderElector]]:
    clients = [ApiClient(url) for _ in range(count)]
    try:
        yield [le.LeaderElector(c, le.Config(NAMESPACE, name, f"host_{i}-{secrets.token_hex(2)}", **timings),
                                clock=Clock()) for i, c in enumerate(clients)]
    finally:
        for client in clients:
            await client.close()


def clock_of(elector: le.LeaderElector) -> Clock:
    clock = elector._clock
    assert isinstance(clock, Clock)
    return clock


async def spec_of(url: str, name: str) -> dict[str, object]:
    async with ApiClient(url) as api:
        lease = await api.get(kinds.LEASES, name, NAMESPACE)
        return dict(lease.to_dict()["spec"])


def lease_name() -> str:
    return f"test-{secrets.token_hex(3)}"


async def test_the_first_candidate_creates_the_lease_and_the_second_waits(apiserver: str, kubectl: Kubectl) -> None:
    name = lease_name()
    async with electors(apiserver, name, 2) as (first, second):
        assert await first.try_acquire_or_renew()
        assert not await second.try_acquire_or_renew()
        spec = await spec_of(apiserver, name)
        assert spec["holderIdentity"] == first.config.identity
        assert spec["leaseDurationSeconds"] == 15
        assert spec["leaseTransitions"] == 0
        assert spec["acquireTime"] == spec["renewTime"]
        assert str(spec["renewTime"]).endswith("Z") and len(str(spec["renewTime"])) == 27  # MicroTime
        # kubectl shows who leads, in kube's columns.
        out = kubectl("get", "lease", "-n", NAMESPACE, name)
        assert out.returncode == 0, out.stderr
        header, row = out.stdout.splitlines()
        assert header.split() == ["NAME", "HOLDER", "AGE"]
        assert row.split()[:2] == [name, first.config.identity]
        # A renewal keeps acquireTime and the transitions, and moves renewTime.
        clock_of(first).now += 2
        assert await first.try_acquire_or_renew()
        renewed = await spec_of(apiserver, name)
        assert renewed["acquireTime"] == spec["acquireTime"] and renewed["leaseTransitions"] == 0
        assert renewed["renewTime"] != spec["renewTime"]


async def test_a_standby_takes_over_only_after_the_record_stood_still_for_the_lease_duration(apiserver: str) -> None:
    name = lease_name()
    async with electors(apiserver, name, 2) as (leader, standby):
        assert await leader.try_acquire_or_renew()
        assert not await standby.try_acquire_or_renew()  # observed now, by the standby's clock
        clock_of(standby).now += 14.9
        assert not await standby.try_acquire_or_renew()
        clock_of(standby).now += 0.1
        assert await standby.try_acquire_or_renew()
        spec = await spec_of(apiserver, name)
        assert spec["holderIdentity"] == standby.config.identity and spec["leaseTransitions"] == 1
        # The old leader's next renewal (its fast path, with the resourceVersion it last wrote) is refused
        # by the API server; its slow path then sees the new holder.
        clock_of(leader).now += 2
        assert not await leader.try_acquire_or_renew()
        assert leader.leader == standby.config.identity
        assert (await spec_of(apiserver, name))["holderIdentity"] == standby.config.identity


async def test_the_resource_version_lets_one_of_two_racing_candidates_win(apiserver: str) -> None:
    name = lease_name()
    async with electors(apiserver, name, 3) as (leader, one, other):
        assert await leader.try_acquire_or_renew()
        for candidate in (one, other):
            assert not await candidate.try_acquire_or_renew()
            clock_of(candidate).now += 15
        results = await asyncio.gather(one.try_acquire_or_renew(), other.try_acquire_or_renew())
        assert sorted(results) == [False, True]
        winner = one if results[0] else other
        spec = await spec_of(apiserver, name)
        assert spec["holderIdentity"] == winner.config.identity and spec["leaseTransitions"] == 1


async def test_a_clean_stop_releases_the_lease_for_an_immediate_takeover(apiserver: str) -> None:
    name = lease_name()
    async with electors(apiserver, name, 2) as (leader, standby):
        leader._clock = time.monotonic  # a real clock: run() renews in real time
        started = asyncio.Event()
        stopped = []

        async def lead() -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                stopped.append(True)

        term = asyncio.create_task(leader.run(lead))
        await asyncio.wait_for(started.wait(), 30)
        async with ApiClient(apiserver) as api:  # the LeaseLock's event, as kubectl get events shows it
            events, _ = await api.list(kinds.EVENTS, NAMESPACE)
            assert [(e.reason, e.message) for e in events if e.involved_object.name == name] == [
                ("LeaderElection", f"{leader.config.identity} became leader")]
        term.cancel()
        with pytest.raises(asyncio.CancelledError):
            await term
        assert stopped == [True]
        spec = await spec_of(apiserver, name)
        assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
        assert await standby.try_acquire_or_renew()  # no waiting out 15 s
        assert (await spec_of(apiserver, name))["leaseTransitions"] == 1


async def test_a_leader_whose_renewal_is_overdue_sends_no_write(apiserver: str) -> None:
    name = lease_name()
    async with electors(apiserver, name, 1) as (leader,):
        assert await leader.try_acquire_or_renew()
        leader._leading = True
        async with ApiClient(apiserver, write_fence=leader.check) as api:
            cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"fenced-{name}"}}
            clock_of(leader).now += 9.9
            await api.create(kinds.CONFIGMAPS, cm, "default")
            await api.delete(kinds.CONFIGMAPS, f"fenced-{name}", "default")
            clock_of(leader).now += 0.1  # the last renewal started renewDeadline (10 s) ago
            with pytest.raises(le.NotLeading):
                await api.create(kinds.CONFIGMAPS, cm, "default")
            with pytest.raises(NotFound):  # nothing was written
                await api.get(kinds.CONFIGMAPS, f"fenced-{name}", "default")


async def test_a_leader_that_loses_the_lease_stops_its_work_and_campaigns_again(apiserver: str) -> None:
    """Short real timings: another writer takes the Lease; the leader's renewal fails, its work is
    cancelled, and it waits as a standby."""
    name = lease_name()
    async with electors(apiserver, name, 1, lease_duration=3, renew_deadline=2, retry_period=0.5) as (leader,):
        leader._clock = time.monotonic
        terms: list[str] = []

        async def lead() -> None:
            terms.append("started")
            try:
                await asyncio.Event().wait()
            finally:
                terms.append("stopped")

        campaign = asyncio.create_task(leader.campaign(lead))
        try:
            async with ApiClient(apiserver) as api:
                lease = None
                for _ in range(600):
                    if terms:
                        lease = await api.get(kinds.LEASES, name, NAMESPACE)
                        break
                    await asyncio.sleep(0.05)
                assert lease is not None and lease.spec is not None
                lease.spec.holder_identity = "someone-else"
                lease.spec.lease_duration_seconds = 3600
                await api.update(kinds.LEASES, lease)
                for _ in range(600):
                    if terms == ["started", "stopped"]:
                        break
                    await asyncio.sleep(0.05)
                assert terms == ["started", "stopped"]
                assert not leader.leading()
                assert (await api.get(kinds.LEASES, name, NAMESPACE)).spec.holder_identity == "someone-else"
        finally:
            campaign.cancel()
            await asyncio.gather(campaign, return_exceptions=True)


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param({"leaseDurationSeconds": 0}, "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                 id="zero duration"),
    pytest.param({"leaseDurationSeconds": -15}, "spec.leaseDurationSeconds: Invalid value: -15: must be greater than 0",
                 id="negative duration"),
    pytest.param({"leaseTransitions": -1},
                 "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0", id="negative transitions"),
])
async def test_a_lease_no_elector_could_read_is_refused_as_kube_validates_it(apiserver: str, spec: dict[str, int],
                                                                            message: str) -> None:
    name = lease_name()
    path = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}, "spec": spec}
    async with httpx.AsyncClient(base_url=apiserver, timeout=10) as http:
        created = await http.post(path, json=body)
        assert created.status_code == 422, created.text
        assert created.json()["message"] == f'Lease.coordination.k8s.io "{name}" is invalid: {message}'
        assert (await http.get(f"{path}/{name}")).status_code == 404
        (await http.post(path, json={**body, "spec": {"leaseDurationSeconds": 15}})).raise_for_status()
        stored = (await http.get(f"{path}/{name}")).json()
        updated = await http.put(f"{path}/{name}", json={**stored, "spec": spec})
        assert updated.status_code == 422 and updated.json()["message"].endswith(message)
        assert (await http.get(f"{path}/{name}")).json()["spec"] == {"leaseDurationSeconds": 15}

"""The storage layer (apiserver/storage.py) on a real three-member etcd cluster, the first member SIGKILLed
under 32 concurrent creates: every call ends with its revision or a StorageError (what the API turns into a
503 or 504 Status), never a CancelledError, and every create that returned a revision can be read back.

Before, each call that failed on the broken channel failed over on its own and closed the channel at once,
while the others still waited on it; gRPC cancelled those, and the CancelledError passed every handler of the
API server (a plain-text 500 from uvicorn; tests/faults/test_etcd_member_failover.py sees it from a client)."""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging

import pytest

from apiserver.storage import Storage, StorageError
from kubelab.etcdcluster import EtcdCluster

WORKERS = 32
BEFORE = 100
AFTER = 300


def test_a_killed_member_fails_calls_with_storage_errors_only(
        etcd_cluster: EtcdCluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="apiserver.storage")
    created: dict[str, int] = {}
    failures: collections.Counter[str] = collections.Counter()
    escaped: list[BaseException] = []
    killed: dict[str, int] = {}
    keys = (f"/registry/configmaps/failover/cm-{i:05d}" for i in itertools.count())

    async def run() -> list[str]:
        storage = Storage(etcd_cluster.urls)
        try:
            async def worker() -> None:
                while not ("at" in killed and len(created) >= killed["at"] + AFTER):
                    key = next(keys)
                    try:
                        created[key] = await storage.create(key, {"kind": "ConfigMap", "metadata": {"name": key}})
                    except StorageError as exc:
                        failures[type(exc).__name__] += 1
                        await asyncio.sleep(0.05)
                    except BaseException as exc:  # noqa: BLE001 - what must not come out of storage
                        escaped.append(exc)
                        await asyncio.sleep(0.05)

            async def kill() -> None:
                while len(created) < BEFORE:
                    await asyncio.sleep(0.05)
                member = etcd_cluster.members[0]  # the one Storage dials first
                assert member.process is not None
                member.process.kill()
                await asyncio.to_thread(member.process.wait)
                killed["at"] = len(created)

            await asyncio.gather(kill(), *(worker() for _ in range(WORKERS)))
            unreadable = []
            for key, revision in created.items():
                if (await storage.get(key)).mod_revision != revision:
                    unreadable.append(key)
            return unreadable
        finally:
            await storage.close()

    unreadable = asyncio.run(run())
    assert not escaped, [repr(e) for e in escaped[:5]]
    assert not unreadable, unreadable[:10]
    assert len(created) >= BEFORE + AFTER
    moves = [r for r in caplog.records if "moving to" in r.getMessage()]
    assert moves, "the storage never moved off the killed member"
    assert all(etcd_cluster.urls[0] not in r.getMessage().split("moving to")[1] for r in moves)

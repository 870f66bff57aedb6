"""ApiClient with several API servers (`--server URL,URL`): requests that cannot reach one go to the
next, and an informer's watch resumes on the next from its last resourceVersion, on real API servers
sharing one etcd."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest

from kubelab import kinds
from kubelab.client import ApiClient, Informer
from kubelab.etcd import Etcd, free_port


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}


@pytest.mark.parametrize("fast", [False, True], ids=["httpx", "aiohttp"])
async def test_a_server_that_cannot_be_reached_is_skipped(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]],
                                                          fast: bool) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with start_apiserver(etcd.url) as url:
        async with ApiClient(f"{dead},{url}", fast_requests=fast) as api:
            assert (await api.get(kinds.NAMESPACES, "default")).metadata.name == "default"
            assert api.server == url
            name = f"failover-{secrets.token_hex(3)}"
            created = await api.create(kinds.CONFIGMAPS, configmap(name), "default")  # a write, never sent to `dead`
            assert created.metadata.name == name
        async with ApiClient([dead], fast_requests=fast) as alone:  # nowhere to go: the error, as before
            with pytest.raises(httpx.ConnectError):
                await alone.get(kinds.NAMESPACES, "default")


async def test_a_watch_resumes_on_the_next_server_from_its_last_resource_version(
        etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]]) -> None:
    namespace = "default"
    prefix = f"resume-{secrets.token_hex(3)}"
    with start_apiserver(etcd.url) as second, contextlib.ExitStack() as first_server:
        first = first_server.enter_context(start_apiserver(etcd.url))
        api = ApiClient([first, second])
        informer: Informer[Any] = Informer(api, kinds.CONFIGMAPS, namespace=namespace)
        lists = 0
        listing = api.list

        async def counted_list(*args: Any, **kwargs: Any) -> Any:
            nonlocal lists
            lists += 1
            return await listing(*args, **kwargs)

        api.list = counted_list  # type: ignore[method-assign]
        added: list[str] = []
        informer.add_handler(lambda kind, old, new: added.append(new.metadata.name)
                             if kind == "ADDED" and new.metadata.name.startswith(prefix) else None)
        running = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.wait_synced(), 30)
            async with httpx.AsyncClient(base_url=second, timeout=10) as writer:
                path = f"/api/v1/namespaces/{namespace}/configmaps"
                (await writer.post(path, json=configmap(f"{prefix}-0"))).raise_for_status()
                await wait_until(lambda: added == [f"{prefix}-0"])
                await asyncio.to_thread(first_server.close)  # the first API server stops
                for i in range(1, 6):
                    (await writer.post(path, json=configmap(f"{prefix}-{i}"))).raise_for_status()
                await wait_until(lambda: len(added) == 6)
            assert added == [f"{prefix}-{i}" for i in range(6)]  # each seen once, in order
            assert api.server == second
            assert lists == 1  # resumed from its resourceVersion: no second list
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await api.close()


async def wait_until(check: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll; the timeout only turns a hang into a failure."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.05)

"""ApiClient with `app=`: requests handed to the API server's ASGI application in the same process, as
`kubelab up` gives its components (kubelab/client/asgi.py). The application is the real one, served by
uvicorn on this test's event loop against a real etcd, so what the in-process client gets can be held
against what a client on the socket gets: the same answers and Status errors, the same authentication,
watches that see writes made over the socket and that unregister when their consumer stops."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from polling import wait_for

from apiserver.app import Config, create_app
from apiserver.serving import Internal, uvicorn_config
from kubelab import kinds
from kubelab.client import ApiClient, ApiError, NotFound
from kubelab.etcd import Etcd

NS = "default"


@contextlib.asynccontextmanager
async def serving(etcd: Etcd, **config: Any) -> AsyncIterator[tuple[str, Any]]:
    """The API server on uvicorn in this loop (as `kubelab up` runs it); yields its URL and the app as
    `kubelab up` hands it to its components (marked internal, as its private socket's requests are)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    cfg = Config([etcd.url], port=port, **config)
    app = create_app(cfg)
    server = uvicorn.Server(uvicorn_config(app, options=cfg.serving))
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not task.done(), "the API server did not start"
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}", Internal(app)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)
        sock.close()


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": data}


async def test_answers_and_errors_are_the_sockets(etcd: Etcd) -> None:
    async with serving(etcd) as (url, app), ApiClient("http://apiserver.local", app=app) as inproc, \
            ApiClient(url) as remote:
        made = await inproc.create(kinds.CONFIGMAPS, configmap("inproc-a", k="v"))
        seen = await remote.get(kinds.CONFIGMAPS, "inproc-a", NS)
        assert seen.metadata.uid == made.metadata.uid and seen.data == {"k": "v"}
        # Validation ran: kube's 422 and message, as over the socket.
        bad = configmap("Not_A_Name")
        errors = []
        for client in (inproc, remote):
            with pytest.raises(ApiError) as caught:
                await client.create(kinds.CONFIGMAPS, bad)
            errors.append((caught.value.code, caught.value.reason, caught.value.message))
        assert errors[0] == errors[1] and errors[0][0] == 422 and errors[0][1] == "Invalid"
        with pytest.raises(NotFound):
            await inproc.get(kinds.CONFIGMAPS, "inproc-missing", NS)
        # A patch, a list with a selector and a delete: the same objects either way.
        await inproc.patch(kinds.CONFIGMAPS, "inproc-a", {"metadata": {"labels": {"via": "asgi"}}}, NS)
        items, _ = await remote.list(kinds.CONFIGMAPS, NS, label_selector="via=asgi")
        assert [i.metadata.name for i in items] == ["inproc-a"]
        await inproc.delete(kinds.CONFIGMAPS, "inproc-a", NS)
        with pytest.raises(NotFound):
            await remote.get(kinds.CONFIGMAPS, "inproc-a", NS)


def watchers(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("apiserver_registered_watchers{") and 'kind="ConfigMap"' in line)


async def test_a_watch_sees_socket_writes_and_unregisters_when_left(etcd: Etcd) -> None:
    async with serving(etcd) as (url, app), ApiClient("http://apiserver.local", app=app) as inproc, \
            ApiClient(url) as remote:
        _, rv = await inproc.list(kinds.CONFIGMAPS, NS)
        before = await asyncio.to_thread(watchers, url)
        names: list[str] = []

        async def watch() -> None:
            async for event in inproc.watch(kinds.CONFIGMAPS, NS, resource_version=rv):
                names.append(event.object.metadata.name)
                if len(names) == 3:
                    return  # the consumer stops: the client disconnects

        watching = asyncio.create_task(watch())
        for i in range(3):
            await remote.create(kinds.CONFIGMAPS, configmap(f"watched-{i}"))
        await asyncio.wait_for(watching, 30)
        assert names == ["watched-0", "watched-1", "watched-2"]
        # The server let the watcher go, as when a socket closes (polled from a thread: this loop serves it).
        await asyncio.to_thread(wait_for, "the watcher to be unregistered",
                                lambda: watchers(url) == before or None)
        # A watch the server refuses: its Status raised, as over the socket.
        refused = []
        for client in (inproc, remote):
            with pytest.raises(ApiError) as caught:
                async for _ in client.watch(kinds.CONFIGMAPS, NS, resource_version="not-a-number"):
                    pass
            refused.append((caught.value.code, caught.value.message))
        assert refused[0] == refused[1] and refused[0][0] < 500


async def test_authentication_is_not_skipped(etcd: Etcd, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("admin-token,admin,admin-uid,system:masters\n")
    tokens.chmod(0o600)
    async with serving(etcd, token_auth_file=str(tokens)) as (_, app):
        async with ApiClient("http://apiserver.local", app=app) as anonymous:
            with pytest.raises(ApiError) as caught:
                await anonymous.get(kinds.CONFIGMAPS, "anything", NS)
            assert caught.value.code in (401, 403)
        async with ApiClient("http://apiserver.local", app=app, token="wrong") as wrong:
            with pytest.raises(ApiError) as caught:
                await wrong.get(kinds.CONFIGMAPS, "anything", NS)
            assert caught.value.code == 401
        async with ApiClient("http://apiserver.local", app=app, token="admin-token") as admin:
            with pytest.raises(NotFound):
                await admin.get(kinds.CONFIGMAPS, "anything", NS)

"""Panic recovery (apiserver/recovery.py): an exception that escapes a handler is a 500 Status of kube's
NewInternalError shape, logged once with its traceback, never uvicorn's plain-text `Internal Server Error`.

A real API server (uvicorn on a loopback port, a real etcd) and the in-process ASGI front are asked; the
unexpected exception is injected in this test process by replacing the resource handler's entry point
(`resources.dispatch`, or the registry's watch) for one namespace only: the codebase has no fault hook
for "a handler raised", and the faults tests inject from outside (signals, raw etcd writes), which cannot
reach into a handler. CancelledError is injected too: gRPC raises it for a call whose channel was closed
under it, which is how one etcd member going away once ended in plain-text 500s (tests/faults/
test_etcd_member_failover.py).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import orjson
import pytest
from starlette.responses import Response, StreamingResponse

from apiserver.app import Config, create_app
from apiserver.registry import Registry
from apiserver.routers import resources
from kubelab.client import ApiClient, ApiError
from kubelab.etcd import Etcd
from kubelab.kinds import CONFIGMAPS

DISPATCH = "panic-dispatch"  # every resource request in this namespace raises
WATCH = "panic-watch"  # a watch in this namespace fails after its first event

INTERNAL = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Internal error occurred: RuntimeError: injected failure", "reason": "InternalError",
            "details": {"causes": [{"message": "RuntimeError: injected failure"}]}, "code": 500}


@pytest.fixture
def failing(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """What the injected failure raises: `failing["raise"]` (an exception instance) or, with
    `failing["cut_off"]`, a body that fails after its first chunk."""
    how: dict[str, Any] = {"raise": RuntimeError("injected failure"), "cut_off": False}
    real = resources.dispatch

    async def dispatch(request: Any, info: Any) -> Response:
        if f"/namespaces/{DISPATCH}/" not in request.url.path:
            return await real(request, info)
        if how["cut_off"]:
            async def body() -> AsyncIterator[bytes]:
                yield b'{"kind":'
                raise how["raise"]
            return StreamingResponse(body(), media_type="application/json")
        raise how["raise"]

    monkeypatch.setattr(resources, "dispatch", dispatch)
    yield how


@pytest.fixture
def server_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    # uvicorn's own logger does not propagate to the root: hear it too (its "Exception in ASGI application").
    uvicorn_error = logging.getLogger("uvicorn.error")
    uvicorn_error.addHandler(caplog.handler)
    caplog.set_level(logging.INFO)
    try:
        yield caplog
    finally:
        uvicorn_error.removeHandler(caplog.handler)


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info is not None]


def test_an_exception_escaping_a_handler_is_an_internal_error_status_logged_once(
        apiserver: str, failing: dict[str, Any], server_log: pytest.LogCaptureFixture) -> None:
    with httpx.Client(base_url=apiserver, timeout=30) as api:
        created = api.post(f"/api/v1/namespaces/{DISPATCH}/configmaps",
                           json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
        got = api.get(f"/api/v1/namespaces/{DISPATCH}/configmaps/x")
        fine = api.get("/api/v1/namespaces/default/configmaps")
    for answer in (created, got):
        assert answer.status_code == 500
        assert answer.headers["content-type"] == "application/json"
        assert answer.json() == INTERNAL
    assert fine.status_code == 200  # only the namespace with the injected failure fails
    logged = _tracebacks(server_log)
    assert len(logged) == 2, [r.getMessage() for r in logged]  # one per request, with its traceback
    assert all(r.exc_info and isinstance(r.exc_info[1], RuntimeError) for r in logged)
    assert not [r for r in server_log.records if "Exception in ASGI application" in r.getMessage()]


def test_a_cancelled_error_from_inside_is_an_internal_error_status(
        apiserver: str, failing: dict[str, Any], server_log: pytest.LogCaptureFixture) -> None:
    failing["raise"] = asyncio.CancelledError()
    with httpx.Client(base_url=apiserver, timeout=30) as api:
        answer = api.get(f"/api/v1/namespaces/{DISPATCH}/configmaps")
    assert answer.status_code == 500
    status = answer.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "InternalError", 500)
    assert status["message"] == "Internal error occurred: the request was cancelled inside the server"
    assert len(_tracebacks(server_log)) == 1
    assert not [r for r in server_log.records if "Exception in ASGI application" in r.getMessage()]


def test_a_response_that_fails_after_it_started_is_cut_off_and_logged_once(
        apiserver: str, failing: dict[str, Any], server_log: pytest.LogCaptureFixture) -> None:
    failing["cut_off"] = True
    with httpx.Client(base_url=apiserver, timeout=30) as api, pytest.raises(httpx.RemoteProtocolError):
        api.get(f"/api/v1/namespaces/{DISPATCH}/configmaps")
    logged = _tracebacks(server_log)
    assert [r.name for r in logged] == ["apiserver.recovery"], [r.getMessage() for r in logged]
    assert "the response is cut off" in logged[0].getMessage()


def test_a_watch_cancelled_from_inside_ends_with_an_error_event(
        apiserver: str, monkeypatch: pytest.MonkeyPatch, server_log: pytest.LogCaptureFixture) -> None:
    real = Registry.watch

    async def watch(self: Registry, rt: Any, namespace: str | None, *args: Any) -> AsyncIterator[Any]:
        async for event in real(self, rt, namespace, *args):
            yield event
            if namespace == WATCH:
                raise asyncio.CancelledError  # what gRPC raises when the channel under a stream is closed

    monkeypatch.setattr(Registry, "watch", watch)
    with httpx.Client(base_url=apiserver, timeout=30) as api:
        api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WATCH}})
        api.post(f"/api/v1/namespaces/{WATCH}/configmaps",
                 json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}}).raise_for_status()
        with api.stream("GET", f"/api/v1/namespaces/{WATCH}/configmaps",
                        params={"watch": "1", "timeoutSeconds": "60"}) as stream:
            assert stream.status_code == 200
            events = [orjson.loads(line) for line in stream.iter_lines() if line]
    assert [e["type"] for e in events] == ["ADDED", "ERROR"]
    assert events[0]["object"]["metadata"]["name"] == "one"
    error = events[1]["object"]
    assert (error["kind"], error["reason"], error["code"]) == ("Status", "InternalError", 500)
    assert error["message"] == "Internal error occurred: the watch was cancelled inside the server"


def test_the_in_process_front_gets_the_status_too(etcd: Etcd, failing: dict[str, Any]) -> None:
    # The app kubelab up hands its components' requests to (kubelab/client/asgi.py); the injected failure
    # comes before anything needs the storage the lifespan would connect.
    app = create_app(Config([etcd.url], disable_admission_plugins=("ServiceAccount",)))

    async def run() -> ApiError:
        async with ApiClient("http://kubelab.invalid", app=app) as api:
            with pytest.raises(ApiError) as caught:
                await api.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
                                 DISPATCH)
            return caught.value

    error = asyncio.run(run())
    assert (error.code, error.reason) == (500, "InternalError")
    assert error.status == INTERNAL


def test_a_client_gone_before_its_body_is_one_warning_not_a_stack(
        apiserver: str, server_log: pytest.LogCaptureFixture) -> None:
    # A DELETE whose body (DeleteOptions) stops after 10 of the 100 bytes it announced, then the client goes.
    url = httpx.URL(apiserver)
    with socket.create_connection((url.host, url.port or 80), timeout=30) as raw:
        raw.sendall(b"DELETE /api/v1/namespaces/default/configmaps/gone HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"kind\": ")
    deadline = time.monotonic() + 60  # the server notices when its loop gets to the closed socket
    while not (said := [r for r in server_log.records if "configmaps/gone" in r.getMessage()]):
        assert time.monotonic() < deadline, [r.getMessage() for r in server_log.records]
        time.sleep(0.05)
    warning = "DELETE /api/v1/namespaces/default/configmaps/gone: the client disconnected before sending its whole body"
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in said] == [("WARNING", warning, None)]
    with httpx.Client(base_url=apiserver, timeout=30) as api:  # and the server serves on
        assert api.get("/api/v1/namespaces/default/configmaps").status_code == 200

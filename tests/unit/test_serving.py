"""The pure parts of serving the API: the connection cap for a descriptor limit, which requests are
long-running (exempt from the request timeout and the in-flight limits), and the client's reading of
Retry-After."""

from __future__ import annotations

import pytest

from apiserver.flowcontrol import is_long_running, list_seats
from apiserver.requestinfo import parse
from apiserver.serving import connection_cap
from kubelab.client.http import _retry_after_seconds


@pytest.mark.parametrize(("open_files", "cap"), [
    pytest.param(1024, 768, id="a quarter kept, at least 256"),
    pytest.param(20000, 15000, id="a quarter kept"),
    pytest.param(300, 150, id="at most half kept"),
    pytest.param(1, 1, id="never none"),
])
def test_connection_cap(open_files: int, cap: int) -> None:
    assert connection_cap(open_files) == cap


@pytest.mark.parametrize(("method", "path", "query", "long_running"), [
    pytest.param("GET", "/api/v1/namespaces/default/pods", {"watch": "true"}, True, id="watch"),
    pytest.param("GET", "/api/v1/watch/namespaces/default/pods/web", {}, True, id="legacy watch path"),
    pytest.param("GET", "/api/v1/namespaces/default/pods/web/log", {}, True, id="log"),
    pytest.param("POST", "/api/v1/namespaces/default/pods/web/exec", {}, True, id="exec"),
    pytest.param("GET", "/api/v1/namespaces/default/pods/web/portforward", {}, True, id="portforward"),
    pytest.param("GET", "/api/v1/namespaces/default/pods", {}, False, id="list"),
    pytest.param("GET", "/api/v1/namespaces/default/pods", {"watch": "false"}, False, id="watch=false"),
    pytest.param("POST", "/api/v1/namespaces/default/pods", {}, False, id="create"),
    pytest.param("GET", "/healthz", {}, False, id="non-resource"),
])
def test_long_running(method: str, path: str, query: dict[str, str], long_running: bool) -> None:
    assert is_long_running(parse(method, path, query)) is long_running


@pytest.mark.parametrize(("header", "seconds"), [
    ("1", 1), ("0", 1), ("7", 7), ("120", 30), (None, None), ("", None), ("1.5", None), ("²", None),
    ("Wed, 21 Oct 2026 07:28:00 GMT", None),
])
def test_retry_after(header: str | None, seconds: int | None) -> None:
    assert _retry_after_seconds(header) == seconds


@pytest.mark.parametrize(("stored", "limit", "selective", "seats"), [
    pytest.param(None, None, False, 1, id="unknown count"),
    pytest.param(0, None, False, 1, id="empty"),
    pytest.param(250, None, False, 3, id="a seat per 100"),
    pytest.param(10_000, None, False, 10, id="at most 10"),
    pytest.param(10_000, 500, False, 10, id="a big page"),
    pytest.param(10_000, 50, False, 1, id="twice the limit"),
    pytest.param(10_000, 50, True, 10, id="selectors read everything"),
])
def test_list_seats(stored: int | None, limit: int | None, selective: bool, seats: int) -> None:
    assert list_seats(stored, limit=limit, selective=selective) == seats

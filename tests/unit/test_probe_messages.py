"""One probe (`kubeletstub.probe`) against real sockets on loopback: success and failure in kubelet's words,
Go's dial errors among them, and the gRPC health check (grpc.health.v1.Health/Check) against a real
grpcio server."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from kubeletstub.probe import _health_request, _health_status, grpc_probe, http_probe, tcp_probe


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def web() -> Iterator[int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(500 if self.path == "/sick" else 200)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_http_probe_words(web: int) -> None:
    assert http_probe(f"http://127.0.0.1:{web}/", 1, {}) == (True, "HTTP probe succeeded with statuscode: 200")
    assert http_probe(f"http://127.0.0.1:{web}/sick", 1, {}) == (False, "HTTP probe failed with statuscode: 500")
    port = closed_port()
    url = f"http://127.0.0.1:{port}/healthz"
    assert http_probe(url, 1, {}) == (False, f'Get "{url}": dial tcp 127.0.0.1:{port}: connect: connection refused')


def test_tcp_probe_words() -> None:
    port = closed_port()
    assert tcp_probe("127.0.0.1", port, 1) == (False, f"dial tcp 127.0.0.1:{port}: connect: connection refused")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        assert tcp_probe("127.0.0.1", listener.getsockname()[1], 1) == (True, "")


def test_health_messages_round_trip() -> None:
    assert _health_request("") == b""
    assert _health_request("db") == b"\x0a\x02db"
    assert _health_request("x" * 200)[:3] == b"\x0a\xc8\x01"
    assert _health_status(b"") == 0 and _health_status(b"\x08\x01") == 1 and _health_status(b"\x08\x02") == 2


@pytest.fixture
def health_server() -> Iterator[int]:
    def check(request: bytes, context: grpc.ServicerContext) -> bytes:
        return b"\x08\x01" if request == b"" else b"\x08\x02"

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(check)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(0)


def test_grpc_probe_words(health_server: int) -> None:
    assert grpc_probe("127.0.0.1", health_server, "", 5) == (True, "service healthy")
    assert grpc_probe("127.0.0.1", health_server, "db", 5) == (False, 'service unhealthy (responded with "NOT_SERVING")')
    port = closed_port()
    assert grpc_probe("127.0.0.1", port, "", 1) == (
        False, f'timeout: failed to connect service "127.0.0.1:{port}" within 1s')


def test_grpc_probe_of_a_server_without_the_health_service() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        ok, why = grpc_probe("127.0.0.1", port, "", 5)
    finally:
        server.stop(0)
    assert not ok
    assert why.startswith("this server does not implement the grpc health protocol (grpc.health.v1.Health): ")

"""Shared fixtures: a real etcd and a real API server, for integration, e2e and kubectl tests.

    etcd       (session)  a private etcd on free loopback ports under a tmp dir; yields the
                          `kubelab.etcd.Etcd` (its `.url` is the client URL). Stopped by its own
                          Popen handle at the end of the session, whatever happened.
    apiserver  (module)   the real FastAPI app served by uvicorn in a background thread on a free
                          loopback port, against that etcd; yields the base URL
                          (`http://127.0.0.1:PORT`) once /readyz answers `ok`, and stops the server
                          at the end of the module, whatever happened.
    api        (function) an `httpx.Client` on that base URL (10 s timeout), closed after the test.
    start_apiserver       the `run_apiserver(etcd_url, **config)` context manager below, for a test that
                          needs a second server, one it can stop, or one with other `Config` settings
                          (`with start_apiserver(etcd.url, min_request_timeout=1) as url:`).

All modules share one etcd, hence one key space: the bootstrap objects (namespaces, the `kubernetes`
Service) are there for everyone, and tests give their objects unique names so they neither see nor
trip over each other's objects. Nothing here kills by name: etcd is stopped through its Popen handle,
the API server by telling its uvicorn loop to exit and joining the thread.
"""

from __future__ import annotations

import signal
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, settings

from apiserver.app import Config, create_app
from apiserver.serving import api_server, uvicorn_config
from kubelab.etcd import Etcd
from kubelab.etcdcluster import EtcdCluster

# Every property test, on a machine shared with other work: Hypothesis' health checks time the generation of
# examples, and "too slow" failed a CRD test at load 20 though nothing was wrong. Tests keep their own
# example counts; only the wall-clock checks go (no timing in tests).
settings.register_profile("kubelab", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kubelab")


@contextmanager
def run_apiserver(etcd_url: str, *, startup_timeout: float = 30.0, tls: tuple[str, str, str] | None = None,
                  **config: Any) -> Iterator[str]:
    """Serve the API server app in a background thread; yield its base URL once ready; always stop it.
    `tls` (certificate, key, CA files): serve HTTPS, as kubectl sends bearer tokens only over TLS.

    The listening socket is bound here (port 0) and handed to uvicorn, so there is no window in which
    another process could take the port between choosing and binding it.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # No controller manager makes default service accounts here: its pods are admitted without one, as
    # kube's own integration tests run kube-apiserver (--disable-admission-plugins=ServiceAccount).
    config.setdefault("disable_admission_plugins", ("ServiceAccount",))
    app_config = Config([etcd_url], port=port, **config)
    app = create_app(app_config)
    # Served as `kubelab apiserver` serves it (serving.py, flowcontrol.py: timeouts, limits, connection cap). Open watch
    # streams would hold a graceful shutdown forever; give them a few seconds.
    server = api_server(uvicorn_config(app, options=app_config.serving, graceful_shutdown=3,
                                       ssl_certfile=tls[0] if tls else None, ssl_keyfile=tls[1] if tls else None),
                        app_config.serving)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"apiserver-{port}",
                              daemon=True)
    thread.start()
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    try:
        _wait_ready(url, thread, startup_timeout, verify=ssl.create_default_context(cafile=tls[2]) if tls else True)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout=5)
        sock.close()


def _wait_ready(url: str, thread: threading.Thread, timeout: float, *, verify: ssl.SSLContext | bool = True) -> None:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if not thread.is_alive():
            raise RuntimeError(f"the API server at {url} exited during start-up (see the log above)")
        try:
            resp = httpx.get(f"{url}/readyz", timeout=2, verify=verify)
            if resp.status_code == 200 and resp.text == "ok":
                return
            last = f"{resp.status_code} {resp.text!r}"
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"the API server at {url} was not ready within {timeout}s (last answer: {last})")


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    server = Etcd(Path(tmp_path_factory.mktemp("etcd")) / "data")
    try:
        server.start()
        yield server
    finally:
        server.stop()  # by its Popen handle; a start that failed half-way is stopped too


@pytest.fixture(scope="module")
def apiserver(etcd: Etcd) -> Iterator[str]:
    with run_apiserver(etcd.url) as url:
        yield url


@pytest.fixture
def api(apiserver: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=apiserver, timeout=10) as client:
        yield client


@pytest.fixture(scope="session")
def start_apiserver() -> Callable[..., AbstractContextManager[str]]:
    return run_apiserver


@pytest.fixture
def etcd_cluster(tmp_path: Path) -> Iterator[EtcdCluster]:
    """A real three-member etcd cluster of the test's own, stopped after it (members the test paused are
    woken first, as a paused process does not hear SIGTERM); none may be left running."""
    cluster = EtcdCluster(tmp_path / "etcd", size=3)
    try:
        cluster.start()
        yield cluster
    finally:
        processes = [m.process for m in cluster.members]
        for proc in processes:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        cluster.stop()
        assert all(p is None or p.poll() is not None for p in processes), "etcd members left running"

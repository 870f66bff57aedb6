"""Fixtures for the fault tests: each test gets an etcd of its own, so killing, pausing or compacting
it troubles no other test, and every process a test starts is stopped by its PID at the end.

    own_etcd          (function) an OwnedEtcd, started; stopped at the end, even if paused or killed,
                                 and the test errors if any etcd process it started is still alive
    apiserver_process (function) a factory: `apiserver_process(etcd_url, extra_args)` returns a started
                                 ApiServerProcess; every one is stopped at the end
    figures           (function) a Figures for the test's measurements ($KUBELAB_FAULT_REPORT)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from faultkit import ApiServerProcess, Figures, OwnedEtcd


@pytest.fixture
def own_etcd(tmp_path: Path) -> Iterator[OwnedEtcd]:
    etcd = OwnedEtcd(tmp_path / "etcd" / "data")
    try:
        etcd.start()
        yield etcd
    finally:
        etcd.stop()
        assert not etcd.alive(), f"etcd processes left running: {etcd.alive()}"


@pytest.fixture
def apiserver_process(tmp_path: Path) -> Iterator[Callable[..., ApiServerProcess]]:
    started: list[ApiServerProcess] = []

    def start(etcd_url: str, extra: Sequence[str] = (), *, port: int | None = None) -> ApiServerProcess:
        server = ApiServerProcess(etcd_url, tmp_path / f"apiserver-{len(started)}.log", port=port, extra=extra)
        started.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[Figures]:
    recorded = Figures(request.node.nodeid)
    yield recorded
    recorded.write()

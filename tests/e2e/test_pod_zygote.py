"""Pod servers forked by the process's zygote (kubeletstub/podzygote.py), seen from outside: each is a process
of its own in its pod's network namespace, its own session, and answers there; one that cannot listen is
an error with its log's tail; a zygote that dies is replaced, and the servers it forked keep serving; a
stopped zygote leaves its servers to be stopped by PID, as before."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeletstub import podprocess
from kubeletstub.netnames import exec_argv
from kubeletstub.podprocess import (
    PodProcessError,
    ServedPort,
    is_pod_process_alive,
    start_pod_process,
    stop_pod_processes,
)

pytestmark = pytest.mark.root


@pytest.fixture
def servers(node_netns: str) -> Iterator[list[podprocess.PodProcess]]:
    subprocess.run(exec_argv(node_netns, ["ip", "link", "set", "lo", "up"]), check=True)
    started: list[podprocess.PodProcess] = []
    try:
        yield started
    finally:
        stop_pod_processes(started)
        podprocess.stop_zygote()


def answer(netns: str, port: int) -> str:
    done = subprocess.run(exec_argv(netns, ["curl", "-sS", "--max-time", "10", f"http://127.0.0.1:{port}/"]),
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_forked_server_is_its_pods_own_process(node_netns: str, servers: list[podprocess.PodProcess],
                                                 tmp_path: Path) -> None:
    proc = start_pod_process(node_netns, "web-0", [ServedPort(5000), ServedPort(5353, "UDP")],
                             log_path=tmp_path / "web-0.log")
    servers.append(proc)
    assert answer(node_netns, 5000) == "web-0\n"
    assert os.stat(f"/proc/{proc.pid}/ns/net").st_ino == os.stat(f"/var/run/netns/{node_netns}").st_ino
    assert os.getsid(proc.pid) == proc.pid  # a session of its own: a Ctrl-C for kubelab does not reach it
    zygote = podprocess._zygote
    assert zygote is not None and f"PPid:\t{zygote.popen.pid}\n" in Path(f"/proc/{proc.pid}/status").read_text()
    assert "kubeletstub.podserver" in Path(f"/proc/{proc.pid}/cmdline").read_text()


def test_a_server_that_cannot_listen_is_an_error_with_its_log(node_netns: str, servers: list[podprocess.PodProcess],
                                                              tmp_path: Path) -> None:
    servers.append(start_pod_process(node_netns, "first", [ServedPort(5000)]))
    log = tmp_path / "second.log"
    with pytest.raises(PodProcessError, match=r"exited with status 1 before listening: podserver second: .*"
                                              r"Address already in use"):
        start_pod_process(node_netns, "second", [ServedPort(5001), ServedPort(5000)], log_path=log)
    assert answer(node_netns, 5000) == "first\n"
    with pytest.raises(PodProcessError, match="network namespace|No such file"):
        start_pod_process(f"{node_netns}-missing", "lost", [ServedPort(5000)], log_path=tmp_path / "lost.log")


def test_a_dead_zygote_is_replaced_and_its_servers_serve_on(node_netns: str, servers: list[podprocess.PodProcess]
                                                            ) -> None:
    servers.append(start_pod_process(node_netns, "before", [ServedPort(5000)]))
    zygote = podprocess._zygote
    assert zygote is not None
    zygote.popen.kill()
    zygote.popen.wait()
    # The next request may come before the thread reading the zygote's answers has seen their end: replay that.
    deadline = time.monotonic() + 30
    while zygote.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not zygote.alive
    zygote.alive = True
    servers.append(start_pod_process(node_netns, "after", [ServedPort(5001)]))
    assert podprocess._zygote is not zygote
    assert (answer(node_netns, 5000), answer(node_netns, 5001)) == ("before\n", "after\n")

    podprocess.stop_zygote()
    assert all(is_pod_process_alive(s) for s in servers)  # stopping the zygote leaves its servers
    assert stop_pod_processes(servers) == servers
    assert not any(is_pod_process_alive(s) for s in servers)

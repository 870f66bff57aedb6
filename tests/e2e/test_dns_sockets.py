"""Cluster DNS asked for "any port" (port 0, as `kubelab up --dataplane render` asks) needs the same
number free for UDP and TCP. The kernel picks the UDP port; when a TCP socket already holds that number,
the server must try another instead of failing to start (seen in CI: `OSError: [Errno 98] Address already
in use` from `kubelab up`).

Reproduced for real in a network namespace of the test's own (root): its ephemeral port range is cut to
four ports and TCP listeners take three of them, so a UDP pick lands on a TCP-held number three times in
four. Every one of 20 starts must still succeed, on the one port free for both.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest
from scratchns import scratch_netns

from clusterdns.server import open_sockets
from kubelab.netnsthread import run_in_netns

pytestmark = pytest.mark.root

FIRST = 40000


@pytest.fixture
def narrow_netns() -> Iterator[str]:
    with scratch_netns("kldns") as name:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "netns", "exec", name, "sysctl", "-q", "-w",
                        f"net.ipv4.ip_local_port_range={FIRST} {FIRST + 3}"], check=True)
        yield name


def tcp_listeners(netns: str, ports: list[int]) -> list[socket.socket]:
    """TCP sockets listening on 127.0.0.1:`ports` inside `netns`."""

    def make() -> list[socket.socket]:
        made = []
        for port in ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", port))
            sock.listen(1)
            made.append(sock)
        return made

    return run_in_netns(netns, make)


def test_any_port_finds_one_free_for_both_udp_and_tcp(narrow_netns: str) -> None:
    held = tcp_listeners(narrow_netns, [FIRST, FIRST + 1, FIRST + 2])
    try:
        for _ in range(20):
            sockets = open_sockets("127.0.0.1", 0, netns=narrow_netns)
            try:
                assert sockets.port == FIRST + 3
                assert sockets.tcp.getsockname()[1] == FIRST + 3
            finally:
                sockets.close()
    finally:
        for sock in held:
            sock.close()

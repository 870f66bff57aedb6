"""route_localnet, which NodePorts on 127.0.0.1 need, is set on a node that has no `sysctl` program.

A node image need not carry procps (python:3.11-slim-bookworm does not): the proxy agent writes
/proc/sys itself, in the node's network namespace, as kube-proxy's sysctl package does, and leaves a
value that is already 1 alone (a container whose runtime set it has /proc/sys read-only).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubelab.netnsthread import run_in_netns
from proxyagent.apply import IptablesApplier

pytestmark = pytest.mark.root
ROUTE_LOCALNET = "/proc/sys/net/ipv4/conf/all/route_localnet"




def _read(netns: str) -> str:
    return run_in_netns(netns, lambda: Path(ROUTE_LOCALNET).read_text().strip())


def test_route_localnet_is_written_without_a_sysctl_program(node_netns: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    assert _read(node_netns) == "0"  # a new namespace starts without it
    monkeypatch.setenv("PATH", str(tmp_path))  # no sysctl, no ip: nothing to run
    asyncio.run(IptablesApplier(node_netns).enable_route_localnet())
    assert _read(node_netns) == "1"
    asyncio.run(IptablesApplier(node_netns).enable_route_localnet())  # already set: left alone
    assert _read(node_netns) == "1"

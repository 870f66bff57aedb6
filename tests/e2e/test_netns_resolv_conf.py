"""A pod's resolv.conf in the netns dataplane (root): written under /etc/netns/<pod netns>/ so that
`ip netns exec` bind-mounts it over /etc/resolv.conf, and removed with the pod, with the lab, and by
the cleanup that runs after a crash."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Protocol

import pytest

from kubeletstub.netns import LabNetwork
from kubeletstub.netnsstate import cleanup

pytestmark = pytest.mark.root

RESOLV = "search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"


class LabSpace(Protocol):
    prefix: str
    state_dir: Path


def etc_dir(netns: str) -> Path:
    return Path("/etc/netns") / netns


def cat_resolv_conf(netns: str) -> str:
    return subprocess.run(["ip", "netns", "exec", netns, "cat", "/etc/resolv.conf"], capture_output=True, text=True,
                          check=True).stdout


def test_written_for_the_pod_and_removed_with_it(lab_space: LabSpace) -> None:
    lab = LabNetwork(lab_space.prefix, lab_space.state_dir)
    lab.create()
    try:
        lab.add_node("node-1", "10.240.0.11", "10.244.1.0/24")
        with_dns = lab.add_pod("node-1", "default/web-a", "10.244.1.5", resolv_conf=RESOLV)
        without = lab.add_pod("node-1", "default/web-b", "10.244.1.6")
        assert cat_resolv_conf(with_dns.netns) == RESOLV
        assert not etc_dir(without.netns).exists()
        assert cat_resolv_conf(without.netns) == Path("/etc/resolv.conf").read_text()  # the node's own
        lab.remove_pod("node-1", "default/web-a")
        assert not etc_dir(with_dns.netns).exists()
        again = lab.add_pod("node-1", "default/web-c", "10.244.1.7", resolv_conf=RESOLV)
        assert etc_dir(again.netns).is_dir()
    finally:
        lab.destroy()
    assert not etc_dir(again.netns).exists()


def test_cleanup_after_a_crash_removes_it(lab_space: LabSpace) -> None:
    lab = LabNetwork(lab_space.prefix, lab_space.state_dir)
    lab.create()
    lab.add_node("node-1", "10.240.0.11", "10.244.1.0/24")
    pod = lab.add_pod("node-1", "default/web-a", "10.244.1.5", resolv_conf=RESOLV)
    assert (etc_dir(pod.netns) / "resolv.conf").read_text() == RESOLV
    # No destroy(): what a later run finds in the state file is all it has.
    report = cleanup(lab_space.state_dir, prefix=lab_space.prefix, force=True)
    assert pod.netns in report.removed_netns
    assert not etc_dir(pod.netns).exists()

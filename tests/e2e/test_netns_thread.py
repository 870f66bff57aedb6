"""run_in_netns: the work runs in the named network namespace, from a thread of its own, and the caller's
thread never moves. A name that does not exist is FileNotFoundError in the caller, as `ip netns exec`'s
"No such file or directory"; a path (/proc/PID/ns/net) is a namespace too."""

from __future__ import annotations

import os
import subprocess

import pytest

from kubelab.netnsthread import NETNS_RUN_DIR, run_in_netns

pytestmark = pytest.mark.root


def _thread_netns_inode() -> int:
    return os.stat("/proc/thread-self/ns/net").st_ino


def test_the_work_runs_in_the_namespace_and_the_caller_stays(node_netns: str) -> None:
    here = _thread_netns_inode()
    inside = run_in_netns(node_netns, _thread_netns_inode)
    assert inside == os.stat(os.path.join(NETNS_RUN_DIR, node_netns)).st_ino != here
    assert _thread_netns_inode() == here
    # What the work sees is that namespace's network: its own loopback only, down.
    links = run_in_netns(node_netns, lambda: subprocess.run(["ip", "-o", "link", "show"], check=True,
                                                            capture_output=True, text=True).stdout)
    assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"]


def test_a_path_names_a_namespace_too(node_netns: str) -> None:
    path = os.path.join(NETNS_RUN_DIR, node_netns)
    assert run_in_netns(path, _thread_netns_inode) == os.stat(path).st_ino
    ours = f"/proc/{os.getpid()}/ns/net"
    assert run_in_netns(ours, _thread_netns_inode) == os.stat(ours).st_ino


def test_a_missing_namespace_fails_in_the_caller(node_netns: str) -> None:
    ran = []
    with pytest.raises(FileNotFoundError):
        run_in_netns(f"{node_netns}-missing", lambda: ran.append(True))
    assert ran == []
    with pytest.raises(ValueError, match="the work's own error"):
        run_in_netns(node_netns, lambda: (_ for _ in ()).throw(ValueError("the work's own error")))

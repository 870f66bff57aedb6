"""Fixtures for end-to-end tests: root only, a unique namespace prefix per test, and a teardown that
always runs, even when the test (or its own teardown) failed.

Not root: the tests skip (a developer's laptop). Root (CI, these machines): they run, and a missing
tool such as curl or ip is a failure, not a skip.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyroute2 import netns as pyroute2_netns

from kubeletstub.netnsstate import cleanup

REQUIRED_TOOLS = ("ip", "curl", "iptables-restore")


@dataclass(frozen=True)
class LabSpace:
    """Where one test's lab lives: a prefix no other lab (or concurrent test run) uses, and a state
    directory of its own."""

    prefix: str
    state_dir: Path


def _require_root_and_tools() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces (CI runs as root)")
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"missing tools on PATH: {', '.join(missing)}")


@pytest.fixture
def root_and_tools() -> None:
    """Skips without root, fails without the tools: for tests that start labs of their own."""
    _require_root_and_tools()


@contextmanager
def _lab_space(state_dir: Path) -> Iterator[LabSpace]:
    _require_root_and_tools()
    space = LabSpace(prefix=f"klt-{secrets.token_hex(3)}", state_dir=state_dir)
    try:
        yield space
    finally:
        try:
            # force: the owner recorded in the state file is this very test process.
            cleanup(space.state_dir, prefix=space.prefix, force=True)
        finally:
            # Belt and braces: whatever still carries our prefix goes, and the test errors so the
            # leak is seen rather than piling up on the machine.
            leftovers = [n for n in pyroute2_netns.listnetns() if n.startswith(f"{space.prefix}-")]
            for name in leftovers:
                pyroute2_netns.remove(name)
            if leftovers:
                pytest.fail(f"network namespaces left behind after cleanup: {leftovers}")


@pytest.fixture
def lab_space(tmp_path: Path) -> Iterator[LabSpace]:
    with _lab_space(tmp_path / "state") as space:
        yield space


@pytest.fixture
def node_netns(lab_space: LabSpace) -> Iterator[str]:
    """One empty namespace in the test's lab space, for a proxy agent's applier to program."""
    name = f"{lab_space.prefix}-node"  # the lab space's teardown removes it too if this one cannot
    pyroute2_netns.create(name)
    try:
        yield name
    finally:
        pyroute2_netns.remove(name)


# --- a whole cluster (kubelab up --dataplane netns) ----------------------------------------------

def _stopping(log: str, limit: int = 40_000) -> str:
    """The log from Ctrl-C on: a stop that hangs writes every thread's stack and pending task there, and
    its head (what the components' main task waits for) is what a diagnosis needs."""
    start = log.find("SIGINT received")
    part = log[log.rfind("\n", 0, start) + 1:] if start >= 0 else log[-4000:]
    return part if len(part) <= limit else f"{part[:limit // 2]}\n[...]\n{part[-limit // 2:]}"


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """`kubelab up --dataplane netns` with 3 nodes for the tests of one module (a module may set
    `KUBELAB_UP_ARGS` to pass more options); stopped with Ctrl-C at the end, after which nothing of
    it may remain."""
    from kubelab_cluster import Cluster

    _require_root_and_tools()
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is not on PATH")
    extra = getattr(request.module, "KUBELAB_UP_ARGS", ())
    running = Cluster(tmp_path_factory.mktemp("cluster") / "data", extra_args=extra).start()
    try:
        yield running
    finally:
        code, left = running.shutdown()
        assert code == 0, f"kubelab up did not exit cleanly on Ctrl-C (exit {code}):\n{_stopping(running.log())}"
        assert not left, f"left behind after Ctrl-C: {left}"

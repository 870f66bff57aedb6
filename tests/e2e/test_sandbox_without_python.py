"""The pod sandbox is util-linux and a shell, not a Python start-up: a UTS namespace with the pod's hostname
held by `sleep infinity`, a child of kubelab, killed by the kernel when kubelab dies (PR_SET_PDEATHSIG) and
never left running when kubelab died before asking for that; containerinit's sandbox remains the fallback
on a node without the programs."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubeletstub.runtime import SANDBOX_TOOLS, ContainerRuntime, sandbox_argv

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: namespaces")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[ContainerRuntime]:
    rt = ContainerRuntime(tmp_path / "node", tmp_path / "node" / "log", namespaces=True)
    try:
        yield rt
    finally:
        await rt.close()


def _uts_hostname(pid: int) -> str:
    return subprocess.run(["nsenter", "-t", str(pid), "-u", "hostname"], check=True, capture_output=True,
                          text=True).stdout.strip()


def _gone(pid: int, *, within: float) -> bool:
    """Whether `pid` has exited, or does within `within` seconds (a liveness bound, not a measurement)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], within)[0])
    finally:
        os.close(fd)


async def test_the_sandbox_holds_the_pods_hostname_without_python(runtime: ContainerRuntime) -> None:
    box = await runtime.run_sandbox("default/p", "web-0")
    assert Path(f"/proc/{box.pid}/comm").read_text().strip() == "sleep"
    assert _uts_hostname(box.pid) == "web-0"
    assert os.uname().nodename != "web-0"  # the host's hostname is untouched
    status = Path(f"/proc/{box.pid}/status").read_text()
    assert f"PPid:\t{os.getpid()}\n" in status
    assert os.readlink(f"/proc/{box.pid}/exe") != os.path.realpath(sys.executable)


def test_the_sandbox_dies_with_kubelab() -> None:
    code = ("import os, subprocess, sys, time\n"
            "from kubeletstub.procutil import comm, spawn_launcher\n"
            "from kubeletstub.runtime import sandbox_argv\n"
            "p = spawn_launcher(sandbox_argv('web-0', os.getpid()), stdin=subprocess.DEVNULL)\n"
            "while not comm(p.pid).startswith('sleep') and p.poll() is None: time.sleep(0.01)\n"
            "print(p.pid if p.poll() is None else -1, flush=True)\n"
            "sys.stdin.read()\n")
    kubelab = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        pid = int(kubelab.stdout.readline()) if kubelab.stdout else -1
        assert pid > 0
        assert not _gone(pid, within=0)
    finally:
        kubelab.kill()
        kubelab.wait()
    assert _gone(pid, within=60)


def test_a_sandbox_whose_parent_already_died_does_not_stay() -> None:
    # The PID given is not its parent: as when kubelab died between the spawn and the death signal.
    sandbox = subprocess.run(sandbox_argv("web-0", 1), check=False, timeout=60)
    assert sandbox.returncode == 128


def test_without_the_programs_the_sandbox_is_containerinits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sandbox_argv("web-0", 42)[0] == "setpriv"
    monkeypatch.setenv("PATH", str(tmp_path))
    assert sandbox_argv("web-0", 42) == [sys.executable, "-m", "kubeletstub.containerinit", "--sandbox", "web-0",
                                         "42"]
    assert "setpriv" in SANDBOX_TOOLS

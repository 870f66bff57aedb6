"""The pod sandbox starts no Python and no shell: util-linux's setpriv and unshare exec `cat`, which holds
a UTS namespace with the pod's hostname (set from kubelab by setns + sethostname), a child of kubelab;
it goes when kubelab dies, by the kernel's death signal and, should kubelab die before that was asked
for, by its lifeline pipe reaching end-of-file. containerinit's sandbox remains the fallback on a node
without the programs."""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from polling import wait_for

from kubeletstub import sandbox
from kubeletstub.runtime import ContainerRuntime, ContainerRuntimeError, ContainerSpec

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


def _kill(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)
    except ProcessLookupError:
        pass
    finally:
        os.close(fd)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _kubelab(code: str, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen[str]:
    """A Python process standing for kubelab: it runs `code`, which prints the sandbox's PID."""
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, pass_fds=pass_fds)


async def test_the_sandbox_holds_the_pods_hostname_without_python(runtime: ContainerRuntime) -> None:
    host = socket.gethostname()
    box = await runtime.run_sandbox("default/p", "web-0")
    assert Path(f"/proc/{box.pid}/comm").read_text().strip() == "cat"
    assert os.readlink(f"/proc/{box.pid}/exe") != os.path.realpath(sys.executable)
    assert _uts_hostname(box.pid) == "web-0"
    assert socket.gethostname() == host != "web-0"  # the host's hostname is untouched
    assert f"PPid:\t{os.getpid()}\n" in Path(f"/proc/{box.pid}/status").read_text()
    # A container of the pod sees the hostname (it joins the sandbox's namespace).
    spec = ContainerSpec(pod_key="default/p", pod_uid="uid-1", name="app", restart=0, argv=["hostname"],
                         env={"PATH": "/usr/bin:/bin"})
    container = await runtime.start(spec)
    await container.wait()
    assert container.exit_code == 0
    assert container.log_path.read_text().split()[-1] == "web-0"
    # Removing the pod ends the holder.
    await runtime.remove_pod("default/p", "uid-1")
    assert _gone(box.pid, within=0)


def test_the_sandbox_dies_with_kubelab() -> None:
    code = ("import asyncio, sys, tempfile\n"
            "from pathlib import Path\n"
            "from kubeletstub.runtime import ContainerRuntime\n"
            "async def main():\n"
            "    d = Path(tempfile.mkdtemp(dir='/dev/shm'))\n"
            "    rt = ContainerRuntime(d / 'node', d / 'log', namespaces=True)\n"
            "    box = await rt.run_sandbox('default/p', 'web-0')\n"
            "    print(box.pid, d, flush=True)\n"
            "    await asyncio.to_thread(sys.stdin.read)\n"
            "asyncio.run(main())\n")
    kubelab = _kubelab(code)
    pid, scratch = -1, ""
    try:
        assert kubelab.stdout is not None
        line = kubelab.stdout.readline().split()
        pid, scratch = int(line[0]), line[1]
        assert not _gone(pid, within=0)
        assert _uts_hostname(pid) == "web-0"
    finally:
        kubelab.kill()
        kubelab.wait()
        if pid > 0 and not _gone(pid, within=60):
            _kill(pid)
            pytest.fail("the sandbox outlived kubelab")
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def test_the_death_signal_alone_ends_it() -> None:
    # The lifeline is kept open by this test: only PR_SET_PDEATHSIG can end the sandbox when its parent dies.
    r, w = os.pipe()
    code = (f"import subprocess, sys\n"
            f"from kubeletstub.sandbox import sandbox_argv\n"
            f"p = subprocess.Popen(sandbox_argv(), stdin={r}, stdout=subprocess.DEVNULL, start_new_session=True)\n"
            f"print(p.pid, flush=True)\n"
            f"sys.stdin.read()\n")
    kubelab = _kubelab(code, pass_fds=(r,))
    os.close(r)
    pid = -1
    try:
        assert kubelab.stdout is not None
        pid = int(kubelab.stdout.readline())
        assert not _gone(pid, within=0)
        # setpriv asks for the signal before it execs unshare, which execs cat: once the holder is cat the
        # signal is armed (before that, a parent that died first would leave only the lifeline to end it,
        # which this test holds open; a loaded machine can take a while to get there).
        wait_for("the holder to be cat", lambda: _comm(pid) == "cat", timeout=60)
    finally:
        kubelab.kill()
        kubelab.wait()
        try:
            assert pid > 0 and _gone(pid, within=60), "the sandbox outlived its parent"
        finally:
            os.close(w)
            _kill(pid)


def test_the_lifeline_alone_ends_it() -> None:
    # The parent stays; its lifeline's write end closes, as when kubelab died before setpriv asked for the
    # death signal (or a process forked from kubelab held the signal's thread).
    r, w = os.pipe()
    holder = subprocess.Popen(sandbox.sandbox_argv() or ["false"], stdin=r, stdout=subprocess.DEVNULL,
                              start_new_session=True)
    os.close(r)
    try:
        assert not _gone(holder.pid, within=0.2)
        os.close(w)
        w = -1
        assert holder.wait(timeout=60) == 0
    finally:
        if w >= 0:
            os.close(w)
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_kubelab_dying_right_after_the_spawn_leaves_no_sandbox() -> None:
    code = ("import os, subprocess\n"
            "from kubeletstub.procutil import spawn_launcher\n"
            "from kubeletstub.sandbox import lifeline, sandbox_argv\n"
            "p = spawn_launcher(sandbox_argv(), stdin=lifeline(), stdout=subprocess.DEVNULL)\n"
            "print(p.pid, flush=True)\n"
            "os._exit(0)\n")
    for _ in range(5):
        kubelab = _kubelab(code)
        out, _ = kubelab.communicate(timeout=60)
        pid = int(out)
        if not _gone(pid, within=60):
            _kill(pid)
            pytest.fail("a sandbox outlived the kubelab that had just spawned it")


def test_the_hosts_hostname_is_never_set() -> None:
    host = socket.gethostname()
    with pytest.raises(ContainerRuntimeError, match="no UTS namespace of its own"):
        sandbox.set_hostname(os.getpid(), "web-0")
    assert socket.gethostname() == host


async def test_without_the_programs_the_sandbox_is_containerinits(
        runtime: ContainerRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sandbox.sandbox_argv() is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sleep").symlink_to(str(shutil.which("sleep")))  # what containerinit's holder needs, no setpriv or unshare
    monkeypatch.setenv("PATH", str(bin_dir))
    assert sandbox.sandbox_argv() is None
    box = await runtime.run_sandbox("default/p", "web-0")
    assert Path(f"/proc/{box.pid}/comm").read_text().strip() == "sleep"
    monkeypatch.undo()
    assert _uts_hostname(box.pid) == "web-0"

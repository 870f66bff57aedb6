"""The runtime on its own (root: namespaces): a container started by `ContainerRuntime.start` runs in its
UTS, mount and PID namespaces with its files laid over the host's, and `spawn_in_container` (what
`kubectl exec` uses) runs a command inside it: same hostname, same mounts, same root, its env and
working directory, and kube's 126/127 semantics for a command that cannot run."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubeletstub.runtime import ContainerRuntime, ContainerSpec, Mount, spawn_in_container

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: namespaces and mounts")


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[ContainerRuntime]:
    rt = ContainerRuntime(tmp_path / "node", tmp_path / "node" / "log", namespaces=True)
    try:
        yield rt
    finally:
        await rt.close()


async def run_in(rt: ContainerRuntime, cmd: list[str]) -> tuple[int, str, str]:
    proc = spawn_in_container(rt, "default/p", "app", cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    out, err = await asyncio.to_thread(proc.communicate, timeout=30)
    return proc.returncode, out.decode(), err.decode()


async def test_exec_runs_inside_the_container(runtime: ContainerRuntime, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("in the container only\n")
    await runtime.run_sandbox("default/p", "web-0")
    spec = ContainerSpec(pod_key="default/p", pod_uid="uid-1", name="app", restart=0,
                         argv=["sleep", "3600"], env={"PATH": "/usr/bin:/bin", "GREETING": "hi"},
                         working_dir="/srv/app", mounts=[Mount(str(secret), "/srv/app/secret.txt", read_only=True)])
    container = await runtime.start(spec)
    assert container.running and container.reason == ""
    code, out, err = await run_in(runtime, ["sh", "-c", ("hostname; pwd; cat secret.txt; echo $GREETING; "
                                                         "cat /proc/1/cmdline | tr '\\0' ' '")])
    assert code == 0, err
    assert out.splitlines() == ["web-0", "/srv/app", "in the container only", "hi", "sleep 3600 "]
    assert not Path("/srv/app").exists(), "the host's filesystem was changed"
    code, _, err = await run_in(runtime, ["sh", "-c", "echo x > /srv/app/secret.txt"])
    assert code != 0 and "Read-only file system" in err
    code, _, err = await run_in(runtime, ["no-such-binary"])
    assert code == 127 and "No such file or directory" in err
    code, _, _ = await run_in(runtime, ["sh", "-c", "exit 3"])
    assert code == 3


async def test_a_command_that_cannot_start_is_a_start_error(runtime: ContainerRuntime) -> None:
    spec = ContainerSpec(pod_key="default/q", pod_uid="uid-2", name="app", restart=0,
                         argv=["no-such-binary"], env={"PATH": "/usr/bin:/bin"})
    container = await runtime.start(spec)
    await asyncio.wait_for(container.wait(), 30)
    assert (container.exit_code, container.reason) == (128, "StartError")
    assert container.message == 'exec: "no-such-binary": executable file not found in $PATH'


async def test_stop_sends_sigterm_then_sigkill(runtime: ContainerRuntime) -> None:
    spec = ContainerSpec(pod_key="default/r", pod_uid="uid-3", name="app", restart=0,
                         argv=["sh", "-c", "trap 'exit 7' TERM; echo trapped; while :; do sleep 0.1; done"],
                         env={"PATH": "/usr/bin:/bin"})
    container = await runtime.start(spec)
    # A signal before the trap is set would be ignored (PID 1), as in any container: wait for its line.
    for _ in range(600):
        if container.log_path.exists() and b"trapped" in container.log_path.read_bytes():
            break
        await asyncio.sleep(0.05)
    await runtime.stop("default/r", "app", grace=30)
    assert container.exit_code == 7
    stubborn = ContainerSpec(pod_key="default/s", pod_uid="uid-4", name="app", restart=0,
                             argv=["sleep", "3600"], env={"PATH": "/usr/bin:/bin"})  # PID 1 ignores SIGTERM
    container = await runtime.start(stubborn)
    await runtime.stop("default/s", "app", grace=0.5)
    assert container.exit_code == 137


async def test_stdin_and_a_terminal_for_attach(runtime: ContainerRuntime) -> None:
    piped = ContainerSpec(pod_key="default/t", pod_uid="uid-5", name="app", restart=0, argv=["cat"],
                          env={"PATH": "/usr/bin:/bin"}, stdin=True)
    container = await runtime.start(piped)
    seen: list[bytes] = []
    runtime.subscribe("default/t", "app", lambda stream, data: seen.append(data))
    fd = runtime.stdin_fd("default/t", "app")
    assert fd is not None
    os.write(fd, b"through stdin\n")
    runtime.close_stdin("default/t", "app")
    await asyncio.wait_for(container.wait(), 30)
    assert container.exit_code == 0
    assert b"".join(seen) == b"through stdin\n"
    assert b"stdout F through stdin" in container.log_path.read_bytes()

    script = "read go; stty size; tty; read line; echo got:$line"
    terminal = ContainerSpec(pod_key="default/u", pod_uid="uid-6", name="app", restart=0,
                             argv=["sh", "-c", script], env={"PATH": "/usr/bin:/bin"}, stdin=True, tty=True)
    container = await runtime.start(terminal)
    out: list[bytes] = []
    runtime.subscribe("default/u", "app", lambda stream, data: out.append(data))
    runtime.resize("default/u", "app", width=100, height=40)
    fd = runtime.stdin_fd("default/u", "app")
    assert fd is not None
    os.write(fd, b"go\n")
    os.write(fd, b"hello\n")
    await asyncio.wait_for(container.wait(), 30)
    text = b"".join(out).decode()
    assert "40 100" in text and "/dev/pts/" in text and "got:hello" in text, text
    assert container.exit_code == 0

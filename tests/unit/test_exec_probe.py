"""An exec probe as the prober runs it (real processes, no container): the command's environment and working
directory are the ones the runtime gives, and a command that outlives timeoutSeconds is killed, with what
it started, and fails in kubelet's words."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

from kubelab.models import Pod
from kubeletstub.containerexec import ExecTarget
from kubeletstub.prober import Prober, ProbeSpec, Run


def prober(env: dict[str, str], cwd: str) -> Prober:
    def target(pod_key: str, container: str, cmd: Sequence[str]) -> ExecTarget:
        return ExecTarget(list(cmd), env, cwd)

    return Prober(lambda cmd: list(cmd), target, lambda key: None, lambda *_: None)


async def test_the_command_gets_the_containers_env_and_working_directory(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "FLAVOR": "mint"}
    spec = ProbeSpec("exec", ("sh", "-c", 'echo "$FLAVOR $(pwd)"; exit 1'), timeout=30)
    assert await prober(env, str(tmp_path)).probe_once("ns/p", "c", spec) == (False, f"mint {tmp_path}")


async def test_a_command_that_outlives_its_timeout_is_killed_and_fails(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    spec = ProbeSpec("exec", ("sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"), timeout=1)
    ok, why = await prober({"PATH": "/usr/bin:/bin"}, "/").probe_once("ns/p", "c", spec)
    assert (ok, why) == (False, f'command "sh -c sleep 300 & echo $! > {pidfile}; wait" timed out')
    child = int(pidfile.read_text())
    try:
        os.kill(child, 0)
    except ProcessLookupError:
        pass
    else:  # a zombie (reparented, not yet reaped) counts as gone
        assert Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


async def test_a_probe_with_nowhere_to_run_gives_the_event_loop_back() -> None:
    """The container's run goes on but its pod's network is gone (the lab torn down at Ctrl-C, the kubelet
    not yet told): the exec probe cannot run, and the worker must still yield between tries. It once
    retried at once, forever, and `kubelab up` never got to finish its stop."""
    turns = 0  # event-loop turns the ticker below saw
    asked: list[int] = []  # the turn at which each probe asked for its target

    def nowhere(pod_key: str, container: str, cmd: Sequence[str]) -> ExecTarget | None:
        asked.append(turns)
        if len(asked) > 50:  # without the pause: stop the busy worker, so that the test fails, not hangs
            raise RuntimeError("the probe worker retried without yielding")
        return None

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    pod = Pod.model_validate({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [
        {"name": "c", "image": "x", "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}}]}})
    prober = Prober(lambda cmd: list(cmd), nowhere, lambda key: None, lambda *_: None,
                    current_run=lambda key, name: Run("containerd://c1", 0.0))
    tick = asyncio.create_task(ticker())
    prober.start(pod, "10.244.1.5")
    [worker] = [t for t in asyncio.all_tasks() if t.get_name().startswith("probe-")]
    try:
        while len(asked) < 3 and not worker.done():
            await asyncio.sleep(0.05)
        assert len(asked) == 3, worker
        assert asked[0] < asked[1] < asked[2]  # the loop ran other tasks between two tries
    finally:
        prober.stop("ns/p")
        tick.cancel()


async def test_stopping_the_kubelet_ends_every_probe_worker() -> None:
    pods = [Pod.model_validate({"metadata": {"name": name, "namespace": "ns"}, "spec": {"containers": [
        {"name": "c", "image": "x", "livenessProbe": {"exec": {"command": ["true"]}}}]}}) for name in ("a", "b")]
    prober = Prober(lambda cmd: list(cmd), lambda *_: None, lambda key: None, lambda *_: None,
                    current_run=lambda key, name: None)
    for pod in pods:
        prober.start(pod, "10.244.1.5")
    workers = [t for t in asyncio.all_tasks() if (t.get_name() or "").startswith("probe-")]
    assert len(workers) == 2
    prober.stop_all()
    await asyncio.gather(*workers, return_exceptions=True)
    assert all(t.cancelled() for t in workers)
    assert not prober.is_probed("ns/a") and not prober.is_probed("ns/b")

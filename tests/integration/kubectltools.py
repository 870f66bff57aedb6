"""Driving the real kubectl in integration tests: the binaries, kubeconfigs, tables, clusters.

    Kubectl(version, kubeconfig, cache_dir)   one real binary: "1.29" ... "1.33" (under
                                              /usr/lib/google-cloud-sdk/bin) or "dispatcher"
                                              (/usr/bin/kubectl, which picks the binary from the
                                              server's /version). Every call passes --kubeconfig and
                                              --cache-dir, so no test reads ~/.kube.
    table(text)                               kubectl's aligned output as a list of {HEADER: cell}.
    RenderCluster(data_dir)                   `kubelab up --dataplane render` as a subprocess (no
                                              root): scheduler, controllers, kubelet stubs; stopped
                                              by Ctrl-C to its PID.

Versions whose behaviour differs (describe reads EndpointSlices from 1.31 and Endpoints before,
1.32+ send protobuf bodies) are parametrized with VERSIONS; tests that only need one kubectl use the
dispatcher, which is what a user of these machines types.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

import polling
import pytest

from kubelab import kubeconfig as kubeconfigs
from kubelab.etcd import free_port
from kubelab.processes import stop_process

BIN = Path("/usr/lib/google-cloud-sdk/bin")
DISPATCHER = Path("/usr/bin/kubectl")
# The oldest and newest kubectl the lab supports, and the dispatcher (1.32 for our /version).
VERSIONS = ["1.29", "1.33", "dispatcher"]
AGE = re.compile(r"^(\d+s|\d+m(\d+s)?|\d+h(\d+m)?|\d+d(\d+h)?)$")
T = TypeVar("T")


def binary(version: str) -> Path:
    path = DISPATCHER if version == "dispatcher" else BIN / f"kubectl.{version}"
    if not path.exists():
        pytest.skip(f"{path} is not installed")
    return path


@dataclass
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def ok(self) -> Result:
        assert self.returncode == 0, f"{' '.join(self.argv)} failed ({self.returncode}):\n{self.stdout}{self.stderr}"
        return self

    def failed(self) -> Result:
        assert self.returncode != 0, f"{' '.join(self.argv)} succeeded:\n{self.stdout}{self.stderr}"
        return self


class Kubectl:
    def __init__(self, version: str, kubeconfig: Path, cache_dir: Path) -> None:
        self.version = version
        self.path = binary(version)
        self.kubeconfig = kubeconfig
        self.cache_dir = cache_dir

    def __call__(self, *args: str, input: str | None = None, env: dict[str, str] | None = None,
                 timeout: float = 60) -> Result:
        argv = [str(self.path), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir), *args]
        proc = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=timeout,
                              env={**os.environ, **(env or {})}, check=False)
        return Result(argv, proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *args: str, input: str | None = None, env: dict[str, str] | None = None) -> str:
        return self(*args, input=input, env=env).ok().stdout

    def popen(self, *args: str) -> subprocess.Popen[str]:
        argv = [str(self.path), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir), *args]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def __repr__(self) -> str:
        return f"kubectl {self.version}"


def write_kubeconfig(directory: Path, server: str) -> Path:
    return kubeconfigs.write(directory / "kubeconfig", server)


def table(text: str) -> list[dict[str, str]]:
    """kubectl's tabwriter output as rows of {HEADER: cell}. Columns start where their headers start
    (cells are left-aligned under them), so empty cells and cells with single spaces are kept."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"(?:(?<=\s{2})|^)\S", header)]
    names = [header[s:e].strip() for s, e in zip(starts, starts[1:] + [len(header)], strict=True)]
    rows = []
    for line in lines[1:]:
        cells = [line[s:e].strip() for s, e in zip(starts, starts[1:] + [None], strict=True)]  # type: ignore[list-item]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def headers(text: str) -> list[str]:
    first = text.splitlines()[0] if text.strip() else ""
    return re.split(r"\s{2,}", first.strip())


def normalize(text: str, **patterns: str) -> str:
    """Replace what legitimately differs between runs (ages, IPs, uids, times) by placeholders:
    normalize(out, AGE=r"\\b\\d+s\\b") turns `5s` into `<AGE>`."""
    for name, pattern in patterns.items():
        text = re.sub(pattern, f"<{name}>", text)
    return text


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.2) -> T:
    """Poll `check` until it returns something truthy; a failed assertion or lookup in it means "not yet"."""
    return polling.wait_for(what, check, timeout, interval=interval,
                            retry_on=(AssertionError, ValueError, KeyError, IndexError))


class RenderCluster:
    """`kubelab up --dataplane render`: the whole control plane and simulated nodes in one process,
    with its own private etcd, and no root. Stopped by SIGINT to its PID; `stop` then checks that
    its etcd is gone too."""

    def __init__(self, data_dir: Path, *, nodes: int = 2, args: Sequence[str] = (),
                 open_files: int | None = None) -> None:
        self.data_dir = data_dir
        self.nodes = nodes
        self.args = tuple(args)
        self.open_files = open_files  # RLIMIT_NOFILE (soft and hard) of the process, when given
        self.port = free_port()
        self.server = f"http://127.0.0.1:{self.port}"
        self.kubeconfig = data_dir / "kubeconfig"
        self.log_path = data_dir.parent / f"{data_dir.name}-kubelab.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0, *, wait: bool = True) -> RenderCluster:
        """Start `kubelab up`; with `wait`, until it says it is up (`wait_up` does that later)."""
        argv = [sys.executable, "-m", "kubelab", "up", "--dataplane", "render", "--nodes", str(self.nodes),
                "--data-dir", str(self.data_dir), "--listen", f"127.0.0.1:{self.port}", *self.args]
        if self.open_files is not None:  # util-linux's prlimit sets the limit and execs the command
            argv = ["prlimit", f"--nofile={self.open_files}:{self.open_files}", *argv]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
        return self.wait_up(timeout) if wait else self

    def wait_up(self, timeout: float = 90.0) -> RenderCluster:
        try:
            wait_for("kubelab up to say it is up", self._is_ready, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _is_ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"kubelab up exited with {self.proc.returncode}:\n{self.log()}")
        return b"kubelab is up" in self.log_path.read_bytes()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 60.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        stop_process(proc, sig=signal.SIGINT, timeout=timeout)
        assert not self.etcd_leftovers(), f"etcd still running after kubelab up stopped: {self.etcd_leftovers()}"

    def etcd_leftovers(self) -> list[str]:
        ps = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=False).stdout
        return [line.strip() for line in ps.splitlines() if str(self.data_dir) in line and "etcd" in line]


def render_cluster(data_dir: Path, nodes: int = 2) -> Iterator[RenderCluster]:
    """For fixtures: start, yield, always stop."""
    cluster = RenderCluster(data_dir, nodes=nodes)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def cells(rows: list[dict[str, str]], key: str, value: str) -> dict[str, str]:
    found = [r for r in rows if r.get(key) == value]
    assert len(found) == 1, f"expected one row with {key}={value}, got {rows}"
    return found[0]


def manifest(*docs: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump_all(list(docs), sort_keys=False)


class RecordingProxy:
    """An HTTP proxy on a free loopback port that forwards every request to `upstream` and keeps
    (method, path, content type, body) of each, so a test can see what kubectl sent — protobuf or
    JSON — next to what the server did with it. Used as a context manager; stopped by shutdown().
    `accept`, if given, replaces every request's Accept header (a client that asks for something else)."""

    def __init__(self, upstream: str, *, accept: str | None = None) -> None:
        import http.server
        import threading

        import httpx

        self.upstream = upstream
        self.requests: list[tuple[str, str, str, bytes]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                proxy.requests.append((self.command, self.path, self.headers.get("content-type") or "", body))
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "content-length", "connection", "transfer-encoding")}
                if accept is not None:
                    headers = {**{k: v for k, v in headers.items() if k.lower() != "accept"}, "Accept": accept}
                resp = httpx.request(self.command, proxy.upstream + self.path, content=body, headers=headers,
                                     timeout=30)
                self.send_response(resp.status_code)
                for key, value in resp.headers.multi_items():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server",
                                           "content-encoding"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(resp.content)))
                self.end_headers()
                self.wfile.write(resp.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="recording-proxy", daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def bodies(self, method: str = "POST") -> list[tuple[str, str, bytes]]:
        return [(path, ctype, body) for m, path, ctype, body in self.requests if m == method]

"""`kubelab up --apiservers 3` supervises its child API servers (launcher/apiservers.py), and `kubelab
apiserver` stops cleanly whenever it is told to:

* a child SIGKILLed is started again by `kubelab up` on the port up binds for it: refused until the new
  process serves, then back at the same URL (/readyz ok, a new pid), cluster.json and `kubelab status` say "restarts 1", and `kubelab up`'s log
  says what happened; Ctrl-C of `kubelab up` then exits 0 and leaves no child (the first or the restarted).
* `kubelab apiserver` SIGTERMed during its start-up (before it serves) exits 0 without a traceback and
  leaves no endpoint of its own in the kubernetes Service (its master lease removed or never made), as a
  SIGTERM after the start-up does.
* `kubelab apiserver` SIGTERMed or SIGINTed while its start-up waits for an etcd that is not there exits 0
  at once, without a traceback or an error (not when the storage wait gives up).
* `--listen-fd` that names no TCP socket, or one on another port than --listen's, is refused with a
  clear message.

Restart times are measured by bench/apiserver_failover.py, never asserted here."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import polling
import pytest
from faultkit import ApiServerProcess, OwnedEtcd
from procfs import alive
from upprocess import start_up, wait_until_up

from kubelab.etcd import free_port
from kubelab.processes import stop_process

REPO = Path(__file__).resolve().parents[2]


def _ports_free(*ports: int) -> bool:
    for port in ports:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=5).text == "ok"
    except httpx.HTTPError:
        return False


def _status(data: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "kubelab", "status", "--data-dir", str(data)], check=False,
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_killed_child_apiserver_is_back_on_its_url_and_ctrl_c_leaves_no_child(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()
    while not _ports_free(port + 1, port + 2):
        port = free_port()
    log = tmp_path / "up.log"
    up = start_up(["--apiservers", "3", "--dataplane", "render", "--nodes", "1", "--data-dir", str(data), "--listen",
                   f"127.0.0.1:{port}"], log)
    children: list[int] = []
    try:
        wait_until_up(up, log)

        def records() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = json.loads((data / "cluster.json").read_text())["apiservers"]
            return found

        urls = [f"http://127.0.0.1:{p}" for p in (port, port + 1, port + 2)]
        assert [r["url"] for r in records()] == urls
        assert [(r["restarts"], r["state"]) for r in records()] == [(0, "running")] * 3
        assert "restarts 0" in _status(data)
        victim = records()[1]
        children += [r["pid"] for r in records()[1:]]
        os.kill(victim["pid"], signal.SIGKILL)

        def handled() -> bool:  # kubelab up has seen the exit (and closed the port first); not yet serving again
            record = records()[1]
            return record["state"] in ("back-off", "starting") and not alive(victim["pid"])
        polling.wait_for("kubelab up to see the killed API server gone", handled, 60)
        # Until the new process is ready to serve, its port refuses (a client moves on at once) instead of
        # queueing the connection in the kernel, where a client would wait out its timeout.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port + 1), timeout=10).close()

        def restarted() -> dict[str, Any] | None:
            record = records()[1]
            return record if record["pid"] != victim["pid"] and record["state"] == "running" else None
        again = polling.wait_for("kubelab up to start the killed API server again", restarted, 240)
        children.append(again["pid"])
        assert again["url"] == victim["url"] and again["restarts"] == 1
        assert _ready(victim["url"])  # the same URL: the port the clients were given
        assert alive(again["pid"]) and not alive(victim["pid"])
        status = _status(data)
        assert f"apiserver   {victim['url']} (ready) pid {again['pid']}, running, restarts 1" in status, status
        assert f"apiserver   {urls[2]} (ready) pid {records()[2]['pid']}, running, restarts 0" in status, status
        text = log.read_text()
        assert f"apiserver-2 was killed by SIGKILL (pid {victim['pid']}); starting it again now (restart 1)" in text
        assert f"apiserver-2 ready again at {victim['url']} (pid {again['pid']}, restart 1)" in text

        up.send_signal(signal.SIGINT)
        assert up.wait(120) == 0
        assert [pid for pid in children if alive(pid)] == []
        assert not (data / "cluster.json").exists()
        assert "Traceback" not in log.read_text()
        assert _ports_free(port + 1, port + 2)  # up closed the sockets it held for them
    finally:
        if up.poll() is None:
            stop_process(up)


def _endpoint_ports(url: str) -> set[int]:
    subsets = httpx.get(f"{url}/api/v1/namespaces/default/endpoints/kubernetes", timeout=30).json().get("subsets")
    return {p["port"] for s in subsets or [] for p in s["ports"]}


def _start_and_stop(etcd_url: str, port: int, log: Path, when: Callable[[subprocess.Popen[bytes]], None],
                    sig: signal.Signals = signal.SIGTERM) -> tuple[int, str]:
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kubelab", "apiserver", "--etcd-servers", etcd_url,
                                 "--listen", f"127.0.0.1:{port}", "--disable-admission-plugins", "ServiceAccount"],
                                stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        when(proc)
        proc.send_signal(sig)
        code = proc.wait(120)
    finally:
        stop_process(proc)
    return code, log.read_text()


def _catches_sigterm(proc: subprocess.Popen[bytes]) -> bool:
    """Its SIGTERM handler is in (the first thing `kubelab apiserver` does): the caught signals' mask."""
    if proc.poll() is not None:
        raise polling.GiveUp(f"exited with {proc.returncode}")
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def test_sigterm_during_start_up_ends_the_apiserver_cleanly(
        tmp_path: Path, own_etcd: OwnedEtcd, apiserver_process: Callable[..., ApiServerProcess]) -> None:
    witness = apiserver_process(own_etcd.url)  # reads the kubernetes Service's endpoints
    port = free_port()

    def at_once(proc: subprocess.Popen[bytes]) -> None:
        polling.wait_for("its SIGTERM handler", lambda: _catches_sigterm(proc), 60, retry_on=(OSError,))

    code, text = _start_and_stop(own_etcd.url, port, tmp_path / "early.log", at_once)
    assert (code, "Traceback" in text) == (0, False), text

    # With etcd paused its start-up cannot finish: the SIGTERM lands while it starts, whatever it has made by
    # then; etcd resumes, and the server must end as a stopped one does.
    def while_etcd_hangs(proc: subprocess.Popen[bytes]) -> None:
        at_once(proc)
        own_etcd.pause()
        try:
            time.sleep(3)  # into the start-up's requests to etcd (not a measurement: any moment will do)
            assert not _ready(f"http://127.0.0.1:{port}")
            proc.send_signal(signal.SIGTERM)
            time.sleep(1)
        finally:
            own_etcd.resume()

    code, text = _start_and_stop(own_etcd.url, port, tmp_path / "paused.log", while_etcd_hangs)
    assert (code, "Traceback" in text) == (0, False), text
    assert port not in _endpoint_ports(witness.url)

    # After the start-up, for comparison: the same end.
    def once_ready(proc: subprocess.Popen[bytes]) -> None:
        polling.wait_for("it to serve", lambda: _ready(f"http://127.0.0.1:{port}"), 120)
        polling.wait_for("its endpoint", lambda: port in _endpoint_ports(witness.url), 60)

    code, text = _start_and_stop(own_etcd.url, port, tmp_path / "ready.log", once_ready)
    assert (code, "Traceback" in text) == (0, False), text
    assert port not in _endpoint_ports(witness.url)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_while_etcd_is_unreachable_ends_the_start_up_quietly(tmp_path: Path, sig: signal.Signals) -> None:
    """Nothing listens on the etcd port: the start-up waits for storage (Registry.wait_for_storage, 30 s),
    then fails with exit 3 and uvicorn's traceback. A stop during that wait ends it as a stop: exit 0,
    nothing logged as an error. (The 120 s the helper waits for the exit is no measurement: the two ends
    differ by their exit code and output, whenever they come.)"""
    closed, port = free_port(), free_port()
    log = tmp_path / "apiserver.log"

    def in_the_storage_wait(proc: subprocess.Popen[bytes]) -> None:
        def waiting() -> bool:
            if proc.poll() is not None:
                raise polling.GiveUp(f"exited with {proc.returncode}: {log.read_text()}")
            return "waiting up to 30s for etcd" in log.read_text()
        polling.wait_for("the start-up's storage wait", waiting, 120)

    code, text = _start_and_stop(f"http://127.0.0.1:{closed}", port, log, in_the_storage_wait, sig)
    assert (code, "Traceback" in text, "ERROR" in text) == (0, False, False), text
    assert "stopped during start-up" in text
    assert not _ready(f"http://127.0.0.1:{port}")


@pytest.mark.parametrize(("make", "message"), [
    pytest.param(lambda port: socket.socket(socket.AF_INET, socket.SOCK_DGRAM), "not a TCP socket", id="udp"),
    pytest.param(lambda port: socket.create_server(("127.0.0.1", free_port())), "give --listen the socket's address",
                 id="another port"),
])
def test_listen_fd_that_cannot_serve_is_refused(make: Callable[[int], socket.socket], message: str) -> None:
    port = free_port()
    with make(port) as sock:
        done = subprocess.run([sys.executable, "-m", "kubelab", "apiserver", "--etcd-servers", "http://127.0.0.1:1",
                               "--listen", f"127.0.0.1:{port}", "--listen-fd", str(sock.fileno())],
                              pass_fds=(sock.fileno(),), capture_output=True, text=True, timeout=120, cwd=REPO,
                              check=False)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr

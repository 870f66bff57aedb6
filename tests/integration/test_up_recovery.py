"""`kubelab up` killed with SIGKILL, and the `kubelab up` after it on the same data dir (render dataplane,
so no root is needed).

Its private etcd dies with it (it used to live on, orphaned, holding the data dir's lock); the next
`kubelab up` says in one line that it cleans up after the earlier run and starts. An etcd an earlier
run left running on the data dir (as one did before children died with their parent) is stopped, in
one line; an etcd on the data dir that kubelab did not start is refused in one line, at once, and left
alone. Before, the next `kubelab up` waited 30 s for the lock and died with a TimeoutError traceback.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import polling
import pytest

from kubelab.etcd import find_etcd, free_port
from kubelab.processes import stop_process

KUBELAB = [sys.executable, "-m", "kubelab"]


class Up:
    """`kubelab up --dataplane render` in a subprocess, its output in a file of its own."""

    def __init__(self, data_dir: Path, name: str) -> None:
        self.data_dir = data_dir
        self.log_path = data_dir.parent / f"{name}.log"
        argv = [*KUBELAB, "up", "--dataplane", "render", "--nodes", "1", "--data-dir", str(data_dir),
                "--listen", f"127.0.0.1:{free_port()}"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> str:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise polling.GiveUp(f"kubelab up exited with {self.proc.returncode}:\n{self.output()}")
            return "Ctrl-C stops everything" in self.output()
        polling.wait_for("kubelab up to be ready", ready, 90, retry_on=())
        return self.output()

    def wait_exit(self) -> int:
        return self.proc.wait(90)

    def stop(self) -> int | None:
        """Ctrl-C, by PID."""
        return stop_process(self.proc, sig=signal.SIGINT, timeout=60)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[Up]]:
    runs: list[Up] = []
    try:
        yield runs
    finally:
        codes = [run.stop() for run in runs]
        assert all(code in (0, 1, -signal.SIGKILL) for code in codes), codes


def etcds_on(data_dir: Path) -> list[int]:
    """PIDs of the live etcd processes whose --data-dir is `data_dir` (read from /proc)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X") and argv[0].endswith(b"etcd") and str(data_dir).encode() in argv:
            found.append(int(proc.name))
    return found


def test_a_killed_kubelab_up_takes_its_etcd_with_it_and_the_next_one_cleans_up(tmp_path: Path,
                                                                               started: list[Up]) -> None:
    data = tmp_path / "data"
    first = Up(data, "first")
    started.append(first)
    first.wait_ready()
    assert len(etcds_on(data / "etcd")) == 1

    first.proc.kill()  # SIGKILL: no Ctrl-C handler, no teardown
    first.proc.wait()
    polling.wait_for("its etcd to die with it", lambda: not etcds_on(data / "etcd"), 30, retry_on=())

    second = Up(data, "second")
    started.append(second)
    output = second.wait_ready()
    assert f"the cluster last run from {data} (pid {first.proc.pid}) ended without stopping; cleaning up" \
           in output, output
    assert "Traceback" not in output
    assert second.stop() == 0
    assert not etcds_on(data / "etcd")


# A run whose etcd does not die with it, as every run's did before (children were not tied to their
# parent): it starts etcd on the data dir, says its PID, and is then killed.
EARLIER_RUN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from kubelab import processes
    processes._prctl = lambda: None  # no PR_SET_PDEATHSIG: the etcd outlives this process
    from kubelab.etcd import Etcd
    print(Etcd(Path(sys.argv[1])).start().process.pid, flush=True)
    time.sleep(600)
""")


def test_an_etcd_an_earlier_run_left_running_is_stopped_in_one_line(tmp_path: Path, started: list[Up]) -> None:
    data = tmp_path / "data"
    earlier = subprocess.Popen([sys.executable, "-c", EARLIER_RUN, str(data / "etcd")], stdout=subprocess.PIPE)
    orphan = 0
    try:
        assert earlier.stdout is not None
        orphan = int(earlier.stdout.readline())
        earlier.kill()
        earlier.wait()
        assert etcds_on(data / "etcd") == [orphan]  # orphaned, holding the data dir's lock

        up = Up(data, "up")
        started.append(up)
        output = up.wait_ready()
        assert f"stopped etcd (pid {orphan}) that an earlier run left running on {data / 'etcd'}" in output, output
        assert "Traceback" not in output
        assert orphan not in etcds_on(data / "etcd")
        assert up.stop() == 0
        assert not etcds_on(data / "etcd")
    finally:
        stop_process(earlier)
        if orphan in etcds_on(data / "etcd"):
            subprocess.run(["kill", "-KILL", str(orphan)], check=False)


def test_a_data_dir_another_etcd_holds_is_refused_in_one_line(tmp_path: Path, started: list[Up]) -> None:
    data = tmp_path / "data"
    client, peer = free_port(), free_port()
    # Someone else's etcd on the data dir's etcd directory: kubelab has no record of starting it.
    with open(tmp_path / "other-etcd.log", "wb") as log:
        other = subprocess.Popen([find_etcd(), "--data-dir", str(data / "etcd"),
                                  "--listen-client-urls", f"http://127.0.0.1:{client}",
                                  "--advertise-client-urls", f"http://127.0.0.1:{client}",
                                  "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                                  "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                                  "--initial-cluster", f"default=http://127.0.0.1:{peer}"],
                                 stdout=log, stderr=subprocess.STDOUT)
    try:
        def healthy() -> bool:  # then it holds the data dir's lock
            if other.poll() is not None:
                raise polling.GiveUp(f"the other etcd exited: {(tmp_path / 'other-etcd.log').read_text()}")
            with urllib.request.urlopen(f"http://127.0.0.1:{client}/health", timeout=2) as resp:
                return b"true" in resp.read()
        polling.wait_for("the other etcd to be healthy", healthy, 30, retry_on=(OSError,))
        up = Up(data, "up")
        started.append(up)
        assert up.wait_exit() == 1
        lines = up.output().splitlines()
        assert lines[-1] == (f"kubelab up: etcd's data dir {data / 'etcd'} is in use by pid {other.pid} "
                             f"({find_etcd()}); stop it, or use another --data-dir"), up.output()
        assert "Traceback" not in up.output()
        assert other.poll() is None  # not ours: left alone
    finally:
        stop_process(other)

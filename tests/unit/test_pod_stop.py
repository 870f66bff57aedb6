"""Stopping a lab's pod servers (kubeletstub/podprocess.py): all of them together, one grace period for all,
not one after another. One by one, a lab of 300 pods took 300 waits, 28 s under load, and `kubelab up`
outlived the test harness's patience on Ctrl-C."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from kubeletstub.netnsstate import PodNet, cleanup
from kubeletstub.podprocess import PodProcess, process_start_time, stop_pod_processes

# A server that, told to stop, notes how many of its siblings still run, and then does not stop: only
# SIGKILL, after the grace period, ends it.
STUBBORN = textwrap.dedent("""
    import os, signal, sys
    siblings_file, out = sys.argv[1], sys.argv[2]

    def running(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except OSError:
            return False

    def on_term(*_):
        with open(siblings_file) as f:
            siblings = [int(p) for p in f.read().split() if int(p) != os.getpid()]
        with open(out, "a") as f:
            f.write(f"{sum(running(p) for p in siblings)}\\n")

    signal.signal(signal.SIGTERM, on_term)
    print("ready", flush=True)
    while True:
        signal.pause()
""")


def test_a_labs_servers_are_told_to_stop_while_all_the_others_still_run(tmp_path: Path) -> None:
    siblings, out = tmp_path / "pids", tmp_path / "out"
    out.touch()
    children = [subprocess.Popen([sys.executable, "-c", STUBBORN, str(siblings), str(out)], stdout=subprocess.PIPE)
                for _ in range(3)]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        siblings.write_text(" ".join(str(c.pid) for c in children))
        # A lab left behind (its state file) whose pods are these servers; no namespaces, so no root needed.
        pods = [PodNet(node="node-1", key=f"default/pod-{i}", netns=f"kst-x-node-1_pod-{i}", ip=f"10.244.1.{i + 2}",
                       gateway="10.244.1.1", host_ifname=f"veth{i}",
                       server=PodProcess(pid=c.pid, start_time=process_start_time(c.pid) or 0,
                                         netns=f"kst-x-node-1_pod-{i}", pod_name=f"pod-{i}", ports=()))
                for i, c in enumerate(children)]
        (tmp_path / "netns-kst-x.json").write_text(json.dumps({
            "version": 1, "prefix": "kst-x", "owner": {"pid": 1, "startTime": 0}, "labNetns": None, "logDir": None,
            "namespaces": [], "nodes": [], "pods": [p.to_json() for p in pods]}))

        report = cleanup(tmp_path, prefix="kst-x", force=True)

        assert sorted(report.stopped_pids) == sorted(c.pid for c in children)
        # Each saw both others running: none was killed (or waited for) before all had been told. One
        # by one, the second saw one sibling, the third none.
        assert sorted(out.read_text().split()) == ["2", "2", "2"]
        assert not any(Path(f"/proc/{c.pid}").exists() for c in children)  # killed after the grace, and reaped
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_servers_that_are_gone_or_not_ours_are_left_alone(tmp_path: Path) -> None:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    started = process_start_time(done.pid) or 0
    done.wait()
    other = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)"],
                             stdout=subprocess.PIPE)
    try:
        assert other.stdout is not None and other.stdout.readline() == b"ready\n"
        gone = PodProcess(pid=done.pid, start_time=started, netns="-", pod_name="gone", ports=())
        # The PID of a running process, with another start time: a recycled PID, someone else's process.
        recycled = PodProcess(pid=other.pid, start_time=(process_start_time(other.pid) or 0) - 1, netns="-",
                              pod_name="recycled", ports=())
        assert stop_pod_processes([gone, recycled], timeout=5) == []
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()

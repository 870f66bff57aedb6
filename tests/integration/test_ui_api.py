"""`kubelab ui` over a real `kubelab up` (render dataplane, 2 nodes), its JSON read as the page reads it:
the path of a Service on every node from the node's restored rules, joined to the pods; a search that pages;
the event stream that tells the page a Service changed; bad inputs answered with 4xx, never a 5xx.
The page itself in a browser: tests/e2e/test_ui_browser.py."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_up_auth import NS, Up, wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    data_dir = tmp_path_factory.mktemp("ui") / "data"
    data_dir.mkdir()
    up = Up(data_dir)
    try:
        up.wait_ready()
        yield up
    finally:
        up.stop()


@pytest.fixture(scope="module")
def ui(cluster: Up) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "kubelab", "ui", "--data-dir", str(cluster.data_dir),
                             "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("kubelab ui: http://"), first
        yield first.split(": ", 1)[1].strip().rstrip("/")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "drawn"}},
            "spec": {"containers": [{"name": "c", "image": "pause", "ports": [{"containerPort": 8080}]}]}}


def test_a_service_path_on_every_node_follows_its_pods(cluster: Up, ui: str) -> None:
    with httpx.Client(base_url=cluster.url, timeout=10) as api, httpx.Client(base_url=ui, timeout=30) as page:
        assert page.get("/").text.startswith("<!doctype html>")
        assert page.get("/static/app.js").headers["content-type"].startswith("text/javascript")
        assert api.post(f"{NS}/services", json={"apiVersion": "v1", "kind": "Service", "metadata": {"name": "drawn"},
                        "spec": {"type": "NodePort", "selector": {"app": "drawn"},
                                 "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}).status_code == 201
        for name in ("drawn-1", "drawn-2"):
            assert api.post(f"{NS}/pods", json=pod(name)).status_code == 201

        def two_branches_everywhere() -> dict[str, Any] | None:
            found = page.get("/ui/v1/path", params={"service": "default/drawn"})
            if found.status_code != 200:
                return None
            data: dict[str, Any] = found.json()
            for node in data["nodes"]:
                if len(node["ports"]) != 1 or len(node["ports"][0]["branches"]) != 2:
                    return None
            return data

        data = wait_for("both pods on every node's path", two_branches_everywhere)
        assert {n["node"] for n in data["nodes"]} == {"node-1", "node-2"}
        for node in data["nodes"]:
            port = node["ports"][0]
            assert {e["kind"] for e in port["entries"]} == {"cluster IP", "nodePort"}
            assert port["chain"].startswith("KUBE-SVC-")
            assert [b["probability"] is None for b in port["branches"]] == [False, True]
            assert sorted(b["pod"]["name"] for b in port["branches"]) == ["default/drawn-1", "default/drawn-2"]
        overview = page.get("/ui/v1/overview").json()
        assert {p["name"] for n in overview["nodes"] for p in n["pods"]} >= {"default/drawn-1", "default/drawn-2"}

        # The event stream names the Service when it changes.
        with page.stream("GET", "/ui/v1/events") as events:
            lines = events.iter_lines()
            assert next(lines).startswith("retry:")
            assert api.delete(f"{NS}/pods/drawn-2", params={"gracePeriodSeconds": "0"}).status_code == 200
            named = False
            for line in lines:
                if line.startswith("data: ") and "default/drawn" in json.loads(line[6:])["services"]:
                    named = True
                    break
            assert named
        # Until a node's rules lose drawn-2's branch, the branch shows with no pod (the pod is gone already).
        wait_for("drawn-2's branch gone", lambda: all(
            [(b["pod"] or {}).get("name") for b in n["ports"][0]["branches"]] == ["default/drawn-1"]
            for n in page.get("/ui/v1/path", params={"service": "default/drawn"}).json()["nodes"]))


def test_search_pages_and_bad_inputs_are_4xx(cluster: Up, ui: str) -> None:
    with httpx.Client(base_url=cluster.url, timeout=10) as api, httpx.Client(base_url=ui, timeout=30) as page:
        for i in range(12):
            assert api.post(f"{NS}/services", json={"apiVersion": "v1", "kind": "Service",
                                                   "metadata": {"name": f"many-{i:02d}"},
                                                   "spec": {"ports": [{"port": 80}]}}).status_code == 201
        found = wait_for("all twelve listed", lambda: (r := page.get("/ui/v1/services", params={
            "q": "many-", "limit": "5"}).json()) and r["matched"] == 12 and r)
        assert [s["key"] for s in found["items"]] == [f"default/many-{i:02d}" for i in range(5)]
        assert page.get("/ui/v1/services", params={"limit": "nonsense"}).status_code == 200
        assert page.get("/ui/v1/path", params={"service": "default/never"}).status_code == 404
        assert page.get("/ui/v1/path").status_code == 404
        assert page.get("/ui/v1/trace", params={"service": "nonsense"}).status_code == 400
        assert page.get("/static/../../etc/passwd").status_code == 404
        assert page.get("/static/secret.py").status_code == 404


def test_a_path_read_in_flight_when_the_ui_stops_ends_quietly(cluster: Up, tmp_path: Path) -> None:
    """Ctrl-C while the page's path read runs (on the netns lab an `iptables-save` per node): the read is
    cancelled with everything else; nothing is logged as an error, the page is told 503."""
    # The same cluster, seen from a data dir of the UI's own in which node-1's rules file is a FIFO: the read
    # of that node (render dataplane: the file the agent restores into) waits there until the test lets it end.
    ui_dir = tmp_path / "ui"
    (ui_dir / "nodes" / "node-1").mkdir(parents=True)
    shutil.copy(cluster.data_dir / "cluster.json", ui_dir / "cluster.json")
    rules = ui_dir / "nodes" / "node-1" / "iptables.rules"
    os.mkfifo(rules)
    proc = subprocess.Popen([sys.executable, "-m", "kubelab", "ui", "--data-dir", str(ui_dir), "--listen",
                             "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    answer: list[httpx.Response | Exception] = []
    held: list[int] = []  # the FIFO's writing end
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("kubelab ui: http://"), first
        url = first.split(": ", 1)[1].strip().rstrip("/")
        wait_for("the UI's caches", lambda: httpx.get(f"{url}/ui/v1/overview", timeout=30).json()["synced"])

        def read_path() -> None:
            try:
                answer.append(httpx.get(f"{url}/ui/v1/path", params={"service": "default/kubernetes"}, timeout=300))
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                answer.append(exc)

        reader = threading.Thread(target=read_path, daemon=True)
        reader.start()

        def reading() -> int | None:
            """The FIFO opened for writing once the UI's read has it open (ENXIO before): the read then waits
            in read(2) until this end is closed."""
            assert not answer, answer  # answered without reading node-1
            try:
                return os.open(rules, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
                return None
        held.append(wait_for("the path read to open node-1's rules", reading))
        proc.send_signal(signal.SIGINT)
        reader.join(300)  # answered once the stop cancelled the read (500 and a traceback before the fix)
        assert answer and isinstance(answer[0], httpx.Response), answer
        assert (answer[0].status_code, answer[0].json()) == (503, {"message": "kubelab ui is stopping"})
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        # The thread reading the FIFO ends at its end of file; the process then exits.
        for fd in held:
            os.close(fd)
        try:
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.stdout is not None
    output = proc.stdout.read()
    assert code == 0, output
    assert "Exception in ASGI application" not in output and "Traceback" not in output, output

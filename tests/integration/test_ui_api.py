"""`kubelab ui` over a real `kubelab up` (render dataplane, 2 nodes), its JSON read as the page reads it:
the path of a Service on every node from the node's restored rules, joined to the pods; a search that pages;
the event stream that tells the page a Service changed; bad inputs answered with 4xx, never a 5xx.
The page itself in a browser: tests/e2e/test_ui_browser.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
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

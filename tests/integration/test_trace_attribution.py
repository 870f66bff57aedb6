"""`kubelab trace` attributes by construction (issue 22): on a real `kubelab up` (render dataplane, 3 nodes),
a change's trace holds only the Endpoints/EndpointSlice writes that name it among their causes and the
node syncs that applied it or those writes, whatever else happened after it.

The sequences are the ones that went wrong: a pod's label-only change (its trace took a later, unrelated
endpoints write and every node's restore), a Service's annotation-only patch next to another Service's
real change, two Services changed back to back, and a pod deleted while another is created. What a write
did is checked against the slice's own history, read from a watch from before the sequence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from test_up_auth import NS, Up, wait_for

SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    data_dir = tmp_path_factory.mktemp("attribution") / "data"
    data_dir.mkdir()
    up = Up(data_dir, "--nodes", "3")
    try:
        up.wait_ready()
        yield up
    finally:
        up.stop()


def kubelab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kubelab", *args], capture_output=True, text=True, timeout=60,
                          check=False)


def trace(up: Up, what: str) -> dict[str, Any]:
    done = kubelab("trace", what, "--data-dir", str(up.data_dir), "-o", "json")
    assert done.returncode in (0, 1), done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def nodes(up: Up) -> set[str]:
    return set(json.loads((up.data_dir / "cluster.json").read_text())["nodes"])


def applied(result: dict[str, Any]) -> set[str]:
    return {s["component"].removeprefix("proxy ") for s in result["steps"] if s["step"] == "rules applied"}


def writes(result: dict[str, Any], resource: str = "endpointslices") -> list[tuple[str, int]]:
    """(object name, revision) of each write of `resource` in the trace."""
    found = []
    for s in result["steps"]:
        if s["step"] == "endpoints written":
            path, _, revision = s["detail"].split(": ", 1)[1].partition(" at revision ")
            if path.startswith(f"{resource}/"):
                found.append((path.rsplit("/", 1)[1], int(revision)))
    return found


def service(name: str, target_port: int = 8080) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": target_port}]}}


def pod(name: str, app: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "pause",
                                     "ports": [{"containerPort": 8080}, {"containerPort": 9090}]}]}}


def ready(http: httpx.Client, svc: str) -> set[str]:
    items = http.get(SLICES, params={"labelSelector": f"kubernetes.io/service-name={svc}"}).json()["items"]
    return {e["targetRef"]["name"] for s in items for e in s.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready")}


def revision_now(http: httpx.Client) -> int:
    return int(http.get(f"{NS}/pods", params={"limit": "1"}).json()["metadata"]["resourceVersion"])


def slice_history(http: httpx.Client, svc: str, since: int) -> dict[int, dict[str, bool]]:
    """Every version of the Service's slices written after `since`: revision -> {pod: ready}, from a
    watch started at `since` (the API server ends it after a second)."""
    history: dict[int, dict[str, bool]] = {}
    with http.stream("GET", SLICES, params={"watch": "1", "resourceVersion": str(since), "timeoutSeconds": "1",
                                            "labelSelector": f"kubernetes.io/service-name={svc}"}) as resp:
        for line in resp.iter_lines():
            if line:
                obj = json.loads(line)["object"]
                history[int(obj["metadata"]["resourceVersion"])] = {
                    e["targetRef"]["name"]: bool((e.get("conditions") or {}).get("ready"))
                    for e in obj.get("endpoints") or []}
    return history


def settled(up: Up, what: str) -> dict[str, Any]:
    """The trace of `what` once every node has applied its change."""
    everyone = nodes(up)
    return wait_for(f"every node applied {what}",  # type: ignore[no-any-return]
                    lambda: (r := trace(up, what)) and applied(r) == everyone and r)


def test_a_label_only_change_of_a_pod_caused_nothing_downstream(cluster: Up) -> None:
    """The issue's case: `kubelab trace pod/api-1` after a label-only change showed a later endpoints write
    (another pod's) and every node's restore, "applied it 10615.3 ms after"."""
    with httpx.Client(base_url=cluster.url, timeout=10) as http:
        assert http.post(f"{NS}/services", json=service("lbl")).status_code == 201
        assert http.post(f"{NS}/pods", json=pod("lbl-1", "lbl")).status_code == 201
        wait_for("lbl-1 ready", lambda: ready(http, "lbl") == {"lbl-1"})
        settled(cluster, "pod/lbl-1")
        patched = http.patch(f"{NS}/pods/lbl-1", json={"metadata": {"labels": {"tier": "front"}}}, headers=MERGE)
        assert patched.status_code == 200, patched.text
        revision = int(patched.json()["metadata"]["resourceVersion"])
        assert http.post(f"{NS}/pods", json=pod("lbl-2", "lbl")).status_code == 201
        wait_for("lbl-2 ready", lambda: ready(http, "lbl") == {"lbl-1", "lbl-2"})
        later = settled(cluster, "pod/lbl-2")  # the later write and every node's restore exist

    result = trace(cluster, "pod/lbl-1")
    assert result["revision"] == revision
    assert writes(later), later
    assert [s["step"] for s in result["steps"] if s["step"] != "delivered"] == ["accepted"], result["steps"]
    assert result["services"] == []
    table = kubelab("trace", "pod/lbl-1", "--data-dir", str(cluster.data_dir))
    assert table.returncode == 0, table.stderr
    assert "rules applied" not in table.stdout and "no endpoints were written" in table.stdout


def test_an_annotation_on_one_service_does_not_take_anothers_restore(cluster: Up) -> None:
    """A Service patched in a way no endpoint or rule reads, then another Service really changed: the first
    trace has the patch and its deliveries only (it took the second's restores, whose revisions were newer)."""
    with httpx.Client(base_url=cluster.url, timeout=10) as http:
        for name in ("quiet", "busy"):
            assert http.post(f"{NS}/services", json=service(name)).status_code == 201
            assert http.post(f"{NS}/pods", json=pod(f"{name}-1", name)).status_code == 201
        for name in ("quiet", "busy"):
            wait_for(f"{name}-1 ready", lambda name=name: ready(http, name) == {f"{name}-1"})
        patched = http.patch(f"{NS}/services/quiet", json={"metadata": {"annotations": {"owner": "me"}}},
                             headers=MERGE)
        assert patched.status_code == 200, patched.text
        assert http.patch(f"{NS}/services/busy", json={"spec": {"ports": [{"port": 80, "targetPort": 9090}]}},
                          headers=MERGE).status_code == 200
        busy = settled(cluster, "service/busy")
    assert writes(busy) and all(name.startswith("busy-") for name, _ in writes(busy)), busy["steps"]
    result = trace(cluster, "service/quiet")
    assert result["revision"] == int(patched.json()["metadata"]["resourceVersion"])
    assert [s["step"] for s in result["steps"] if s["step"] != "delivered"] == ["accepted"], result["steps"]


def test_two_services_changed_back_to_back_each_keep_their_own_writes(cluster: Up) -> None:
    with httpx.Client(base_url=cluster.url, timeout=10) as http:
        for name in ("left", "right"):
            assert http.post(f"{NS}/services", json=service(name)).status_code == 201
            assert http.post(f"{NS}/pods", json=pod(f"{name}-1", name)).status_code == 201
        for name in ("left", "right"):
            wait_for(f"{name}-1 ready", lambda name=name: ready(http, name) == {f"{name}-1"})
        # Each patch moves the port on (a change undone before the controller saw it would write nothing).
        for name, port in (("left", 9001), ("right", 9001), ("left", 9002), ("right", 9002)):
            assert http.patch(f"{NS}/services/{name}", json={"spec": {"ports": [{"port": 80, "targetPort": port}]}},
                              headers=MERGE).status_code == 200
        traces = {name: settled(cluster, f"service/{name}") for name in ("left", "right")}
        for name, result in traces.items():
            current = {s["metadata"]["name"]: int(s["metadata"]["resourceVersion"]) for s in http.get(
                SLICES, params={"labelSelector": f"kubernetes.io/service-name={name}"}).json()["items"]}
            # Its own slice, at the version that carries its last change (nothing wrote it since).
            assert writes(result) == sorted(current.items()), (name, result["steps"])
            assert all(n.startswith(f"{name}-") or n == name for n, _ in writes(result, "endpoints"))
            assert result["services"] == [f"default/{name}"]


def test_a_pod_deleted_while_another_is_created(cluster: Up) -> None:
    with httpx.Client(base_url=cluster.url, timeout=10) as http:
        assert http.post(f"{NS}/services", json=service("swap")).status_code == 201
        assert http.post(f"{NS}/pods", json=pod("swap-1", "swap")).status_code == 201
        wait_for("swap-1 ready", lambda: ready(http, "swap") == {"swap-1"})
        settled(cluster, "pod/swap-1")
        since = revision_now(http)
        deleted = http.delete(f"{NS}/pods/swap-1", params={"gracePeriodSeconds": "0"})
        assert deleted.status_code == 200, deleted.text
        assert http.post(f"{NS}/pods", json=pod("swap-2", "swap")).status_code == 201
        wait_for("only swap-2 ready", lambda: ready(http, "swap") == {"swap-2"})
        gone, came = settled(cluster, "pod/swap-1"), settled(cluster, "pod/swap-2")
        history = slice_history(http, "swap", since)

    versions = sorted(history)
    removed = [v for v in versions if "swap-1" not in history[v]]
    turned_ready = [v for v in versions if history[v].get("swap-2")]
    assert gone["steps"][0]["detail"].startswith("delete"), gone["steps"][0]
    # swap-1's trace: the one slice write that first left it out; swap-2's: the first one with it ready.
    assert [rev for _, rev in writes(gone)] == removed[:1], (history, gone["steps"])
    assert [rev for _, rev in writes(came)] == turned_ready[:1], (history, came["steps"])


def test_a_reader_that_went_away_ends_the_trace_quietly(cluster: Up) -> None:
    """`kubelab trace ... -o json | head` ended in a BrokenPipeError traceback. Here the reader is gone
    before the first write (the pipe's read end is closed), so every run hits it: the command stops as a
    Unix tool killed by SIGPIPE does, 141 and nothing on stderr."""
    with httpx.Client(base_url=cluster.url, timeout=10) as http:
        assert http.post(f"{NS}/services", json=service("piped")).status_code == 201
    for output in (["-o", "json"], []):
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            done = subprocess.run([sys.executable, "-m", "kubelab", "trace", "svc/piped", "--data-dir",
                                   str(cluster.data_dir), *output], stdout=write_end, stderr=subprocess.PIPE,
                                  text=True, timeout=60, check=False)
        finally:
            os.close(write_end)
        assert (done.returncode, done.stderr) == (141, ""), output

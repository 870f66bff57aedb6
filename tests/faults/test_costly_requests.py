"""Requests that would cost far more than their size, against a real API server process and its own etcd.

A small body must not be able to make a big object or a long computation (issue J, item 3):

* a JSON patch of more than 10,000 operations is refused as kube-apiserver refuses it (413, its words);
* `copy` operations may add at most 3 MiB in all (evanphx/json-patch's AccumulatedCopySizeLimit, set by
  kube-apiserver): a patch that copies a subtree into itself twenty times (900 MB) is a 422;
* a YAML body whose aliases would expand past 3 MiB (a few aliases of a huge scalar) is a 400 before
  anything is expanded;
* patches that name many things still give the right result: 8,000 `add` operations, 10,000 finalizers
  merged by a strategic merge patch (tests/unit/test_patch_cost.py counts the work they take).

Memory is the server's peak RSS (VmHWM, reset through /proc/PID/clear_refs before each request) over its
RSS just before: deterministic enough to bound, unlike a latency. Nothing here asserts a duration.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from faultkit import ApiServerProcess, Figures, OwnedEtcd

NS = "costly"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    base = tmp_path_factory.mktemp("costly")
    etcd = OwnedEtcd(base / "etcd")
    apiserver: ApiServerProcess | None = None
    try:
        etcd.start()
        apiserver = ApiServerProcess(etcd.url, base / "apiserver.log").start()
        httpx.post(f"{apiserver.url}/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
        yield apiserver
    finally:
        if apiserver is not None:
            apiserver.stop()
        etcd.stop()
        assert not etcd.alive()


@pytest.fixture
def api(server: ApiServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=300) as client:
        yield client


def _status_field(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {name} for {pid}")


class PeakGrowth:
    """How far the process's RSS rose above where it was when this started (VmHWM after a reset)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # 5: reset the peak RSS to the current RSS
        except OSError as exc:
            pytest.skip(f"cannot reset the peak RSS of the API server: {exc}")
        self.base = _status_field(pid, "VmRSS")

    def bytes(self) -> int:
        return _status_field(self.pid, "VmHWM") - self.base


def seed(api: httpx.Client, name: str, **fields: Any) -> dict[str, Any]:
    resp = api.post(CONFIGMAPS, json={"metadata": {"name": name, **fields.pop("metadata", {})}, **fields})
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


def patch(api: httpx.Client, name: str, body: Any, content_type: str) -> httpx.Response:
    return api.patch(f"{CONFIGMAPS}/{name}", content=orjson.dumps(body), headers={"Content-Type": content_type})


def test_a_json_patch_of_more_than_10000_operations_is_413_and_changes_nothing(api: httpx.Client) -> None:
    live = seed(api, "ops", data={"seed": "x"})
    ops = [{"op": "add", "path": f"/data/k{i}", "value": "v"} for i in range(10_001)]
    resp = patch(api, "ops", ops, "application/json-patch+json")
    assert resp.status_code == 413, resp.text[:300]
    assert resp.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": "Request entity too large: The allowed maximum operations in a JSON patch "
                                      "is 10000, got 10001",
                           "reason": "RequestEntityTooLarge", "code": 413}
    assert api.get(f"{CONFIGMAPS}/ops").json() == live
    # 10,000 is allowed.
    resp = patch(api, "ops", ops[:10_000], "application/json-patch+json")
    assert resp.status_code == 200, resp.text[:300]
    assert len(resp.json()["data"]) == 10_001


def test_a_patch_copying_a_subtree_into_itself_is_refused_with_bounded_memory(api: httpx.Client, server: ApiServerProcess,
                                                                           figures: Figures) -> None:
    """The 1.6 KiB patch of the report: `add` a 900-byte subtree, then 20 `copy` ops of it into itself. Each
    doubles it (900 MB at the end); the copies pass 3 MiB at the 12th and the patch is refused there."""
    live = seed(api, "doubling", data={"seed": "x"})
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/x", "value": {"s": "a" * 900}}]
    ops += [{"op": "copy", "from": "/x", "path": f"/x/c{i}"} for i in range(20)]
    peak = PeakGrowth(server.proc.pid if server.proc else 0)
    resp = patch(api, "doubling", ops, "application/json-patch+json")
    growth = peak.bytes()
    figures.update(copy_doubling_rss_growth_mib=round(growth / MIB, 1), patch_bytes=len(orjson.dumps(ops)))
    assert resp.status_code == 422, resp.text[:300]
    status = resp.json()
    assert (status["reason"], status["message"]) == (
        "Invalid", "the server rejected our request due to an error in our request")
    [cause] = status["details"]["causes"]
    assert re.fullmatch(r"Unable to complete the copy, the accumulated size increase of copy is (\d+), "
                        r"exceeding the limit 3145728", cause["message"]), cause
    copied = int(re.findall(r"\d+", cause["message"])[0])
    assert 3 * MIB < copied < 4 * MIB  # refused at the copy that passed the limit, not later
    assert api.get(f"{CONFIGMAPS}/doubling").json() == live
    # The document held at most the 3 MiB the copies may add, a few times over as Python objects;
    # without the limit it reached 900 MB.
    assert growth < 4 * 3 * MIB, f"the API server grew by {growth / MIB:.0f} MiB"


def test_8000_add_operations_all_apply(api: httpx.Client) -> None:
    live = seed(api, "adds", data={"seed": "x"})
    ops = [{"op": "add", "path": f"/data/k{i}", "value": f"v{i}"} for i in range(8_000)]
    resp = patch(api, "adds", ops, "application/json-patch+json")
    assert resp.status_code == 200, resp.text[:300]
    want = {"seed": "x", **{f"k{i}": f"v{i}" for i in range(8_000)}}
    assert resp.json()["data"] == want
    stored = api.get(f"{CONFIGMAPS}/adds").json()
    assert stored["data"] == want
    assert stored["metadata"]["resourceVersion"] != live["metadata"]["resourceVersion"]


def test_10000_finalizers_merge_in_kube_order(api: httpx.Client) -> None:
    old = [f"example.com/old{i}" for i in range(100)]
    seed(api, "finalizers", metadata={"finalizers": old})
    added = [f"example.com/f{i}" for i in range(10_000)]
    resp = patch(api, "finalizers", {"metadata": {"finalizers": [*added, old[5]]}},
                 "application/strategic-merge-patch+json")
    assert resp.status_code == 200, resp.text[:300]
    # A set-merged list (mergeSortedSlice): the patch's new items in its order first, and the live ones in
    # their live order, old5 included, which the patch names but which keeps its live place among them.
    want = [*added, *old]
    assert resp.json()["metadata"]["finalizers"] == want
    assert api.get(f"{CONFIGMAPS}/finalizers").json()["metadata"]["finalizers"] == want


def test_yaml_aliases_that_expand_past_3_mib_are_refused_before_expansion(api: httpx.Client, server: ApiServerProcess,
                                                                       figures: Figures) -> None:
    """88 KiB of YAML: one 64 KiB scalar and 8,000 aliases of it, few enough for the count limit; expanded
    it is 524 MB. The count of aliases alone let it through, to 2 GB of RSS and a 504."""
    keys = ", ".join(f"k{i}: *s" for i in range(8_000))
    text = f"x: &s \"{'a' * 65536}\"\nmetadata: {{name: aliasbytes}}\ndata: {{{keys}}}\n"
    peak = PeakGrowth(server.proc.pid if server.proc else 0)
    resp = api.post(CONFIGMAPS, content=text, headers={"Content-Type": "application/yaml"})
    growth = peak.bytes()
    figures.update(alias_bytes_body=len(text), alias_bytes_rss_growth_mib=round(growth / MIB, 1))
    assert resp.status_code == 400, resp.text[:300]
    assert resp.json()["reason"] == "BadRequest"
    assert resp.json()["message"] == "error converting YAML to JSON: yaml: document contains excessive aliasing"
    assert api.get(f"{CONFIGMAPS}/aliasbytes").status_code == 404
    assert growth < 8 * MIB, f"the API server grew by {growth / MIB:.0f} MiB"


def test_yaml_anchors_within_the_limits_still_work(api: httpx.Client) -> None:
    """The bound is on what aliases add: a 300 KB scalar used three times (600 KB more) is fine."""
    text = f"metadata: {{name: anchored}}\ndata: {{a: &s \"{'a' * 300_000}\", b: *s, c: *s}}\n"
    resp = api.post(CONFIGMAPS, content=text, headers={"Content-Type": "application/yaml"})
    assert resp.status_code == 201, resp.text[:300]
    assert resp.json()["data"] == {"a": "a" * 300_000, "b": "a" * 300_000, "c": "a" * 300_000}

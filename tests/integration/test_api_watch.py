"""Watch: newline-delimited JSON events, resourceVersion semantics, selection changes, timeouts and
compaction (410 Expired), each in a namespace of its own so no other test's objects show up."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from apitools import CORE, assert_status, create, ns_path, pod, service, unique_name, watch_events

from apiserver.storage import Storage
from kubelab.etcd import Etcd


@pytest.fixture
def ns(api: httpx.Client) -> str:
    name = unique_name("watch")
    create(api, f"{CORE}/namespaces", {"metadata": {"name": name}})
    return name


def summary(event: dict[str, Any]) -> tuple[str, str]:
    return event["type"], event["object"]["metadata"]["name"]


def relabel(api: httpx.Client, path: str, labels: dict[str, str]) -> dict[str, Any]:
    resp = api.patch(path, json={"metadata": {"labels": labels}},
                     headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code == 200, resp.text
    obj: dict[str, Any] = resp.json()
    return obj


def list_rv(api: httpx.Client, path: str) -> str:
    rv: str = api.get(path).json()["metadata"]["resourceVersion"]
    return rv


def test_watch_without_resource_version_replays_then_follows(api: httpx.Client, ns: str) -> None:
    create(api, ns_path("services", ns), service("alpha"))
    create(api, ns_path("services", ns), service("beta"))

    events = watch_events(api, ns_path("services", ns))
    first = [next(events), next(events)]
    assert sorted(summary(e) for e in first) == [("ADDED", "alpha"), ("ADDED", "beta")]
    assert all(e["object"]["kind"] == "Service" for e in first)
    assert all(e["object"]["apiVersion"] == "v1" for e in first)

    create(api, ns_path("services", ns), service("gamma"))
    relabel(api, ns_path("services", ns, "alpha"), {"tier": "front"})
    assert api.delete(ns_path("services", ns, "beta")).status_code == 200
    later = [next(events) for _ in range(3)]
    events.close()
    assert [summary(e) for e in later] == [("ADDED", "gamma"), ("MODIFIED", "alpha"), ("DELETED", "beta")]
    assert later[1]["object"]["metadata"]["labels"] == {"tier": "front"}


def test_events_are_newline_terminated_json(api: httpx.Client, ns: str) -> None:
    create(api, ns_path("services", ns), service("one"))
    with api.stream("GET", ns_path("services", ns), params={"watch": "true", "timeoutSeconds": "1"}) as resp:
        assert resp.status_code == 200
        raw = resp.read()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")
    assert lines[-1] == b""
    assert len(lines) == 2, raw
    assert lines[0].startswith(b'{"type":"ADDED","object":{')


def test_watch_from_resource_version_sends_only_later_changes(api: httpx.Client, ns: str) -> None:
    create(api, ns_path("services", ns), service("before"))
    rv = list_rv(api, ns_path("services", ns))

    create(api, ns_path("services", ns), service("after"))
    modified = relabel(api, ns_path("services", ns, "before"), {"seen": "yes"})
    last_state = relabel(api, ns_path("services", ns, "after"), {"final": "state"})
    assert api.delete(ns_path("services", ns, "after")).status_code == 200

    events = list(watch_events(api, ns_path("services", ns), count=4, resourceVersion=rv))
    assert [summary(e) for e in events] == [("ADDED", "after"), ("MODIFIED", "before"), ("MODIFIED", "after"),
                                           ("DELETED", "after")]
    assert events[1]["object"]["metadata"]["resourceVersion"] == modified["metadata"]["resourceVersion"]
    deleted = events[3]["object"]
    # DELETED carries the last state, at the revision of the deletion.
    assert deleted["metadata"]["labels"] == {"final": "state"}
    assert deleted["metadata"]["uid"] == last_state["metadata"]["uid"]
    assert int(deleted["metadata"]["resourceVersion"]) > int(last_state["metadata"]["resourceVersion"])
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


def test_resuming_from_a_remembered_resource_version_misses_nothing(api: httpx.Client, ns: str) -> None:
    rv = list_rv(api, ns_path("pods", ns))
    for i in range(3):
        create(api, ns_path("pods", ns), pod(f"p{i}"))

    first = list(watch_events(api, ns_path("pods", ns), count=2, resourceVersion=rv))
    assert [summary(e) for e in first] == [("ADDED", "p0"), ("ADDED", "p1")]
    remembered = first[-1]["object"]["metadata"]["resourceVersion"]

    # Changes made while no one watches.
    create(api, ns_path("pods", ns), pod("p3"))
    assert api.delete(ns_path("pods", ns, "p0")).status_code == 200

    rest = list(watch_events(api, ns_path("pods", ns), count=3, resourceVersion=remembered))
    assert [summary(e) for e in rest] == [("ADDED", "p2"), ("ADDED", "p3"), ("DELETED", "p0")]


def test_label_selected_watch_turns_label_changes_into_added_and_deleted(api: httpx.Client, ns: str) -> None:
    rv = list_rv(api, ns_path("pods", ns))
    path = ns_path("pods", ns, "flip")
    create(api, ns_path("pods", ns), pod("flip", labels={"app": "web"}))
    create(api, ns_path("pods", ns), pod("never", labels={"app": "db"}))
    relabel(api, path, {"app": "db"})        # leaves the selection
    relabel(api, path, {"app": "web"})       # comes back
    relabel(api, path, {"app": "web", "x": "1"})
    assert api.delete(path).status_code == 200

    events = list(watch_events(api, ns_path("pods", ns), count=5, resourceVersion=rv, labelSelector="app=web"))
    assert [summary(e) for e in events] == [("ADDED", "flip"), ("DELETED", "flip"), ("ADDED", "flip"),
                                           ("MODIFIED", "flip"), ("DELETED", "flip")]
    # The DELETED for leaving the selection shows the object as it is now (app=db), as kube's watch
    # cache does.
    assert events[1]["object"]["metadata"]["labels"] == {"app": "db"}


def test_field_selected_watch_of_one_object(api: httpx.Client, ns: str) -> None:
    rv = list_rv(api, ns_path("pods", ns))
    create(api, ns_path("pods", ns), pod("mine"))
    create(api, ns_path("pods", ns), pod("other"))
    relabel(api, ns_path("pods", ns, "other"), {"a": "b"})
    relabel(api, ns_path("pods", ns, "mine"), {"a": "b"})
    events = list(watch_events(api, ns_path("pods", ns), count=2, resourceVersion=rv,
                               fieldSelector="metadata.name=mine"))
    assert [summary(e) for e in events] == [("ADDED", "mine"), ("MODIFIED", "mine")]


def test_watch_of_pods_across_namespaces_by_node(api: httpx.Client, ns: str) -> None:
    node = unique_name("node")
    rv = list_rv(api, f"{CORE}/pods")
    create(api, ns_path("pods", ns), pod("elsewhere"))
    create(api, ns_path("pods", ns), pod("here", nodeName=node))
    events = list(watch_events(api, f"{CORE}/pods", count=1, resourceVersion=rv, fieldSelector=f"spec.nodeName={node}"))
    assert [summary(e) for e in events] == [("ADDED", "here")]
    assert events[0]["object"]["metadata"]["namespace"] == ns


def test_timeout_seconds_ends_the_stream(api: httpx.Client, ns: str) -> None:
    rv = list_rv(api, ns_path("services", ns))
    assert list(watch_events(api, ns_path("services", ns), resourceVersion=rv, timeoutSeconds="1")) == []


def test_watch_from_a_compacted_revision_is_expired(api: httpx.Client, etcd: Etcd, ns: str) -> None:
    created = create(api, ns_path("services", ns), service("old"))
    old_rv = created["metadata"]["resourceVersion"]
    relabel(api, ns_path("services", ns, "old"), {"v": "2"})
    latest = relabel(api, ns_path("services", ns, "old"), {"v": "3"})
    compact_to = int(latest["metadata"]["resourceVersion"])

    async def compact() -> None:
        storage = Storage([etcd.url])
        try:
            await storage.compact(compact_to)
        finally:
            await storage.close()
    asyncio.run(compact())

    events = list(watch_events(api, ns_path("services", ns), resourceVersion=old_rv))
    assert len(events) == 1, events
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status"
    assert status["status"] == "Failure"
    assert status["code"] == 410
    assert status["reason"] == "Expired"
    assert status["message"] == f"too old resource version: {old_rv} ({compact_to})"


def test_watch_with_a_bad_selector_is_refused_before_streaming(api: httpx.Client, ns: str) -> None:
    resp = api.get(ns_path("pods", ns), params={"watch": "true", "fieldSelector": "spec.bogus=1"})
    assert_status(resp, 400, "BadRequest", "field label not supported: spec.bogus")


def test_watch_with_a_malformed_resource_version_is_a_client_error(api: httpx.Client, ns: str) -> None:
    # A Status before the stream starts, never a 200 with an ERROR event or a 500.
    resp = api.get(ns_path("pods", ns), params={"watch": "true", "resourceVersion": "abc"})
    assert_status(resp, 400, "BadRequest",
                  'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax')

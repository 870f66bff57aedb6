"""events.k8s.io/v1 Events over the core/v1 event storage, as kube-apiserver serves them: one object in
etcd (/registry/events), read and written through either version with kube's field mapping, validated
by kube's rules for the version written through, selected by each version's field labels, watched
through both. A real etcd and a real API server (uvicorn)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from apitools import unique_name

from apiserver.storage import Storage
from kubelab.etcd import Etcd

NS = "default"
CORE = f"/api/v1/namespaces/{NS}/events"
V1 = f"/apis/events.k8s.io/v1/namespaces/{NS}/events"
NOW = "2026-12-02T01:00:00.123456Z"


def v1_event(name: str, **extra: Any) -> dict[str, Any]:
    body = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
            "eventTime": NOW, "reportingController": "default-scheduler", "reportingInstance": "default-scheduler-x",
            "action": "Binding", "reason": "Scheduled", "type": "Normal", "note": f"Successfully assigned {NS}/web",
            "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "web", "namespace": NS, "uid": "u-1"}}
    body.update(extra)
    return body


def stored(etcd: Etcd, key: str) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        storage = Storage([etcd.url])
        try:
            return (await storage.get(key)).obj
        finally:
            await storage.close()

    return asyncio.run(read())


def test_written_through_events_v1_read_through_both(api: httpx.Client, etcd: Etcd) -> None:
    name = unique_name("ev")
    resp = api.post(V1, json=v1_event(name, related={"kind": "Node", "name": "node-1"},
                                      series={"count": 2, "lastObservedTime": NOW}))
    assert resp.status_code == 201, resp.text
    created = resp.json()
    assert created["apiVersion"] == "events.k8s.io/v1"
    assert created["note"] == f"Successfully assigned {NS}/web"
    assert created["regarding"]["name"] == "web"

    # One object in etcd, in the storage version (core/v1), under /registry/events.
    raw = stored(etcd, f"/registry/events/{NS}/{name}")
    assert raw["apiVersion"] == "v1"
    assert raw["message"] == f"Successfully assigned {NS}/web"
    assert raw["involvedObject"]["uid"] == "u-1"
    assert raw["reportingComponent"] == "default-scheduler"
    assert "note" not in raw and "regarding" not in raw

    core = api.get(f"{CORE}/{name}").json()
    assert core["apiVersion"] == "v1"
    assert core["message"] == created["note"]
    assert core["involvedObject"] == created["regarding"]
    assert core["reportingComponent"] == "default-scheduler"
    assert core["reportingInstance"] == "default-scheduler-x"
    assert core["related"] == {"kind": "Node", "name": "node-1"}
    assert core["series"] == {"count": 2, "lastObservedTime": NOW}
    assert core["eventTime"] == NOW and core["action"] == "Binding"
    assert core["metadata"]["uid"] == created["metadata"]["uid"]
    assert core["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    again = api.get(f"{V1}/{name}").json()
    assert again == created


def test_written_through_core_read_through_events_v1(api: httpx.Client) -> None:
    name = unique_name("ev")
    body = {"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": "web", "namespace": NS},
            "reason": "Pulled", "message": "pulled it", "type": "Normal", "count": 3,
            "firstTimestamp": "2026-12-02T00:00:00Z", "lastTimestamp": "2026-12-02T00:05:00Z",
            "source": {"component": "kubelet", "host": "node-1"}}
    assert api.post(CORE, json=body).status_code == 201
    event = api.get(f"{V1}/{name}").json()
    assert event["kind"] == "Event" and event["apiVersion"] == "events.k8s.io/v1"
    assert event["note"] == "pulled it"
    assert event["regarding"] == {"kind": "Pod", "name": "web", "namespace": NS}
    assert event["deprecatedSource"] == {"component": "kubelet", "host": "node-1"}
    assert event["deprecatedCount"] == 3
    assert event["deprecatedFirstTimestamp"] == "2026-12-02T00:00:00Z"
    assert event["deprecatedLastTimestamp"] == "2026-12-02T00:05:00Z"
    for core_only in ("message", "involvedObject", "source", "count", "firstTimestamp", "lastTimestamp"):
        assert core_only not in event

    # A list through events.k8s.io/v1 holds it, converted, with the list's own kind and version.
    listed = api.get(V1).json()
    assert listed["kind"] == "EventList" and listed["apiVersion"] == "events.k8s.io/v1"
    mine = [e for e in listed["items"] if e["metadata"]["name"] == name]
    assert mine == [event]


def test_patch_update_and_apply_through_events_v1(api: httpx.Client) -> None:
    name = unique_name("ev")
    assert api.post(V1, json=v1_event(name)).status_code == 201
    # A merge patch in the served version's names; core readers see it under theirs.
    resp = api.patch(f"{V1}/{name}", json={"series": {"count": 2, "lastObservedTime": NOW}},
                     headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["series"]["count"] == 2
    assert api.get(f"{CORE}/{name}").json()["series"]["count"] == 2

    resp = api.patch(f"{V1}/{name}", json={"series": {"count": 3, "lastObservedTime": NOW}},
                     headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert resp.status_code == 200, resp.text
    assert api.get(f"{CORE}/{name}").json()["series"]["count"] == 3

    current = api.get(f"{V1}/{name}").json()
    current["series"]["count"] = 4
    resp = api.put(f"{V1}/{name}", json=current)
    assert resp.status_code == 200, resp.text
    assert resp.json()["series"]["count"] == 4

    # A no-op PUT through the served version writes nothing (the conversion round-trips).
    rv = resp.json()["metadata"]["resourceVersion"]
    resp = api.put(f"{V1}/{name}", json=resp.json())
    assert resp.status_code == 200 and resp.json()["metadata"]["resourceVersion"] == rv

    applied = {**v1_event(name), "series": {"count": 5, "lastObservedTime": NOW}}
    resp = api.patch(f"{V1}/{name}", params={"fieldManager": "tester", "force": "true"},
                     content=json.dumps(applied), headers={"Content-Type": "application/apply-patch+yaml"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["series"]["count"] == 5
    managers = {(m["manager"], m["apiVersion"]) for m in resp.json()["metadata"]["managedFields"]}
    assert ("tester", "events.k8s.io/v1") in managers
    assert api.get(f"{CORE}/{name}").json()["series"]["count"] == 5

    # Server-side apply creates through the served version too.
    other = unique_name("ev")
    resp = api.patch(f"{V1}/{other}", params={"fieldManager": "tester"}, content=json.dumps(v1_event(other)),
                     headers={"Content-Type": "application/apply-patch+yaml"})
    assert resp.status_code == 201, resp.text
    assert api.get(f"{CORE}/{other}").json()["message"] == f"Successfully assigned {NS}/web"

    resp = api.delete(f"{V1}/{name}")
    assert resp.status_code == 200 and resp.json()["apiVersion"] == "events.k8s.io/v1"
    assert api.get(f"{CORE}/{name}").status_code == 404
    missing = api.get(f"{V1}/{name}")
    assert missing.status_code == 404
    assert missing.json()["message"] == f'events.events.k8s.io "{name}" not found'


def _invalid(resp: httpx.Response) -> str:
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["reason"] == "Invalid"
    message: str = body["message"]
    return message


QUALIFIED = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


@pytest.mark.parametrize(("change", "message"), [
    pytest.param({"eventTime": None}, "eventTime: Required value", id="no eventTime"),
    # kube checks IsQualifiedName on the empty name too, and says all three.
    pytest.param({"reportingController": None},
                 '[reportingController: Required value, reportingController: Invalid value: "": name part must be '
                 f'non-empty, reportingController: Invalid value: "": {QUALIFIED}]', id="no controller"),
    pytest.param({"reportingController": "not a name!"},
                 f'reportingController: Invalid value: "not a name!": {QUALIFIED}', id="controller not a qualified name"),
    pytest.param({"reportingInstance": None}, "reportingInstance: Required value", id="no instance"),
    pytest.param({"reportingInstance": "i" * 129},
                 'reportingInstance: Invalid value: "": can have at most 128 characters', id="long instance"),
    pytest.param({"action": None}, "action: Required value", id="no action"),
    pytest.param({"reason": None}, "reason: Required value", id="no reason"),
    pytest.param({"reason": "r" * 129}, 'reason: Invalid value: "": can have at most 128 characters',
                 id="long reason"),
    pytest.param({"note": "n" * 1025}, 'message: Invalid value: "": can have at most 1024 characters',
                 id="long note"),
    pytest.param({"type": "Fatal"}, 'type: Invalid value: "": has invalid value: Fatal', id="bad type"),
    pytest.param({"deprecatedCount": 2}, 'count: Invalid value: "": needs to be unset', id="deprecated count"),
    pytest.param({"deprecatedSource": {"component": "x"}}, 'source: Invalid value: "": needs to be unset',
                 id="deprecated source"),
    pytest.param({"deprecatedFirstTimestamp": NOW}, 'firstTimestamp: Invalid value: "": needs to be unset',
                 id="deprecated firstTimestamp"),
    pytest.param({"series": {"count": 1, "lastObservedTime": NOW}},
                 'series.count: Invalid value: "": should be at least 2', id="short series"),
    pytest.param({"series": {"count": 2}}, "series.lastObservedTime: Required value", id="series without time"),
    pytest.param({"regarding": {"kind": "Node", "name": "n"}, "metadata": {"name": "x", "namespace": "other"}},
                 None, id="namespace mismatch"),
])
def test_events_v1_create_validation(api: httpx.Client, change: dict[str, Any], message: str | None) -> None:
    name = unique_name("bad")
    body = v1_event(name)
    for key, value in change.items():
        if value is None:
            body.pop(key)
        else:
            body[key] = value
    if message is None:  # a cluster-scoped object's event must live in default or kube-system
        assert api.post("/api/v1/namespaces", json={"metadata": {"name": "other"}}).status_code in (201, 409)
        body["metadata"] = {"name": name}
        text = _invalid(api.post("/apis/events.k8s.io/v1/namespaces/other/events", json=body))
        assert text == (f'Event.events.k8s.io "{name}" is invalid: involvedObject.namespace: Invalid value: "": '
                        "does not match event.namespace")
        return
    text = _invalid(api.post(V1, json=body))
    assert text == f'Event.events.k8s.io "{name}" is invalid: {message}'
    assert api.get(f"{CORE}/{name}").status_code == 404


def test_events_v1_update_validation(api: httpx.Client) -> None:
    name = unique_name("ev")
    created = api.post(V1, json=v1_event(name)).json()
    changed = {**created, "note": "something else", "reason": "Other"}
    text = _invalid(api.put(f"{V1}/{name}", json=changed))
    # kube checks reason twice; the message says it once (ToAggregate), the causes twice.
    assert text == (f'Event.events.k8s.io "{name}" is invalid: [reason: Invalid value: "Other": field is immutable, '
                    'message: Invalid value: "something else": field is immutable]')
    causes = api.put(f"{V1}/{name}", json=changed).json()["details"]["causes"]
    assert [c["field"] for c in causes] == ["reason", "message", "reason"]
    resp = api.patch(f"{V1}/{name}", json={"regarding": {"name": "other"}},
                     headers={"Content-Type": "application/merge-patch+json"})
    assert _invalid(resp) == (
        f'Event.events.k8s.io "{name}" is invalid: involvedObject: Invalid value: core.ObjectReference{{Kind:"Pod", '
        f'Namespace:"default", Name:"other", UID:"u-1", APIVersion:"v1", ResourceVersion:"", FieldPath:""}}: '
        "field is immutable")
    # The same change through core/v1 is allowed: kube keeps the old API's loose rules for old clients.
    resp = api.patch(f"{CORE}/{name}", json={"message": "something else"},
                     headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code == 200, resp.text
    assert api.get(f"{V1}/{name}").json()["note"] == "something else"


def test_core_events_keep_legacy_validation(api: httpx.Client) -> None:
    name = unique_name("ev")
    # A core/v1 event with eventTime is a new-style event: it must say who reported it and what.
    body = {"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": "web", "namespace": NS},
            "eventTime": NOW, "reason": "X", "type": "Normal"}
    text = _invalid(api.post(CORE, json=body))
    assert text == (f'Event "{name}" is invalid: [reportingController: Required value, reportingController: Invalid '
                    f'value: "": name part must be non-empty, reportingController: Invalid value: "": {QUALIFIED}, '
                    "reportingInstance: Required value, action: Required value]")


def test_field_selectors_per_version(api: httpx.Client) -> None:
    name = unique_name("ev")
    regarding = unique_name("pod")
    assert api.post(V1, json=v1_event(name, regarding={"kind": "Pod", "name": regarding, "namespace": NS})
                    ).status_code == 201

    def names(path: str, selector: str) -> list[str]:
        resp = api.get(path, params={"fieldSelector": selector})
        assert resp.status_code == 200, resp.text
        return [e["metadata"]["name"] for e in resp.json()["items"]]

    assert names(V1, f"regarding.name={regarding}") == [name]
    assert names(CORE, f"involvedObject.name={regarding}") == [name]
    assert names(V1, f"regarding.name={regarding},reportingController=default-scheduler") == [name]
    assert names(CORE, f"involvedObject.name={regarding},reportingComponent=default-scheduler") == [name]
    # `source` is the reporting controller of an event without a source, in both versions.
    assert names(V1, f"regarding.name={regarding},source=default-scheduler") == [name]
    assert names(CORE, f"involvedObject.name={regarding},source=default-scheduler") == [name]
    assert names(V1, f"regarding.name={regarding},type=Warning") == []

    # Each version takes its own labels only, with kube's words.
    for path, label in ((V1, "involvedObject.name"), (CORE, "regarding.name"), (V1, "reportingComponent"),
                        (CORE, "reportingController"), (V1, "note")):
        resp = api.get(path, params={"fieldSelector": f"{label}=x"})
        assert resp.status_code == 400, (path, label, resp.text)
        assert resp.json()["message"] == f"field label not supported: {label}"


def test_watch_through_both_versions(api: httpx.Client, apiserver: str) -> None:
    name = unique_name("ev")
    rv = api.get(CORE).json()["metadata"]["resourceVersion"]
    seen: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    with httpx.Client(base_url=apiserver, timeout=60) as client:
        params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "30"}
        with client.stream("GET", CORE, params=params) as core_watch, \
                client.stream("GET", V1, params=params) as v1_watch:
            assert api.post(V1, json=v1_event(name)).status_code == 201
            resp = api.patch(f"{V1}/{name}", json={"series": {"count": 2, "lastObservedTime": NOW}},
                             headers={"Content-Type": "application/merge-patch+json"})
            assert resp.status_code == 200
            assert api.delete(f"{CORE}/{name}").status_code == 200
            for key, stream in (("core", core_watch), ("v1", v1_watch)):
                seen[key] = []
                for line in stream.iter_lines():
                    event = json.loads(line)
                    if event["object"]["metadata"]["name"] == name:
                        seen[key].append((event["type"], event["object"]))
                    if len(seen[key]) == 3:
                        break
    core, v1 = seen["core"], seen["v1"]
    assert [t for t, _ in core] == ["ADDED", "MODIFIED", "DELETED"]
    assert [t for t, _ in v1] == ["ADDED", "MODIFIED", "DELETED"]
    assert all(o["apiVersion"] == "v1" and "message" in o and "note" not in o for _, o in core)
    assert all(o["apiVersion"] == "events.k8s.io/v1" and "note" in o and "message" not in o for _, o in v1)
    assert [o["metadata"]["resourceVersion"] for _, o in core] == [o["metadata"]["resourceVersion"] for _, o in v1]
    assert v1[1][1]["series"]["count"] == 2


def test_watch_with_field_selector_per_version(api: httpx.Client, apiserver: str) -> None:
    """A field-selected watch through events.k8s.io/v1 matches on the served version's labels, and an
    update that moves an event out of the selection is DELETED for that watcher."""
    name, regarding = unique_name("ev"), unique_name("pod")
    rv = api.get(CORE).json()["metadata"]["resourceVersion"]
    with httpx.Client(base_url=apiserver, timeout=60) as client:
        params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "30",
                  "fieldSelector": f"regarding.name={regarding}"}
        with client.stream("GET", V1, params=params) as watch:
            other = unique_name("ev")
            assert api.post(V1, json=v1_event(other)).status_code == 201
            assert api.post(V1, json=v1_event(name, regarding={"kind": "Pod", "name": regarding, "namespace": NS},
                                              type="Warning")).status_code == 201
            # Through core/v1 (loose rules): the event stops regarding that pod.
            resp = api.patch(f"{CORE}/{name}", json={"involvedObject": {"name": "someone-else"}},
                             headers={"Content-Type": "application/merge-patch+json"})
            assert resp.status_code == 200, resp.text
            events = []
            for line in watch.iter_lines():
                events.append(json.loads(line))
                if len(events) == 2:
                    break
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", name), ("DELETED", name)]
    assert events[0]["object"]["regarding"]["name"] == regarding


def test_a_body_of_the_other_version_is_refused(api: httpx.Client) -> None:
    """Each version decodes its own fields only: a core/v1 body sent to events.k8s.io (or the reverse)
    is the decoder's 400, and the other version's field names are unknown fields."""
    name = unique_name("ev")
    core_body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
                 "involvedObject": {"kind": "Pod", "name": "web", "namespace": NS}}
    resp = api.post(V1, json=core_body)
    assert resp.status_code == 400
    assert resp.json()["message"] == ("the API version in the data (v1) does not match the expected API version "
                                      "(events.k8s.io/v1)")
    resp = api.post(CORE, json=v1_event(name))
    assert resp.status_code == 400
    assert resp.json()["message"] == ("the API version in the data (events.k8s.io/v1) does not match the expected "
                                      "API version (v1)")
    resp = api.post(V1, params={"fieldValidation": "Strict"}, json={**v1_event(name), "message": "core's name"})
    assert resp.status_code == 400
    assert resp.json()["message"] == ('Event in version "v1" cannot be handled as a Event: strict decoding error: '
                                      'unknown field "message"')
    assert api.get(f"{CORE}/{name}").status_code == 404


def test_the_table_prints_both_versions_as_kube_prints_events(api: httpx.Client) -> None:
    """printEvent, for an event the events API wrote: the series' count, the reporting controller and
    instance as source, eventTime as first seen; the same row through either version."""
    name = unique_name("ev")
    assert api.post(V1, json=v1_event(name, series={"count": 4, "lastObservedTime": NOW})).status_code == 201
    rows = {}
    for key, path in (("core", CORE), ("v1", V1)):
        resp = api.get(f"{path}/{name}", headers={"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"})
        assert resp.status_code == 200, resp.text
        table = resp.json()
        assert [c["name"] for c in table["columnDefinitions"]] == [
            "Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"]
        rows[key] = table["rows"][0]["cells"]
    assert rows["core"] == rows["v1"]
    _last, kind, reason, target, sub, source, message, _first, count, row_name = rows["v1"]
    assert (kind, reason, target, sub, source, message, count, row_name) == (
        "Normal", "Scheduled", "pod/web", "", "default-scheduler, default-scheduler-x",
        f"Successfully assigned {NS}/web", 4, name)


HOSTILE_FIELDS: list[tuple[str, Any]] = [
    (field, value)
    for field in ("regarding", "related", "note", "reason", "type", "action", "reportingController",
                  "reportingInstance", "eventTime", "series", "deprecatedSource", "deprecatedFirstTimestamp",
                  "deprecatedLastTimestamp", "deprecatedCount", "metadata")
    for value in ("x", 5, -1, 2**40, True, [], ["x"], {"x": 1}, {"count": "2"}, {"lastObservedTime": 5},
                  {"count": 2, "lastObservedTime": "not a time"}, {"name": 5}, {"component": ["x"]}, "\x00", "é" * 2000)
]


def test_hostile_bodies_get_a_status_and_change_nothing(api: httpx.Client) -> None:
    """Every field of an events.k8s.io/v1 event set to values of the wrong type or shape, on create and
    as a merge patch of a stored event: a 4xx Status each time (never a 5xx), and the stored event unchanged
    unless the write was valid."""
    # In a namespace of their own: a bad time string is still accepted (kube's decoder refuses it, kubelab's
    # does not parse times), and the official client cannot read a list that holds one.
    ns = "hostile-events"
    assert api.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code in (201, 409)
    core_path, v1_path = CORE.replace(f"/{NS}/", f"/{ns}/"), V1.replace(f"/{NS}/", f"/{ns}/")
    name = unique_name("hostile")
    assert api.post(v1_path, json=v1_event(name, regarding={"kind": "Pod", "name": "web", "namespace": ns})
                    ).status_code == 201
    before = api.get(f"{core_path}/{name}").json()
    codes: dict[int, int] = {}
    for field, value in HOSTILE_FIELDS:
        target = unique_name("h")
        body = {**v1_event(target, regarding={"kind": "Pod", "name": "web", "namespace": ns}), field: value}
        resp = api.post(v1_path, json=body)
        codes[resp.status_code] = codes.get(resp.status_code, 0) + 1
        assert resp.status_code < 500, (field, value, resp.text)
        if resp.status_code >= 400:
            assert resp.json()["kind"] == "Status", resp.text
            assert api.get(f"{v1_path}/{target}").status_code == 404
        else:  # accepted: readable through both versions and the Table
            for path in (f"{v1_path}/{target}", f"{core_path}/{target}"):
                assert api.get(path).status_code == 200
                assert api.get(path, headers={"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"}
                               ).status_code == 200
        resp = api.patch(f"{v1_path}/{name}", json={field: value}, headers={"Content-Type": "application/merge-patch+json"})
        assert resp.status_code < 500, (field, value, resp.text)
        codes[resp.status_code] = codes.get(resp.status_code, 0) + 1
        if resp.status_code >= 400:
            assert resp.json()["kind"] == "Status", resp.text
    # The events API's update rules make every field but series and metadata immutable: whatever passed
    # changed only those.
    # (`deprecatedSource: {}` is no source: a Go struct, not a pointer, as kube compares them.)
    after = api.get(f"{core_path}/{name}").json()
    assert {k: v for k, v in after.items() if k not in ("metadata", "series") and v != {}} == \
        {k: v for k, v in before.items() if k not in ("metadata", "series")}
    assert 400 in codes and 422 in codes
    assert sum(codes.values()) == 2 * len(HOSTILE_FIELDS)


def test_a_series_is_typed_in_core_v1_too(api: httpx.Client) -> None:
    """series.lastObservedTime is a MicroTime and series.count an int32 in both versions: a number for the
    time is the decoder's 400 (before, core/v1 stored it and every Table of the namespace's events
    answered 500)."""
    name = unique_name("ev")
    body = {"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": "web", "namespace": NS},
            "reason": "X", "message": "m", "type": "Normal", "series": {"count": 2, "lastObservedTime": 5}}
    resp = api.post(CORE, json=body)
    assert resp.status_code == 400, resp.text
    assert resp.json()["message"].startswith('Event in version "v1" cannot be handled as a Event: json: cannot '
                                             "unmarshal number")
    assert api.get(CORE, headers={"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"}).status_code == 200

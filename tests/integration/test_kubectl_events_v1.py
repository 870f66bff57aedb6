"""events.k8s.io/v1 with the real kubectl and the official Python client's EventsV1Api: discovery,
`kubectl get events.events.k8s.io` (the columns kube prints for both versions), `kubectl explain`, and an
event created through events.k8s.io/v1 read back through CoreV1Api and watched through both APIs."""

from __future__ import annotations

import datetime
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from apitools import unique_name
from kubectltools import Kubectl, table
from kubernetes import client, watch

NS = "default"


@pytest.fixture(scope="module")
def apis(apiserver: str) -> Iterator[tuple[client.EventsV1Api, client.CoreV1Api]]:
    config = client.Configuration()
    config.host = apiserver
    with client.ApiClient(config) as api_client:
        yield client.EventsV1Api(api_client), client.CoreV1Api(api_client)


def _event(name: str, regarding: str, **extra: Any) -> client.EventsV1Event:
    return client.EventsV1Event(
        metadata=client.V1ObjectMeta(name=name, namespace=NS),
        event_time=datetime.datetime.now(datetime.UTC), reporting_controller="example.com/operator",
        reporting_instance="operator-0", action="Reconcile", reason="Reconciled", type="Normal",
        note="reconciled the web app", regarding=client.V1ObjectReference(kind="Pod", name=regarding, namespace=NS),
        **extra)


def test_discovery_lists_events_in_both_groups(kubectl: Kubectl) -> None:
    rows = table(kubectl.ok("api-resources", "--api-group=events.k8s.io"))
    assert [(r["NAME"], r["SHORTNAMES"], r["APIVERSION"], r["NAMESPACED"], r["KIND"]) for r in rows] == [
        ("events", "ev", "events.k8s.io/v1", "true", "Event")]
    assert "events.k8s.io/v1" in kubectl.ok("api-versions").split()


def test_kubectl_get_and_explain(kubectl: Kubectl, apis: tuple[client.EventsV1Api, client.CoreV1Api]) -> None:
    events_v1, _ = apis
    name, pod = unique_name("ev"), unique_name("pod")
    events_v1.create_namespaced_event(NS, _event(name, pod))

    rows = table(kubectl.ok("get", "events.events.k8s.io", "-n", NS, "--field-selector", f"regarding.name={pod}"))
    assert [(r["TYPE"], r["REASON"], r["OBJECT"], r["MESSAGE"]) for r in rows] == [
        ("Normal", "Reconciled", f"pod/{pod}", "reconciled the web app")]
    wide = table(kubectl.ok("get", "events.events.k8s.io", "-n", NS, "-o", "wide", "--field-selector",
                            f"regarding.name={pod}"))
    assert wide[0]["SOURCE"] == "example.com/operator, operator-0"
    assert wide[0]["COUNT"] == "1" and wide[0]["NAME"] == name
    # The same event through core/v1, with the same columns.
    core = table(kubectl.ok("get", "events", "-n", NS, "-o", "wide", "--field-selector",
                            f"involvedObject.name={pod}"))
    ages = ("LAST SEEN", "FIRST SEEN")  # a second may pass between the two commands
    assert [{k: v for k, v in r.items() if k not in ages} for r in core] == [
        {k: v for k, v in r.items() if k not in ages} for r in wide]

    out = kubectl.ok("get", "events.events.k8s.io", name, "-n", NS, "-o", "jsonpath={.note}/{.regarding.name}")
    assert out == f"reconciled the web app/{pod}"

    # kubectl explain reads RESOURCE.FIELD, so a group is chosen with --api-version (as against kube).
    explained = kubectl.ok("explain", "events", "--api-version=events.k8s.io/v1")
    assert explained.startswith("GROUP:      events.k8s.io\nKIND:       Event\nVERSION:    v1\n")
    for field in ("deprecatedCount\t<integer>", "note\t<string>", "regarding\t<ObjectReference>",
                  "reportingController\t<string>", "series\t<EventSeries>", "eventTime\t<string> -required-"):
        assert field in explained, field
    series = kubectl.ok("explain", "events.series", "--api-version=events.k8s.io/v1")
    assert "lastObservedTime\t<string> -required-" in series


def test_python_client_events_v1_round_trip(apis: tuple[client.EventsV1Api, client.CoreV1Api]) -> None:
    events_v1, core_v1 = apis
    name, pod = unique_name("ev"), unique_name("pod")
    created = events_v1.create_namespaced_event(NS, _event(name, pod, series=client.EventsV1EventSeries(
        count=2, last_observed_time=datetime.datetime.now(datetime.UTC))))
    assert created.note == "reconciled the web app" and created.regarding.name == pod

    core = core_v1.read_namespaced_event(name, NS)
    assert core.message == "reconciled the web app"
    assert core.involved_object.name == pod
    assert core.reporting_component == "example.com/operator"
    assert core.reporting_instance == "operator-0"
    assert core.series.count == 2

    core.message = "changed through core/v1"
    core_v1.replace_namespaced_event(name, NS, core)
    back = events_v1.read_namespaced_event(name, NS)
    assert back.note == "changed through core/v1"
    assert back.metadata.uid == created.metadata.uid

    listed = events_v1.list_namespaced_event(NS, field_selector=f"regarding.name={pod}")
    assert [e.metadata.name for e in listed.items] == [name]
    with pytest.raises(client.ApiException) as refused:
        events_v1.patch_namespaced_event(name, NS, {"note": "not through the events API"})
    assert refused.value.status == 422
    causes = json.loads(refused.value.body)["details"]["causes"]
    assert causes == [{"reason": "FieldValueInvalid", "field": "message",
                       "message": 'Invalid value: "not through the events API": field is immutable'}]
    events_v1.delete_namespaced_event(name, NS)
    with pytest.raises(client.ApiException) as gone:
        core_v1.read_namespaced_event(name, NS)
    assert gone.value.status == 404


def test_python_client_watches_both_versions(apiserver: str, apis: tuple[client.EventsV1Api, client.CoreV1Api]
                                             ) -> None:
    events_v1, core_v1 = apis
    name, pod = unique_name("ev"), unique_name("pod")
    rv = core_v1.list_namespaced_event(NS).metadata.resource_version
    seen: dict[str, list[tuple[str, Any]]] = {"core": [], "v1": []}
    started = {key: threading.Event() for key in seen}

    def follow(key: str) -> None:
        lister = (events_v1.list_namespaced_event if key == "v1" else core_v1.list_namespaced_event)
        w = watch.Watch()
        started[key].set()
        for event in w.stream(lister, NS, resource_version=rv, timeout_seconds=30,
                              field_selector=f"metadata.name={name}"):
            seen[key].append((event["type"], event["object"]))
            if len(seen[key]) == 2:
                w.stop()

    threads = [threading.Thread(target=follow, args=(key,)) for key in seen]
    for t in threads:
        t.start()
    for ready in started.values():
        assert ready.wait(30)
    events_v1.create_namespaced_event(NS, _event(name, pod))
    events_v1.delete_namespaced_event(name, NS)
    for t in threads:
        t.join(60)
    assert [t for t, _ in seen["v1"]] == ["ADDED", "DELETED"]
    assert [t for t, _ in seen["core"]] == ["ADDED", "DELETED"]
    assert isinstance(seen["v1"][0][1], client.EventsV1Event) and seen["v1"][0][1].note == "reconciled the web app"
    assert isinstance(seen["core"][0][1], client.CoreV1Event)
    assert seen["core"][0][1].message == "reconciled the web app"
    # The raw watch line names the served version.
    with httpx.Client(base_url=apiserver) as raw:
        resp = raw.get(f"/apis/events.k8s.io/v1/namespaces/{NS}/events",
                       params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "1",
                               "fieldSelector": f"metadata.name={name}"})
    assert '"apiVersion":"events.k8s.io/v1"' in resp.text.splitlines()[0]

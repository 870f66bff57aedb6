"""Server-side Tables, which `kubectl get` prints verbatim: column names and cells as kube-apiserver's
printers produce them."""

from __future__ import annotations

import re

import httpx
import pytest
from apitools import (
    CORE,
    TABLE_ACCEPT,
    create,
    ns_path,
    pod,
    release_node_port,
    service,
    unique_name,
    watch_events,
)

# What kubectl sends: Table v1, then v1beta1, then plain JSON.
KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                  "application/json")
AGE = re.compile(r"^\d+(s|m\d*s?|h)$")


@pytest.fixture(scope="module")
def ns(apiserver: str) -> str:
    name = unique_name("tables")
    with httpx.Client(base_url=apiserver, timeout=10) as api:
        create(api, f"{CORE}/namespaces", {"metadata": {"name": name}})
    return name


def columns(table: dict[str, object]) -> list[tuple[str, int]]:
    defs = table["columnDefinitions"]
    assert isinstance(defs, list)
    return [(c["name"], c["priority"]) for c in defs]


def test_service_table(api: httpx.Client, ns: str) -> None:
    release_node_port(api, 31122)
    create(api, ns_path("services", ns), service("web", type="NodePort", ports=[{"port": 3017, "nodePort": 31122}]))
    created = create(api, ns_path("services", ns), service("db", ports=[{"name": "pg", "port": 5432},
                                                                        {"name": "dns", "port": 53, "protocol": "UDP"}]))
    resp = api.get(ns_path("services", ns), headers={"Accept": KUBECTL_ACCEPT})
    assert resp.status_code == 200
    table = resp.json()
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"]["resourceVersion"].isdigit()
    assert columns(table) == [("Name", 0), ("Type", 0), ("Cluster-IP", 0), ("External-IP", 0), ("Port(s)", 0),
                              ("Age", 0), ("Selector", 1)]
    assert table["columnDefinitions"][0]["format"] == "name"
    rows = {r["cells"][0]: r for r in table["rows"]}
    web = rows["web"]["cells"]
    assert web[1:5] == ["NodePort", web[2], "<none>", "3017:31122/TCP"]
    assert web[6] == "app=web"
    assert AGE.match(web[5]), web[5]
    assert rows["db"]["cells"][1:5] == ["ClusterIP", created["spec"]["clusterIP"], "<none>", "5432/TCP,53/UDP"]
    # kubectl's default: the row object is PartialObjectMetadata carrying the full metadata.
    obj = rows["db"]["object"]
    assert obj["kind"] == "PartialObjectMetadata"
    assert obj["apiVersion"] == "meta.k8s.io/v1"
    assert obj["metadata"]["uid"] == created["metadata"]["uid"]
    assert obj["metadata"]["namespace"] == ns


def test_single_object_table_and_include_object(api: httpx.Client, ns: str) -> None:
    create(api, ns_path("services", ns), service("single"))
    resp = api.get(ns_path("services", ns, "single"), headers={"Accept": TABLE_ACCEPT},
                   params={"includeObject": "Object"})
    table = resp.json()
    assert table["kind"] == "Table"
    assert len(table["rows"]) == 1
    assert table["rows"][0]["object"]["kind"] == "Service"
    assert table["rows"][0]["object"]["spec"]["ports"][0]["port"] == 80
    none = api.get(ns_path("services", ns, "single"), headers={"Accept": TABLE_ACCEPT},
                   params={"includeObject": "None"}).json()
    assert "object" not in none["rows"][0]


def test_pod_table(api: httpx.Client, ns: str) -> None:
    create(api, ns_path("pods", ns), pod("pending"))
    create(api, ns_path("pods", ns), pod("placed", nodeName="node-1"))
    table = api.get(ns_path("pods", ns), headers={"Accept": KUBECTL_ACCEPT}).json()
    assert columns(table) == [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0), ("IP", 1),
                              ("Node", 1), ("Nominated Node", 1), ("Readiness Gates", 1)]
    rows = {r["cells"][0]: r["cells"] for r in table["rows"]}
    assert rows["pending"][1:4] == ["0/1", "Pending", "0"]
    assert rows["pending"][5:] == ["<none>", "<none>", "<none>", "<none>"]
    assert rows["placed"][6] == "node-1"


def test_plain_json_without_table_accept(api: httpx.Client, ns: str) -> None:
    body = api.get(ns_path("services", ns), headers={"Accept": "application/json"}).json()
    assert body["kind"] == "ServiceList"


def test_watch_with_table_accept_sends_tables(api: httpx.Client, ns: str) -> None:
    rv = api.get(ns_path("pods", ns)).json()["metadata"]["resourceVersion"]
    create(api, ns_path("pods", ns), pod("watched-1"))
    create(api, ns_path("pods", ns), pod("watched-2"))
    api.headers["Accept"] = KUBECTL_ACCEPT
    events = list(watch_events(api, ns_path("pods", ns), count=2, resourceVersion=rv))
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]
    assert all(e["object"]["kind"] == "Table" for e in events)
    # As kube-apiserver does: column definitions in the first event only.
    assert columns(events[0]["object"])[0] == ("Name", 0)
    assert events[1]["object"]["columnDefinitions"] == []
    assert [e["object"]["rows"][0]["cells"][0] for e in events] == ["watched-1", "watched-2"]

"""Hostile writes of DaemonSets, StatefulSets, ReplicationControllers and ControllerRevisions: a valid object
with one to three places replaced by hostile values (test_hostile_input.py's values), created, replaced or
patched. Never a 5xx, every refusal a Status, a refused write changes nothing, and whatever is stored is a
valid object of its kind that the controllers' models read."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from faultkit import OwnedEtcd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile_input import assert_no_5xx, dns_label, hostile_text, hostile_value, paths_of, replaced

from kubelab import kinds

EXAMPLES = int(os.environ.get("KUBELAB_FUZZ_EXAMPLES", "500"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                derandomize=os.environ.get("KUBELAB_FUZZ_RANDOM") != "1", suppress_health_check=list(HealthCheck))
NS = "fuzz-apps"
SEED = "seed"
COUNTS: dict[str, int] = {}


def _template(labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {"nodeSelector": {"disk": "ssd"}, "tolerations": [
        {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}],
        "containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"name": "http", "containerPort": 8080}]}]}}


def meta(name: str) -> dict[str, Any]:
    return {"name": name, "labels": {"app": "web"}, "annotations": {"note": "hello"}}


APPS = f"/apis/apps/v1/namespaces/{NS}"
TEMPLATES: dict[str, tuple[str, Any]] = {
    "daemonsets": (f"{APPS}/daemonsets", lambda n: {"metadata": meta(n), "spec": {
        "selector": {"matchLabels": {"app": "web"}}, "template": _template({"app": "web"}), "minReadySeconds": 1,
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 0}}}}),
    "statefulsets": (f"{APPS}/statefulsets", lambda n: {"metadata": meta(n), "spec": {
        "replicas": 2, "serviceName": "web", "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {"app": "web"}}, "template": _template({"app": "web"}),
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}}}),
    "replicationcontrollers": (f"/api/v1/namespaces/{NS}/replicationcontrollers", lambda n: {
        "metadata": meta(n), "spec": {"replicas": 2, "selector": {"app": "web"}, "template": _template({"app": "web"})}}),
    "controllerrevisions": (f"{APPS}/controllerrevisions", lambda n: {
        "metadata": meta(n), "revision": 3, "data": {"spec": {"template": {"$patch": "replace"}}}}),
}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, start_apiserver: Any) -> Iterator[httpx.Client]:
    etcd = OwnedEtcd(tmp_path_factory.mktemp("fuzz-apps-etcd") / "data")
    try:
        etcd.start()
        with start_apiserver(etcd.url) as url, httpx.Client(base_url=url, timeout=60) as client:
            client.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
            yield client
    finally:
        etcd.stop()
        assert not etcd.alive()


@pytest.fixture(scope="module", autouse=True)
def report_counts() -> Iterator[None]:
    yield
    path = os.environ.get("KUBELAB_FAULT_REPORT")
    if path:
        with open(path, "a") as out:
            out.write(orjson.dumps({"test": "tests/faults/test_hostile_workloads.py", **COUNTS},
                                   option=orjson.OPT_SORT_KEYS).decode() + "\n")


@st.composite
def mutated(draw: st.DrawFn, kind: str, name: str) -> Any:
    body: Any = TEMPLATES[kind][1](name)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths_of(body)))
        body = replaced(body, path, draw(hostile_value))
    return body


def stored(api: httpx.Client, kind: str) -> dict[str, Any]:
    listed = api.get(TEMPLATES[kind][0])
    assert listed.status_code == 200, listed.text
    return {o["metadata"]["name"]: o for o in listed.json()["items"]}


@FUZZ
@given(data=st.data())
def test_hostile_workload_writes_never_5xx_and_refusals_change_nothing(api: httpx.Client, data: Any) -> None:
    kind = data.draw(st.sampled_from(sorted(TEMPLATES)))
    path = TEMPLATES[kind][0]
    if api.get(f"{path}/{SEED}").status_code == 404:
        assert api.post(path, json=TEMPLATES[kind][1](SEED)).status_code == 201
    before = stored(api, kind)
    verb = data.draw(st.sampled_from(["create", "update", "merge-patch", "strategic-patch", "scale"]))
    if verb == "create":
        body = data.draw(mutated(kind, data.draw(st.one_of(dns_label, hostile_text))))
        resp = api.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})
    elif verb == "update":
        resp = api.put(f"{path}/{SEED}", content=json.dumps(data.draw(mutated(kind, SEED))),
                       headers={"Content-Type": "application/json"})
    elif verb == "scale":
        resp = api.patch(f"{path}/{SEED}/scale", content=json.dumps({"spec": {"replicas": data.draw(hostile_value)}}),
                         headers={"Content-Type": "application/merge-patch+json"})
    else:
        content_type = "application/merge-patch+json" if verb == "merge-patch" else \
            "application/strategic-merge-patch+json"
        resp = api.patch(f"{path}/{SEED}", content=json.dumps(data.draw(mutated(kind, SEED))),
                         headers={"Content-Type": content_type})
    COUNTS["write cases"] = COUNTS.get("write cases", 0) + 1
    assert_no_5xx(resp)
    after = stored(api, kind)
    if resp.status_code >= 400:
        COUNTS["writes refused"] = COUNTS.get("writes refused", 0) + 1
        assert after == before, f"{verb} {kind} was refused ({resp.status_code}) but changed what is stored"
        return
    COUNTS["writes accepted"] = COUNTS.get("writes accepted", 0) + 1
    rt = next(r for r in kinds.BUILTIN if r.plural == kind)
    for name, obj in after.items():
        if name not in before or obj != before[name]:
            rt.model.model_validate(obj)
    for name in set(after) - set(before) - {SEED}:
        api.delete(f"{path}/{name}")

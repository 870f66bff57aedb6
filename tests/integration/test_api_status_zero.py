"""Every kind with a status reads it as kube-apiserver serves the Go zero value of its status struct:
`"status": {}` before any controller wrote status (Deployment, Job), and the fields without `omitempty`
as 0 (ReplicaSet `{"replicas": 0}`), also after a status write that left them out. Clients index
`raw["status"]` (kr8s, lightkube); kubelab used to leave the key out. No controllers run here, so what
is read is the API server's own answer."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from apitools import CORE, create, unique_name

LABELS = {"app": "zero"}
TEMPLATE = {"metadata": {"labels": LABELS}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}
SELECTOR = {"matchLabels": LABELS}


def _kinds() -> list[Any]:
    return [
        pytest.param("/apis/apps/v1", "deployments", {"apiVersion": "apps/v1", "kind": "Deployment",
                     "spec": {"selector": SELECTOR, "template": TEMPLATE}}, {}, id="Deployment"),
        pytest.param("/apis/apps/v1", "replicasets", {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                     "spec": {"selector": SELECTOR, "template": TEMPLATE}}, {"replicas": 0}, id="ReplicaSet"),
        pytest.param(CORE, "replicationcontrollers", {"apiVersion": "v1", "kind": "ReplicationController",
                     "spec": {"selector": LABELS, "template": TEMPLATE}}, {"replicas": 0},
                     id="ReplicationController"),
        pytest.param("/apis/apps/v1", "statefulsets", {"apiVersion": "apps/v1", "kind": "StatefulSet",
                     "spec": {"selector": SELECTOR, "template": TEMPLATE, "serviceName": "zero"}},
                     {"replicas": 0, "availableReplicas": 0}, id="StatefulSet"),
        pytest.param("/apis/apps/v1", "daemonsets", {"apiVersion": "apps/v1", "kind": "DaemonSet",
                     "spec": {"selector": SELECTOR, "template": TEMPLATE}},
                     {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                      "numberReady": 0}, id="DaemonSet"),
        pytest.param("/apis/batch/v1", "jobs", {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {
                     **TEMPLATE, "spec": {**TEMPLATE["spec"], "restartPolicy": "Never"}}}}, {}, id="Job"),
        pytest.param("/apis/batch/v1", "cronjobs", {"apiVersion": "batch/v1", "kind": "CronJob", "spec": {
                     "schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {
                         **TEMPLATE, "spec": {**TEMPLATE["spec"], "restartPolicy": "Never"}}}}}}, {}, id="CronJob"),
        pytest.param("/apis/policy/v1", "poddisruptionbudgets", {"apiVersion": "policy/v1",
                     "kind": "PodDisruptionBudget", "spec": {"selector": SELECTOR, "minAvailable": 1}},
                     {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
                     id="PodDisruptionBudget"),
        pytest.param(CORE, "services", {"apiVersion": "v1", "kind": "Service", "spec": {
                     "selector": LABELS, "ports": [{"port": 80}]}}, {"loadBalancer": {}}, id="Service"),
    ]


@pytest.mark.parametrize(("root", "plural", "body", "zero"), _kinds())
def test_status_is_the_go_zero_value(api: httpx.Client, root: str, plural: str, body: dict[str, Any],
                                     zero: dict[str, Any]) -> None:
    name = unique_name("zero")
    collection = f"{root}/namespaces/default/{plural}"
    created = create(api, collection, {**body, "metadata": {"name": name}})
    assert created["status"] == zero
    read = api.get(f"{collection}/{name}")
    assert read.status_code == 200
    assert read.json()["status"] == zero
    # The bytes a client sees: the key is there, not only a dict that compares equal after defaulting.
    assert b'"status":' in read.content
    listed = api.get(collection, params={"fieldSelector": f"metadata.name={name}"}).json()["items"]
    assert [item["status"] for item in listed] == [zero]

    # A status write that leaves the fields out still reads them as 0 (the Go struct has them).
    obj = read.json()
    obj["status"] = {} if plural in ("jobs", "cronjobs", "services") else {"observedGeneration": 1}
    written = api.put(f"{collection}/{name}/status", json=obj)
    assert written.status_code == 200, written.text
    expected = {**zero, **obj["status"]}
    assert written.json()["status"] == expected
    assert api.get(f"{collection}/{name}").json()["status"] == expected
    api.delete(f"{collection}/{name}")

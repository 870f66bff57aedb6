"""storage.k8s.io/v1 CSIStorageCapacities served as kube-apiserver serves them: in discovery (kr8s's
lookup_kind finds them), printCSIStorageCapacity's columns, pkg/apis/storage/validation's words for bad ones
(which change nothing), nodeTopology and storageClassName immutable, kube's 400 for a capacity that is not a
quantity, and the official client's StorageV1Api. No CSI driver publishes any (kubelab has no storage)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from apitools import assert_status, unique_name
from kubectltools import Kubectl, table
from kubernetes import client

BASE = "/apis/storage.k8s.io/v1/namespaces/default/csistoragecapacities"
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                 "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
                 r"is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def _body(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": name},
            "storageClassName": "fast", **fields}


@pytest.fixture(scope="module")
def storage(apiserver: str) -> Iterator[client.StorageV1Api]:
    with client.ApiClient(client.Configuration(host=apiserver)) as api:
        yield client.StorageV1Api(api)


def test_kubectl_and_the_python_client(kubectl: Kubectl, storage: client.StorageV1Api, api: httpx.Client) -> None:
    name = unique_name("cap")
    made = storage.create_namespaced_csi_storage_capacity("default", client.V1CSIStorageCapacity(
        metadata=client.V1ObjectMeta(name=name), storage_class_name="fast", capacity="10Gi",
        node_topology=client.V1LabelSelector(match_labels={"topology.kubernetes.io/zone": "a"})))
    assert (made.capacity, made.storage_class_name) == ("10Gi", "fast")
    row = table(kubectl.ok("get", "csistoragecapacities", name))[0]
    assert (list(row), row["STORAGECLASSNAME"], row["CAPACITY"]) == (["NAME", "STORAGECLASSNAME", "CAPACITY"],
                                                                     "fast", "10Gi")
    out = kubectl.ok("api-resources", "--api-group", "storage.k8s.io", "-o", "name")
    assert "csistoragecapacities.storage.k8s.io" in out.split()
    body = api.get(f"{BASE}/{name}").json()
    resp = api.put(f"{BASE}/{name}", json={**body, "storageClassName": "slow", "nodeTopology": {}})
    assert_status(resp, 422, "Invalid", f'CSIStorageCapacity.storage.k8s.io "{name}" is invalid: [nodeTopology: '
                  "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
                  "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable, storageClassName: "
                  'Invalid value: "slow": field is immutable]')
    resp = api.put(f"{BASE}/{name}", json={**body, "capacity": "20Gi"})
    assert resp.status_code == 200 and resp.json()["capacity"] == "20Gi", resp.text
    unset = unique_name("cap")
    assert api.post(BASE, json=_body(unset)).status_code == 201
    assert table(kubectl.ok("get", "csistoragecapacities", unset))[0]["CAPACITY"] == "<unset>"
    storage.delete_namespaced_csi_storage_capacity(name, "default")
    storage.delete_namespaced_csi_storage_capacity(unset, "default")


@pytest.mark.parametrize(("fields", "message"), [
    pytest.param({"storageClassName": ""}, f'storageClassName: Invalid value: "": {SUBDOMAIN_MSG}', id="no class"),
    pytest.param({"storageClassName": "Fast"}, f'storageClassName: Invalid value: "Fast": {SUBDOMAIN_MSG}',
                 id="class name"),
    pytest.param({"capacity": "-1Gi"}, 'capacity: Invalid value: "-1Gi": must be greater than or equal to 0',
                 id="negative"),
    pytest.param({"nodeTopology": {"matchExpressions": [{"key": "zone", "operator": "In"}]}},
                 "nodeTopology.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' "
                 "or 'NotIn'", id="topology"),
])
def test_bad_ones_are_refused_in_kubes_words(api: httpx.Client, fields: dict[str, Any], message: str) -> None:
    name = unique_name("bad")
    assert_status(api.post(BASE, json=_body(name, **fields)), 422, "Invalid",
                  f'CSIStorageCapacity.storage.k8s.io "{name}" is invalid: {message}')
    assert_status(api.get(f"{BASE}/{name}"), 404, "NotFound")


def test_a_capacity_that_is_not_a_quantity_is_kubes_decode_error(api: httpx.Client) -> None:
    name = unique_name("bad")
    resp = api.post(BASE, content=json.dumps(_body(name, capacity="lots")), headers={"content-type": "application/json"})
    assert_status(resp, 400, "BadRequest", 'CSIStorageCapacity in version "v1" cannot be handled as a '
                  "CSIStorageCapacity: quantities must match the regular expression "
                  "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")

"""apiregistration.k8s.io/v1 APIServices: the API server keeps one "Local" APIService per group version it
serves (kube-apiserver's autoregister), `kubectl get apiservices` shows kube-aggregator's columns, and the
official client's ApiregistrationV1Api creates, reads, lists and deletes one with kube's validation.
Aggregation itself (proxying a group to the Service named) is not served."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from apitools import assert_status, unique_name
from kubectltools import Kubectl, table
from kubernetes import client
from kubernetes.client.rest import ApiException

APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"


@pytest.fixture(scope="module")
def registration(apiserver: str) -> Iterator[client.ApiregistrationV1Api]:
    with client.ApiClient(client.Configuration(host=apiserver)) as api:
        yield client.ApiregistrationV1Api(api)


def test_every_served_group_version_has_a_local_apiservice(kubectl: Kubectl) -> None:
    rows = {row["NAME"]: row for row in table(kubectl.ok("get", "apiservices"))}
    for name in ("v1.", "v1.apps", "v1.coordination.k8s.io", "v1.discovery.k8s.io", "v1.authorization.k8s.io",
                 "v1beta1.metrics.k8s.io"):
        assert (rows[name]["SERVICE"], rows[name]["AVAILABLE"]) == ("Local", "True"), rows[name]
    core = kubectl.ok("get", "apiservice", "v1.", "-o", "jsonpath={.spec.groupPriorityMinimum} "
                      "{.spec.versionPriority} {.metadata.labels.kube-aggregator\\.kubernetes\\.io/automanaged} "
                      "{.status.conditions[0].reason}")
    assert core == "18000 1 onstart Local"


def test_the_python_client_creates_reads_and_deletes_one(registration: client.ApiregistrationV1Api,
                                                         kubectl: Kubectl) -> None:
    group = f"{unique_name('wardle')}.example.com"
    body = client.V1APIService(
        metadata=client.V1ObjectMeta(name=f"v1alpha1.{group}"),
        spec=client.V1APIServiceSpec(group=group, version="v1alpha1", group_priority_minimum=2000,
                                     version_priority=200, insecure_skip_tls_verify=True,
                                     service=client.ApiregistrationV1ServiceReference(namespace="default",
                                                                                      name="wardle")))
    made = registration.create_api_service(body)
    assert made.spec.service.port == 443  # defaulted
    assert made.spec.insecure_skip_tls_verify is True
    assert registration.read_api_service(f"v1alpha1.{group}").spec.group == group
    assert f"v1alpha1.{group}" in {a.metadata.name for a in registration.list_api_service().items}
    row = next(r for r in table(kubectl.ok("get", "apiservices")) if r["NAME"] == f"v1alpha1.{group}")
    assert (row["SERVICE"], row["AVAILABLE"]) == ("default/wardle", "Unknown")
    registration.delete_api_service(f"v1alpha1.{group}")
    with pytest.raises(ApiException) as caught:
        registration.read_api_service(f"v1alpha1.{group}")
    assert caught.value.status == 404


@pytest.mark.parametrize(("spec", "name", "message"), [
    pytest.param({"group": "example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10},
                 "v2.example.com", 'metadata.name: Invalid value: "v2.example.com": must be '
                                   '`spec.version+"."+spec.group`: "v1.example.com"', id="name"),
    pytest.param({"group": "example.com", "version": "v1", "groupPriorityMinimum": 0, "versionPriority": 10},
                 "v1.example.com", "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
                 id="group priority"),
    pytest.param({"group": "example.com", "version": "v1", "groupPriorityMinimum": 10, "versionPriority": 10,
                  "insecureSkipTLSVerify": True}, "v1.example.com",
                 "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
                 id="local with insecureSkipTLSVerify"),
    pytest.param({"group": "example.com", "version": "v1", "groupPriorityMinimum": 10, "versionPriority": 10,
                  "service": {"name": "x"}}, "v1.example.com", "spec.service.namespace: Required value",
                 id="service without namespace"),
])
def test_validation_in_kube_aggregators_words(api: httpx.Client, spec: dict[str, object], name: str,
                                              message: str) -> None:
    resp = api.post(APISERVICES, json={"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                                       "metadata": {"name": name}, "spec": spec})
    assert_status(resp, 422, "Invalid", f'APIService.apiregistration.k8s.io "{name}" is invalid: {message}')
    assert_status(api.get(f"{APISERVICES}/{name}"), 404, "NotFound")


def test_kubectl_explain_reads_its_schema(kubectl: Kubectl) -> None:
    out = kubectl.ok("explain", "apiservice.spec.groupPriorityMinimum")
    assert "GROUP:      apiregistration.k8s.io" in out and "FIELD: groupPriorityMinimum <integer>" in out, out

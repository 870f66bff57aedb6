"""`kubectl explain` against kubelab: the per-group-version /openapi/v3 documents carry the kinds' schemas
with their descriptions (from the official client's models), shaped as kube-apiserver's, so kubectl's
own explain templates render fields, types, `-required-` marks and descriptions, for every group kubelab
serves and with --recursive. `kubectl apply` keeps merging lists by their keys (it does not take merge
keys from these schemas)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from kubectltools import VERSIONS, Kubectl


@pytest.mark.parametrize("version", VERSIONS)
def test_explain_a_field(kubectl_for: Callable[[str], Kubectl], version: str) -> None:
    out = kubectl_for(version).ok("explain", "svc.spec.externalTrafficPolicy")

    assert out.startswith("KIND:       Service\nVERSION:    v1\n\nFIELD: externalTrafficPolicy <string>\n")
    assert "DESCRIPTION:\n    externalTrafficPolicy describes how nodes distribute service traffic they\n" in out
    assert "without masquerading the client source IP" in " ".join(out.split())


def test_explain_a_kind_lists_its_fields_with_types_and_required_marks(kubectl: Kubectl) -> None:
    out = kubectl.ok("explain", "pod.spec")

    assert "FIELD: spec <PodSpec>" in out
    assert "    PodSpec is a description of a pod.\n" in out
    assert "  containers\t<[]Container> -required-\n" in out
    assert "  nodeSelector\t<map[string]string>\n" in out
    assert "  terminationGracePeriodSeconds\t<integer>\n" in out


def test_explain_other_groups_and_recursive(kubectl: Kubectl) -> None:
    slices = kubectl.ok("explain", "endpointslices", "--recursive")
    assert slices.startswith("GROUP:      discovery.k8s.io\nKIND:       EndpointSlice\nVERSION:    v1\n")
    assert "  endpoints\t<[]Endpoint>\n    addresses\t<[]string> -required-\n    conditions\t<EndpointConditions>\n" \
           "      ready\t<boolean>\n      serving\t<boolean>\n      terminating\t<boolean>\n" in slices

    surge = kubectl.ok("explain", "deployment.spec.strategy.rollingUpdate.maxSurge")
    assert surge.startswith("GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n\nFIELD: maxSurge")
    assert "The maximum number of pods that can be scheduled above the desired number of" in surge

    missing = kubectl("explain", "svc.spec.nosuchfield").failed()
    assert 'field "nosuchfield" does not exist' in missing.stderr


def test_openapi_hashes_follow_the_documents(apiserver: str) -> None:
    """kubectl caches the documents by URL: the hash in each URL is of the document itself."""
    with httpx.Client(base_url=apiserver, timeout=10) as api:
        index = api.get("/openapi/v3").json()["paths"]
        core = api.get(index["api/v1"]["serverRelativeURL"]).json()
        apps = api.get(index["apis/apps/v1"]["serverRelativeURL"]).json()

    assert index["api/v1"]["serverRelativeURL"] != index["apis/apps/v1"]["serverRelativeURL"]
    schemas = core["components"]["schemas"]
    assert schemas["io.k8s.api.core.v1.Service"]["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Service", "version": "v1"}]
    assert schemas["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"]["items"] == {
        "allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.ServicePort"}], "default": {}}
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas
    assert "io.k8s.api.apps.v1.Deployment" not in schemas and "io.k8s.api.apps.v1.Deployment" in \
        apps["components"]["schemas"]
    # No PATCH operation declares a requestBody: kubectl apply would otherwise take merge keys from here.
    assert all("requestBody" not in op for path in core["paths"].values() for op in path.values())

"""`kubectl auth can-i` against kubelab: SelfSubjectAccessReviews are discovered, created (JSON, and the
protobuf bodies kubectl 1.32+ sends), answered and never stored; bad ones get kube's Status errors.
Against an open API everything is allowed, as with kube-apiserver's AlwaysAllow; the node authorizer's
answers are in test_api_auth.py."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from apitools import assert_status
from kubectltools import VERSIONS, Kubectl

PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@pytest.mark.parametrize("version", VERSIONS)
def test_can_i(kubectl_for: Callable[[str], Kubectl], version: str) -> None:
    kubectl = kubectl_for(version)
    assert kubectl.ok("auth", "can-i", "create", "pods") == "yes\n"
    assert kubectl.ok("auth", "can-i", "delete", "services", "--namespace", "kube-system") == "yes\n"
    assert kubectl.ok("auth", "can-i", "get", "/healthz") == "yes\n"
    assert ["selfsubjectaccessreviews", "authorization.k8s.io/v1", "false", "SelfSubjectAccessReview"] in [
        line.split() for line in kubectl.ok("api-resources").splitlines()]


def test_reviews_are_answered_not_stored(apiserver: str) -> None:
    with httpx.Client(base_url=apiserver, timeout=10) as api:
        resp = api.post(PATH, json={"spec": {"nonResourceAttributes": {"path": "/version", "verb": "get"}}})
        assert resp.status_code == 201 and resp.json()["status"] == {"allowed": True}
        assert_status(api.get(PATH), 405, "MethodNotAllowed",
                      "the server does not allow this method on the requested resource")
        assert_status(api.post(PATH, json={"spec": {}}), 422, "Invalid",
                      'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: '
                      "null: exactly one of nonResourceAttributes or resourceAttributes must be specified")
        both = {"spec": {"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/"}}}
        assert api.post(PATH, json=both).json()["details"]["causes"][0]["field"] == "spec.nonResourceAttributes"
        # Bodies are decoded as every kind's are, with the Go decoder's words.
        assert_status(api.post(PATH, json={"apiVersion": "v1", "kind": "Pod", "spec": {"resourceAttributes": {}}}),
                      400, "BadRequest", 'Pod in version "v1" cannot be handled as a SelfSubjectAccessReview: '
                      "converting (v1.Pod) to (authorization.SelfSubjectAccessReview): unknown conversion")
        assert_status(api.post(PATH, json={"spec": {"resourceAttributes": {"verb": 5}}}), 400, "BadRequest",
                      'SelfSubjectAccessReview in version "v1" cannot be handled as a SelfSubjectAccessReview: json: '
                      "cannot unmarshal number 5 into Go struct field ResourceAttributes.spec.resourceAttributes.verb "
                      "of type string")

"""rbac.authorization.k8s.io/v1 Roles, ClusterRoles, RoleBindings and ClusterRoleBindings served as kube
serves them: `kubectl create role|clusterrole|rolebinding|clusterrolebinding`, `kubectl get` with kube's
columns (bindings show `Kind/name` and, wide, their subjects), `kubectl describe`, `kubectl explain`,
v1's defaults and pkg/apis/rbac/validation's messages."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from apitools import assert_status, unique_name
from kubectltools import Kubectl, headers, table

RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture
def namespace(kubectl: Kubectl) -> Iterator[str]:
    name = unique_name("rbac")
    kubectl.ok("create", "namespace", name)
    yield name
    kubectl("delete", "namespace", name, "--wait=false")


def test_kubectl_creates_gets_and_describes_roles_and_bindings(kubectl: Kubectl, namespace: str) -> None:
    kubectl.ok("create", "role", "pod-reader", "--verb=get,list", "--resource=pods,pods/log", "-n", namespace)
    out = kubectl.ok("get", "roles", "-n", namespace)
    assert headers(out) == ["NAME", "CREATED AT"]
    assert table(out)[0]["NAME"] == "pod-reader"
    rules = kubectl.ok("get", "role", "pod-reader", "-n", namespace, "-o",
                       "jsonpath={.rules[0].apiGroups} {.rules[0].resources} {.rules[0].verbs}")
    assert rules == '[""] ["pods","pods/log"] ["get","list"]'
    described = kubectl.ok("describe", "role", "pod-reader", "-n", namespace)
    assert "PolicyRule:" in described and "pods/log" in described

    cluster_role = unique_name("reader")
    kubectl.ok("create", "clusterrole", cluster_role, "--verb=get", "--non-resource-url=/logs/*")
    try:
        kubectl.ok("create", "rolebinding", "readers", "--role=pod-reader", "--user=alice", "--group=devs",
                   f"--serviceaccount={namespace}:robot", "-n", namespace)
        out = kubectl.ok("get", "rolebindings", "-n", namespace, "-o", "wide")
        assert headers(out) == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
        row = table(out)[0]
        assert (row["NAME"], row["ROLE"], row["USERS"], row["GROUPS"], row["SERVICEACCOUNTS"]) == (
            "readers", "Role/pod-reader", "alice", "devs", f"{namespace}/robot")
        assert headers(kubectl.ok("get", "rolebindings", "-n", namespace)) == ["NAME", "ROLE", "AGE"]
        # v1's defaults: the RBAC group for the role reference and for User and Group subjects.
        assert kubectl.ok("get", "rolebinding", "readers", "-n", namespace, "-o",
                          "jsonpath={.roleRef.apiGroup} {.subjects[*].apiGroup}") == (
            "rbac.authorization.k8s.io rbac.authorization.k8s.io rbac.authorization.k8s.io")
        assert "Role:\n  Kind:  Role\n  Name:  pod-reader" in kubectl.ok("describe", "rolebinding", "readers",
                                                                         "-n", namespace)
        kubectl.ok("create", "clusterrolebinding", cluster_role, f"--clusterrole={cluster_role}", "--group=devs")
        row = table(kubectl.ok("get", "clusterrolebinding", cluster_role, "-o", "wide"))[0]
        assert (row["ROLE"], row["GROUPS"]) == (f"ClusterRole/{cluster_role}", "devs")
        assert headers(kubectl.ok("get", "clusterroles", cluster_role)) == ["NAME", "CREATED AT"]
    finally:
        kubectl("delete", "clusterrolebinding", cluster_role)
        kubectl("delete", "clusterrole", cluster_role)


def test_discovery_and_explain(kubectl: Kubectl) -> None:
    resources = {tuple(line.split()[:1] + line.split()[-3:]) for line in kubectl.ok("api-resources").splitlines()}
    for plural, namespaced, kind in (("roles", "true", "Role"), ("clusterroles", "false", "ClusterRole"),
                                     ("rolebindings", "true", "RoleBinding"),
                                     ("clusterrolebindings", "false", "ClusterRoleBinding")):
        assert (plural, "rbac.authorization.k8s.io/v1", namespaced, kind) in resources
    explained = kubectl.ok("explain", "clusterrole.aggregationRule")
    assert "clusterRoleSelectors" in explained
    assert "nonResourceURLs" in kubectl.ok("explain", "role.rules")


def invalid(kind: str, name: str, detail: str) -> str:
    return f'{kind}.rbac.authorization.k8s.io "{name}" is invalid: {detail}'


@pytest.mark.parametrize(("path", "body", "message"), [
    ("namespaces/default/roles", {"metadata": {"name": "r"}, "rules": [{"verbs": ["get"],
                                                                      "nonResourceURLs": ["/healthz"]}]},
     invalid("Role", "r", 'rules[0].nonResourceURLs: Invalid value: []string{"/healthz"}: namespaced rules cannot '
             "apply to non-resource URLs")),
    ("clusterroles", {"metadata": {"name": "c"}, "rules": [{"verbs": [], "apiGroups": [""]}]},
     invalid("ClusterRole", "c", "[rules[0].verbs: Required value: verbs must contain at least one value, "
             "rules[0].resources: Required value: resource rules must supply at least one resource]")),
    ("clusterroles", {"metadata": {"name": "c"}, "rules": [{"verbs": ["get"], "resources": ["pods"],
                                                           "nonResourceURLs": ["/x"]}]},
     invalid("ClusterRole", "c", 'rules[0].nonResourceURLs: Invalid value: []string{"/x"}: rules cannot apply to '
             "both regular resources and non-resource URLs")),
    ("clusterroles", {"metadata": {"name": "a/b"}},
     invalid("ClusterRole", "a/b", 'metadata.name: Invalid value: "a/b": may not contain \'/\'')),
    ("clusterroles", {"metadata": {"name": "c"}, "aggregationRule": {}},
     invalid("ClusterRole", "c", "aggregationRule.clusterRoleSelectors: Required value: at least one "
             "clusterRoleSelector required if aggregationRule is non-nil")),
    ("namespaces/default/rolebindings", {"metadata": {"name": "b"}, "roleRef": {"kind": "Pod", "name": "x"}},
     invalid("RoleBinding", "b", 'roleRef.kind: Unsupported value: "Pod": supported values: "Role", "ClusterRole"')),
    ("clusterrolebindings", {"metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "x"}},
     invalid("ClusterRoleBinding", "b", 'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"')),
    ("clusterrolebindings", {"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole"},
                             "subjects": [{"kind": "ServiceAccount", "name": "Bad_Name"}]},
     invalid("ClusterRoleBinding", "b", "[roleRef.name: Required value, subjects[0].name: Invalid value: \"Bad_Name\": "
             "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
             "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), subjects[0].namespace: "
             "Required value]")),
    ("namespaces/default/rolebindings", {"metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "x"},
                                         "subjects": [{"kind": "Robot", "name": "r"},
                                                      {"kind": "User", "name": "u", "apiGroup": "v1"}]},
     invalid("RoleBinding", "b", '[subjects[0].kind: Unsupported value: "Robot": supported values: '
             '"ServiceAccount", "User", "Group", subjects[1].apiGroup: Unsupported value: "v1": supported values: '
             '"rbac.authorization.k8s.io"]')),
])
def test_invalid_objects_get_kubes_messages(apiserver: str, path: str, body: dict[str, object], message: str) -> None:
    with httpx.Client(base_url=apiserver, timeout=10) as api:
        assert_status(api.post(f"{RBAC}/{path}", json=body), 422, "Invalid", message)
        name = str(body["metadata"]["name"])  # type: ignore[index]
        assert api.get(f"{RBAC}/{path}/{name}").status_code == 404  # nothing stored


def test_a_bindings_role_reference_cannot_change(apiserver: str) -> None:
    name = unique_name("fixed")
    path = f"{RBAC}/clusterrolebindings"
    with httpx.Client(base_url=apiserver, timeout=10) as api:
        made = api.post(path, json={"metadata": {"name": name}, "roleRef": {"kind": "ClusterRole", "name": "view"}})
        assert made.status_code == 201, made.text
        try:
            changed = made.json()
            changed["roleRef"]["name"] = "edit"
            assert_status(api.put(f"{path}/{name}", json=changed), 422, "Invalid", invalid(
                "ClusterRoleBinding", name, 'roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", '
                'Kind:"ClusterRole", Name:"edit"}: cannot change roleRef'))
            assert api.get(f"{path}/{name}").json()["roleRef"]["name"] == "view"
        finally:
            api.delete(f"{path}/{name}")

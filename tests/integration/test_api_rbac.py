"""RBAC against a real API server (HTTPS, --token-auth-file, Node,RBAC) and etcd, driven by the real kubectl
as a user drives kube: the bootstrap policy is there; a service account may do nothing until a Role and a
RoleBinding made with `kubectl create role|rolebinding` let it, and then exactly that, with kube's Forbidden
body otherwise; `kubectl auth can-i --as` answers from RBAC; escalation prevention refuses a Role or
binding granting more than the writer holds (kube's message) unless it has `escalate` or `bind`."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from apitools import assert_status
from kubectltools import Kubectl, table
from tokenapi import token_client, token_kubectl

from kubelab.pki import LabPKI

SUFFIX = secrets.token_hex(3)
NS = f"rbac-{SUFFIX}"
OTHER = f"rbac-other-{SUFFIX}"
ACCOUNT = f"system:serviceaccount:{NS}:robot"


@pytest.fixture(scope="module")
def server(token_apiserver: Callable[[str], AbstractContextManager[str]], lab_pki: LabPKI) -> Iterator[str]:
    with token_apiserver(f'admin-{SUFFIX},alice,1,"system:masters"\n'
                         f"bob-{SUFFIX},bob,2,developers\n"
                         f'node-{SUFFIX},system:node:node-1,3,"system:nodes"\n') as url:
        with token_client(url, lab_pki, f"admin-{SUFFIX}") as admin:
            for namespace in (NS, OTHER):
                admin.post("/api/v1/namespaces", json={"metadata": {"name": namespace}}).raise_for_status()
            admin.post(f"/api/v1/namespaces/{NS}/serviceaccounts",
                       json={"metadata": {"name": "robot"}}).raise_for_status()
        yield url


@pytest.fixture(scope="module")
def admin(server: str, lab_pki: LabPKI, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return token_kubectl(server, lab_pki, tmp_path_factory.mktemp("admin"), f"admin-{SUFFIX}")


@pytest.fixture(scope="module")
def bob(server: str, lab_pki: LabPKI, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return token_kubectl(server, lab_pki, tmp_path_factory.mktemp("bob"), f"bob-{SUFFIX}")


@pytest.fixture(scope="module")
def robot(server: str, lab_pki: LabPKI, admin: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    token = admin.ok("create", "token", "robot", "-n", NS).strip()
    return token_kubectl(server, lab_pki, tmp_path_factory.mktemp("robot"), token)


def refused(result: Any, message: str) -> None:
    assert result.returncode != 0, result.stdout
    # `Error from server (Forbidden): <message>`, or `error: failed to create ...: <message>` from kubectl create.
    assert message in result.stderr, result.stderr


def test_the_bootstrap_policy(admin: Kubectl) -> None:
    row = table(admin.ok("get", "clusterrolebinding", "cluster-admin", "-o", "wide"))[0]
    assert (row["ROLE"], row["GROUPS"]) == ("ClusterRole/cluster-admin", "system:masters")
    labels = json.loads(admin.ok("get", "clusterrole", "view", "-o", "json"))["metadata"]
    assert labels["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
    assert labels["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] == "true"
    names = {r["NAME"] for r in table(admin.ok("get", "clusterroles"))}
    assert {"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery",
            "system:public-info-viewer", "system:node-proxier", "system:kube-scheduler",
            "system:kube-controller-manager", "system:controller:replicaset-controller"} <= names


def test_a_service_account_may_do_exactly_what_its_role_allows(admin: Kubectl, robot: Kubectl) -> None:
    refused(robot("get", "pods", "-n", NS),
            f'pods is forbidden: User "{ACCOUNT}" cannot list resource "pods" in API group "" in the namespace "{NS}"')
    admin.ok("create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods", "-n", NS)
    admin.ok("create", "rolebinding", "robot-reads-pods", "--role=pod-reader", f"--serviceaccount={NS}:robot",
             "-n", NS)
    assert robot.ok("get", "pods", "-n", NS) == "" or "No resources" in robot("get", "pods", "-n", NS).stderr
    refused(robot("get", "pods", "-n", OTHER),
            f'pods is forbidden: User "{ACCOUNT}" cannot list resource "pods" in API group "" in the namespace '
            f'"{OTHER}"')
    refused(robot("get", "pods", "-A"),
            f'pods is forbidden: User "{ACCOUNT}" cannot list resource "pods" in API group "" at the cluster scope')
    refused(robot("create", "configmap", "x", "-n", NS),
            f'configmaps is forbidden: User "{ACCOUNT}" cannot create resource "configmaps" in API group "" in the '
            f'namespace "{NS}"')
    refused(robot("delete", "pod", "nope", "-n", NS),
            f'pods "nope" is forbidden: User "{ACCOUNT}" cannot delete resource "pods" in API group "" in the '
            f'namespace "{NS}"')
    # kubectl auth can-i, as the admin impersonating the account, and as the account itself.
    assert admin.ok("auth", "can-i", "list", "pods", "-n", NS, "--as", ACCOUNT) == "yes\n"
    assert admin("auth", "can-i", "delete", "pods", "-n", NS, "--as", ACCOUNT).stdout == "no\n"
    assert admin("auth", "can-i", "list", "pods", "-n", OTHER, "--as", ACCOUNT).stdout == "no\n"
    assert robot.ok("auth", "can-i", "watch", "pods", "-n", NS) == "yes\n"
    assert robot("auth", "can-i", "get", "secrets", "-n", NS).stdout == "no\n"


def test_a_binding_to_a_missing_role_says_so(server: str, lab_pki: LabPKI, admin: Kubectl) -> None:
    admin.ok("create", "rolebinding", "dangling", "--clusterrole=does-not-exist", "--user=carol", "-n", NS)
    with token_client(server, lab_pki, f"admin-{SUFFIX}") as api:
        resp = api.get(f"/api/v1/namespaces/{NS}/pods", headers={"Impersonate-User": "carol"})
    assert_status(resp, 403, "Forbidden",
                  f'pods is forbidden: User "carol" cannot list resource "pods" in API group "" in the namespace '
                  f'"{NS}": RBAC: clusterrole.rbac.authorization.k8s.io "does-not-exist" not found')


def test_escalation_is_refused_unless_escalate_or_bind(admin: Kubectl, bob: Kubectl) -> None:
    # bob may manage roles and bindings in NS, and read pods there.
    admin.ok("create", "role", "role-manager", "--verb=create,update,patch,get,list",
             "--resource=roles,rolebindings", "-n", NS)
    admin.ok("create", "role", "pod-reader-2", "--verb=get,list", "--resource=pods", "-n", NS)
    admin.ok("create", "rolebinding", "bob-manages", "--role=role-manager", "--user=bob", "-n", NS)
    admin.ok("create", "rolebinding", "bob-reads", "--role=pod-reader-2", "--user=bob", "-n", NS)
    groups = '["developers" "system:authenticated"]'
    refused(bob("create", "role", "deleter", "--verb=delete,get", "--resource=pods", "-n", NS),
            f'roles.rbac.authorization.k8s.io "deleter" is forbidden: user "bob" (groups={groups}) is attempting to '
            'grant RBAC permissions not currently held:\n{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}')
    bob.ok("create", "role", "reader-copy", "--verb=get", "--resource=pods", "-n", NS)  # what bob holds
    refused(bob("create", "rolebinding", "bob-admin", "--clusterrole=admin", "--user=bob", "-n", NS),
            f'rolebindings.rbac.authorization.k8s.io "bob-admin" is forbidden: user "bob" (groups={groups}) is '
            "attempting to grant RBAC permissions not currently held:")
    bob.ok("create", "rolebinding", "carol-reads", "--role=pod-reader-2", "--user=carol", "-n", NS)
    # A patch that widens a role is judged on the patched role.
    refused(bob("patch", "role", "reader-copy", "-n", NS, "--type=json", "-p",
                '[{"op": "add", "path": "/rules/0/verbs/-", "value": "delete"}]'),
            f'roles.rbac.authorization.k8s.io "reader-copy" is forbidden: user "bob" (groups={groups}) is attempting '
            'to grant RBAC permissions not currently held:\n{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}')
    assert admin.ok("get", "role", "reader-copy", "-n", NS, "-o", "jsonpath={.rules[0].verbs}") == '["get"]'
    # With escalate on roles and bind on the admin ClusterRole, both go through.
    admin.ok("create", "role", "escalator", "--verb=escalate", "--resource=roles", "-n", NS)
    admin.ok("create", "role", "binder", "--verb=bind", "--resource=clusterroles", "--resource-name=admin", "-n", NS)
    admin.ok("create", "rolebinding", "bob-escalates", "--role=escalator", "--user=bob", "-n", NS)
    admin.ok("create", "rolebinding", "bob-binds", "--role=binder", "--user=bob", "-n", NS)
    bob.ok("create", "role", "deleter", "--verb=delete,get", "--resource=pods", "-n", NS)
    bob.ok("create", "rolebinding", "bob-admin", "--clusterrole=admin", "--user=bob", "-n", NS)
    assert bob.ok("auth", "can-i", "delete", "secrets", "-n", NS) == "yes\n"  # admin's, now bob's in NS
    assert bob("auth", "can-i", "delete", "secrets", "-n", OTHER).stdout == "no\n"


def test_auth_can_i_list_shows_the_rules(admin: Kubectl, robot: Kubectl) -> None:
    """SelfSubjectRulesReview: the account's rules in the namespace (its Role's, and system:basic-user's,
    system:discovery's and the rest bound to every authenticated user), as `kubectl auth can-i --list`
    prints them."""
    admin("create", "role", "cm-reader", "--verb=get", "--resource=configmaps", "--resource-name=settings", "-n", NS)
    admin("create", "rolebinding", "robot-reads-settings", "--role=cm-reader", f"--serviceaccount={NS}:robot",
          "-n", NS)
    rows = {(r["Resources"], r["Non-Resource URLs"], r["Resource Names"], r["Verbs"])
            for r in table(robot.ok("auth", "can-i", "--list", "-n", NS))}
    assert ("configmaps", "[]", "[settings]", "[get]") in rows
    assert ("selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]") in rows
    assert ("", "[/version]", "[]", "[get]") in rows
    assert not any(r[0] == "secrets" for r in rows)
    everything = {(r["Resources"], r["Verbs"]) for r in table(admin.ok("auth", "can-i", "--list"))}
    assert ("*.*", "[*]") in everything


def test_subject_access_reviews(server: str, lab_pki: LabPKI) -> None:
    path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    local = f"/apis/authorization.k8s.io/v1/namespaces/{NS}/localsubjectaccessreviews"
    pods = {"verb": "list", "resource": "pods", "namespace": NS}
    with token_client(server, lab_pki, f"admin-{SUFFIX}") as api, token_client(server, lab_pki, f"bob-{SUFFIX}") as bob:
        resp = api.post(path, json={"spec": {"user": ACCOUNT, "resourceAttributes": pods}})
        assert resp.status_code == 201 and resp.json()["status"] == {"allowed": True}, resp.text
        # Groups are as given: without system:serviceaccounts:NS nothing binds a user by group.
        resp = api.post(path, json={"spec": {"user": "nobody", "resourceAttributes": pods}})
        assert resp.json()["status"] == {"allowed": False}
        resp = api.post(path, json={"spec": {"user": "x", "groups": ["system:masters"],
                                             "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})
        assert resp.json()["status"] == {"allowed": True}
        assert_status(api.post(path, json={"spec": {"resourceAttributes": pods}}), 422, "Invalid",
                      'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least '
                      "one of user or group must be specified")
        resp = api.post(local, json={"spec": {"user": ACCOUNT, "resourceAttributes": pods}})
        assert resp.status_code == 201 and resp.json()["status"]["allowed"] is True, resp.text
        assert resp.json()["metadata"]["namespace"] == NS
        assert_status(api.post(local, json={"spec": {"user": ACCOUNT, "resourceAttributes": {**pods,
                                                                                             "namespace": OTHER}}}),
                      400, "BadRequest", f"spec.resourceAttributes.namespace must match namespace: {NS}")
        # Asking about others is itself authorized: bob holds no SubjectAccessReview create.
        assert_status(bob.post(path, json={"spec": {"user": "x", "resourceAttributes": pods}}), 403, "Forbidden",
                      'subjectaccessreviews.authorization.k8s.io is forbidden: User "bob" cannot create resource '
                      '"subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope')


# kube 1.33's bootstrap ClusterRoles for certificates.k8s.io (plugin/pkg/auth/authorizer/rbac/bootstrappolicy's
# testdata/cluster-roles.yaml): name -> rules, verbs sorted as kube stores them.
CSR = "certificates.k8s.io"
CSR_ROLES = {
    "system:node-bootstrapper": [{"apiGroups": [CSR], "resources": ["certificatesigningrequests"],
                                  "verbs": ["create", "get", "list", "watch"]}],
    "system:certificates.k8s.io:certificatesigningrequests:nodeclient": [
        {"apiGroups": [CSR], "resources": ["certificatesigningrequests/nodeclient"], "verbs": ["create"]}],
    "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient": [
        {"apiGroups": [CSR], "resources": ["certificatesigningrequests/selfnodeclient"], "verbs": ["create"]}],
    **{f"system:certificates.k8s.io:{role}": [{"apiGroups": [CSR], "resources": ["signers"], "verbs": ["approve"],
                                               "resourceNames": [f"kubernetes.io/{signer}"]}]
       for role, signer in (("kube-apiserver-client-approver", "kube-apiserver-client"),
                            ("kube-apiserver-client-kubelet-approver", "kube-apiserver-client-kubelet"),
                            ("kubelet-serving-approver", "kubelet-serving"),
                            ("legacy-unknown-approver", "legacy-unknown"))},
}


def test_the_certificate_roles_kube_ships_and_what_they_grant(admin: Kubectl, robot: Kubectl,
                                                              server: str, lab_pki: LabPKI) -> None:
    for name, rules in CSR_ROLES.items():
        role = json.loads(admin.ok("get", "clusterrole", name, "-o", "json"))
        assert role["rules"] == rules, name
        assert role["metadata"]["labels"] == {"kubernetes.io/bootstrapping": "rbac-defaults"}
        assert role["metadata"]["annotations"] == {"rbac.authorization.kubernetes.io/autoupdate": "true"}
    # Bound to nobody by kube; the robot may do none of it until a binding says so.
    assert robot("auth", "can-i", "create", "certificatesigningrequests").stdout == "no\n"
    assert robot("auth", "can-i", "create", "certificatesigningrequests", "--subresource=selfnodeclient"
                 ).stdout == "no\n"
    binding = f"robot-node-bootstrapper-{SUFFIX}"
    admin.ok("create", "clusterrolebinding", binding, "--clusterrole=system:node-bootstrapper",
             f"--serviceaccount={NS}:robot")
    admin.ok("create", "clusterrolebinding", f"{binding}-self",
             "--clusterrole=system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
             f"--serviceaccount={NS}:robot")
    try:
        for verb in ("create", "get", "list", "watch"):
            assert robot("auth", "can-i", verb, "certificatesigningrequests").stdout == "yes\n", verb
        assert robot("auth", "can-i", "delete", "certificatesigningrequests").stdout == "no\n"
        assert robot("auth", "can-i", "create", "certificatesigningrequests", "--subresource=selfnodeclient"
                     ).stdout == "yes\n"
        assert robot("auth", "can-i", "create", "certificatesigningrequests", "--subresource=nodeclient"
                     ).stdout == "no\n"
        refused(robot("get", "secrets", "-n", NS),
                f'secrets is forbidden: User "{ACCOUNT}" cannot list resource "secrets" in API group "" in the '
                f'namespace "{NS}"')
        # The approver role, through a SubjectAccessReview as the csrapproving admission asks it.
        with token_client(server, lab_pki, f"admin-{SUFFIX}") as api:
            def may_approve(user: str, signer: str) -> bool:
                review = api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json={
                    "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                    "spec": {"user": user, "resourceAttributes": {"group": CSR, "resource": "signers",
                                                                  "verb": "approve", "name": signer}}})
                assert review.status_code == 201, review.text
                return bool(review.json()["status"]["allowed"])
            assert not may_approve("bob", "kubernetes.io/kubelet-serving")
            admin.ok("create", "clusterrolebinding", f"bob-approves-{SUFFIX}",
                     "--clusterrole=system:certificates.k8s.io:kubelet-serving-approver", "--user=bob")
            assert may_approve("bob", "kubernetes.io/kubelet-serving")
            assert not may_approve("bob", "kubernetes.io/kube-apiserver-client")
    finally:
        admin("delete", "clusterrolebinding", binding, f"{binding}-self", f"bob-approves-{SUFFIX}")


def test_a_node_may_request_its_certificate(server: str, lab_pki: LabPKI, tmp_path: Path) -> None:
    """system:node's rules (NodeRules, which the Node authorizer applies): create, get, list and watch
    CertificateSigningRequests, as a kubelet rotating its client certificate does; not delete them."""
    node = token_kubectl(server, lab_pki, tmp_path / "node", f"node-{SUFFIX}")
    for verb in ("create", "get", "list", "watch"):
        assert node("auth", "can-i", verb, "certificatesigningrequests").stdout == "yes\n", verb
    assert node("auth", "can-i", "delete", "certificatesigningrequests").stdout == "no\n"

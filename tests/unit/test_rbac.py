"""The RBAC authorizer's pure parts (apiserver/rbac.py), table by table: rule matching as RuleAllows has it,
subjects as appliesToUser, the authorizer's walk over bindings and its `RBAC: ... not found` reason, the
escalation check's coverage and message, and the authorizer chain (authz.verdict) with --authorization-mode."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import authz, bootstrappolicy, rbac
from apiserver.requestinfo import RequestInfo, parse
from kubelab.tokenfile import UserInfo

ALICE = UserInfo("alice", "", ("devs", "system:authenticated"))
ROBOT = UserInfo("system:serviceaccount:team:robot", "", ("system:serviceaccounts", "system:serviceaccounts:team",
                                                         "system:authenticated"))


def req(method: str, path: str) -> RequestInfo:
    path, _, query = path.partition("?")
    return parse(method, path, query.encode())


@pytest.mark.parametrize(("rule", "method", "path", "allowed"), [
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, "GET", "/api/v1/namespaces/a/pods/p", True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, "GET", "/api/v1/namespaces/a/pods", False),  # list
    ({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}, "GET", "/api/v1/namespaces/a/pods", True),
    ({"verbs": ["watch"], "apiGroups": [""], "resources": ["pods"]}, "GET", "/api/v1/pods?watch=1", True),
    ({"verbs": ["watch"], "apiGroups": [""], "resources": ["pods"]}, "GET", "/api/v1/pods", False),
    ({"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]}, "DELETE", "/api/v1/namespaces/a/pods/p", True),
    ({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]}, "GET", "/api/v1/namespaces/a/pods/p", False),
    ({"verbs": ["get"], "apiGroups": ["*"], "resources": ["deployments"]}, "GET",
     "/apis/apps/v1/namespaces/a/deployments/d", True),
    # Subresources: named, `*/<sub>`, or `*`; the resource alone does not cover them.
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, "GET", "/api/v1/namespaces/a/pods/p/log", False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}, "GET", "/api/v1/namespaces/a/pods/p/log", True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}, "GET", "/api/v1/namespaces/a/pods/p", False),
    ({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["*/scale"]}, "PUT",
     "/apis/apps/v1/namespaces/a/deployments/d/scale", True),
    ({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["*/scale"]}, "PUT",
     "/apis/apps/v1/namespaces/a/deployments/d", False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["*"]}, "GET", "/api/v1/namespaces/a/pods/p/status", True),
    # resourceNames: only requests that name one of them (a list names none).
    ({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["c"]}, "GET",
     "/api/v1/namespaces/a/configmaps/c", True),
    ({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["c"]}, "GET",
     "/api/v1/namespaces/a/configmaps/d", False),
    ({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["c"]}, "GET",
     "/api/v1/namespaces/a/configmaps", False),
    # nonResourceURLs: exact, `*`, or a prefix ending in `*`; never resource requests.
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, "GET", "/healthz", True),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, "GET", "/healthz/etcd", False),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz/*"]}, "GET", "/healthz/etcd", True),
    ({"verbs": ["get"], "nonResourceURLs": ["/apis*"]}, "GET", "/apisx", True),
    ({"verbs": ["get"], "nonResourceURLs": ["*"]}, "GET", "/anything", True),
    ({"verbs": ["post"], "nonResourceURLs": ["*"]}, "GET", "/anything", False),
    ({"verbs": ["get"], "nonResourceURLs": ["*"]}, "GET", "/api/v1/namespaces/a/pods/p", False),
    ({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"]}, "GET", "/healthz", False),
    ({"verbs": "get", "apiGroups": [""], "resources": ["pods"]}, "GET", "/api/v1/namespaces/a/pods/p", False),  # junk
])
def test_rule_allows(rule: dict[str, Any], method: str, path: str, allowed: bool) -> None:
    assert rbac.rule_allows(rule, req(method, path)) is allowed


@pytest.mark.parametrize(("subject", "user", "namespace", "applies"), [
    ({"kind": "User", "name": "alice"}, ALICE, "", True),
    ({"kind": "User", "name": "bob"}, ALICE, "", False),
    ({"kind": "Group", "name": "devs"}, ALICE, "", True),
    ({"kind": "Group", "name": "system:serviceaccounts:team"}, ROBOT, "", True),
    ({"kind": "ServiceAccount", "name": "robot", "namespace": "team"}, ROBOT, "", True),
    ({"kind": "ServiceAccount", "name": "robot"}, ROBOT, "team", True),  # the binding's namespace
    ({"kind": "ServiceAccount", "name": "robot"}, ROBOT, "", False),  # none at all
    ({"kind": "ServiceAccount", "name": "robot", "namespace": "other"}, ROBOT, "team", False),
    ({"kind": "User", "name": "system:serviceaccount:team:robot"}, ROBOT, "", True),
    ({"kind": "Robot", "name": "alice"}, ALICE, "", False),
])
def test_applies_to(subject: dict[str, str], user: UserInfo, namespace: str, applies: bool) -> None:
    assert rbac.applies_to(subject, user, namespace) is applies


def role(kind: str, name: str, rules: list[dict[str, Any]], namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"kind": kind, "metadata": meta, "rules": rules}


def binding(name: str, kind: str, role_name: str, subjects: list[dict[str, str]], namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name},
            "subjects": subjects}


POLICY = rbac.Policy.of(
    cluster_roles=[role("ClusterRole", "reader", [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])],
    roles=[role("Role", "writer", [{"verbs": ["create"], "apiGroups": [""], "resources": ["pods"]}], "team")],
    cluster_role_bindings=[binding("gone", "ClusterRole", "missing", [{"kind": "Group", "name": "devs"}])],
    role_bindings=[
        binding("w", "Role", "writer", [{"kind": "ServiceAccount", "name": "robot"}], "team"),
        binding("r", "ClusterRole", "reader", [{"kind": "ServiceAccount", "name": "robot"}], "team"),
        binding("elsewhere", "ClusterRole", "reader", [{"kind": "ServiceAccount", "name": "robot",
                                                        "namespace": "team"}], "other")])


@pytest.mark.parametrize(("user", "method", "path", "verdict"), [
    (ROBOT, "POST", "/api/v1/namespaces/team/pods", (True, "")),
    (ROBOT, "GET", "/api/v1/namespaces/team/pods", (True, "")),  # a ClusterRole bound in the namespace
    (ROBOT, "GET", "/api/v1/namespaces/other/pods", (True, "")),  # bound there by its namespace
    (ROBOT, "GET", "/api/v1/pods", (False, "")),  # RoleBindings give nothing cluster-wide
    (ROBOT, "DELETE", "/api/v1/namespaces/team/pods/p", (False, "")),
    (ALICE, "GET", "/api/v1/namespaces/team/pods",
     (False, 'RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found')),
])
def test_the_authorizer(user: UserInfo, method: str, path: str, verdict: tuple[bool, str]) -> None:
    assert rbac.authorize(POLICY, user, req(method, path)) == verdict


def test_the_chain_of_modes() -> None:
    masters = UserInfo("root", "", ("system:masters", "system:authenticated"))
    node = UserInfo("system:node:n1", "", ("system:nodes", "system:authenticated"))
    create_pods = req("POST", "/api/v1/namespaces/team/pods")
    assert authz.verdict(masters, create_pods, policy=None) == (True, "")  # the privileged group first
    assert authz.verdict(ROBOT, create_pods, policy=POLICY) == (True, "")
    assert authz.verdict(ROBOT, create_pods, policy=POLICY, modes=("Node",)) == (False, "")
    assert authz.verdict(ROBOT, create_pods, policy=None, modes=("AlwaysAllow",)) == (True, "")
    assert authz.verdict(ROBOT, create_pods, policy=POLICY, modes=("AlwaysDeny", "RBAC")) == (True, "")
    assert authz.verdict(ALICE, create_pods, policy=POLICY, modes=("AlwaysDeny", "RBAC")) == (
        False, 'Everything is forbidden.\nRBAC: clusterrole.rbac.authorization.k8s.io "missing" not found')
    lease = req("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n2")
    assert authz.verdict(node, lease, policy=POLICY) == (
        False, "can only access node lease with the same name as the requesting node")
    assert authz.verdict(node, req("GET", "/api/v1/secrets"), policy=POLICY, modes=("RBAC",)) == (False, "")


@pytest.mark.parametrize(("text", "modes"), [("Node,RBAC", ("Node", "RBAC")), (" RBAC ", ("RBAC",)),
                                             ("AlwaysAllow", ("AlwaysAllow",))])
def test_parse_modes(text: str, modes: tuple[str, ...]) -> None:
    assert authz.parse_modes(text) == modes


@pytest.mark.parametrize(("text", "message"), [
    ("", "at least one authorization-mode must be passed"),
    ("Node,ABAC", "authorization-mode 'ABAC' is not a valid mode"),
    ("RBAC,RBAC", "authorization-mode 'RBAC,RBAC' has mode specified more than once"),
])
def test_bad_modes(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace(".", r"\.") + "$"):
        authz.parse_modes(text)


@pytest.mark.parametrize(("owner", "requested", "missing"), [
    ([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
     [{"verbs": ["get", "delete"], "apiGroups": ["apps"], "resources": ["deployments"]}], []),
    ([{"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments"]}],
     [{"verbs": ["get", "delete", "list"], "apiGroups": ["apps"], "resources": ["deployments"]}],
     ['{APIGroups:["apps"], Resources:["deployments"], Verbs:["delete" "list"]}']),
    ([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]}],
     [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a", "b"]}],
     ['{APIGroups:[""], Resources:["pods"], ResourceNames:["b"], Verbs:["get"]}']),
    ([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
     [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]}], []),
    ([{"verbs": ["get"], "apiGroups": ["apps"], "resources": ["*/scale"]}],
     [{"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments/scale", "deployments"]}],
     ['{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}']),
    ([{"verbs": ["get"], "nonResourceURLs": ["/logs/*"]}], [{"verbs": ["get"], "nonResourceURLs": ["/logs/x", "/x"]}],
     ['{NonResourceURLs:["/x"], Verbs:["get"]}']),
])
def test_escalation_coverage(owner: list[dict[str, Any]], requested: list[dict[str, Any]], missing: list[str]) -> None:
    assert sorted(rbac.compact_string(r) for r in rbac.compact(rbac.uncovered(owner, requested))) == missing


def test_escalation_message() -> None:
    missing = rbac.uncovered([], [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["secrets"]}])
    assert rbac.escalation_message(ROBOT, missing, []) == (
        'user "system:serviceaccount:team:robot" (groups=["system:serviceaccounts" "system:serviceaccounts:team" '
        '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}')


def test_the_bootstrap_policy_aggregates_view_into_edit_into_admin() -> None:
    roles, bindings = bootstrappolicy.policy()
    by_name = {r["metadata"]["name"]: r for r in roles}
    policy = rbac.Policy.of(cluster_roles=roles, roles=[], cluster_role_bindings=bindings, role_bindings=[
        binding("v", "ClusterRole", "view", [{"kind": "User", "name": "v"}], "team"),
        binding("a", "ClusterRole", "admin", [{"kind": "User", "name": "a"}], "team")])
    viewer, admin = UserInfo("v", "", ("system:authenticated",)), UserInfo("a", "", ("system:authenticated",))
    assert rbac.authorize(policy, viewer, req("GET", "/api/v1/namespaces/team/pods"))[0]
    assert not rbac.authorize(policy, viewer, req("GET", "/api/v1/namespaces/team/secrets"))[0]
    assert rbac.authorize(policy, admin, req("GET", "/api/v1/namespaces/team/secrets"))[0]  # edit's, through admin
    assert rbac.authorize(policy, admin, req("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles"))[0]
    assert rbac.authorize(policy, viewer, req("GET", "/apis"))[0]  # system:discovery
    assert not rbac.authorize(policy, viewer, req("GET", "/api/v1/namespaces/else/pods"))[0]
    for r in roles:
        assert r["metadata"]["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
        assert r["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] == "true"
    assert by_name["cluster-admin"]["rules"] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                                                 {"verbs": ["*"], "nonResourceURLs": ["*"]}]


def test_kubelabs_components_may_do_their_work_under_the_bootstrap_policy() -> None:
    """Each component's user, as `kubelab up` and the compose lab name them, allowed what it writes."""
    roles, bindings = bootstrappolicy.policy()
    local_roles, local_bindings = bootstrappolicy.namespaced()
    policy = rbac.Policy.of(cluster_roles=roles, roles=local_roles, cluster_role_bindings=bindings,
                            role_bindings=local_bindings)
    authenticated = ("system:authenticated",)
    dns = UserInfo("system:kube-dns", "", authenticated)
    scheduler = UserInfo("system:kube-scheduler", "", authenticated)
    controllers = UserInfo("system:kube-controller-manager", "", authenticated)
    for user, method, path in [
        (dns, "POST", "/api/v1/namespaces/kube-system/services"),
        (dns, "PUT", "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/kube-dns"),
        (dns, "GET", "/api/v1/services?watch=1"),
        (scheduler, "POST", "/api/v1/namespaces/a/pods/p/binding"),
        (scheduler, "POST", "/apis/kubelab.dev/v1/traces"),
        (controllers, "POST", "/api/v1/namespaces/a/pods"),
        (controllers, "POST", "/apis/apps/v1/namespaces/a/replicasets"),
        (controllers, "PUT", "/apis/apps/v1/namespaces/a/deployments/d/status"),
        (controllers, "POST", "/api/v1/namespaces/a/serviceaccounts"),
        (controllers, "POST", "/api/v1/namespaces/a/configmaps"),
        (controllers, "DELETE", "/apis/batch/v1/namespaces/a/jobs/j"),
        (controllers, "PUT", "/api/v1/namespaces/a/finalize"),
        (controllers, "PUT", "/apis/rbac.authorization.k8s.io/v1/clusterroles/view"),
        (controllers, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles?watch=1"),
    ]:
        assert rbac.authorize(policy, user, req(method, path))[0], (user.name, method, path)
    assert not rbac.authorize(policy, dns, req("POST", "/api/v1/namespaces/default/services"))[0]
    assert not rbac.authorize(policy, scheduler, req("POST", "/api/v1/namespaces/a/secrets"))[0]

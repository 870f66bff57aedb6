"""The RBAC snapshot's index by subject (apiserver/rbac.py) against the plain walk over every binding it
replaces: over random policies (subjects by user, group and service account, with and without a namespace,
junk subjects, missing and unsupported roles) and random users and requests, the index visits the same
bindings' rules in the same order, so the verdicts, the reasons (`RBAC: [... not found, ...]`, whose order
is the walk's) and RulesFor's answers are the walk's."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver import rbac
from apiserver.requestinfo import RequestInfo, parse
from kubelab.tokenfile import UserInfo

NAMESPACES = ("team", "other")
USER_NAMES = ("alice", "bob", "system:serviceaccount:team:robot", "system:serviceaccount:other:robot",
              "system:serviceaccount:team:builder")
GROUPS = ("devs", "ops", "system:authenticated", "system:serviceaccounts", "system:serviceaccounts:team")
ROLE_NAMES = ("view", "edit", "gone", "pods-only")
REQUESTS = (("GET", "/api/v1/namespaces/team/pods"), ("DELETE", "/api/v1/namespaces/team/pods/p"),
            ("GET", "/api/v1/namespaces/other/secrets/s"), ("POST", "/apis/apps/v1/namespaces/other/deployments"),
            ("GET", "/api/v1/namespaces/ghost/pods"), ("GET", "/api/v1/nodes"), ("GET", "/healthz"),
            ("GET", "/apis"))

rules = st.lists(st.one_of(
    st.fixed_dictionaries({"verbs": st.lists(st.sampled_from(["get", "list", "delete", "create", "*"]), max_size=2),
                           "apiGroups": st.lists(st.sampled_from(["", "apps", "*"]), max_size=2),
                           "resources": st.lists(st.sampled_from(["pods", "secrets", "deployments", "nodes", "*"]),
                                                 max_size=2)}),
    st.fixed_dictionaries({"verbs": st.lists(st.sampled_from(["get", "*"]), max_size=1),
                           "nonResourceURLs": st.lists(st.sampled_from(["/healthz", "/apis", "*"]), max_size=1)})),
    max_size=3)

subject = st.one_of(
    st.fixed_dictionaries({"kind": st.sampled_from(["User", "Group", "ServiceAccount", "Bogus"]),
                           "name": st.one_of(st.sampled_from([*USER_NAMES, *GROUPS, "robot", "builder", ""]),
                                             st.none(), st.integers(0, 1))},
                          optional={"namespace": st.sampled_from([*NAMESPACES, "", "ghost"])}),
    st.sampled_from(["alice", 7, None]))  # not a subject at all: names nobody, in the walk as in the index
subjects = st.one_of(st.lists(subject, max_size=4), st.sampled_from([None, "alice", {"kind": "User"}]))


@st.composite
def bindings(draw: st.DrawFn, namespace: str | None) -> dict[str, Any]:
    meta = {"name": "b"} if namespace is None else {"name": "b", "namespace": namespace}
    kind = draw(st.sampled_from(["ClusterRole", "Role", "Bogus"] if namespace else ["ClusterRole", "ClusterRole", "Role"]))
    return {"metadata": meta, "roleRef": {"kind": kind, "name": draw(st.sampled_from(ROLE_NAMES))},
            "subjects": draw(subjects)}


@st.composite
def policies(draw: st.DrawFn) -> rbac.Policy:
    cluster_roles = [{"metadata": {"name": name}, "rules": draw(rules)}
                     for name in draw(st.lists(st.sampled_from(ROLE_NAMES), unique=True))]
    roles = [{"metadata": {"name": name, "namespace": ns}, "rules": draw(rules)}
             for ns in NAMESPACES for name in draw(st.lists(st.sampled_from(ROLE_NAMES), unique=True, max_size=2))]
    cluster_bindings = draw(st.lists(bindings(None), max_size=12))
    role_bindings = [b for ns in NAMESPACES for b in draw(st.lists(bindings(ns), max_size=12))]
    return rbac.Policy.of(cluster_roles=cluster_roles, roles=roles, cluster_role_bindings=cluster_bindings,
                          role_bindings=role_bindings)


users = st.builds(lambda name, groups: UserInfo(name, "", tuple(groups)), st.sampled_from(USER_NAMES),
                  st.lists(st.sampled_from(GROUPS), max_size=4))  # duplicates too: a group named twice


def request(method: str, path: str) -> RequestInfo:
    return parse(method, path, b"")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy=policies(), user=users)
def test_the_index_visits_what_the_walk_visits(policy: rbac.Policy, user: UserInfo) -> None:
    for method, path in REQUESTS:
        info = request(method, path)
        walked = list(rbac.walk_rules(policy, user, info.namespace))
        assert list(rbac.visit_rules(policy, user, info.namespace)) == walked, (method, path)
        assert rbac.authorize(policy, user, info) == rbac.verdict_of(walked, info), (method, path)
    for namespace in ("", *NAMESPACES, "ghost"):
        walked_rules = [rule for found, _ in rbac.walk_rules(policy, user, namespace) for rule in found]
        walked_problems = [problem for _, problem in rbac.walk_rules(policy, user, namespace) if problem]
        assert rbac.rules_for(policy, user, namespace) == (walked_rules, walked_problems), namespace


def test_missing_roles_are_reported_in_the_walks_order() -> None:
    """Cluster bindings before the namespace's, each list in its stored order, whichever key found them."""
    def binding(name: str, role: str, subject: dict[str, str], namespace: str | None = None) -> dict[str, Any]:
        meta = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
        return {"metadata": meta, "roleRef": {"kind": "ClusterRole", "name": role}, "subjects": [subject]}

    policy = rbac.Policy.of(cluster_roles=[], roles=[], cluster_role_bindings=[
        binding("1", "by-group", {"kind": "Group", "name": "devs"}),
        binding("2", "by-name", {"kind": "User", "name": "system:serviceaccount:team:robot"}),
    ], role_bindings=[
        binding("3", "by-account", {"kind": "ServiceAccount", "name": "robot"}, "team"),
        binding("4", "by-group-too", {"kind": "Group", "name": "devs"}, "team"),
    ])
    robot = UserInfo("system:serviceaccount:team:robot", "", ("devs",))
    allowed, reason = rbac.authorize(policy, robot, request("GET", "/api/v1/namespaces/team/pods"))
    assert not allowed
    assert reason == ('RBAC: [clusterrole.rbac.authorization.k8s.io "by-group" not found, '
                      'clusterrole.rbac.authorization.k8s.io "by-name" not found, '
                      'clusterrole.rbac.authorization.k8s.io "by-account" not found, '
                      'clusterrole.rbac.authorization.k8s.io "by-group-too" not found]')
    assert rbac.naming(policy.cluster_index, UserInfo("carol", "", ("ops",))) == ()


def test_a_binding_naming_a_user_twice_is_visited_once() -> None:
    """By name and as its service account, or one group twice: one binding, one visit (as the walk's `any`)."""
    twice = {"metadata": {"name": "b", "namespace": "team"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
             "subjects": [{"kind": "User", "name": "system:serviceaccount:team:robot"},
                          {"kind": "ServiceAccount", "name": "robot"}, {"kind": "Group", "name": "devs"},
                          {"kind": "Group", "name": "devs"}]}
    policy = rbac.Policy.of(cluster_roles=[], roles=[], cluster_role_bindings=[], role_bindings=[twice])
    for user in (UserInfo("system:serviceaccount:team:robot", "", ()), UserInfo("carol", "", ("devs", "devs"))):
        missing = 'clusterrole.rbac.authorization.k8s.io "view" not found'
        assert list(rbac.visit_rules(policy, user, "team")) == [((), missing)]


def test_a_missing_role_named_by_two_bindings_is_reported_once() -> None:
    """The reason is utilerrors.NewAggregate's message: duplicates once, brackets only for several."""
    def binding(role: str) -> dict[str, Any]:
        return {"metadata": {"name": role}, "roleRef": {"kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "User", "name": "alice"}]}

    alice = UserInfo("alice", "", ())
    twice = rbac.Policy.of(cluster_roles=[], roles=[], cluster_role_bindings=[binding("gone"), binding("gone")],
                           role_bindings=[])
    assert rbac.authorize(twice, alice, request("GET", "/healthz")) == (
        False, 'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found')
    three = rbac.Policy.of(cluster_roles=[], roles=[], role_bindings=[],
                           cluster_role_bindings=[binding("gone"), binding("lost"), binding("gone")])
    assert rbac.authorize(three, alice, request("GET", "/healthz")) == (
        False, ('RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, '
                'clusterrole.rbac.authorization.k8s.io "lost" not found]'))

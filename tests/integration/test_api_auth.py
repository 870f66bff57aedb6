"""Authentication and node authorization against a real API server started with --token-auth-file:
401 for anonymous and bad tokens (public health and version paths excepted), everything for system:masters,
nothing but discovery for a user RBAC does not bind, and a node confined to what its kubelet writes, with
kube-apiserver's Forbidden messages."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest
from apitools import assert_status, pod, service

from kubelab.etcd import Etcd

SUFFIX = secrets.token_hex(3)
NODE1, NODE2 = f"authn-{SUFFIX}-1", f"authn-{SUFFIX}-2"
NS = f"authn-{SUFFIX}"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@pytest.fixture(scope="module")
def server(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tokens = tmp_path_factory.mktemp("auth") / "tokens.csv"
    tokens.write_text(f'admin-{SUFFIX},alice,1,"system:masters"\n'
                      f"node1-{SUFFIX},system:node:{NODE1},n1,system:nodes\n"
                      f"node2-{SUFFIX},system:node:{NODE2},n2,system:nodes\n"
                      f"fake-{SUFFIX},system:node:{NODE2},n3\n"
                      f"bob-{SUFFIX},bob,4\n")
    with start_apiserver(etcd.url, token_auth_file=str(tokens)) as url:
        with client(url, "admin") as admin:
            admin.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
        yield url


def client(url: str, who: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {who}-{SUFFIX}"} if who else {}
    return httpx.Client(base_url=url, headers=headers, timeout=10)


@pytest.fixture
def admin(server: str) -> Iterator[httpx.Client]:
    with client(server, "admin") as api:
        yield api


@pytest.fixture
def node1(server: str) -> Iterator[httpx.Client]:
    with client(server, "node1") as api:
        yield api


def forbidden(resp: httpx.Response, message: str) -> None:
    assert_status(resp, 403, "Forbidden", message)


@pytest.mark.parametrize("path", ["/api/v1/namespaces", "/api", "/apis", f"/api/v1/namespaces/{NS}/pods"])
def test_anonymous_requests_are_unauthorized(server: str, path: str) -> None:
    with client(server, None) as anonymous:
        assert_status(anonymous.get(path), 401, "Unauthorized", "Unauthorized")


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz", "/version"])
def test_public_info_is_served_to_anonymous(server: str, path: str) -> None:
    with client(server, None) as anonymous:
        assert anonymous.get(path).status_code == 200
        assert_status(anonymous.post(path), 401, "Unauthorized", "Unauthorized")


@pytest.mark.parametrize("header", ["Bearer not-a-token", "Bearer admin-other"])
def test_a_bad_token_is_unauthorized_even_for_public_paths(server: str, header: str) -> None:
    for path in ("/healthz", "/api/v1/nodes"):
        resp = httpx.get(f"{server}{path}", headers={"Authorization": header})
        assert_status(resp, 401, "Unauthorized", "Unauthorized")


def test_a_header_without_a_bearer_token_is_anonymous(server: str) -> None:
    headers = {"Authorization": "Basic YWxpY2U6c2VjcmV0"}
    assert httpx.get(f"{server}/healthz", headers=headers).status_code == 200
    assert_status(httpx.get(f"{server}/api/v1/nodes", headers=headers), 401, "Unauthorized", "Unauthorized")


def test_system_masters_may_do_everything(admin: httpx.Client) -> None:
    name = f"admin-{secrets.token_hex(2)}"
    assert admin.post(f"/api/v1/namespaces/{NS}/services", json=service(name)).status_code == 201
    assert admin.delete(f"/api/v1/namespaces/{NS}/services/{name}").status_code == 200


@pytest.mark.parametrize("who", ["bob", "fake"])
def test_other_users_may_do_nothing_until_bound(server: str, who: str) -> None:
    """Node,RBAC: a user nothing binds (one merely named like a node included) gets kube's 403."""
    user = "bob" if who == "bob" else f"system:node:{NODE2}"
    with client(server, who) as api:
        forbidden(api.post(f"/api/v1/namespaces/{NS}/services", json=service("x")),
                  f'services is forbidden: User "{user}" cannot create resource "services" in API group "" in the '
                  f'namespace "{NS}"')
        assert api.get("/apis").status_code == 200  # system:discovery, bound to system:authenticated


def test_a_node_reads_everything(node1: httpx.Client) -> None:
    for path in ("/api/v1/pods", "/api/v1/nodes", f"/api/v1/namespaces/{NS}/services", "/api",
                 "/apis/discovery.k8s.io/v1/endpointslices", f"{LEASES}?watch=true&timeoutSeconds=1"):
        assert node1.get(path).status_code == 200, path


def test_a_node_writes_its_own_node_only(node1: httpx.Client, admin: httpx.Client) -> None:
    created = node1.post("/api/v1/nodes", json={"metadata": {"name": NODE1}})
    assert created.status_code == 201, created.text
    node = created.json()
    node["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    assert node1.put(f"/api/v1/nodes/{NODE1}/status", json=node).status_code == 200
    assert node1.patch(f"/api/v1/nodes/{NODE1}", json={"metadata": {"labels": {"x": "y"}}},
                       headers={"Content-Type": "application/merge-patch+json"}).status_code == 200
    other = f'nodes "{NODE2}" is forbidden: node "{NODE1}" is not allowed to modify node "{NODE2}"'
    forbidden(node1.post("/api/v1/nodes", json={"metadata": {"name": NODE2}}), other)
    assert admin.post("/api/v1/nodes", json={"metadata": {"name": NODE2}}).status_code == 201
    forbidden(node1.patch(f"/api/v1/nodes/{NODE2}/status", json={"status": {}},
                          headers={"Content-Type": "application/merge-patch+json"}), other)
    forbidden(node1.put(f"/api/v1/nodes/{NODE2}", json={"metadata": {"name": NODE2}}), other)
    forbidden(node1.delete(f"/api/v1/nodes/{NODE1}"),
              f'nodes "{NODE1}" is forbidden: User "system:node:{NODE1}" cannot delete resource "nodes" in API group '
              '"" at the cluster scope')
    # Server-side apply cannot create another node under the URL of its own.
    resp = node1.patch(f"/api/v1/nodes/{NODE1}-x?fieldManager=kubelet",
                       content=f'{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{NODE2}-y"}}}}',
                       headers={"Content-Type": "application/apply-patch+yaml"})
    assert resp.status_code in (400, 403), resp.text
    assert admin.get(f"/api/v1/nodes/{NODE2}-y").status_code == 404


def test_a_node_renews_its_own_lease_only(node1: httpx.Client, admin: httpx.Client) -> None:
    lease = node1.post(LEASES, json={"metadata": {"name": NODE1}, "spec": {"holderIdentity": NODE1}})
    assert lease.status_code == 201, lease.text
    assert node1.put(f"{LEASES}/{NODE1}", json=lease.json()).status_code == 200
    forbidden(node1.post(LEASES, json={"metadata": {"name": NODE2}}),
              f'leases.coordination.k8s.io "{NODE2}" is forbidden: can only access node lease with the same name as '
              "the requesting node")
    assert admin.post(LEASES, json={"metadata": {"name": NODE2}}).status_code == 201
    forbidden(node1.delete(f"{LEASES}/{NODE2}"),
              f'leases.coordination.k8s.io "{NODE2}" is forbidden: User "system:node:{NODE1}" cannot delete resource '
              '"leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node '
              "lease with the same name as the requesting node")
    forbidden(node1.post(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases", json={"metadata": {"name": NODE1}}),
              f'leases.coordination.k8s.io is forbidden: User "system:node:{NODE1}" cannot create resource "leases" '
              f'in API group "coordination.k8s.io" in the namespace "{NS}": can only access leases in the '
              '"kube-node-lease" system namespace')


def bound_pod(name: str, node: str) -> dict[str, Any]:
    return pod(name, nodeName=node)


def test_a_node_reports_on_and_deletes_its_own_pods_only(node1: httpx.Client, admin: httpx.Client) -> None:
    pods = f"/api/v1/namespaces/{NS}/pods"
    mine = admin.post(pods, json=bound_pod("mine", NODE1)).json()
    theirs = admin.post(pods, json=bound_pod("theirs", NODE2)).json()
    mine["status"] = {**mine["status"], "phase": "Running"}
    assert node1.put(f"{pods}/mine/status", json=mine).status_code == 200
    theirs["status"] = {**theirs["status"], "phase": "Running"}
    forbidden(node1.put(f"{pods}/theirs/status", json=theirs),
              f'pods "theirs" is forbidden: node "{NODE1}" can only update pod status for pods with spec.nodeName '
              "set to itself")
    forbidden(node1.delete(f"{pods}/theirs"),
              f'pods "theirs" is forbidden: node "{NODE1}" can only delete pods with spec.nodeName set to itself')
    forbidden(node1.patch(f"{pods}/mine", json={"metadata": {"labels": {"a": "b"}}},
                          headers={"Content-Type": "application/merge-patch+json"}),
              f'pods "mine" is forbidden: User "system:node:{NODE1}" cannot patch resource "pods" in API group "" in '
              f'the namespace "{NS}"')
    forbidden(node1.post(pods, json=bound_pod("new", NODE1)),
              f'pods "new" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "{NODE1}" '
              "can only create mirror pods")
    forbidden(node1.post(f"{pods}/theirs/binding", json={"target": {"name": NODE1}}),
              f'pods "theirs" is forbidden: User "system:node:{NODE1}" cannot create resource "pods/binding" in API '
              f'group "" in the namespace "{NS}"')
    # The kubelet's final delete of its own pod, and a 404 for one that is not there.
    assert node1.delete(f"{pods}/mine?gracePeriodSeconds=0").status_code == 200
    assert node1.delete(f"{pods}/gone").status_code == 404
    assert admin.get(f"{pods}/theirs").json()["status"]["phase"] == "Pending"  # nothing was written


def test_a_node_creates_events_and_nothing_else(node1: httpx.Client) -> None:
    # An event about a cluster-scoped object lives in `default`, as kubelet posts its Node's (kube's
    # legacyValidateEvent refuses one elsewhere whose involvedObject has no namespace).
    event = {"metadata": {"name": f"e-{SUFFIX}"}, "involvedObject": {"kind": "Node", "name": NODE1},
             "reason": "Starting", "message": "Starting kubelet.", "type": "Normal"}
    assert node1.post("/api/v1/namespaces/default/events", json=event).status_code == 201
    for method, path, body in [
        ("POST", f"/api/v1/namespaces/{NS}/services", service("s")),
        ("POST", f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"name": "c"}}),
        ("POST", "/api/v1/namespaces", {"metadata": {"name": f"{NS}-2"}}),
        ("DELETE", f"/api/v1/namespaces/{NS}/pods", None),
        ("POST", f"/apis/apps/v1/namespaces/{NS}/deployments", {"metadata": {"name": "d"}}),
    ]:
        resp = node1.request(method, path, json=body)
        assert_status(resp, 403, "Forbidden")
        assert f'User "system:node:{NODE1}" cannot' in resp.json()["message"], resp.text


def can_i(api: httpx.Client, **attributes: str) -> dict[str, Any]:
    """What `kubectl auth can-i` sends, and the status it reads back."""
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": attributes}}
    resp = api.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review)
    assert resp.status_code == 201, resp.text
    assert resp.json()["spec"] == review["spec"]
    status: dict[str, Any] = resp.json()["status"]
    return status


def test_self_subject_access_reviews_answer_with_the_authorizers_verdicts(server: str, admin: httpx.Client,
                                                                          node1: httpx.Client) -> None:
    assert can_i(admin, verb="create", resource="services", namespace=NS) == {"allowed": True}
    assert can_i(node1, verb="create", resource="services", namespace=NS) == {"allowed": False}
    assert can_i(node1, verb="patch", resource="nodes", subresource="status", name=NODE1) == {"allowed": True}
    assert can_i(node1, verb="list", resource="secrets") == {"allowed": True}  # kubelab lets nodes read all
    assert can_i(node1, verb="update", group="coordination.k8s.io", resource="leases",
                 namespace="kube-node-lease", name=NODE2) == {
        "allowed": False, "reason": "can only access node lease with the same name as the requesting node"}
    with client(server, None) as anonymous:
        assert_status(anonymous.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json={}), 401,
                      "Unauthorized", "Unauthorized")

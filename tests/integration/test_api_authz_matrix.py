"""Every verb on every path shape, as an admin, a node and an anonymous client, against a real API server
with --token-auth-file: the answers must be the table below, which is what kube-apiserver answers (its
authorizer judges the request before its mux routes it; NodeRestriction runs in the handler, after
routing). The table was written from kube's rules, not read off kubelab.

The row that made this test: `POST /api/v1/watch/namespaces/NS/secrets` with a node's token answered 201
and created a Secret, because the authorizer parsed `watch/` as a read while the router dispatched a
create. A `watch/` path is only ever a GET: 405 for every other method, whoever asks.

Impersonation (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-*`) is honoured for admins, then the request is
judged as the impersonated user; nodes and anonymous clients get kube's 403 for asking.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from apitools import assert_status

from kubelab.etcd import Etcd

SUFFIX = secrets.token_hex(3)
NODE = f"authz-{SUFFIX}"
NS = f"authz-{SUFFIX}"
MERGE = {"Content-Type": "application/merge-patch+json"}
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


@pytest.fixture(scope="module")
def server(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tokens = tmp_path_factory.mktemp("authz") / "tokens.csv"
    tokens.write_text(f'admin-{SUFFIX},alice,1,"system:masters"\n'
                      f"node-{SUFFIX},system:node:{NODE},n1,system:nodes\n")
    with start_apiserver(etcd.url, token_auth_file=str(tokens)) as url:
        with client(url, "admin") as admin:
            admin.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
            admin.post("/api/v1/nodes", json={"metadata": {"name": NODE}}).raise_for_status()
        yield url


def client(url: str, who: str | None, **headers: str) -> httpx.Client:
    if who:
        headers["Authorization"] = f"Bearer {who}-{SUFFIX}"
    return httpx.Client(base_url=url, headers=headers, timeout=30)


# --- the objects a case acts on: made fresh by the admin for every case -----------------------------

def secret(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "labels": {"case": name}},
            "stringData": {"k": "v"}}


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"case": name}},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"case": name}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeName": "some-other-node"}}


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"case": name}}}


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"case": name}}}


def lease(name: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": name}}


SECRETS = f"/api/v1/namespaces/{NS}/secrets"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NS}/deployments"
PODS = f"/api/v1/namespaces/{NS}/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@dataclass(frozen=True)
class Shape:
    """A path shape: the path (with {name} for the case's object), where the admin creates the case's
    object before the request (None: nothing to create), and the kind of object a write sends."""

    path: str
    collection: str | None
    manifest: Callable[[str], dict[str, Any]]
    # The answers, in METHODS order: admin, node (anonymous is 401 everywhere).
    admin: tuple[int, ...]
    node: tuple[int, ...]
    fixed_name: str | None = None  # the object's name when it cannot be the case's own (a node's lease)


SHAPES: dict[str, Shape] = {
    #                                                                  GET  POST  PUT  PATCH DELETE
    "core namespaced collection": Shape(SECRETS, SECRETS, secret,
                                        admin=(200, 201, 405, 405, 200), node=(200, 403, 403, 403, 403)),
    "core namespaced object": Shape(SECRETS + "/{name}", SECRETS, secret,
                                    admin=(200, 405, 200, 200, 200), node=(200, 403, 403, 403, 403)),
    "cluster collection": Shape("/api/v1/namespaces", "/api/v1/namespaces", namespace,
                                admin=(200, 201, 405, 405, 405), node=(200, 403, 403, 403, 403)),
    # Another node's Node: the authorizer lets a node create, update and patch nodes, NodeRestriction
    # then refuses another node's; a POST to a name has no route (405) before admission is asked.
    "cluster object (another node)": Shape("/api/v1/nodes/{name}", "/api/v1/nodes", node,
                                           admin=(200, 405, 200, 200, 200), node=(200, 405, 403, 403, 403)),
    "group namespaced collection": Shape(DEPLOYMENTS, DEPLOYMENTS, deployment,
                                         admin=(200, 201, 405, 405, 200), node=(200, 403, 403, 403, 403)),
    "group namespaced object": Shape(DEPLOYMENTS + "/{name}", DEPLOYMENTS, deployment,
                                     admin=(200, 405, 200, 200, 200), node=(200, 403, 403, 403, 403)),
    # The status of a pod bound to another node: the authorizer allows a node pods/status updates,
    # NodeRestriction refuses them for pods not bound to it.
    "subresource": Shape(PODS + "/{name}/status", PODS, pod,
                         admin=(200, 405, 200, 200, 405), node=(200, 403, 403, 403, 403)),
    "group subresource": Shape(DEPLOYMENTS + "/{name}/scale", DEPLOYMENTS, deployment,
                               admin=(200, 405, 200, 200, 405), node=(200, 403, 403, 403, 403)),
    # watch/ is a verb the authorizer reads as a watch; the mux has it for GET alone.
    "watch/ collection": Shape(f"/api/v1/watch/namespaces/{NS}/secrets", SECRETS, secret,
                               admin=(200, 405, 405, 405, 405), node=(200, 405, 405, 405, 405)),
    "watch/ object": Shape(f"/api/v1/watch/namespaces/{NS}/secrets/{{name}}", SECRETS, secret,
                           admin=(200, 405, 405, 405, 405), node=(200, 405, 405, 405, 405)),
    "watch/ group": Shape(f"/apis/apps/v1/watch/namespaces/{NS}/deployments", DEPLOYMENTS, deployment,
                          admin=(200, 405, 405, 405, 405), node=(200, 405, 405, 405, 405)),
    "watch/ cluster": Shape("/api/v1/watch/nodes", "/api/v1/nodes", node,
                            admin=(200, 405, 405, 405, 405), node=(200, 405, 405, 405, 405)),
    # ?watch=true makes a GET of a collection a watch, and nothing else.
    "?watch=true": Shape(SECRETS + "?watch=true", SECRETS, secret,
                         admin=(200, 201, 405, 405, 200), node=(200, 403, 403, 403, 403)),
    # A namespaced kind across all namespaces: list and watch only.
    "all namespaces": Shape("/api/v1/secrets", SECRETS, secret,
                            admin=(200, 405, 405, 405, 405), node=(200, 403, 403, 403, 403)),
    # What a node may write: its own Lease (a POST to a name has no route).
    "node's own lease": Shape(LEASES + "/{name}", LEASES, lease, fixed_name=NODE,
                              admin=(200, 405, 200, 200, 200), node=(200, 405, 200, 200, 200)),
}


def prepare(admin: httpx.Client, shape: Shape, name: str) -> None:
    """The case's object, fresh: deleted first if a case left it, then created."""
    if shape.collection is None:
        return
    admin.delete(f"{shape.collection}/{name}")
    resp = admin.post(shape.collection, json=shape.manifest(name))
    assert resp.status_code == 201, resp.text


def body_for(admin: httpx.Client, shape: Shape, method: str, name: str, path: str) -> dict[str, Any]:
    """What a client would send: a new object for a POST, the object (or its Scale) read back for a PUT, a
    label for a PATCH, the request's own name wherever the path names none."""
    if method == "POST":
        return shape.manifest(f"{name}-new" if shape.fixed_name is None else name)
    if method == "PATCH":
        if path.endswith("/scale"):
            return {"spec": {"replicas": 2}}
        return {"metadata": {"labels": {"patched": "yes"}}}
    read = admin.get(path) if "{name}" in shape.path and "/watch/" not in path else None
    if read is not None and read.status_code == 200 and read.json().get("kind") not in ("Status", None):
        obj: dict[str, Any] = read.json()
        obj.setdefault("metadata", {}).setdefault("labels", {})["put"] = "yes"
        return obj
    return shape.manifest(name)


def cases() -> Iterator[Any]:
    for shape_id, shape in SHAPES.items():
        for index, method in enumerate(METHODS):
            for who in ("admin", "node", "anonymous"):
                want = {"admin": shape.admin, "node": shape.node}.get(who, (401,) * 5)[index]
                yield pytest.param(shape_id, method, who, want, id=f"{shape_id}-{method}-{who}-{want}")


@pytest.mark.parametrize(("shape_id", "method", "who", "want"), list(cases()))
def test_the_answer_is_kubes(server: str, shape_id: str, method: str, who: str, want: int) -> None:
    shape = SHAPES[shape_id]
    name = shape.fixed_name or f"m{secrets.token_hex(4)}"
    with client(server, "admin") as admin, client(server, None if who == "anonymous" else who) as api:
        prepare(admin, shape, name)
        path = shape.path.format(name=name)
        params: dict[str, str] = {}
        if method == "GET" and ("/watch/" in path or "watch=true" in path):
            params["timeoutSeconds"] = "1"  # a watch that was allowed ends by itself
        if method == "DELETE" and "{name}" not in shape.path:
            params["labelSelector"] = f"case={name}"  # a deletecollection touches only this case's object
        before = admin.get(shape.collection).json() if shape.collection else None
        body = body_for(admin, shape, method, name, path) if method in ("POST", "PUT", "PATCH") else None
        resp = api.request(method, path, params=params, json=body, headers=MERGE if method == "PATCH" else None)
        assert resp.status_code == want, f"{method} {path} as {who}: {resp.status_code} {resp.text[:300]}"
        if want >= 400:
            status = resp.json()
            assert status["kind"] == "Status" and status["code"] == want, status
            assert status["reason"] == {401: "Unauthorized", 403: "Forbidden", 405: "MethodNotAllowed"}[want]
            # A refused request changed nothing: the collection reads back the same, resourceVersions included.
            if shape.collection:
                after = admin.get(shape.collection).json()
                assert _items(after) == _items(before)


def _items(listing: Any) -> list[tuple[str, str]]:
    return sorted((i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in listing["items"])


# --- the messages of the rows that matter ----------------------------------------------------------

def test_a_write_through_a_watch_path_creates_nothing(server: str) -> None:
    """The reported bypass, as it was sent: a node's POST of a Secret into kube-system via `watch/`."""
    name = f"stolen-{SUFFIX}"
    with client(server, "node") as api, client(server, "admin") as admin:
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            resp = api.request(method, f"/api/v1/watch/namespaces/kube-system/secrets/{name}"
                               if method != "POST" else "/api/v1/watch/namespaces/kube-system/secrets",
                               json=secret(name), headers=MERGE if method == "PATCH" else None)
            assert_status(resp, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        assert admin.get(f"/api/v1/namespaces/kube-system/secrets/{name}").status_code == 404
        # Without watch/ the same write is the authorizer's 403, in kube's words.
        assert_status(api.post("/api/v1/namespaces/kube-system/secrets", json=secret(name)), 403, "Forbidden",
                      f'secrets is forbidden: User "system:node:{NODE}" cannot create resource "secrets" in API group '
                      f'"" in the namespace "kube-system"')


def test_a_node_may_not_impersonate(server: str) -> None:
    with client(server, "node", **{"Impersonate-User": "alice"}) as api:
        assert_status(api.get(SECRETS), 403, "Forbidden",
                      f'users "alice" is forbidden: User "system:node:{NODE}" cannot impersonate resource "users" in '
                      'API group "" at the cluster scope')
    with client(server, "node", **{"Impersonate-User": "system:serviceaccount:kube-system:default"}) as api:
        assert_status(api.get(SECRETS), 403, "Forbidden",
                      f'serviceaccounts "default" is forbidden: User "system:node:{NODE}" cannot impersonate resource '
                      '"serviceaccounts" in API group "" in the namespace "kube-system"')
    with client(server, "node", **{"Impersonate-User": "alice", "Impersonate-Extra-Scopes": "view"}) as api:
        resp = api.get(SECRETS)
        assert_status(resp, 403, "Forbidden")
        assert resp.json()["message"].startswith('users "alice" is forbidden')


def test_anonymous_may_not_impersonate(server: str) -> None:
    with client(server, None, **{"Impersonate-User": "alice"}) as api:
        # Authenticated as system:anonymous on a public path, then refused the impersonation.
        assert_status(api.get("/healthz"), 403, "Forbidden",
                      'users "alice" is forbidden: User "system:anonymous" cannot impersonate resource "users" in API '
                      'group "" at the cluster scope')
        assert_status(api.get(SECRETS), 401, "Unauthorized")


def test_an_admin_acts_as_whom_it_impersonates(server: str) -> None:
    as_node = {"Impersonate-User": f"system:node:{NODE}", "Impersonate-Group": "system:nodes"}
    with client(server, "admin", **as_node) as api, client(server, "admin") as admin:
        name = f"imp-{secrets.token_hex(3)}"
        assert_status(api.post(SECRETS, json=secret(name)), 403, "Forbidden",
                      f'secrets is forbidden: User "system:node:{NODE}" cannot create resource "secrets" in API group '
                      f'"" in the namespace "{NS}"')
        assert admin.get(f"{SECRETS}/{name}").status_code == 404
        assert api.get(SECRETS).status_code == 200  # what the node may do, it may
        review = api.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                          json={"spec": {"resourceAttributes": {"verb": "delete", "resource": "secrets",
                                                                "namespace": NS}}})
        assert review.status_code == 201 and review.json()["status"] == {"allowed": False}
    # A service account gets its fixed groups and system:authenticated, and with them what RBAC binds to
    # them: nothing here, as in kube.
    with client(server, "admin", **{"Impersonate-User": f"system:serviceaccount:{NS}:builder"}) as api:
        assert_status(api.post(SECRETS, json=secret(f"sa-{secrets.token_hex(3)}")), 403, "Forbidden",
                      f'secrets is forbidden: User "system:serviceaccount:{NS}:builder" cannot create resource '
                      f'"secrets" in API group "" in the namespace "{NS}"')
        assert_status(api.get(PODS), 403, "Forbidden",
                      f'pods is forbidden: User "system:serviceaccount:{NS}:builder" cannot list resource "pods" in '
                      f'API group "" in the namespace "{NS}"')
    # system:anonymous is not authenticated, whoever it is impersonated by.
    with client(server, "admin", **{"Impersonate-User": "system:anonymous"}) as api:
        assert_status(api.get(SECRETS), 403, "Forbidden",
                      f'secrets is forbidden: User "system:anonymous" cannot list resource "secrets" in API group "" '
                      f'in the namespace "{NS}"')
        assert api.get("/version").status_code == 200


def test_groups_without_a_user_are_refused(server: str) -> None:
    for headers in ({"Impersonate-Group": "system:masters"}, {"Impersonate-Uid": "1234"},
                    {"Impersonate-Extra-Scopes": "view"}):
        with client(server, "admin", **headers) as api:
            resp = api.get(SECRETS)
            assert_status(resp, 400, "BadRequest")
            assert resp.json()["message"].endswith("without impersonating a user")

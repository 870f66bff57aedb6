"""Request attributes as kube's RequestInfoFactory parses them, and the node authorizer's and
NodeRestriction's verdicts in kube-apiserver's words."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.auth import Unauthorized, authenticate
from apiserver.authz import admit_node_write, authorize_node, node_name
from apiserver.requestinfo import RequestInfo
from apiserver.requestinfo import parse as request_info
from kubelab.tokenfile import UserInfo

NODE1 = UserInfo("system:node:node-1", "n1", ("system:nodes", "system:authenticated"))


@pytest.mark.parametrize(("method", "path", "query", "want"), [
    pytest.param("GET", "/api/v1/namespaces/default/pods", {}, ("list", "", "pods", "", "default", ""), id="list"),
    pytest.param("GET", "/api/v1/namespaces/default/pods", {"watch": "true"},
                 ("watch", "", "pods", "", "default", ""), id="watch param"),
    pytest.param("GET", "/api/v1/watch/namespaces/default/pods/web", {}, ("watch", "", "pods", "", "default", "web"),
                 id="legacy watch path"),
    pytest.param("PUT", "/api/v1/namespaces/default/pods/web/status", {},
                 ("update", "", "pods", "status", "default", "web"), id="status"),
    pytest.param("DELETE", "/api/v1/namespaces/default/pods", {}, ("deletecollection", "", "pods", "", "default", ""),
                 id="deletecollection"),
    pytest.param("DELETE", "/api/v1/namespaces/kube-system", {},
                 ("delete", "", "namespaces", "", "kube-system", "kube-system"), id="a namespace is in itself"),
    pytest.param("PUT", "/api/v1/namespaces/x/finalize", {}, ("update", "", "namespaces", "finalize", "x", "x"),
                 id="namespace subresource"),
    pytest.param("PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1", {},
                 ("patch", "coordination.k8s.io", "leases", "", "kube-node-lease", "node-1"), id="group"),
    pytest.param("POST", "/api/v1/nodes", {}, ("create", "", "nodes", "", "", ""), id="cluster scoped create"),
    # `watch` in the path is the verb, whatever the method: the router serves it for GET only (405 else).
    pytest.param("POST", "/api/v1/watch/namespaces/kube-system/secrets", {},
                 ("watch", "", "secrets", "", "kube-system", ""), id="POST on a watch path is a watch"),
    pytest.param("DELETE", "/apis/apps/v1/watch/namespaces/default/deployments/web", {},
                 ("watch", "apps", "deployments", "", "default", "web"), id="DELETE on a watch path is a watch"),
    pytest.param("GET", "/api/v1/namespaces/default/pods", {"watch": "false"}, ("list", "", "pods", "", "default", ""),
                 id="watch=false lists"),
    pytest.param("GET", "/api/v1/namespaces/default/pods", {"watch": "0"}, ("list", "", "pods", "", "default", ""),
                 id="watch=0 lists"),
    pytest.param("GET", "/api/v1/namespaces/default/pods", {"watch": ""}, ("watch", "", "pods", "", "default", ""),
                 id="any other watch value watches"),
    pytest.param("GET", "/api/v1/namespaces/default/pods/web", {"watch": "true"},
                 ("get", "", "pods", "", "default", "web"), id="a named GET stays a get"),
    pytest.param("POST", "/api/v1/namespaces//pods", {}, ("create", "", "pods", "", "", ""),
                 id="empty namespace segment"),
    pytest.param("GET", "/api/v1/proxy/namespaces/default/pods/web/extra", {},
                 ("proxy", "", "pods", "", "default", "web"), id="proxy has no subresource"),
])
def test_request_info(method: str, path: str, query: dict[str, str], want: tuple[str, ...]) -> None:
    info = request_info(method, path, query)
    assert info.is_resource
    assert (info.verb, info.group, info.resource, info.subresource, info.namespace, info.name) == want


@pytest.mark.parametrize("path", ["/healthz", "/version", "/api", "/apis/apps", "/metrics"])
def test_non_resource_paths(path: str) -> None:
    assert not request_info("GET", path, {}).is_resource


@pytest.mark.parametrize(("header", "user"), [
    pytest.param(None, None, id="no header"),
    pytest.param("Basic dXNlcjpwYXNz", None, id="not a bearer token"),
    pytest.param("Bearer", None, id="no token"),
    pytest.param("Bearer  t1", None, id="empty token before a second space"),
    pytest.param("bearer t1", UserInfo("u", "1", ("g", "system:authenticated")), id="scheme case-insensitive"),
])
def test_authenticate(header: str | None, user: UserInfo | None) -> None:
    assert authenticate(header, {"t1": UserInfo("u", "1", ("g",))}) == user


def test_unknown_bearer_token_is_refused() -> None:
    with pytest.raises(Unauthorized):
        authenticate("Bearer nope", {"t1": UserInfo("u")})


@pytest.mark.parametrize(("user", "node"), [
    pytest.param(NODE1, "node-1", id="node"),
    pytest.param(UserInfo("system:node:node-1"), None, id="not in system:nodes"),
    pytest.param(UserInfo("alice", groups=("system:nodes",)), None, id="not named like a node"),
    pytest.param(UserInfo("system:node:", groups=("system:nodes",)), "", id="names no node"),
])
def test_node_identity(user: UserInfo, node: str | None) -> None:
    assert node_name(user) == node


def verdict(method: str, path: str, **admission: Any) -> str | None:
    info = request_info(method, path, {})
    refusal = authorize_node(NODE1, "node-1", info) or admit_node_write("node-1", info, **admission)
    return refusal.message if refusal else None


def pod(node: str) -> dict[str, Any]:
    return {"metadata": {"name": "web"}, "spec": {"nodeName": node}}


@pytest.mark.parametrize(("method", "path", "admission", "message"), [
    pytest.param("GET", "/api/v1/secrets", {}, None, id="reads are allowed"),
    pytest.param("POST", "/api/v1/nodes", {"body": {"metadata": {"name": "node-1"}}}, None, id="register itself"),
    pytest.param("POST", "/api/v1/nodes", {"body": {"metadata": {"name": "node-2"}}},
                 'nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"', id="register another"),
    pytest.param("PUT", "/api/v1/nodes/node-2/status", {},
                 'nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"',
                 id="another's status"),
    pytest.param("DELETE", "/api/v1/nodes/node-1", {},
                 'nodes "node-1" is forbidden: User "system:node:node-1" cannot delete resource "nodes" in API group "" '
                 "at the cluster scope", id="delete itself"),
    pytest.param("PUT", "/api/v1/namespaces/default/pods/web/status", {"stored": pod("node-1")}, None,
                 id="status of its pod"),
    pytest.param("PATCH", "/api/v1/namespaces/default/pods/web/status", {"stored": pod("node-2")},
                 'pods "web" is forbidden: node "node-1" can only update pod status for pods with spec.nodeName set '
                 "to itself", id="status of another's pod"),
    pytest.param("DELETE", "/api/v1/namespaces/default/pods/web", {"stored": pod("node-1")}, None, id="delete its pod"),
    pytest.param("DELETE", "/api/v1/namespaces/default/pods/web", {"stored": pod("")},
                 'pods "web" is forbidden: node "node-1" can only delete pods with spec.nodeName set to itself',
                 id="delete an unbound pod"),
    pytest.param("PATCH", "/api/v1/namespaces/default/pods/web", {},
                 'pods "web" is forbidden: User "system:node:node-1" cannot patch resource "pods" in API group "" in '
                 'the namespace "default"', id="patch a pod"),
    pytest.param("POST", "/api/v1/namespaces/default/pods/web/binding", {},
                 'pods "web" is forbidden: User "system:node:node-1" cannot create resource "pods/binding" in API '
                 'group "" in the namespace "default"', id="bind a pod"),
    pytest.param("POST", "/api/v1/namespaces/default/pods", {"body": pod("node-1")},
                 'pods "web" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "node-1" '
                 "can only create mirror pods", id="create a pod"),
    pytest.param("POST", "/api/v1/namespaces/default/pods", {"node_uid": "u1", "body": {
        "metadata": {"name": "m", "annotations": {"kubernetes.io/config.mirror": "x"}, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "u1", "controller": True}]},
        "spec": {"nodeName": "node-1"}}}, None, id="create a mirror pod"),
    pytest.param("POST", "/api/v1/namespaces/default/events", {}, None, id="events"),
    pytest.param("DELETE", "/api/v1/namespaces/default/events/e", {},
                 'events "e" is forbidden: User "system:node:node-1" cannot delete resource "events" in API group "" '
                 'in the namespace "default"', id="delete an event"),
    pytest.param("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                 {"body": {"metadata": {"name": "node-1"}}}, None, id="its lease"),
    pytest.param("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                 {"body": {"metadata": {"name": "node-2"}}},
                 'leases.coordination.k8s.io "node-2" is forbidden: can only access node lease with the same name as '
                 "the requesting node", id="another's lease"),
    pytest.param("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-2", {},
                 'leases.coordination.k8s.io "node-2" is forbidden: User "system:node:node-1" cannot update resource '
                 '"leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node '
                 "lease with the same name as the requesting node", id="renew another's lease"),
    pytest.param("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", {},
                 'leases.coordination.k8s.io is forbidden: User "system:node:node-1" cannot create resource "leases" '
                 'in API group "coordination.k8s.io" in the namespace "default": can only access leases in the '
                 '"kube-node-lease" system namespace', id="a lease elsewhere"),
    pytest.param("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", {}, None,
                 id="request its client certificate"),
    pytest.param("DELETE", "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1", {},
                 'certificatesigningrequests.certificates.k8s.io "csr-1" is forbidden: User "system:node:node-1" '
                 'cannot delete resource "certificatesigningrequests" in API group "certificates.k8s.io" at the '
                 "cluster scope", id="delete a certificate request"),
    pytest.param("POST", "/api/v1/namespaces/default/services", {},
                 'services is forbidden: User "system:node:node-1" cannot create resource "services" in API group "" '
                 'in the namespace "default"', id="create a service"),
    pytest.param("PUT", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web", {},
                 'endpointslices.discovery.k8s.io "web" is forbidden: User "system:node:node-1" cannot update '
                 'resource "endpointslices" in API group "discovery.k8s.io" in the namespace "default"',
                 id="update an endpointslice"),
])
def test_node_verdicts(method: str, path: str, admission: dict[str, Any], message: str | None) -> None:
    assert verdict(method, path, **admission) == message


def test_forbidden_status_details() -> None:
    info = RequestInfo(path="/x", verb="create", is_resource=True, group="coordination.k8s.io", resource="leases",
                       namespace="kube-node-lease")
    refusal = admit_node_write("node-1", info, body={"metadata": {"name": "node-2"}})
    assert refusal is not None
    assert refusal.status() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden", "code": 403,
        "message": refusal.message,
        "details": {"name": "node-2", "group": "coordination.k8s.io", "kind": "leases"}}

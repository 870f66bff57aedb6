"""PATCH bodies as kube-apiserver applies them: RFC 7386 merge patch, RFC 6902 JSON patch and
strategic merge patch (apimachinery's strategicpatch), including the exact patch `kubectl apply`
sends (reference/kubectl-and-clients.md §4). Cases marked "(upstream ...)" replay apimachinery's
own patch_test.go cases on a real merge-keyed field."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from apiserver.errors import StatusError
from apiserver.patch import apply_patch, json_patch, merge_patch, strategic_merge_patch


@pytest.mark.parametrize(("original", "patch", "result"), [
    pytest.param({"a": 1}, {"b": 2}, {"a": 1, "b": 2}, id="add"),
    pytest.param({"a": 1}, {"a": 2}, {"a": 2}, id="replace"),
    pytest.param({"a": 1, "b": 2}, {"a": None}, {"b": 2}, id="null deletes"),
    pytest.param({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}, {"a": {"c": 2, "d": 3}}, id="nested"),
    pytest.param({"a": [1, 2]}, {"a": [3]}, {"a": [3]}, id="arrays are replaced"),
    pytest.param({"a": {"b": 1}}, {"a": "x"}, {"a": "x"}, id="object replaced by a scalar"),
    pytest.param({"a": "x"}, {"a": {"b": None, "c": 1}}, {"a": {"c": 1}}, id="nulls dropped in a new object"),
    pytest.param({"a": 1}, {"missing": None}, {"a": 1}, id="deleting a missing key"),
    pytest.param({"spec": {"ports": [{"port": 80, "name": "a"}]}}, {"spec": {"ports": [{"port": 81}]}},
                 {"spec": {"ports": [{"port": 81}]}}, id="no merge keys in a merge patch"),
])
def test_merge_patch(original: dict[str, Any], patch: dict[str, Any], result: dict[str, Any]) -> None:
    before = copy.deepcopy(original)
    assert merge_patch(original, patch) == result
    assert original == before  # the stored object is never modified in place


SVC: dict[str, Any] = {"metadata": {"name": "web", "labels": {"app": "web"}},
       "spec": {"ports": [{"port": 80, "targetPort": 8080}], "selector": {"app": "web"}}}


@pytest.mark.parametrize(("patch", "result"), [
    pytest.param([{"op": "add", "path": "/metadata/labels/tier", "value": "front"}],
                 {**SVC, "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}}}, id="add"),
    pytest.param([{"op": "replace", "path": "/spec/ports/0/port", "value": 81}],
                 {**SVC, "spec": {**SVC["spec"], "ports": [{"port": 81, "targetPort": 8080}]}}, id="replace"),
    pytest.param([{"op": "remove", "path": "/spec/selector"}],
                 {**SVC, "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}, id="remove"),
    pytest.param([{"op": "test", "path": "/metadata/name", "value": "web"},
                  {"op": "add", "path": "/spec/ports/-", "value": {"port": 443}}],
                 {**SVC, "spec": {**SVC["spec"], "ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}},
                 id="passing test, then append"),
])
def test_json_patch(patch: list[dict[str, Any]], result: dict[str, Any]) -> None:
    before = copy.deepcopy(SVC)
    assert json_patch(SVC, patch) == result
    assert SVC == before


@pytest.mark.parametrize(("patch", "cause"), [
    pytest.param([{"op": "replace", "path": "/metadata/name", "value": "x"},
                  {"op": "test", "path": "/metadata/labels/app", "value": "api"}],
                 "testing value /metadata/labels/app failed: test failed", id="failing test"),
])
def test_json_patch_failing_test_is_all_or_nothing(patch: list[dict[str, Any]], cause: str) -> None:
    before = copy.deepcopy(SVC)
    with pytest.raises(StatusError) as err:
        json_patch(SVC, patch)
    status = err.value.status()
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["message"] == "the server rejected our request due to an error in our request"
    assert status["details"] == {"causes": [{"message": cause}]}
    assert SVC == before


@pytest.mark.parametrize(("patch",), [
    pytest.param([{"op": "remove", "path": "/spec/nothing"}], id="remove a missing path"),
    pytest.param([{"op": "replace", "path": "/spec/ports/5/port", "value": 1}], id="index out of range"),
    pytest.param([{"op": "frobnicate", "path": "/spec"}], id="unknown op"),
])
def test_json_patch_errors_are_422(patch: list[dict[str, Any]]) -> None:
    with pytest.raises(StatusError) as err:
        json_patch(SVC, patch)
    assert (err.value.code, err.value.reason) == (422, "Invalid")
    assert err.value.details and err.value.details["causes"][0]["message"]


def test_json_patch_must_be_a_list() -> None:
    with pytest.raises(StatusError) as err:
        json_patch(SVC, {"op": "add"})
    assert (err.value.code, err.value.message) == (
        400, "json: cannot unmarshal object into Go value of type jsonpatch.Patch")


def pod_spec(*containers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"spec": {"containers": list(containers), **extra}}


def c(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


@pytest.mark.parametrize(("kind", "original", "patch", "result"), [
    # lists with a merge key
    pytest.param("Service", {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}},
                 {"spec": {"ports": [{"port": 443, "targetPort": 8443}]}},
                 {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https", "targetPort": 8443}]}},
                 id="service ports merge by port"),
    pytest.param("Pod", pod_spec(c("app", image="a:1"), c("log", image="l:1")),
                 {"spec": {"containers": [c("app", image="a:2")]}},
                 pod_spec(c("app", image="a:2"), c("log", image="l:1")), id="containers merge by name"),
    pytest.param("Pod", pod_spec(c("app", env=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])),
                 {"spec": {"containers": [c("app", env=[{"name": "B", "value": "3"}])]}},
                 pod_spec(c("app", env=[{"name": "A", "value": "1"}, {"name": "B", "value": "3"}])),
                 id="env merges by name inside a container"),
    pytest.param("Deployment", {"spec": {"template": {"spec": {"containers": [c("c", image="nginx:1")]}}}},
                 {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "c"}],
                                                 "containers": [{"image": "nginx:2", "name": "c"}]}}}},
                 {"spec": {"template": {"spec": {"containers": [c("c", image="nginx:2")]}}}},
                 id="the Deployment patch kubectl apply sends"),
    # directives
    pytest.param("Service", {"spec": {"ports": [{"port": 80}, {"port": 443}]}},
                 {"spec": {"ports": [{"$patch": "delete", "port": 80}]}}, {"spec": {"ports": [{"port": 443}]}},
                 id="$patch delete in a list"),
    pytest.param("Service", {"spec": {"ports": [{"port": 80, "name": "a"}]}},
                 {"spec": {"ports": [{"port": 80, "name": "b"}, {"$patch": "delete", "port": 80}]}},
                 {"spec": {"ports": [{"port": 80, "name": "b"}]}}, id="deletions apply before merges"),
    pytest.param("Service", {"spec": {"ports": [{"port": 80}, {"port": 443}]}},
                 {"spec": {"ports": [{"port": 8080}, {"$patch": "replace"}]}}, {"spec": {"ports": [{"port": 8080}]}},
                 id="$patch replace in a list"),
    pytest.param("Service", {"spec": {"selector": {"app": "web", "tier": "front"}}},
                 {"spec": {"selector": {"$patch": "replace", "app": "api"}}}, {"spec": {"selector": {"app": "api"}}},
                 id="$patch replace on a map"),
    # apimachinery leaves an empty map, which the typed object then omits on the wire; kubelab stores the
    # JSON as is, so it drops the key to read back the same.
    pytest.param("Service", {"spec": {"selector": {"app": "web"}, "type": "ClusterIP"}},
                 {"spec": {"selector": {"$patch": "delete"}}}, {"spec": {"type": "ClusterIP"}},
                 id="$patch delete on a map"),
    pytest.param("Service", {"spec": {"ports": [{"port": 80}, {"port": 443}, {"port": 53}]}},
                 {"spec": {"$setElementOrder/ports": [{"port": 53}, {"port": 80}, {"port": 443}]}},
                 {"spec": {"ports": [{"port": 53}, {"port": 80}, {"port": 443}]}}, id="$setElementOrder reorders"),
    pytest.param("Pod", {"metadata": {"finalizers": ["a", "b", "c"]}},
                 {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}, {"metadata": {"finalizers": ["a", "c"]}},
                 id="$deleteFromPrimitiveList"),
    pytest.param("Pod", {"metadata": {"name": "x"}}, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}},
                 {"metadata": {"name": "x"}}, id="$deleteFromPrimitiveList on a missing list"),
    pytest.param("Pod", {"metadata": {"finalizers": ["a", "b"]}}, {"metadata": {"finalizers": ["b", "c"]}},
                 {"metadata": {"finalizers": ["a", "b", "c"]}}, id="finalizers merge as a set"),
    pytest.param("Pod", {"metadata": {"finalizers": ["a", "b"]}}, {"metadata": {"finalizers": ["c", "a"]}},
                 {"metadata": {"finalizers": ["c", "a", "b"]}}, id="finalizers take the patch's order"),
    pytest.param("Pod", {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}},
                 {"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"],
                                        "hostPath": {"path": "/data"}}]}},
                 {"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/data"}}]}},
                 id="$retainKeys drops the old volume source"),
    pytest.param("Pod", {"spec": {"strategy": {"type": "Recreate", "x": 1}}},
                 {"spec": {"strategy": {"$retainKeys": ["type"], "type": "RollingUpdate", "rollingUpdate": {"a": 1}}}},
                 {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"a": 1}}}},
                 id="$retainKeys clears the live keys only, before merging"),
    # plain map semantics
    pytest.param("Service", {"metadata": {"labels": {"a": "1", "b": "2"}}}, {"metadata": {"labels": {"a": None}}},
                 {"metadata": {"labels": {"b": "2"}}}, id="null deletes a key"),
    pytest.param("Pod", {"spec": {"tolerations": [{"key": "a"}, {"key": "b"}]}},
                 {"spec": {"tolerations": [{"key": "c"}]}}, {"spec": {"tolerations": [{"key": "c"}]}},
                 id="list without a merge key is replaced"),
    pytest.param("Service", {"spec": {"externalIPs": ["1.1.1.1"]}}, {"spec": {"externalIPs": ["2.2.2.2"]}},
                 {"spec": {"externalIPs": ["2.2.2.2"]}}, id="scalar list without merge strategy is replaced"),
    pytest.param("Service", {"spec": {}}, {"spec": {"ports": [{"port": 80, "$patch": "merge"}],
                                                    "$setElementOrder/ports": [{"port": 80}]}},
                 {"spec": {"ports": [{"port": 80}]}}, id="directives are never stored"),
    pytest.param("Pod", {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}},
                 {"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]}},
                 {"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}, {"uid": "1", "name": "a"}]}},
                 id="ownerReferences merge by uid"),
    # list order, as apimachinery's patch_test.go states it
    pytest.param("Pod", pod_spec(c("1"), c("2", value="b"), c("3")),
                 {"spec": {"containers": [c("3", value="c"), c("1", value="a"), c("2", other="x")]}},
                 pod_spec(c("3", value="c"), c("1", value="a"), c("2", value="b", other="x")),
                 id="(upstream) preserve the order from the patch in a merging list"),
    pytest.param("Pod", pod_spec(c("1"), c("2", value="b"), c("3")),
                 {"spec": {"containers": [c("3", value="c"), c("1", value="a")]}},
                 pod_spec(c("2", value="b"), c("3", value="c"), c("1", value="a")),
                 id="(upstream) preserve the order from the patch in a merging list 2"),
    pytest.param("Pod", {"metadata": {"finalizers": ["1", "2", "3"]}}, {"metadata": {"finalizers": ["3", "1"]}},
                 {"metadata": {"finalizers": ["2", "3", "1"]}},
                 id="(upstream) preserve the order from the patch in a merging int list"),
    pytest.param("Pod", pod_spec(c("1", other="a"), c("2", value="2", other="b")),
                 {"spec": {"$setElementOrder/containers": [{"name": "4"}, {"name": "1"}, {"name": "2"}, {"name": "3"}],
                           "containers": [c("4", value="4"), c("3", value="3")]}},
                 pod_spec(c("4", value="4"), c("1", other="a"), c("2", value="2", other="b"), c("3", value="3")),
                 id="(upstream) merge lists of maps"),
    pytest.param("Pod", {"metadata": {"finalizers": ["1", "2", "3", "4"]}},
                 {"metadata": {"$setElementOrder/finalizers": ["1", "2"],
                               "$deleteFromPrimitiveList/finalizers": ["3"]}},
                 {"metadata": {"finalizers": ["1", "2", "4"]}}, id="(upstream) delete items in lists of scalars"),
    pytest.param("Pod", pod_spec(c("a"), c("b")), {"spec": {"containers": [c("new")]}},
                 pod_spec(c("new"), c("a"), c("b")), id="a new item without an order goes first"),
    pytest.param("Pod", pod_spec(c("a"), c("injected"), c("b")),
                 {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                           "containers": [c("b", image="x")]}},
                 pod_spec(c("injected"), c("b", image="x"), c("a")),
                 id="server-only items keep their live place among the ordered ones"),
])
def test_strategic_merge_patch(kind: str, original: dict[str, Any], patch: dict[str, Any],
                               result: dict[str, Any]) -> None:
    before = copy.deepcopy(original)
    assert strategic_merge_patch(original, patch, kind) == result
    assert original == before


def test_unknown_patch_directive_is_a_bad_request() -> None:
    with pytest.raises(StatusError) as err:
        strategic_merge_patch({"spec": {}}, {"spec": {"selector": {"$patch": "frobnicate"}}}, "Service")
    assert err.value.code == 400


LIVE_SERVICE: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Service",
    "metadata": {
        "name": "demo", "namespace": "default", "uid": "u1", "resourceVersion": "42",
        "creationTimestamp": "2024-01-01T00:00:00Z", "labels": {"app": "demo"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": '{"old":true}\n'}},
    "spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "type": "ClusterIP",
             "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
             "internalTrafficPolicy": "Cluster", "selector": {"app": "demo"},
             "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]},
    "status": {"loadBalancer": {}}}

KUBECTL_APPLY_PATCH = json.loads(
    '{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{...new...}\\n"},'
    '"labels":{"app":"demo2"}},'
    '"spec":{"$setElementOrder/ports":[{"port":81}],'
    '"ports":[{"name":"http","port":81,"targetPort":8080},{"$patch":"delete","port":80}],'
    '"selector":{"app":"demo2"}}}')


def test_kubectl_apply_update_of_a_live_service() -> None:
    patched = apply_patch("application/strategic-merge-patch+json", LIVE_SERVICE, KUBECTL_APPLY_PATCH, "Service")
    expected = copy.deepcopy(LIVE_SERVICE)
    expected["metadata"]["labels"] = {"app": "demo2"}
    expected["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{...new...}\n"}
    expected["spec"]["selector"] = {"app": "demo2"}
    # Port 80 is gone, 81 came in as sent; the registry defaults its protocol afterwards.
    expected["spec"]["ports"] = [{"name": "http", "port": 81, "targetPort": 8080}]
    assert patched == expected
    assert "$" not in json.dumps(patched)


def test_applying_the_same_patch_again_changes_nothing() -> None:
    once = strategic_merge_patch(LIVE_SERVICE, KUBECTL_APPLY_PATCH, "Service")
    assert strategic_merge_patch(once, KUBECTL_APPLY_PATCH, "Service") == once


@pytest.mark.parametrize(("content_type", "patch", "ports"), [
    pytest.param("application/merge-patch+json", {"spec": {"ports": [{"port": 81}]}}, [{"port": 81}],
                 id="merge patch replaces the list"),
    pytest.param("application/strategic-merge-patch+json", {"spec": {"ports": [{"port": 81}]}},
                 [{"port": 81}, {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                 id="strategic merge patch merges by port"),
    pytest.param("application/apply-patch+yaml", {"spec": {"ports": [{"port": 80, "name": "web"}]}},
                 [{"name": "web", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                 id="server-side apply approximated by a keyed merge"),
    pytest.param("application/json-patch+json", [{"op": "remove", "path": "/spec/ports/0"}], [],
                 id="json patch"),
])
def test_apply_patch_dispatch(content_type: str, patch: Any, ports: list[dict[str, Any]]) -> None:
    assert apply_patch(content_type, LIVE_SERVICE, patch, "Service")["spec"]["ports"] == ports


def test_unsupported_patch_type() -> None:
    with pytest.raises(StatusError) as err:
        apply_patch("text/plain", LIVE_SERVICE, {}, "Service")
    assert err.value.code == 415


# --- what a JSON patch may make (kube-apiserver's bounds) ------------------------------------------

def test_a_json_patch_has_at_most_10000_operations() -> None:
    ops = [{"op": "test", "path": "/metadata/name", "value": "web"}] * 10_001
    with pytest.raises(StatusError) as err:
        json_patch(SVC, ops)
    assert (err.value.code, err.value.reason, err.value.message) == (
        413, "RequestEntityTooLarge",
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001")
    assert json_patch(SVC, ops[:10_000]) == SVC


def test_copies_may_add_at_most_3_mib() -> None:
    doc = {"x": {"s": "a" * 1000}}
    ops = [{"op": "copy", "from": "/x", "path": f"/x/c{i}"} for i in range(20)]
    with pytest.raises(StatusError) as err:
        json_patch(doc, ops)
    assert err.value.code == 422
    [cause] = (err.value.details or {})["causes"]
    # Copy i adds the JSON of x as it then is: 1,010 bytes doubling (plus its keys) each time; the 12th
    # takes the sum past 3 MiB.
    assert cause["message"].startswith("Unable to complete the copy, the accumulated size increase of copy is ")
    assert cause["message"].endswith(", exceeding the limit 3145728")
    assert json_patch(doc, ops[:11])["x"]["c10"]["c9"]["s"] == "a" * 1000


def test_a_json_patch_may_not_nest_deeper_than_a_body_may() -> None:
    """Each copy of /x into /x/a nests one level deeper; 300 of them are well within the copy budget."""
    ops = [{"op": "copy", "from": "/x", "path": "/x/a"} for _ in range(300)]
    with pytest.raises(StatusError) as err:
        json_patch({"x": {}}, ops)
    assert err.value.code == 422
    assert (err.value.details or {})["causes"] == [{"message": "exceeded max depth of 128"}]
    assert json_patch({"x": {}}, ops[:100])["x"]["a"]["a"]["a"] is not None


@pytest.mark.parametrize(("patch", "cause"), [
    pytest.param([{"op": "remove", "path": "/spec/nothing"}],
                 "error in remove for path: '/spec/nothing': Unable to remove nonexistent key: nothing: missing value",
                 id="remove a missing key"),
    pytest.param([{"op": "add", "path": "/spec/ports/7", "value": 1}],
                 "error in add for path: '/spec/ports/7': Unable to access invalid index: 7: invalid index referenced",
                 id="add past the end"),
    pytest.param([{"op": "add", "path": "/nope/x", "value": 1}],
                 'add operation does not apply: doc is missing path: "/nope/x": missing value', id="missing parent"),
    pytest.param([{"op": "frobnicate", "path": "/spec"}], "Unexpected kind: frobnicate", id="unknown op"),
])
def test_json_patch_failures_read_as_evanphx_json_patch_words_them(patch: list[dict[str, Any]], cause: str) -> None:
    with pytest.raises(StatusError) as err:
        json_patch(SVC, patch)
    assert (err.value.details or {})["causes"] == [{"message": cause}]


def test_json_patch_takes_negative_indices_as_the_go_library_does() -> None:
    patched = json_patch({"a": [1, 2, 3]}, [{"op": "remove", "path": "/a/-1"}, {"op": "add", "path": "/a/-1", "value": 9}])
    assert patched == {"a": [1, 2, 9]}

"""The bytes kube-apiserver writes, where clients compare them: every JSON answer is Go's
json.Encoder output (HTML-safe escapes, a final line feed), a Status lists `details` before `code`
(metav1.Status's field order), and /version is indented without a final line feed."""

from __future__ import annotations

import httpx
from apitools import CORE, create, ns_path, unique_name


def test_not_found_status_is_byte_for_byte_kube_apiservers(api: httpx.Client) -> None:
    resp = api.get(ns_path("pods", "default", "no-such-pod"))
    assert resp.status_code == 404
    assert resp.content == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                            b'"message":"pods \\"no-such-pod\\" not found","reason":"NotFound",'
                            b'"details":{"name":"no-such-pod","kind":"pods"},"code":404}\n')


def test_objects_and_lists_end_with_a_line_feed_and_escape_html(api: httpx.Client) -> None:
    name = unique_name("wire")
    create(api, ns_path("configmaps", "default"), {"apiVersion": "v1", "kind": "ConfigMap",
                                                   "metadata": {"name": name}, "data": {"q": "<a & b>\u2028"}})
    got = api.get(ns_path("configmaps", "default", name))
    assert got.content.endswith(b"}\n")
    assert b'"q":"\\u003ca \\u0026 b\\u003e\\u2028"' in got.content
    assert got.json()["data"]["q"] == "<a & b>\u2028"  # the same value, only spelled as Go spells it
    assert api.get(f"{CORE}/namespaces/default/configmaps").content.endswith(b"}\n")
    api.delete(ns_path("configmaps", "default", name))


def test_version_is_indented_as_write_raw_json_writes_it(api: httpx.Client) -> None:
    body = api.get("/version").content
    assert body.startswith(b'{\n  "major": "1",\n  "minor": ')
    assert body.endswith(b'"\n}')


def test_empty_metadata_collections_are_not_stored(api: httpx.Client) -> None:
    """ObjectMeta's labels, annotations, finalizers and ownerReferences are omitempty in Go: sent empty,
    kube-apiserver stores and returns none of them."""
    name = unique_name("empty")
    made = create(api, ns_path("configmaps", "default"), {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": []}})
    assert not {"labels", "annotations", "finalizers", "ownerReferences"} & set(made["metadata"])
    api.delete(ns_path("configmaps", "default", name))


def test_invalid_names_the_group_kind_and_orders_details_as_go(api: httpx.Client) -> None:
    """apierrors.NewInvalid: the message names the GroupKind (`Lease.coordination.k8s.io`), details are
    name, group, kind, causes."""
    resp = api.post(ns_path("leases", "default", group="coordination.k8s.io/v1"),
                    json={"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "Bad_Name"}})
    assert resp.status_code == 422
    assert resp.content.startswith(b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                                   b'"message":"Lease.coordination.k8s.io \\"Bad_Name\\" is invalid: metadata.name: ')
    assert b'"reason":"Invalid","details":{"name":"Bad_Name","group":"coordination.k8s.io","kind":"Lease",' \
           b'"causes":[{"reason":"FieldValueInvalid","message":"Invalid value: \\"Bad_Name\\": ' in resp.content
    assert resp.content.endswith(b'"field":"metadata.name"}]},"code":422}\n')

"""Which media types a body may have: a patch's types are no body for a create or an update.

kube-apiserver picks the decoder for a create (POST) or an update (PUT) from the serializers it offers
for the kind (NegotiateInputSerializer), and a patch type is none of them: 415 UnsupportedMediaType,
naming the types it does take. kubelab decoded `application/json-patch+json` and the other patch types
as plain JSON and created the object. A PATCH with a type that is no patch type is a 415 naming the
patch types (the PATCH route's supportedTypes, in its order).
"""

from __future__ import annotations

import httpx
import orjson
import pytest
from apitools import assert_status, create, ns_path, service, unique_name

BODY_TYPES_415 = ("the body of the request was in an unknown format - accepted media types include: "
                  "application/json, application/yaml, application/vnd.kubernetes.protobuf")
PATCH_TYPES_415 = ("the body of the request was in an unknown format - accepted media types include: "
                   "application/json-patch+json, application/merge-patch+json, "
                   "application/strategic-merge-patch+json, application/apply-patch+yaml")
PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml"]


@pytest.mark.parametrize("content_type", PATCH_TYPES)
def test_a_create_sent_as_a_patch_type_is_415(api: httpx.Client, content_type: str) -> None:
    name = unique_name("create-as-patch")
    resp = api.post(ns_path("services"), content=orjson.dumps(service(name)),
                    headers={"Content-Type": f"{content_type}; charset=utf-8"})
    assert_status(resp, 415, "UnsupportedMediaType", BODY_TYPES_415)
    assert_status(api.get(ns_path("services", name=name)), 404, "NotFound")


@pytest.mark.parametrize("content_type", PATCH_TYPES)
def test_an_update_sent_as_a_patch_type_is_415(api: httpx.Client, content_type: str) -> None:
    name = unique_name("update-as-patch")
    created = create(api, ns_path("services"), service(name))
    changed = {**created, "metadata": {**created["metadata"], "labels": {"changed": "yes"}}}
    resp = api.put(ns_path("services", name=name), content=orjson.dumps(changed),
                   headers={"Content-Type": content_type})
    assert_status(resp, 415, "UnsupportedMediaType", BODY_TYPES_415)
    assert api.get(ns_path("services", name=name)).json() == created


def test_a_patch_of_another_type_is_415_naming_the_patch_types(api: httpx.Client) -> None:
    name = unique_name("patch-as-json")
    created = create(api, ns_path("services"), service(name))
    resp = api.patch(ns_path("services", name=name), content=b'{"metadata":{"labels":{"a":"b"}}}',
                     headers={"Content-Type": "application/json"})
    assert_status(resp, 415, "UnsupportedMediaType", PATCH_TYPES_415)
    assert api.get(ns_path("services", name=name)).json() == created


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml", "application/json; charset=utf-8"])
def test_a_create_in_a_body_type_still_works(api: httpx.Client, content_type: str) -> None:
    name = unique_name("create-json")
    body = orjson.dumps(service(name))  # JSON is YAML too
    resp = api.post(ns_path("services"), content=body, headers={"Content-Type": content_type})
    assert resp.status_code == 201, resp.text


@pytest.mark.parametrize("keys", [10, 10_000], ids=["small", "big (made off the event loop)"])
def test_an_object_read_as_yaml_is_the_same_object(api: httpx.Client, keys: int) -> None:
    import yaml

    name = unique_name("yaml-out")
    body = {"metadata": {"name": name}, "data": {f"key-{i:05}": f"value {i}: ok" for i in range(keys)}}
    resp = api.post(ns_path("configmaps"), json=body)
    assert resp.status_code == 201, resp.text[:300]
    as_json = api.get(ns_path("configmaps", name=name)).json()
    resp = api.get(ns_path("configmaps", name=name), headers={"Accept": "application/yaml"})
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/yaml")
    assert yaml.safe_load(resp.text) == as_json

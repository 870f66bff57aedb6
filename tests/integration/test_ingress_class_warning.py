"""The `kubernetes.io/ingress.class` annotation's deprecation warning, as kube-apiserver's ingress strategy
gives it (WarningsOnCreate, pkg/registry/networking/ingress/strategy.go): on a create of an Ingress that has
the annotation and no spec.ingressClassName, once it passed validation, the response carries `Warning: 299
- "annotation \"kubernetes.io/ingress.class\" is deprecated, please use 'spec.ingressClassName' instead"`.
No warning on updates (WarningsOnUpdate returns nothing), none with spec.ingressClassName set, none for a
refused object. The real kubectl prints it, the official client reads it, httpx sees the raw header."""

from __future__ import annotations

import json
from typing import Any

import httpx
from apitools import assert_status, unique_name
from kubectltools import Kubectl
from kubernetes import client

PATH = "/apis/networking.k8s.io/v1/namespaces/default/ingresses"
TEXT = "annotation \"kubernetes.io/ingress.class\" is deprecated, please use 'spec.ingressClassName' instead"
HEADER = '299 - "annotation \\"kubernetes.io/ingress.class\\" is deprecated, please use \'spec.ingressClassName\' instead"'


def _ingress(name: str, *, annotation: str | None = "nginx", class_name: str | None = None,
             path: str = "/") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotation is not None:
        meta["annotations"] = {"kubernetes.io/ingress.class": annotation}
    spec: dict[str, Any] = {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}},
                            "rules": [{"http": {"paths": [{"path": path, "pathType": "Prefix", "backend": {
                                "service": {"name": "web", "port": {"number": 80}}}}]}}]}
    if class_name is not None:
        spec["ingressClassName"] = class_name
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}


def test_a_create_with_the_class_annotation_is_warned_in_kubes_words(api: httpx.Client) -> None:
    name = unique_name("annotated")
    made = api.post(PATH, json=_ingress(name))
    assert made.status_code == 201 and made.headers.get_list("warning") == [HEADER]
    # A dry run is the same create, warned alike; the AlreadyExists create after validation too.
    dry = api.post(PATH, params={"dryRun": "All"}, json=_ingress(unique_name("dry")))
    assert dry.status_code == 201 and dry.headers.get_list("warning") == [HEADER]
    again = api.post(PATH, json=_ingress(name))
    assert again.status_code == 409 and again.headers.get_list("warning") == [HEADER]
    # Updates are not warned (WarningsOnUpdate: nil), nor are patches.
    stored = api.get(f"{PATH}/{name}").json()
    stored["metadata"]["labels"] = {"a": "b"}
    updated = api.put(f"{PATH}/{name}", json=stored)
    assert updated.status_code == 200 and "warning" not in updated.headers
    patched = api.patch(f"{PATH}/{name}", content=json.dumps({"metadata": {"labels": {"a": "c"}}}),
                        headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200 and "warning" not in patched.headers
    api.delete(f"{PATH}/{name}")


def test_no_warning_with_the_class_name_or_without_the_annotation_or_when_refused(api: httpx.Client) -> None:
    both = unique_name("both")
    made = api.post(PATH, json=_ingress(both, class_name="nginx"))  # both, equal: valid, not warned
    assert made.status_code == 201 and "warning" not in made.headers
    plain = unique_name("plain")
    made = api.post(PATH, json=_ingress(plain, annotation=None))
    assert made.status_code == 201 and "warning" not in made.headers
    # Validation fails first: kube's BeforeCreate returns the Invalid before it adds any warning.
    refused = api.post(PATH, json=_ingress(unique_name("bad"), path="relative"))
    assert_status(refused, 422, "Invalid")
    assert "warning" not in refused.headers
    # NamespaceLifecycle admission answers a missing namespace before BeforeCreate could warn.
    missing = api.post(PATH.replace("/default/", f"/{unique_name('gone')}/"), json=_ingress(unique_name("lost")))
    assert_status(missing, 404, "NotFound")
    assert "warning" not in missing.headers
    for name in (both, plain):
        api.delete(f"{PATH}/{name}")


def test_kubectl_prints_it_and_the_python_client_reads_it(kubectl: Kubectl, apiserver: str, tmp_path: Any) -> None:
    name = unique_name("kc")
    manifest = tmp_path / "ing.json"
    manifest.write_text(json.dumps(_ingress(name)))
    created = kubectl("create", "-f", str(manifest)).ok()
    assert created.stderr == f"Warning: {TEXT}\n" and f"ingress.networking.k8s.io/{name} created" in created.stdout
    applied = kubectl("apply", "-f", str(manifest)).ok()  # a patch now: kubectl's own warning, not kube's
    assert TEXT not in applied.stderr and "last-applied-configuration" in applied.stderr, applied.stderr
    kubectl.ok("delete", "ingress", name)

    other = unique_name("py")
    with client.ApiClient(client.Configuration(host=apiserver)) as api_client:
        networking = client.NetworkingV1Api(api_client)
        _, status, headers = networking.create_namespaced_ingress_with_http_info("default", _ingress(other))
        assert status == 201 and headers.get("Warning") == HEADER
        networking.delete_namespaced_ingress(other, "default")

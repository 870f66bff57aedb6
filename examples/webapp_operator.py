"""A kopf operator for the WebApp custom resource (examples/webapp-crd.yaml): each WebApp becomes a Deployment
and a ClusterIP Service of the same name, both owned by the WebApp (so kube's garbage collector deletes them
with it), and the WebApp's status follows the Deployment's (replicas, readyReplicas).

    kubectl apply -f examples/webapp-crd.yaml
    kopf run --standalone --namespace default examples/webapp_operator.py
    kubectl apply -f examples/webapp.yaml

It uses nothing but kopf and the official Python client, as an operator written for kube-apiserver would:
kopf's watches (with bookmarks), its finalizer (the delete handler below), its events, its merge patches of
the status subresource; `--standalone` skips kopf's peering objects (the KopfPeering CRDs).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "lab.example.com", "v1", "webapps"
# The label that ties children to their WebApp: the Deployment's selector, the Service's selector, and the
# filter of the Deployment watch below.
APP_LABEL = "webapp.lab.example.com/name"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Handler progress in annotations only: the WebApp's status schema is structural, so kube prunes the
    # status.kopf field kopf would otherwise write there too.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="lab.example.com")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="lab.example.com")
    settings.posting.level = logging.INFO
    try:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]  # $KUBECONFIG, as kopf logs in


def deployment(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    labels = {APP_LABEL: name}
    container = {"name": "web", "image": spec["image"], "ports": [{"containerPort": spec["port"]}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": spec["replicas"], "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def service(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": {APP_LABEL: name}},
            "spec": {"selector": {APP_LABEL: name},
                     "ports": [{"name": "http", "port": spec["port"], "targetPort": spec["port"]}]}}


@kopf.on.create(GROUP, VERSION, PLURAL)
def create_children(name: str, namespace: str | None, spec: kopf.Spec, body: kopf.Body, patch: kopf.Patch,
                    **_: Any) -> None:
    assert namespace is not None  # a namespaced kind
    wanted = {"image": spec["image"], "replicas": spec.get("replicas", 1), "port": spec.get("port", 8080)}
    deploy, svc = deployment(name, wanted), service(name, wanted)
    kopf.adopt([deploy, svc])  # ownerReferences to the WebApp (controller: true), and its namespace
    # The client takes plain dicts as bodies as well as its model classes (its stubs know only the latter).
    kubernetes.client.AppsV1Api().create_namespaced_deployment(namespace, deploy)  # type: ignore[arg-type]
    created = kubernetes.client.CoreV1Api().create_namespaced_service(namespace, svc)  # type: ignore[arg-type]
    assert created.spec is not None
    kopf.info(body, reason="Created", message=f"Deployment {name} and Service {name} created")
    patch.status["deployment"] = name
    patch.status["service"] = name
    patch.status["clusterIP"] = created.spec.cluster_ip


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def update_children(name: str, namespace: str | None, spec: kopf.Spec, **_: Any) -> None:
    assert namespace is not None
    # A strategic merge patch, as `kubectl edit` of the Deployment would send: only what the WebApp decides.
    image, port = spec["image"], spec.get("port", 8080)
    body = {"spec": {"replicas": spec.get("replicas", 1),
                     "template": {"spec": {"containers": [{"name": "web", "image": image,
                                                           "ports": [{"containerPort": port}]}]}}}}
    kubernetes.client.AppsV1Api().patch_namespaced_deployment(name, namespace, body)
    ports = [{"name": "http", "port": port, "targetPort": port}]
    kubernetes.client.CoreV1Api().patch_namespaced_service(name, namespace, {"spec": {"ports": ports}})


@kopf.on.delete(GROUP, VERSION, PLURAL)
def say_goodbye(body: kopf.Body, **_: Any) -> None:
    # A delete handler makes kopf put its finalizer on every WebApp and take it off once this ran; the
    # children need no help: kube's garbage collector deletes them through their ownerReferences.
    kopf.info(body, reason="Deleting", message="children left to the garbage collector")


@kopf.on.event("apps", "v1", "deployments", labels={APP_LABEL: kopf.PRESENT})
def mirror_status(body: kopf.Body, namespace: str | None, type: str, **_: Any) -> None:
    """The Deployment's counts copied into its WebApp's status (a merge patch of the status subresource)."""
    if type == "DELETED":
        return
    owners = [ref for ref in body.metadata.get("ownerReferences", [])
              if ref.get("kind") == "WebApp" and ref.get("apiVersion") == f"{GROUP}/{VERSION}"]
    if not owners or namespace is None:
        return
    status = body.get("status", {})
    wanted = {"replicas": status.get("replicas", 0), "readyReplicas": status.get("readyReplicas", 0),
              "observedGeneration": status.get("observedGeneration", 0)}
    try:
        kubernetes.client.CustomObjectsApi().patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, owners[0]["name"], {"status": wanted})
    except kubernetes.client.ApiException as err:
        if err.status != 404:  # the WebApp is already gone: nothing left to report to
            raise

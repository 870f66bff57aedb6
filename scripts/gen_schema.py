"""Generate kubelab/schema/kubernetes.json: the field names and types of the Kubernetes API kinds kubelab
serves, read from the official `kubernetes` Python client's generated models (themselves generated from
Kubernetes' OpenAPI spec). The API server uses it for fieldValidation=Strict: `unknown field "spec.foo"`.

And kubelab/schema/openapi.json: the same types as OpenAPI v3 component schemas, named and shaped as
kube-apiserver's /openapi/v3 names and shapes them, with the models' descriptions, for `kubectl explain`.

    .venv/bin/python scripts/gen_schema.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes import client

ROOTS = {
    "v1/Namespace": "V1Namespace", "v1/Node": "V1Node", "v1/Pod": "V1Pod", "v1/Service": "V1Service",
    "v1/Endpoints": "V1Endpoints", "v1/Event": "CoreV1Event", "v1/Binding": "V1Binding",
    "v1/ConfigMap": "V1ConfigMap", "v1/Secret": "V1Secret", "v1/ServiceAccount": "V1ServiceAccount",
    "discovery.k8s.io/v1/EndpointSlice": "V1EndpointSlice", "coordination.k8s.io/v1/Lease": "V1Lease",
    "apps/v1/Deployment": "V1Deployment", "apps/v1/ReplicaSet": "V1ReplicaSet", "autoscaling/v1/Scale": "V1Scale",
    "apiregistration.k8s.io/v1/APIService": "V1APIService", "policy/v1/PodDisruptionBudget": "V1PodDisruptionBudget",
    "policy/v1/Eviction": "V1Eviction", "meta/v1/DeleteOptions": "V1DeleteOptions",
    "batch/v1/Job": "V1Job", "batch/v1/CronJob": "V1CronJob",
}
ROOTS.update({"apps/v1/DaemonSet": "V1DaemonSet", "apps/v1/StatefulSet": "V1StatefulSet",
              "apps/v1/ControllerRevision": "V1ControllerRevision",
              "v1/ReplicationController": "V1ReplicationController"})
ROOTS.update({"networking.k8s.io/v1/ServiceCIDR": "V1ServiceCIDR"})
ROOTS.update({"networking.k8s.io/v1/Ingress": "V1Ingress", "networking.k8s.io/v1/IngressClass": "V1IngressClass",
              "networking.k8s.io/v1/NetworkPolicy": "V1NetworkPolicy"})
ROOTS["certificates.k8s.io/v1/CertificateSigningRequest"] = "V1CertificateSigningRequest"
ROOTS["storage.k8s.io/v1/CSIStorageCapacity"] = "V1CSIStorageCapacity"
ROOTS["apiextensions.k8s.io/v1/CustomResourceDefinition"] = "V1CustomResourceDefinition"
ROOTS["events.k8s.io/v1/Event"] = "EventsV1Event"
ROOTS.update({"rbac.authorization.k8s.io/v1/Role": "V1Role", "rbac.authorization.k8s.io/v1/ClusterRole": "V1ClusterRole",
              "rbac.authorization.k8s.io/v1/RoleBinding": "V1RoleBinding",
              "rbac.authorization.k8s.io/v1/ClusterRoleBinding": "V1ClusterRoleBinding"})
PRIMITIVES = {"str": "string", "int": "integer", "bool": "boolean", "float": "number", "datetime": "string",
              "date": "string", "object": "any", "bytearray": "string", "bytes": "string",
              "Any": "any"}


def describe(type_name: str, types: dict[str, Any]) -> Any:
    """A type as JSON: "string", ["list", T], ["map", T], or the name of an object in `types`."""
    type_name = type_name.strip()
    match = re.fullmatch(r"(?:list|List)\[(.+)\]", type_name)
    if match:
        return ["list", describe(match.group(1), types)]
    match = re.fullmatch(r"(?:dict|Dict)\((?:str|str), (.+)\)|(?:dict|Dict)\[str, (.+)\]", type_name)
    if match:
        return ["map", describe(match.group(1) or match.group(2), types)]
    if type_name in PRIMITIVES:
        return PRIMITIVES[type_name]
    model = getattr(client, type_name)
    if type_name not in types:
        types[type_name] = {}  # placeholder against recursion (JSONSchemaProps refers to itself)
        types[type_name] = {model.attribute_map[attr]: describe(kind, types)
                            for attr, kind in model.openapi_types.items()}
    return type_name


# Where kube-apiserver's OpenAPI names a type: meta/v1 for the apimachinery types, otherwise the package
# of the first served kind (core first) that uses it.
META_TYPES = {"V1ObjectMeta", "V1ListMeta", "V1OwnerReference", "V1ManagedFieldsEntry", "V1LabelSelector",
              "V1LabelSelectorRequirement", "V1DeleteOptions", "V1Preconditions", "V1Condition"}
CORE_TYPES = {"V1PodTemplateSpec"}  # reached only from apps/v1 kinds here, but a core/v1 type
# A StatefulSet's volumeClaimTemplates: core/v1 types too.
CORE_TYPES |= {"V1PersistentVolumeClaim", "V1PersistentVolumeClaimCondition", "V1PersistentVolumeClaimStatus",
               "V1ModifyVolumeStatus", "V1VolumeHealthStatus"}
PACKAGES = {"v1": "io.k8s.api.core.v1", "discovery.k8s.io/v1": "io.k8s.api.discovery.v1",
            "coordination.k8s.io/v1": "io.k8s.api.coordination.v1", "apps/v1": "io.k8s.api.apps.v1",
            "autoscaling/v1": "io.k8s.api.autoscaling.v1", "meta/v1": "io.k8s.apimachinery.pkg.apis.meta.v1",
            "apiregistration.k8s.io/v1": "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1",
            "policy/v1": "io.k8s.api.policy.v1", "batch/v1": "io.k8s.api.batch.v1",
            "apiextensions.k8s.io/v1": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1",
            "events.k8s.io/v1": "io.k8s.api.events.v1",
            "rbac.authorization.k8s.io/v1": "io.k8s.api.rbac.v1"}
PACKAGES["networking.k8s.io/v1"] = "io.k8s.api.networking.v1"
PACKAGES["certificates.k8s.io/v1"] = "io.k8s.api.certificates.v1"
PACKAGES["storage.k8s.io/v1"] = "io.k8s.api.storage.v1"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
FORMATS = {"int": "int32", "float": "double", "datetime": "date-time", "bytearray": "byte"}


def openapi_name(model: str, package: str) -> str:
    kind = re.sub(r"^(?:[A-Z][a-z]+)?V\d+(?:(?:alpha|beta)\d+)?", "", model)  # V1PodSpec, CoreV1Event -> ...
    if model in META_TYPES:
        package = PACKAGES["meta/v1"]
    elif model in CORE_TYPES:
        package = PACKAGES["v1"]
    return f"{package}.{kind}"


def openapi_schemas() -> tuple[dict[str, str], dict[str, Any]]:
    """(served "apiVersion/Kind" -> schema name, schema name -> OpenAPI v3 schema)."""
    names: dict[str, str] = {}  # model class -> schema name
    schemas: dict[str, Any] = {}

    def prop(type_name: str, field_name: str, package: str) -> dict[str, Any]:
        type_name = type_name.strip()
        match = re.fullmatch(r"(?:list|List)\[(.+)\]", type_name)
        if match:
            return {"type": "array", "items": prop(match.group(1), field_name, package)}
        match = re.fullmatch(r"(?:dict|Dict)\((?:str|str), (.+)\)|(?:dict|Dict)\[str, (.+)\]", type_name)
        if match:
            return {"type": "object", "additionalProperties": prop(match.group(1) or match.group(2), field_name,
                                                                   package)}
        if type_name in ("object", "Any"):  # the client's IntOrString fields, and fieldsV1
            return {"type": "object"} if field_name == "fieldsV1" else {"allOf": [{"$ref": _ref(INT_OR_STRING)}]}
        if type_name in PRIMITIVES:
            out = {"type": PRIMITIVES[type_name]}
            if type_name in FORMATS:
                out["format"] = FORMATS[type_name]
            return out
        return {"allOf": [{"$ref": _ref(visit(type_name, package))}], "default": {}}

    def visit(model_name: str, package: str) -> str:
        if model_name in names:
            return names[model_name]
        model = getattr(client, model_name)
        name = names[model_name] = openapi_name(model_name, package)
        own_package = name.rsplit(".", 1)[0]
        doc = (model.__doc__ or "").strip().split("\n\n", 1)[0].strip()
        schema: dict[str, Any] = {"type": "object", "properties": {}}
        if doc and not doc.startswith("NOTE: This class is auto generated"):
            schema["description"] = " ".join(doc.split())
        schemas[name] = schema
        required = []
        for attr, kind in model.openapi_types.items():
            json_name = model.attribute_map[attr]
            field = model.model_fields.get(attr)
            out = prop(kind, json_name, own_package)
            if field is not None and field.description:
                out["description"] = field.description
            if field is not None and field.is_required():
                required.append(json_name)
            schema["properties"][json_name] = out
        if required:
            schema["required"] = required
        return name

    roots = {}
    for gvk, model in ROOTS.items():
        api_version, kind = gvk.rsplit("/", 1)
        roots[gvk] = visit(model, PACKAGES[api_version])
        group, _, version = api_version.rpartition("/")
        schemas[roots[gvk]]["x-kubernetes-group-version-kind"] = [
            {"group": "" if group == "meta" else group, "kind": kind, "version": version}]
    schemas[INT_OR_STRING] = {"type": "string", "format": "int-or-string",
                              "description": "IntOrString holds either an int32 or a string: a port number or a "
                                             "port name, for example."}
    return roots, schemas


def _ref(name: str) -> str:
    return f"#/components/schemas/{name}"


def main() -> None:
    types: dict[str, Any] = {}
    roots = {gvk: describe(model, types) for gvk, model in ROOTS.items()}
    out = {"generatedFrom": f"kubernetes Python client {kubernetes.__version__}", "roots": roots, "types": types}
    path = Path(__file__).resolve().parents[1] / "kubelab" / "schema" / "kubernetes.json"
    path.write_text(json.dumps(out, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{path}: {len(types)} types")
    openapi_roots, schemas = openapi_schemas()
    out = {"generatedFrom": f"kubernetes Python client {kubernetes.__version__}", "roots": openapi_roots,
           "schemas": schemas}
    path = path.with_name("openapi.json")
    path.write_text(json.dumps(out, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{path}: {len(schemas)} schemas, {path.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()

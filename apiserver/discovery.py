"""Discovery documents: /version, /api, /apis, the APIResourceLists, and the slim /openapi/v3.

kubectl resolves every resource type through legacy discovery; apply/create/replace also fetch the
OpenAPI v3 index and look for a PATCH operation per kind that declares `fieldValidation`, which tells
kubectl to leave validation to the server (reference/kubectl-and-clients.md §2-3).
"""

from __future__ import annotations

import functools
import hashlib
import platform
from collections.abc import Iterable
from typing import Any

import orjson

from kubelab import __version__, schema
from kubelab.customresources import by_priority
from kubelab.kinds import ResourceType

from .bootstrap import API_VERSION_PRIORITIES

KUBE_MAJOR, KUBE_MINOR = "1", "32"


def version() -> dict[str, str]:
    return {
        "major": KUBE_MAJOR, "minor": KUBE_MINOR, "gitVersion": f"v{KUBE_MAJOR}.{KUBE_MINOR}.0+kubelab",
        "gitCommit": f"kubelab-{__version__}", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": f"python{platform.python_version()}", "compiler": "cpython",
        "platform": f"linux/{'amd64' if platform.machine() in ('x86_64', 'AMD64') else platform.machine()}",
    }


def _group_versions(resources: Iterable[ResourceType]) -> dict[str, list[ResourceType]]:
    result: dict[str, list[ResourceType]] = {}
    for rt in resources:
        result.setdefault(rt.group_version, []).append(rt)
    return result


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


# Where a group without an APIService priority sorts: a CustomResourceDefinition's group is registered
# with GroupPriorityMinimum 1000 and VersionPriority 100 (kube-aggregator's crdregistration controller),
# the same for every version, so its versions sort as kube-like versions.
CUSTOM_GROUP_PRIORITY, CUSTOM_VERSION_PRIORITY = 1000, 100
# kube-aggregator lists its own group first, with no APIService for it ("it's good to be king"), and gives
# it 18000 in the aggregated document.
AGGREGATOR_PRIORITY = {"apiregistration.k8s.io/v1": (18000, 15)}


def group_versions(resources: Iterable[ResourceType]) -> list[tuple[str, list[str]]]:
    """The named groups and their versions in the order kube-apiserver lists them, in /apis and in the
    aggregated document alike (the APIServices' sort): groups by their highest groupPriorityMinimum, then
    by name; versions by versionPriority, then kube-aware (preferred first)."""
    found: dict[str, set[str]] = {}
    for rt in resources:
        if rt.group:
            found.setdefault(rt.group, set()).add(rt.version)

    def priority(group: str, version: str) -> tuple[int, int]:
        gv = f"{group}/{version}"
        return API_VERSION_PRIORITIES.get(gv) or AGGREGATOR_PRIORITY.get(gv) or (CUSTOM_GROUP_PRIORITY,
                                                                                CUSTOM_VERSION_PRIORITY)

    ordered = sorted(found, key=lambda g: (-max(priority(g, v)[0] for v in found[g]), g))
    # By versionPriority, ties in kube's version order (a stable sort over by_priority's).
    return [(g, sorted(by_priority(list(found[g])), key=lambda v: -priority(g, v)[1])) for g in ordered]


def api_group_list(resources: Iterable[ResourceType]) -> dict[str, Any]:
    items = []
    for group, versions in group_versions(resources):
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        items.append({"name": group, "versions": gvs, "preferredVersion": gvs[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": items}


def api_group(group: str, resources: Iterable[ResourceType]) -> dict[str, Any] | None:
    versions = next((found for name, found in group_versions(resources) if name == group), None)
    if not versions:
        return None
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": gvs, "preferredVersion": gvs[0]}


def _storage_hash(rt: ResourceType) -> str:
    return hashlib.sha256(f"{rt.group_version}/{rt.kind}".encode()).digest()[:8].hex()


# The connect subresources, as kube-apiserver's discovery lists them: (kind, "" for the parent's; verbs).
CONNECT_SUBRESOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "attach": ("PodAttachOptions", ("create", "get")),
    "exec": ("PodExecOptions", ("create", "get")),
    "log": ("", ("get",)),
    "portforward": ("PodPortForwardOptions", ("create", "get")),
    "proxy": ("NodeProxyOptions", ("create", "delete", "get", "patch", "update")),
}


# apiextensions' discovery controller lists a custom kind's verbs in this order.
CUSTOM_VERBS = ("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch")


def api_resource_list(group_version: str, resources: Iterable[ResourceType]) -> dict[str, Any] | None:
    """A group version's APIResourceList. kube-apiserver's installer registers built-in paths sorted and
    lists them so (`pods`, `pods/attach`, ..., `pods/status`, `podtemplates`); apiextensions lists each
    custom kind as it builds it: the resource, then status, then scale."""
    rts = [rt for rt in resources if rt.group_version == group_version]
    if not rts:
        return None
    builtin = sorted((entry for rt in rts if not rt.definition for entry in _entries(rt)), key=lambda e: e["name"])
    custom = [entry for rt in rts if rt.definition for entry in _entries(rt)]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [*builtin, *custom]}


def _entries(rt: ResourceType) -> list[dict[str, Any]]:
    """One resource's APIResource entries: its own, then one per subresource."""
    entries = []
    own_verbs = CUSTOM_VERBS if rt.definition and set(rt.verbs) == set(CUSTOM_VERBS) else rt.verbs
    if rt.discovery_verbs:  # a custom kind whose definition is terminating (customresources.served_types)
        own_verbs = rt.discovery_verbs
    entry: dict[str, Any] = {"name": rt.plural, "singularName": rt.singular_name, "namespaced": rt.namespaced,
                             "kind": rt.kind, "verbs": list(own_verbs), "storageVersionHash": _storage_hash(rt)}
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    entries.append(entry)
    for sub in rt.subresources:
        if sub == "binding":
            entries.append({"name": f"{rt.plural}/binding", "singularName": "", "namespaced": rt.namespaced,
                            "kind": "Binding", "verbs": ["create"]})
        elif sub == "eviction":  # pods/eviction, which kubectl drain looks for
            entries.append({"name": f"{rt.plural}/eviction", "singularName": "", "namespaced": rt.namespaced,
                            "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
        elif sub == "token":  # serviceaccounts/token
            entries.append({"name": f"{rt.plural}/token", "singularName": "", "namespaced": rt.namespaced,
                            "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
                            "verbs": ["create"]})
        elif sub in CONNECT_SUBRESOURCES:
            kind, verbs = CONNECT_SUBRESOURCES[sub]
            if sub == "proxy":  # NodeProxyOptions, PodProxyOptions, ServiceProxyOptions
                kind = f"{rt.kind}ProxyOptions"
            entries.append({"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                            "kind": kind or rt.kind, "verbs": list(verbs)})
        elif sub == "scale":  # every scale subresource speaks autoscaling/v1 Scale, custom kinds' too
            entries.append({"name": f"{rt.plural}/scale", "singularName": "", "namespaced": rt.namespaced,
                            "group": "autoscaling", "version": "v1", "kind": "Scale",
                            "verbs": ["get", "patch", "update"]})
        elif sub == "finalize":
            entries.append({"name": f"{rt.plural}/finalize", "singularName": "", "namespaced": rt.namespaced,
                            "kind": rt.kind, "verbs": ["update"]})
        else:
            entries.append({"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                            "kind": rt.kind, "verbs": ["get", "patch", "update"]})
    return entries


OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def custom_schema_name(rt: ResourceType) -> str:
    """How kube-apiserver names a custom kind's schema: the group reversed, the version, the kind
    (stable.example.com/v1 CronTab -> com.example.stable.v1.CronTab)."""
    return ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])


def _custom_schemas(rt: ResourceType) -> dict[str, Any]:
    """A custom kind's schema as the CRD OpenAPI builder publishes it: the version's openAPIV3Schema with
    apiVersion, kind and metadata (ObjectMeta) filled in, and the types ObjectMeta refers to."""
    version = orjson.loads(rt.definition)
    found = ((version.get("schema") or {}).get("openAPIV3Schema")) or {"type": "object"}
    body = {**found, "properties": dict(found.get("properties") or {})}
    body["properties"]["apiVersion"] = {"type": "string", "description": _TYPE_META["apiVersion"]}
    body["properties"]["kind"] = {"type": "string", "description": _TYPE_META["kind"]}
    body["properties"]["metadata"] = {"allOf": [{"$ref": f"#/components/schemas/{OBJECT_META}"}],
                                      "description": _TYPE_META["metadata"], "default": {}}
    body["x-kubernetes-group-version-kind"] = [{"group": rt.group, "kind": rt.kind, "version": rt.version}]
    return {custom_schema_name(rt): body, **schema.openapi_closure([OBJECT_META])}


_TYPE_META = {
    "apiVersion": "APIVersion defines the versioned schema of this representation of an object. Servers should "
                  "convert recognized schemas to the latest internal value, and may reject unrecognized values. "
                  "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
                  "#resources",
    "kind": "Kind is a string value representing the REST resource this object represents. Servers may infer this "
            "from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
            "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
    "metadata": "Standard object's metadata. More info: "
                "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
}


def _openapi_path(gv: str) -> str:
    return f"api/{gv}" if "/" not in gv else f"apis/{gv}"


def openapi_index(resources: Iterable[ResourceType]) -> dict[str, Any]:
    """The /openapi/v3 index. Each document's hash is of its content, as kube-apiserver's is: kubectl
    keeps the documents in its disk cache by URL, so new content must come with a new URL."""
    paths = {}
    for gv, rts in _group_versions(resources).items():
        digest = _openapi_document(gv, tuple(rts))[1]
        paths[_openapi_path(gv)] = {"serverRelativeURL": f"/openapi/v3/{_openapi_path(gv)}?hash={digest}"}
    return {"paths": paths}


def openapi_group_version(group_version: str, resources: Iterable[ResourceType]) -> dict[str, Any] | None:
    rts = tuple(rt for rt in resources if rt.group_version == group_version)
    return _openapi_document(group_version, rts)[0] if rts else None


@functools.lru_cache(maxsize=64)
def _openapi_document(group_version: str, rts: tuple[ResourceType, ...]) -> tuple[dict[str, Any], str]:
    """Per-GV document: one PATCH operation per kind declaring `fieldValidation` (how kubectl learns the
    server validates fields), and the kinds' schemas with their descriptions under components, which is
    what `kubectl explain` reads. The operations carry no requestBody (see §3 of the kubectl reference: a
    requestBody without schemas makes kubectl warn, and a PATCH requestBody listing strategic merge patch
    would make `kubectl apply` take its merge keys from these schemas, which do not carry them; without it
    kubectl uses its built-in types, as it does against kube-apiserver for these kinds)."""
    paths: dict[str, Any] = {}
    params = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True},
               "description": "fieldValidation instructs the server on how to handle objects in the request "
                              "containing unknown or duplicate fields."},
              {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
              {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
    for rt in rts:
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        if rt.namespaced:
            path = f"/{_openapi_path(group_version)}/namespaces/{{namespace}}/{rt.plural}/{{name}}"
        else:
            path = f"/{_openapi_path(group_version)}/{rt.plural}/{{name}}"
        op = {"operationId": f"patch{rt.kind}", "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk,
              "parameters": params, "responses": {"200": {"description": "OK"}}}
        post = {"operationId": f"create{rt.kind}", "x-kubernetes-action": "post",
                "x-kubernetes-group-version-kind": gvk, "parameters": params,
                "responses": {"201": {"description": "Created"}}}
        paths[path] = {"patch": op, "put": {**op, "operationId": f"replace{rt.kind}", "x-kubernetes-action": "put"}}
        paths[path.rsplit("/", 1)[0]] = {"post": post}
    components = {"schemas": schema.openapi_schemas([(rt.group_version, rt.kind) for rt in rts if not rt.definition])}
    for rt in rts:
        if rt.definition:
            components["schemas"].update(_custom_schemas(rt))
    document = {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": version()["gitVersion"]},
                "paths": paths, "components": components}
    digest = hashlib.sha512(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()[:128].upper()
    return document, digest


# --- /openapi/v2 ------------------------------------------------------------------------------------
# kubectl's client-side validation falls back to OpenAPI v2 for a group version /openapi/v3 does not
# list (an unknown kind, a CRD): with a v2 document that does not define the kind it skips validation,
# and the REST mapping then fails with kube's `no matches for kind "Widget" in version "example.com/v1"
# ... ensure CRDs are installed first`; a 404 here made it print "the server could not find the
# requested resource" instead. kubectl reads only protobuf (gnostic's openapi_v2.Document); JSON is the
# default for everyone else. The document declares no paths or definitions: /openapi/v3 is where kubelab
# publishes its schemas, and kubectl 1.27+ validates and explains from there.
OPENAPI_V2_PROTOBUF = ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
                       "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")


def openapi_v2() -> dict[str, Any]:
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": version()["gitVersion"]},
            "paths": {}, "definitions": {}}


def _proto_field(number: int, payload: bytes) -> bytes:
    """One length-delimited field (wire type 2); lengths here stay far below 128, one varint byte."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def openapi_v2_protobuf() -> bytes:
    """openapi_v2() as gnostic's Document: swagger = 1, info = 2 (title = 1, version = 2), paths = 8,
    definitions = 9 (both empty messages)."""
    doc = openapi_v2()
    info = _proto_field(1, doc["info"]["title"].encode()) + _proto_field(2, doc["info"]["version"].encode())
    return (_proto_field(1, doc["swagger"].encode()) + _proto_field(2, info) + _proto_field(8, b"")
            + _proto_field(9, b""))

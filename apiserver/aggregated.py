"""Aggregated discovery: /api and /apis as one apidiscovery.k8s.io APIGroupDiscoveryList (v2 or v2beta1).

kubectl (client-go 1.26+) asks /api and /apis for `application/json;g=apidiscovery.k8s.io;v=v2;as=
APIGroupDiscoveryList` (then v2beta1, then plain JSON); a server that answers the legacy APIVersions /
APIGroupList makes it GET every group version's APIResourceList, one request each. kube-apiserver's
WrappedHandler picks the document by the Accept header; this module owns that choice (`negotiate`, as
kube's NegotiateMediaTypeOptions with the DiscoveryEndpointRestrictions) and the document (`document`).

The document is derived from the legacy APIResourceLists (discovery.api_resource_list), as kube's
ConvertGroupVersionIntoToDiscovery derives it from the installer's APIResources: the resources in order,
each `<resource>/<sub>` entry folded into its parent's subresources. Groups and versions are in
discovery.group_versions' order, which /apis uses too, so both documents list the same things in the same
order and a CustomResourceDefinition's group appears in both as soon as it is served.

Its ETag is the SHA-512 of the v2 JSON (uppercase hex, quoted), the same whatever version or encoding
is sent (kube: "okay because Accept is part of the Vary header").

Protobuf is not encoded here, as nowhere in kubelab: an aggregated protobuf Accept is answered with the
JSON document and a JSON Content-Type, which client-go decodes by the Content-Type it gets.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubelab.kinds import ResourceType

from . import codecs, discovery

GROUP = "apidiscovery.k8s.io"
KIND = "APIGroupDiscoveryList"
VERSIONS = ("v2", "v2beta1")
JSON, YAML = "application/json", "application/yaml"
# The media types kube-apiserver's discovery serializer offers, in its order (json, yaml, protobuf); a
# protobuf clause is answered as JSON (module docstring).
_SERVED = (JSON, YAML, codecs.PROTOBUF)


@dataclass(frozen=True)
class Negotiated:
    """The aggregated document the Accept header asked for: its version and the media type sent."""

    version: str
    media_type: str

    @property
    def content_type(self) -> str:
        """kube's generateMediaTypeWithGVK: the media type with the GVK the body is."""
        return f"{self.media_type};g={GROUP};v={self.version};as={KIND}"


@dataclass(frozen=True)
class _Clause:
    type: str
    subtype: str
    params: dict[str, str]
    q: float


def _clauses(header: str) -> list[_Clause]:
    """The Accept header as goautoneg.ParseAccept reads it: comma-separated media ranges with `;k=v`
    parameters (a malformed parameter is skipped, an unparsable q is 0), sorted by q, then by how
    specific the range is, stably."""
    clauses = []
    for part in header.split(","):
        pieces = [f.strip() for f in part.split(";")]
        media, _, sub = pieces[0].partition("/")
        if not media:
            continue
        params: dict[str, str] = {}
        q = 1.0
        for piece in pieces[1:]:
            key, eq, value = piece.partition("=")
            if not eq or not key.strip():
                continue
            if key.strip() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 0.0
                continue
            params[key.strip()] = value.strip()
        clauses.append(_Clause(media.strip(), (sub or "*").strip(), params, q))

    def specificity(c: _Clause) -> int:
        return 0 if c.type == "*" else 1 if c.subtype == "*" else 2

    return sorted(clauses, key=lambda c: (-c.q, -specificity(c)))


def negotiate(accept: str | None) -> Negotiated | None:
    """The first Accept clause that matches a served media type and names an aggregated discovery GVK
    (g=apidiscovery.k8s.io, v=v2 or v2beta1, as=APIGroupDiscoveryList); None: the legacy document. A clause
    naming any other GVK, or none, is passed over, as kube's DiscoveryEndpointRestrictions does."""
    for clause in _clauses(accept or ""):
        params = clause.params
        if (params.get("g"), params.get("as")) != (GROUP, KIND) or params.get("v") not in VERSIONS:
            continue
        for served in _SERVED:
            media, sub = served.split("/")
            if clause.type == "*" or (clause.type == media and clause.subtype in ("*", sub)):
                return Negotiated(params["v"], YAML if served == YAML else JSON)
    return None


def resources(resource_list: dict[str, Any], *, custom: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """One group version's APIResourceDiscovery entries from its APIResourceList: kube's
    ConvertGroupVersionIntoToDiscovery (responseKind from the entry's group/version/kind, "" for the group
    version's own; scope; subresources with their own responseKind and verbs). The `custom` resources (a
    CustomResourceDefinition's) name their group version in responseKind, theirs and their status's, as
    apiextensions' discovery controller writes them. Pure."""
    group, _, version = resource_list["groupVersion"].rpartition("/")
    found: list[dict[str, Any]] = []
    parents: dict[str, dict[str, Any]] = {}
    for entry in resource_list["resources"]:
        if "/" in entry["name"]:
            continue
        resource: dict[str, Any] = {
            "resource": entry["name"], "responseKind": _kind(entry, group, version, own=entry["name"] in custom),
            "scope": "Namespaced" if entry["namespaced"] else "Cluster",
            "singularResource": entry["singularName"], "verbs": list(entry["verbs"])}
        for key in ("shortNames", "categories"):
            if entry.get(key):
                resource[key] = list(entry[key])
        found.append(resource)
        parents[entry["name"]] = resource
    for entry in resource_list["resources"]:
        parent, slash, sub = entry["name"].partition("/")
        if slash and parent in parents:
            parents[parent].setdefault("subresources", []).append(
                {"subresource": sub, "responseKind": _kind(entry, group, version, own=parent in custom),
                 "verbs": list(entry["verbs"])})
    return found


def _kind(entry: dict[str, Any], group: str, version: str, *, own: bool) -> dict[str, str]:
    if own and "group" not in entry:
        return {"group": group, "version": version, "kind": entry["kind"]}
    return {"group": entry.get("group", ""), "version": entry.get("version", ""), "kind": entry["kind"]}


def _version(group_version: str, served: tuple[ResourceType, ...]) -> dict[str, Any]:
    resource_list = discovery.api_resource_list(group_version, served)
    custom = frozenset(rt.plural for rt in served if rt.definition and rt.group_version == group_version)
    return {"version": group_version.rpartition("/")[2],
            "resources": resources(resource_list, custom=custom) if resource_list else [], "freshness": "Current"}


@dataclass(frozen=True)
class Document:
    """One aggregated document: the v2 body, its ETag (unquoted), and its encodings once made."""

    body: dict[str, Any]
    etag: str
    _encoded: dict[Negotiated, bytes] = field(default_factory=dict, repr=False, compare=False)

    def encode(self, negotiated: Negotiated) -> bytes:
        found = self._encoded.get(negotiated)
        if found is None:
            body = {**self.body, "apiVersion": f"{GROUP}/{negotiated.version}"}
            if negotiated.media_type == YAML:
                found = str(yaml.safe_dump(body, sort_keys=False)).encode()
            else:
                found = codecs.encode_json(body)
            self._encoded[negotiated] = found
        return found


# The last document built for /api (True) and /apis (False), with the catalogue it was built from: a request
# compares its catalogue with it (element identity first, so about a microsecond) instead of hashing it.
_last: dict[bool, tuple[tuple[ResourceType, ...], Document]] = {}


def document(served: tuple[ResourceType, ...], *, core: bool) -> Document:
    """/api's document (core: the legacy group, one item without a name) or /apis' (every named group in
    discovery.group_versions' order). Kept while the served catalogue stays the same: the API server swaps
    it whole when a CustomResourceDefinition changes what is served, so a new catalogue is a new document
    and a new ETag."""
    last = _last.get(core)
    if last is not None and last[0] == served:
        return last[1]
    built = _build(served, core=core)
    _last[core] = (served, built)
    return built


def _build(served: tuple[ResourceType, ...], *, core: bool) -> Document:
    items: list[dict[str, Any]]
    if core:
        items = [{"metadata": {"creationTimestamp": None}, "versions": [_version("v1", served)]}]
    else:
        items = [{"metadata": {"name": group, "creationTimestamp": None},
                  "versions": [_version(f"{group}/{v}", served) for v in versions]}
                 for group, versions in discovery.group_versions(served)]
    body = {"kind": KIND, "apiVersion": f"{GROUP}/v2", "metadata": {}, "items": items}
    return Document(body, hashlib.sha512(codecs.encode_json(body)).hexdigest().upper())


__all__ = ["Document", "Negotiated", "document", "negotiate", "resources"]

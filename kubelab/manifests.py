"""Reading Kubernetes manifests from files: YAML or JSON, several documents, Lists."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pydantic
import yaml

from .models import EndpointSlice, Service


class ManifestError(ValueError):
    pass


def _parse(text: str) -> list[Any]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        # JSON proper first: YAML 1.1 parsers trip over JSON that kubectl and jq happily write
        # (tabs for indentation, for one).
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            pass
        else:
            return data if isinstance(data, list) else [data]
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(f"not valid YAML or JSON: {exc}") from exc


def documents(text: str) -> list[dict[str, Any]]:
    """The objects in `text`: one per YAML document, the items of a List (`kind: List`,
    `ServiceList`, ... as `kubectl get -o yaml` prints them) flattened, a JSON array's elements."""
    flat: list[dict[str, Any]] = []
    pending = _parse(text)
    while pending:
        doc = pending.pop(0)
        if not isinstance(doc, dict):
            raise ManifestError(f"expected an object, got {type(doc).__name__}")
        if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
            pending[:0] = doc["items"]
        else:
            flat.append(doc)
    return flat


def load_objects(text: str) -> tuple[list[Service], list[EndpointSlice]]:
    """The v1 Services and discovery.k8s.io/v1 EndpointSlices in `text`; other kinds are ignored."""
    services: list[Service] = []
    slices: list[EndpointSlice] = []
    for doc in documents(text):
        kind, api_version = doc.get("kind"), doc.get("apiVersion")
        try:
            if kind == "Service" and api_version == "v1":
                services.append(Service.model_validate(doc))
            elif kind == "EndpointSlice" and api_version == "discovery.k8s.io/v1":
                slices.append(EndpointSlice.model_validate(doc))
        except pydantic.ValidationError as exc:
            name = (doc.get("metadata") or {}).get("name", "?")
            raise ManifestError(f"{kind} {name}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from exc
    return services, slices


def service_cidrs_in(text: str) -> list[str]:
    """spec.cidrs of every networking.k8s.io/v1 ServiceCIDR in `text`, in document order: what
    kube-proxy's ServiceCIDR informer hands its proxiers (OnServiceCIDRsChanged)."""
    cidrs: list[str] = []
    for doc in documents(text):
        if doc.get("kind") != "ServiceCIDR" or doc.get("apiVersion") != "networking.k8s.io/v1":
            continue
        found = (doc.get("spec") or {}).get("cidrs") or []
        if not isinstance(found, list) or not all(isinstance(c, str) for c in found):
            name = (doc.get("metadata") or {}).get("name", "?")
            raise ManifestError(f"ServiceCIDR {name}: spec.cidrs must be a list of strings")
        cidrs += found
    return cidrs


def pick_family(cidrs: str, family: str) -> str | None:
    """The first CIDR of `family` ("IPv4"/"IPv6") in a comma-separated list, as kube-proxy splits a
    dual-stack --cluster-cidr between its two proxiers; None if there is none or one is invalid."""
    for text in (c.strip() for c in cidrs.split(",")):
        if not text:
            continue
        try:
            net = ipaddress.ip_network(text, strict=False)
        except ValueError:
            return None
        if (net.version == 6) == (family == "IPv6"):
            return text
    return None

"""Reading Kubernetes manifests from files: YAML or JSON, several documents, Lists."""

from __future__ import annotations

from typing import Any

import pydantic
import yaml

from .models import EndpointSlice, Service


class ManifestError(ValueError):
    pass


def documents(text: str) -> list[dict[str, Any]]:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(f"not valid YAML or JSON: {exc}") from exc
    flat: list[dict[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, dict):
            raise ManifestError(f"expected an object, got {type(doc).__name__}")
        if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
            flat += [item for item in doc["items"] if isinstance(item, dict)]
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

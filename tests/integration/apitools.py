"""Small helpers the integration tests share: manifests, Status assertions, watch reading.

Kept free of fixtures on purpose: tests import what they use, and what a test asserts stays visible
in the test itself.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Generator
from typing import Any

import httpx

CORE = "/api/v1"
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io"


def unique_name(prefix: str) -> str:
    """A DNS-1035 name no other test uses: `prefix-` and six hex digits."""
    return f"{prefix}-{secrets.token_hex(3)}"


def ns_path(resource: str, namespace: str = "default", name: str | None = None, *, group: str = "") -> str:
    root = f"/apis/{group}" if group else CORE
    path = f"{root}/namespaces/{namespace}/{resource}"
    return f"{path}/{name}" if name else path


def service(name: str, *, ports: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": ports if ports is not None else [{"port": 80}], **spec}}


def pod(name: str, *, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}], **spec}}


def create(api: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = api.post(path, json=body)
    assert resp.status_code == 201, resp.text
    obj: dict[str, Any] = resp.json()
    return obj


def assert_status(resp: httpx.Response, code: int, reason: str, message: str | None = None) -> dict[str, Any]:
    """The response is a Kubernetes Status with this code and reason (and message, when given)."""
    assert resp.status_code == code, resp.text
    assert resp.headers["content-type"].startswith("application/json"), resp.headers["content-type"]
    body: dict[str, Any] = resp.json()
    assert body["kind"] == "Status", body
    assert body["apiVersion"] == "v1", body
    assert body["status"] == "Failure", body
    assert body["code"] == code, body
    assert body["reason"] == reason, body
    if message is not None:
        assert body["message"] == message, body
    return body


def release_node_port(api: httpx.Client, port: int) -> None:
    """Delete whatever Service holds NodePort `port`, so a test can ask for that exact port. Tests run
    one at a time, so the holder is a finished test's leftover."""
    for svc in api.get(f"{CORE}/services").json()["items"]:
        if any(p.get("nodePort") == port for p in svc["spec"].get("ports") or []):
            meta = svc["metadata"]
            assert api.delete(ns_path("services", meta["namespace"], meta["name"])).status_code == 200


def names(items: list[dict[str, Any]]) -> set[str]:
    return {i["metadata"]["name"] for i in items}


def watch_events(api: httpx.Client, path: str, *, count: int | None = None, **params: Any
                 ) -> Generator[dict[str, Any], None, None]:
    """Stream `path?watch=true&...`, yielding each newline-terminated JSON event; stops after `count`
    events, or when the server ends the stream."""
    query = {"watch": "true", **params}
    seen = 0
    with api.stream("GET", path, params=query, timeout=httpx.Timeout(10, read=15)) as resp:
        assert resp.status_code == 200, resp.read().decode()
        assert resp.headers["content-type"].startswith("application/json")
        buffer = b""
        for chunk in resp.iter_raw():
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not line.strip():
                    continue
                yield json.loads(line)
                seen += 1
                if count is not None and seen >= count:
                    return
        assert not buffer.strip(), f"the stream ended with an unterminated event: {buffer!r}"

"""The kubeconfig `kubelab up` writes, so kubectl and the Python client find the cluster."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml


def render(server: str, *, name: str = "kubelab", token: str | None = None, ca_pem: bytes | None = None) -> str:
    user: dict[str, str] = {"token": token} if token else {}
    cluster: dict[str, str] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }
    text: str = yaml.safe_dump(config, sort_keys=False)  # PyYAML is untyped: without a stream it returns str
    return text


def write(path: Path, server: str, *, token: str | None = None, ca_file: Path | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(server, token=token, ca_pem=ca_file.read_bytes() if ca_file else None))
    path.chmod(0o600)
    return path


def token_of(path: Path) -> str | None:
    """The bearer token of the current context's user in a kubeconfig kubelab wrote (None if none)."""
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    context = next((c.get("context") or {} for c in config.get("contexts") or []
                    if c.get("name") == config.get("current-context")), {})
    user = next((u.get("user") or {} for u in config.get("users") or [] if u.get("name") == context.get("user")), {})
    token = user.get("token")
    return str(token) if token else None

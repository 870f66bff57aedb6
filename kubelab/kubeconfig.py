"""The kubeconfig `kubelab up` writes, so kubectl and the Python client find the cluster."""

from __future__ import annotations

from pathlib import Path

import yaml


def render(server: str, *, name: str = "kubelab", token: str | None = None) -> str:
    user: dict[str, str] = {"token": token} if token else {}
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write(path: Path, server: str, *, token: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(server, token=token))
    path.chmod(0o600)
    return path

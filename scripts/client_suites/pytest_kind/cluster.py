"""KindCluster for a `kubelab up` cluster: create() and delete() start and stop nothing (scripts/client-suites.sh
owns the cluster's lifetime), kubectl() runs the real kubectl against its kubeconfig."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


class KindCluster:
    def __init__(self, name: str = "pytest-kind", kubeconfig: Path | None = None, *, image: str | None = None,
                 **_: object) -> None:
        self.name = name
        self.image = image  # a kind node image means nothing here; the suite passes None unless told otherwise
        configured = kubeconfig or os.environ.get("KUBELAB_KUBECONFIG")
        if not configured:
            raise RuntimeError("set KUBELAB_KUBECONFIG to the kubeconfig `kubelab up` wrote")
        self.kubeconfig_path = Path(configured).resolve()
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            raise RuntimeError("kubectl is not on PATH")
        self.kubectl_path = Path(kubectl)

    def create(self) -> None:
        self.kubectl("version")  # fails loudly if the cluster is not answering

    def delete(self) -> None:
        pass

    def kubectl(self, *args: str, **kwargs: object) -> str:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig_path)}
        return subprocess.run([str(self.kubectl_path), *args], env=env, check=True, capture_output=True,
                              text=True, timeout=120).stdout

"""With `kubelab up --dataplane netns --token-auth-file`, a pod's service account is who its token says
it is: the real kubectl inside the pod's network namespace (token and CA as a pod would mount them,
server https://10.96.0.1) may do nothing until a Role and RoleBinding made with `kubectl create role` and
`kubectl create rolebinding` let it list pods, and is then still refused writes and Secrets with
kube-apiserver's 403 (RBAC, apiserver/rbac.py)."""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubelab_cluster import Cluster, wait_for

_TOKENS_DIR = Path(tempfile.mkdtemp(prefix="kubelab-sa-tokens-"))
KUBELAB_UP_ARGS = ("--token-auth-file", str(_TOKENS_DIR / "tokens.csv"))
NS = f"reach-tok-{secrets.token_hex(3)}"


@pytest.fixture(scope="module", autouse=True)
def _remove_tokens_dir() -> Iterator[None]:
    yield
    shutil.rmtree(_TOKENS_DIR, ignore_errors=True)


def test_the_pods_token_is_its_service_account(cluster: Cluster, tmp_path: Path) -> None:
    cluster.kubectl("create", "namespace", NS)
    wait_for("the default ServiceAccount", lambda: cluster.kubectl("get", "sa", "default", "-n", NS,
                                                                   check=False).returncode == 0, timeout=30)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": NS},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}))
    wait_for("pod app Running", lambda: cluster.kubectl("get", "pod", "app", "-n", NS, "-o", "jsonpath={.status.phase}",
                                                       check=False).stdout == "Running", timeout=90)
    token = cluster.kubectl("create", "token", "default", "-n", NS, "--bound-object-kind", "Pod",
                            "--bound-object-name", "app").stdout.strip()
    ca = tmp_path / "ca.crt"
    ca.write_text(json.loads(cluster.kubectl("get", "configmap", "kube-root-ca.crt", "-n", NS, "-o", "json").stdout)
                  ["data"]["ca.crt"])

    def in_pod(*args: str) -> tuple[int, str]:
        result = cluster.exec(f"{NS}/app", "kubectl", "--kubeconfig", "/dev/null", "--server", "https://10.96.0.1",
                              "--certificate-authority", str(ca), "--token", token, "--cache-dir",
                              str(tmp_path / "cache"), *args, check=False)
        return result.returncode, result.stdout + result.stderr

    user = f"system:serviceaccount:{NS}:default"
    code, out = in_pod("get", "pods", "-n", NS, "-o", "name")
    assert code != 0
    assert (f'pods is forbidden: User "{user}" cannot list resource "pods" in API group "" in the namespace "{NS}"'
            in out), out
    cluster.kubectl("create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods", "-n", NS)
    cluster.kubectl("create", "rolebinding", "default-reads-pods", "--role=pod-reader",
                    f"--serviceaccount={NS}:default", "-n", NS)
    code, out = in_pod("get", "pods", "-n", NS, "-o", "name")
    assert code == 0 and out.strip() == "pod/app", out
    code, out = in_pod("auth", "can-i", "list", "pods", "-n", NS)
    assert (code, out.strip()) == (0, "yes"), out
    code, out = in_pod("auth", "whoami", "-o", "json")
    assert code == 0, out
    user_info = json.loads(out)["status"]["userInfo"]
    assert user_info["username"] == f"system:serviceaccount:{NS}:default"
    assert user_info["extra"]["authentication.kubernetes.io/pod-name"] == ["app"]
    code, out = in_pod("auth", "can-i", "delete", "pods", "-n", NS)
    assert (code, out.strip()) == (1, "no"), out
    code, out = in_pod("create", "configmap", "x", "-n", NS)
    assert code != 0
    assert (f'configmaps is forbidden: User "{user}" cannot create resource "configmaps" in API group "" in the '
            f'namespace "{NS}"') in out
    code, out = in_pod("get", "secrets", "-n", NS)
    assert code != 0
    assert f'User "{user}" cannot list resource "secrets"' in out

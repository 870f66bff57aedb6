"""`kubelab up --token-auth-file`: the one-process cluster with authentication on. Its components get
tokens (written into the file when missing) and do their work under the node restrictions: nodes
register, renew their leases, run pods and delete them, proxy agents program Services; the kubeconfig
carries the admin token and the lab CA, since the API then serves HTTPS (kubectl sends tokens only over
TLS); kubectl works with it unchanged; anonymous requests get 401. Render dataplane, so no root is needed.

And the default: `kubelab up` without a token file serves only on loopback, open as before.
"""

from __future__ import annotations

import base64
import signal
import ssl
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import polling
import pytest
import yaml

from kubelab.etcd import free_port
from kubelab.tokenfile import parse

NS = "/api/v1/namespaces/default"


def wait_for(what: str, check: Any, timeout: float = 60.0) -> Any:
    """Poll `check` until it returns something truthy; any error in it fails at once."""
    return polling.wait_for(what, check, timeout, interval=0.2, retry_on=())


class Up:
    def __init__(self, data_dir: Path, *args: str) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = data_dir.parent / "up.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "kubelab", "up", "--dataplane", "render", "--nodes", "2",
                                          "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{self.port}", *args],
                                         stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"kubelab up exited:\n{self.log.read_text()[-3000:]}")
            return b"kubelab is up" in self.log.read_bytes()
        wait_for("kubelab up", ready, 90)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                return self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Any]:
    started: list[Up] = []

    def start(*args: str) -> Up:
        cluster = Up(tmp_path / f"data{len(started)}", *args)
        started.append(cluster)
        cluster.wait_ready()
        return cluster

    try:
        yield start
    finally:
        codes = [cluster.stop() for cluster in started]
        assert codes == [0] * len(started), codes


def listening_addresses(port: int) -> set[str]:
    """The IPv4 addresses something listens on at `port` (from /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, hex_port = fields[1].split(":")
        if int(hex_port, 16) == port and fields[3] == "0A":  # LISTEN
            found.add(".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_up_with_a_token_file(up: Any, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('my-admin-token,alice,1000,"system:masters"\n')
    cluster = up("--token-auth-file", str(tokens))

    users = {u.name for u in parse(tokens.read_text()).values()}
    assert users == {"alice", "system:kube-scheduler", "system:kube-controller-manager", "system:kube-dns",
                     "system:kube-proxy", "system:node:node-1", "system:node:node-2"}
    assert stat.S_IMODE(tokens.stat().st_mode) & 0o077 == 0 or tokens.read_text().startswith("my-admin-token")
    config = yaml.safe_load((cluster.data_dir / "kubeconfig").read_text())
    assert config["users"][0]["user"] == {"token": "my-admin-token"}
    url = f"https://127.0.0.1:{cluster.port}"
    ca = cluster.data_dir / "pki" / "ca.crt"
    assert config["clusters"][0]["cluster"] == {"server": url,
                                                "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()}
    assert listening_addresses(cluster.port) == {"127.0.0.1"}

    lab_ca = ssl.create_default_context(cafile=str(ca))
    assert httpx.get(f"{url}/api/v1/nodes", verify=lab_ca).status_code == 401
    assert httpx.get(f"{url}/readyz", verify=lab_ca).text == "ok"
    with pytest.raises(httpx.ConnectError):  # a certificate of the lab's own CA, which nobody else trusts
        httpx.get(f"{url}/readyz")
    # The real kubectl, with nothing but the kubeconfig: it trusts the CA and so sends the token.
    kubectl = subprocess.run(["kubectl", "--kubeconfig", str(cluster.data_dir / "kubeconfig"), "get", "nodes",
                              "-o", "name"], capture_output=True, text=True, timeout=60, check=False)
    assert kubectl.stdout.split() == ["node/node-1", "node/node-2"], kubectl.stderr
    # kubectl --as: the admin acts as node-1, and is judged as node-1 (the Node authorizer's 403).
    as_node = ["kubectl", "--kubeconfig", str(cluster.data_dir / "kubeconfig"), "--as", "system:node:node-1",
               "--as-group", "system:nodes"]
    run = subprocess.run([*as_node, "auth", "can-i", "create", "secrets"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.stdout == "no\n", run.stderr
    run = subprocess.run([*as_node, "create", "secret", "generic", "impersonated", "--from-literal=k=v"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 1 and run.stderr.endswith(
        'secrets is forbidden: User "system:node:node-1" cannot create resource "secrets" in API group "" in the '
        'namespace "default"\n'), run.stderr
    run = subprocess.run([*as_node, "get", "nodes", "-o", "name"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.stdout.split() == ["node/node-1", "node/node-2"], run.stderr
    with httpx.Client(base_url=url, headers={"Authorization": "Bearer my-admin-token"}, timeout=30,
                      verify=lab_ca) as api:
        nodes = api.get("/api/v1/nodes").json()["items"]
        assert sorted(n["metadata"]["name"] for n in nodes) == ["node-1", "node-2"]
        for name in ("node-1", "node-2"):  # each kubelet renews its own lease with its own token
            lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}").json()
            assert lease["spec"]["holderIdentity"] == name
        api.post(f"{NS}/services", json={"metadata": {"name": "web"}, "spec": {
            "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}).raise_for_status()
        api.post(f"{NS}/pods", json={"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {
            "containers": [{"name": "web", "image": "example/web:1", "ports": [{"containerPort": 8080}]}]}}
                 ).raise_for_status()
        # Scheduler (binding), kubelet (status), controllers (EndpointSlice), proxy agents (rules): all with
        # their own tokens.
        try:
            ip = wait_for("the pod Running", lambda: api.get(f"{NS}/pods/web").json()["status"].get("podIP"))
        except AssertionError:
            raise AssertionError(f"the pod never ran: {api.get(f'{NS}/pods/web').text}\n"
                                 f"{cluster.log.read_text()[-4000:]}") from None
        cluster_ip = api.get(f"{NS}/services/web").json()["spec"]["clusterIP"]

        def programmed() -> bool:
            rules = subprocess.run([sys.executable, "-m", "kubelab", "iptables", "--data-dir", str(cluster.data_dir),
                                    "node-2"], capture_output=True, text=True, check=False).stdout
            return f"-d {cluster_ip}" in rules and f"{ip}:8080" in rules
        wait_for("node-2's proxy agent to program the Service", programmed)
        # The kubelet's final delete of its pod goes through the node restriction.
        assert api.delete(f"{NS}/pods/web").status_code == 200
        wait_for("the pod gone", lambda: api.get(f"{NS}/pods/web").status_code == 404)
    status = subprocess.run([sys.executable, "-m", "kubelab", "status", "--data-dir", str(cluster.data_dir)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert status.returncode == 0 and "node-1" in status.stdout and "node-2" in status.stdout, status.stdout
    # The official client reads the kubeconfig (server, CA, token) as well.
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    api_client = k8s_config.new_client_from_config(str(cluster.data_dir / "kubeconfig"))
    try:
        names = sorted(n.metadata.name for n in k8s_client.CoreV1Api(api_client).list_node().items)
    finally:
        api_client.close()
    assert names == ["node-1", "node-2"]


def test_up_without_a_token_file_is_open_on_loopback_only(up: Any) -> None:
    cluster = up()
    assert listening_addresses(cluster.port) == {"127.0.0.1"}
    assert httpx.get(f"{cluster.url}/api/v1/nodes").status_code == 200
    config = yaml.safe_load((cluster.data_dir / "kubeconfig").read_text())
    assert config["users"][0]["user"] == {}


@pytest.mark.parametrize("command", ["up", "apiserver"])
def test_the_api_listens_on_loopback_by_default(command: str) -> None:
    from launcher.cli import build_parser
    from launcher.runner import split_listen

    argv = [command] + (["--etcd-servers", "http://127.0.0.1:2379"] if command == "apiserver" else [])
    assert split_listen(build_parser().parse_args(argv).listen) == ("127.0.0.1", 8080)


@pytest.mark.parametrize("command", ["up", "apiserver", "dns"])
@pytest.mark.parametrize("listen", ["127.0.0.1:abc", "127.0.0.1:99999", "127.0.0.1", "[::1]:٣"])
def test_a_bad_listen_address_is_a_usage_error(command: str, listen: str) -> None:
    """argparse's usage error and exit 2, where a ValueError traceback came out of start-up before."""
    result = subprocess.run([sys.executable, "-m", "kubelab", command, "--listen", listen],
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"kubelab {command}: error: argument --listen: {listen!r} is not HOST:PORT (a port 0-65535)")
    assert "Traceback" not in result.stderr

"""`kubelab up --apiservers 3 --etcd-members 3` (render dataplane, with tokens so TLS and the lab CA are in
play): one command starts a 3-member etcd cluster and three API servers on it; `kubelab status` shows them
all; the kubernetes Service lists the three; each has its identity Lease; a write through one is read
through another; Ctrl-C stops everything and leaves no process behind."""

from __future__ import annotations

import json
import re
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import polling
from procfs import alive
from upprocess import start_up, wait_until_up

from kubelab.etcd import free_port
from kubelab.processes import stop_process

NS = "/api/v1/namespaces/default"


def test_up_with_three_apiservers_on_a_three_member_etcd(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('admin-token,alice,1000,"system:masters"\n')
    tokens.chmod(0o600)
    data, port = tmp_path / "data", free_port()
    while any(not _port_free(p) for p in (port + 1, port + 2)):
        port = free_port()
    log = tmp_path / "up.log"
    up = start_up(["--dataplane", "render", "--nodes", "1", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}",
                   "--token-auth-file", str(tokens), "--apiservers", "3", "--etcd-members", "3"], log)
    try:
        wait_until_up(up, log)

        state = json.loads((data / "cluster.json").read_text())
        urls = [f"https://127.0.0.1:{p}" for p in (port, port + 1, port + 2)]
        assert state["servers"] == urls
        assert len(state["etcd"]) == 3 and all(u.startswith("https://127.0.0.1:") for u in state["etcd"])
        assert f"server: {urls[0]}" in (data / "kubeconfig").read_text()  # the kubeconfig names the first

        status = subprocess.run([sys.executable, "-m", "kubelab", "status", "--data-dir", str(data)],
                                check=False, capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        for url in urls:
            assert f"apiserver   {url} (ready)" in status.stdout

        lab_ca = ssl.create_default_context(cafile=str(data / "pki" / "ca.crt"))
        clients = [httpx.Client(base_url=u, headers={"Authorization": "Bearer admin-token"}, verify=lab_ca,
                                timeout=30) for u in urls]
        try:
            clients[1].post(f"{NS}/configmaps", json={"metadata": {"name": "via-second"}}).raise_for_status()
            assert clients[2].get(f"{NS}/configmaps/via-second").status_code == 200

            def three_ports() -> bool:
                subsets = clients[0].get(f"{NS}/endpoints/kubernetes").json()["subsets"]
                return {p["port"] for s in subsets for p in s["ports"]} == {port, port + 1, port + 2}
            polling.wait_for("the kubernetes Service's endpoints to list the three", three_ports, 60)
            leases = clients[0].get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
                                    params={"labelSelector": "apiserver.kubernetes.io/identity=kube-apiserver"}).json()
            assert len({lease["metadata"]["name"] for lease in leases["items"]}) == 3
        finally:
            for client in clients:
                client.close()

        text = log.read_text()
        children = [int(pid) for pid in re.findall(r"apiserver-\d +ready at \S+ \(pid (\d+),", text)]
        assert len(children) == 2
        children += [json.loads(p.read_text())["pid"] for p in sorted((data / "etcd-cluster").glob("etcd-*.pid"))]
        assert len(children) == 5 and all(alive(pid) for pid in children)

        up.send_signal(signal.SIGINT)
        assert up.wait(120) == 0
        assert not [pid for pid in children if alive(pid)]
        assert not (data / "cluster.json").exists()
    finally:
        if up.poll() is None:
            stop_process(up)


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True



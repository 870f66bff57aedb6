"""`kubelab up --token-auth-file` guards its private etcd as well as its API (render dataplane, no root).

Before, the API wanted tokens but etcd answered anyone on its loopback port, so any local user read
every Secret and token straight from etcd. Now etcd serves https and wants a client certificate of the
lab CA (--client-cert-auth), as kube-apiserver's etcd does under kubeadm; only the API server has one.
A client without it, plaintext or TLS, reads nothing; the cluster works as before. And a token file that
others could read is made 0600, in one line.
"""

from __future__ import annotations

import base64
import json
import signal
import ssl
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import polling
import pytest
from upprocess import start_up, wait_until_up

from kubelab.etcd import free_port
from kubelab.processes import stop_process

NS = "/api/v1/namespaces/default"


def etcd_range(url: str, prefix: str, **client: object) -> httpx.Response:
    """A read of every key under `prefix` through etcd's own HTTP/JSON gateway (what `curl` would do)."""
    key = prefix.encode()
    body = {"key": base64.b64encode(key).decode(), "range_end": base64.b64encode(key[:-1] + b"0").decode()}
    return httpx.post(f"{url}/v3/kv/range", json=body, timeout=10, **client)  # type: ignore[arg-type]


def test_the_private_etcd_wants_a_certificate_of_the_lab_ca(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('admin-token,alice,1000,"system:masters"\n')
    tokens.chmod(0o644)
    data, port = tmp_path / "data", free_port()
    log = tmp_path / "up.log"
    up = start_up(["--dataplane", "render", "--nodes", "1", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}",
                   "--token-auth-file", str(tokens)], log)
    try:
        wait_until_up(up, log)

        assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
        assert f"token file {tokens} was mode 0644: made it 0600, as it holds bearer tokens" in log.read_text()
        pki = data / "pki"
        for key in ("apiserver.key", "etcd-server.key", "apiserver-etcd-client.key"):
            assert stat.S_IMODE((pki / key).stat().st_mode) == 0o600, key

        # The cluster works through it: a Secret written through the API, as kubectl would.
        lab_ca = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        with httpx.Client(base_url=f"https://127.0.0.1:{port}", headers={"Authorization": "Bearer admin-token"},
                          verify=lab_ca, timeout=30) as api:
            api.post(f"{NS}/secrets", json={"metadata": {"name": "db"}, "data": {
                "password": base64.b64encode(b"s3cret").decode()}}).raise_for_status()
            assert api.get(f"{NS}/secrets/db").json()["data"]["password"] == base64.b64encode(b"s3cret").decode()
            nodes = polling.wait_for("node-1 registered", lambda: api.get("/api/v1/nodes").json()["items"], 60)
            assert [n["metadata"]["name"] for n in nodes] == ["node-1"]

        [etcd] = json.loads((data / "cluster.json").read_text())["etcd"]
        assert etcd.startswith("https://127.0.0.1:")
        # A local user without a certificate: neither plaintext nor TLS gets an answer.
        with pytest.raises(httpx.TransportError):
            etcd_range(etcd.replace("https://", "http://"), "/registry/secrets/")
        with pytest.raises(httpx.TransportError):  # the handshake is refused: no client certificate
            etcd_range(etcd, "/registry/secrets/", verify=lab_ca)
        # The API server's own client certificate reads the Secret, so it is there to be read.
        with_cert = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        with_cert.load_cert_chain(pki / "apiserver-etcd-client.crt", pki / "apiserver-etcd-client.key")
        keys = [base64.b64decode(kv["key"]).decode()
                for kv in etcd_range(etcd, "/registry/secrets/", verify=with_cert).json().get("kvs", [])]
        assert "/registry/secrets/default/db" in keys
    finally:
        code = stop_process(up, sig=signal.SIGINT, timeout=60)
    assert code == 0, log.read_text()[-3000:]


def test_kubelab_apiserver_takes_kube_apiservers_etcd_tls_flags(tmp_path: Path) -> None:
    from kubelab.etcd import Etcd
    from kubelab.pki import ensure_lab_pki

    pki = ensure_lab_pki(tmp_path / "pki", ips=[])
    with Etcd(tmp_path / "etcd", tls=pki.etcd_tls()) as etcd:
        argv = [sys.executable, "-m", "kubelab", "apiserver", "--etcd-servers", etcd.url]
        flags = ["--etcd-cafile", str(pki.ca_file), "--etcd-certfile", str(pki.etcd_client_cert_file),
                 "--etcd-keyfile", str(pki.etcd_client_key_file)]
        missing = subprocess.run([*argv, *flags[:4]], capture_output=True, text=True, timeout=60, check=False)
        assert (missing.returncode, missing.stderr.strip()) == (
            2, "kubelab apiserver: --etcd-certfile and --etcd-keyfile go together")

        port = free_port()
        log = tmp_path / "apiserver.log"
        with open(log, "wb") as out:
            server = subprocess.Popen([*argv, *flags, "--listen", f"127.0.0.1:{port}"], stdout=out,
                                      stderr=subprocess.STDOUT)
        try:
            def ready() -> bool:
                if server.poll() is not None:
                    raise polling.GiveUp(f"kubelab apiserver exited with {server.returncode}:\n{log.read_text()}")
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).text == "ok"
            polling.wait_for("kubelab apiserver on an etcd with client-certificate TLS", ready, 60,
                             retry_on=(httpx.TransportError,))
            created = httpx.post(f"http://127.0.0.1:{port}{NS}/configmaps", timeout=30,
                                 json={"metadata": {"name": "over-tls"}, "data": {"a": "b"}})
            assert created.status_code == 201, created.text
        finally:
            # uvicorn stops on SIGTERM and then lets it end the process, as the default action would.
            assert stop_process(server, timeout=30) in (0, -signal.SIGTERM), log.read_text()[-3000:]

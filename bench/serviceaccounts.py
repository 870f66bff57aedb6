"""What service account tokens cost, against a private etcd and `kubelab apiserver` in its own process
(with --token-auth-file and a signing key file, plain HTTP on loopback):

(a) TokenRequest latency (`POST serviceaccounts/NAME/token`, one at a time);
(b) GET latency of one pod by who asks: a token-file user (a dict lookup), a service account JWT (ES256
    check plus the account read from the watch cache, apiserver/tokengetters.py; from etcd before) and a
    pod-bound JWT (plus the pod read, likewise). A/B against an older checkout: run it with
    PYTHONPATH=<that checkout> (the API server is a child process and imports from there);
(c) pod create latency with the ServiceAccount admission plugin (the account read, the volume added)
    and without it (a second API server on the same etcd with --disable-admission-plugins).

    .venv/bin/python bench/serviceaccounts.py [--n 300]

Prints one JSON document. Sequential requests over one keep-alive connection: latency, not throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import httpx
from harness import Lab, machine, summary_ms, wait_ready

from kubelab.etcd import free_port
from kubelab.pki import ensure_service_account_key

NS = "bench-sa"


def timed(client: httpx.Client, n: int, request: Any) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        resp = request(client, i)
        out.append(time.perf_counter() - t0)
        assert resp.status_code < 300, resp.text
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    n = parser.parse_args().n
    lab = Lab()
    try:
        etcd = lab.start_etcd()
        key = ensure_service_account_key(lab.base / "pki")
        tokens = lab.base / "tokens.csv"
        tokens.write_text('bench-admin,admin,1,"system:masters"\n')
        servers = []
        for name, extra in (("with-admission", []), ("without-admission", ["--disable-admission-plugins",
                                                                          "ServiceAccount"])):
            port = free_port()
            proc = lab.spawn(name, "apiserver", "--etcd-servers", etcd.url, "--listen", f"127.0.0.1:{port}",
                             "--token-auth-file", str(tokens), "--service-account-signing-key-file", str(key), *extra)
            asyncio.run(wait_ready(f"http://127.0.0.1:{port}", proc))
            servers.append(f"http://127.0.0.1:{port}")
        admin_headers = {"Authorization": "Bearer bench-admin"}
        result: dict[str, Any] = {"machine": machine(), "n": n}
        with httpx.Client(base_url=servers[0], headers=admin_headers, timeout=30) as admin:
            admin.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
            admin.post(f"/api/v1/namespaces/{NS}/serviceaccounts", json={"metadata": {"name": "default"}}
                       ).raise_for_status()
            pod = admin.post(f"/api/v1/namespaces/{NS}/pods", json={
                "metadata": {"name": "target"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}).json()
            token_path = f"/api/v1/namespaces/{NS}/serviceaccounts/default/token"
            result["a_token_request"] = summary_ms(timed(admin, n, lambda c, i: c.post(token_path, json={"spec": {}})))
            plain = admin.post(token_path, json={"spec": {}}).json()["status"]["token"]
            bound = admin.post(token_path, json={"spec": {"boundObjectRef": {
                "apiVersion": "v1", "kind": "Pod", "name": "target", "uid": pod["metadata"]["uid"]}}}).json()[
                "status"]["token"]
            get_path = f"/api/v1/namespaces/{NS}/pods/target"
            result["b_get_pod"] = {}
            for who, token in (("token_file_user", "bench-admin"), ("service_account", plain),
                               ("pod_bound_service_account", bound)):
                with httpx.Client(base_url=servers[0], headers={"Authorization": f"Bearer {token}"},
                                  timeout=30) as client:
                    result["b_get_pod"][who] = summary_ms(timed(client, n, lambda c, i: c.get(get_path)))
        result["c_pod_create"] = {}
        for label, server in (("service_account_admission", servers[0]), ("admission_off", servers[1])):
            with httpx.Client(base_url=server, headers=admin_headers, timeout=30) as client:
                result["c_pod_create"][label] = summary_ms(timed(client, n, lambda c, i, label=label: c.post(
                    f"/api/v1/namespaces/{NS}/pods", json={"metadata": {"name": f"{label[:5]}-{i}"},
                                                           "spec": {"containers": [{"name": "c", "image": "x"}]}})))
        print(json.dumps(result, indent=2))
    finally:
        lab.stop()


if __name__ == "__main__":
    main()

"""`kubelab dns` as its own process against a real API server: it registers kube-dns and answers from
what the API holds, over real UDP and TCP on loopback, following changes as they are watched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rcode
import httpx
import polling
import pytest
from apitools import ns_path, unique_name

from kubelab.etcd import free_port


def ask(port: int, name: str, rdtype: str, *, tcp: bool = False) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    send = dns.query.tcp if tcp else dns.query.udp
    return send(query, "127.0.0.1", port=port, timeout=2)


def answers(response: dns.message.Message) -> list[str]:
    return sorted(rd.to_text() for rrset in response.answer for rd in rrset)


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    return polling.wait_for(what, check, timeout, retry_on=(OSError, dns.exception.DNSException))


@pytest.fixture(scope="module")
def dns_port(private_api: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    with open(tmp_path_factory.mktemp("dns") / "kubelab-dns.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kubelab", "dns", "--server", private_api, "--listen",
                                 f"127.0.0.1:{port}", "--metrics-port", "-1",
                                 "--advertise-address", "10.240.0.3"],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for("kubelab dns to answer",
                     lambda: answers(ask(port, "kubernetes.default.svc.cluster.local.", "A")))
            yield port
        finally:
            os.killpg(proc.pid, signal.SIGINT)  # our own process group
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 0


def json_if_found(response: httpx.Response) -> Any:
    return response.json() if response.status_code == 200 else None


def test_registers_kube_dns(private_api: str, dns_port: int) -> None:
    with httpx.Client(base_url=private_api, timeout=10) as http:
        svc = wait_for("kube-dns",
                       lambda: json_if_found(http.get("/api/v1/namespaces/kube-system/services/kube-dns")))
        assert svc["spec"]["clusterIP"] == "10.96.0.10"
        assert [(p["name"], p["port"], p["protocol"], p["targetPort"]) for p in svc["spec"]["ports"]] == [
            ("dns", 53, "UDP", dns_port), ("dns-tcp", 53, "TCP", dns_port)]
        ep = wait_for("kube-dns endpoints",
                      lambda: json_if_found(http.get("/api/v1/namespaces/kube-system/endpoints/kube-dns")))
        assert ep["subsets"] == [{"addresses": [{"ip": "10.240.0.3"}],
                                  "ports": [{"name": "dns", "port": dns_port, "protocol": "UDP"},
                                            {"name": "dns-tcp", "port": dns_port, "protocol": "TCP"}]}]
    assert answers(ask(dns_port, "kube-dns.kube-system.svc.cluster.local.", "A", tcp=True)) == ["10.96.0.10"]


def test_follows_services_and_slices(private_api: str, dns_port: int) -> None:
    name = unique_name("db")
    with httpx.Client(base_url=private_api, timeout=10) as http:
        missing = ask(dns_port, f"{name}.default.svc.cluster.local.", "A")
        assert missing.rcode() == dns.rcode.NXDOMAIN
        resp = http.post(ns_path("services"), json={"metadata": {"name": name}, "spec": {
            "clusterIP": "None", "ports": [{"name": "pg", "port": 5432}]}})
        assert resp.status_code == 201, resp.text
        # Headless without endpoints: still NXDOMAIN. Then a slice with one ready endpoint.
        assert ask(dns_port, f"{name}.default.svc.cluster.local.", "A").rcode() == dns.rcode.NXDOMAIN
        resp = http.post("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", json={
            "metadata": {"name": f"{name}-1", "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4", "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["10.244.1.8"], "hostname": "db-0", "conditions": {"ready": True}}]})
        assert resp.status_code == 201, resp.text
        wait_for("the endpoint", lambda: answers(ask(dns_port, f"{name}.default.svc.cluster.local.", "A"))
                 == ["10.244.1.8"])
        assert answers(ask(dns_port, f"_pg._tcp.{name}.default.svc.cluster.local.", "SRV")) == [
            f"0 100 5432 db-0.{name}.default.svc.cluster.local."]
        http.delete(ns_path("services", name=name))
        wait_for("the Service to go", lambda: ask(dns_port, f"{name}.default.svc.cluster.local.", "A").rcode()
                 == dns.rcode.NXDOMAIN)


def test_kubelab_dns_started_before_the_api_server_waits_for_it(tmp_path: Any) -> None:
    """An API server not yet listening is a refused connection, which kubelab's client raises as its
    TransportError, not as OSError: `kubelab dns` must retry it as it retries any other, not exit."""
    log_path = tmp_path / "kubelab-dns.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kubelab", "dns", "--server", f"http://127.0.0.1:{free_port()}",
                                 "--listen", f"127.0.0.1:{free_port()}", "--metrics-port", "-1"],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            def retried_twice_or_exited() -> bool:
                retries = log_path.read_text().count("cannot write Service kube-system/kube-dns yet")
                return proc.poll() is not None or retries >= 2

            polling.wait_for("kubelab dns to retry its registration twice", retried_twice_or_exited, 60)
            assert proc.poll() is None, f"kubelab dns exited ({proc.returncode}):\n{log_path.read_text()}"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)  # our own process group
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 0, log_path.read_text()

"""pods/proxy and services/proxy through a real API server to a real HTTP server, driven by the real kubectl
(`get --raw`, `kubectl proxy`), the official Python client's connect_* calls and plain HTTP: kube's location
resolution and words (pkg/registry/core/pod/strategy.go and service/storage/storage.go ResourceLocation),
the upgrade-aware proxy (methods, query, headers, redirects, Location rewriting, upgrades), and who may
proxy (nodes and service accounts may not).

The "pod" is a Pod object whose status names an address of this machine that is not loopback (kube refuses
to proxy to loopback: "address not allowed"), where this test serves HTTP; the Endpoints are written as the
endpoints controller would write them. The netns lab's run, with a real pod behind a real Service, is
tests/e2e/test_pod_proxy.py.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import secrets
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import kubernetes
import pytest
from apitools import assert_status
from kubectltools import Kubectl, wait_for

from kubelab import kubeconfig as kubeconfigs
from kubelab.etcd import Etcd

SUFFIX = secrets.token_hex(3)
NS = f"pxy-{SUFFIX}"


def host_address() -> str:
    """An IPv4 address of this machine that is not loopback (kube proxies to global unicast addresses only)."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True,
                         check=False).stdout
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            return fields[fields.index("inet") + 1].split("/")[0]
    pytest.skip("this machine has no IPv4 address but loopback")


class Echo(http.server.BaseHTTPRequestHandler):
    """What the pod serves: every request answered with what arrived (method, path, headers, body), plus a
    few answers to check what the proxy does with them."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = self._read_chunked()
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "/target/page?x=1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/elsewhere"):
            self.send_response(302)
            self.send_header("Location", "http://example.com/away")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/upgrade") and self.headers.get("Upgrade"):
            self.send_response(101)
            self.send_header("Connection", "Upgrade")
            self.send_header("Upgrade", self.headers["Upgrade"])
            self.end_headers()
            self.wfile.flush()
            while data := self.connection.recv(4096):  # an echo, until the client closes
                self.connection.sendall(data.upper())
            self.close_connection = True
            return
        answer = json.dumps({"method": self.command, "path": self.path, "body": body.decode(),
                             "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("X-Pod", "yes")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer)

    def _read_chunked(self) -> bytes:
        out = b""
        while (size := int(self.rfile.readline().split(b";")[0], 16)) != 0:
            out += self.rfile.read(size)
            self.rfile.readline()
        self.rfile.readline()
        return out

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _answer


@pytest.fixture(scope="module")
def backend() -> Iterator[tuple[str, int]]:
    address = host_address()
    server = http.server.ThreadingHTTPServer((address, 0), Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="pod-echo", daemon=True)
    thread.start()
    try:
        yield address, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _pod(name: str, port: int | None, *, sa: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "web", "image": "busybox"}
    if port is not None:
        container["ports"] = [{"containerPort": port}]
    return {"metadata": {"name": name, "labels": {"app": name}}, "spec": {"containers": [container]}}


@pytest.fixture(scope="module")
def cluster(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]], backend: tuple[str, int],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    ip, port = backend
    tmp = tmp_path_factory.mktemp("podproxy")
    tokens = tmp / "tokens.csv"
    tokens.write_text(f'admin-{SUFFIX},alice,1,"system:masters"\nnode-{SUFFIX},system:node:n1,n1,system:nodes\n')
    closed = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    closed.bind((ip, 0))  # bound, never listening: connection refused
    try:
        with start_apiserver(etcd.url, token_auth_file=str(tokens)) as url:
            admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer admin-{SUFFIX}"}, timeout=30)
            admin.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
            admin.post(f"/api/v1/namespaces/{NS}/serviceaccounts", json={"metadata": {"name": "default"}}
                       ).raise_for_status()
            for name, pod_port, pod_ip in (("web", port, ip), ("bare", None, ip), ("shut", closed.getsockname()[1], ip),
                                           ("pending", port, None), ("local", port, "127.0.0.1")):
                made = admin.post(f"/api/v1/namespaces/{NS}/pods", json=_pod(name, pod_port))
                assert made.status_code == 201, made.text
                if pod_ip is not None:
                    status = {**made.json(), "status": {"phase": "Running", "podIP": pod_ip, "podIPs": [{"ip": pod_ip}]}}
                    admin.put(f"/api/v1/namespaces/{NS}/pods/{name}/status", json=status).raise_for_status()
            for name in ("web", "empty", "notready", "stale"):
                admin.post(f"/api/v1/namespaces/{NS}/services", json={
                    "metadata": {"name": name}, "spec": {"selector": {"app": name}, "ports": [
                        {"name": "http", "port": 80, "targetPort": port}]}}).raise_for_status()
            ready = [{"ip": ip, "targetRef": {"kind": "Pod", "namespace": NS, "name": "web"}}]
            endpoints = {"web": [{"addresses": ready, "ports": [{"name": "http", "port": port}]}],
                         "empty": [],
                         "notready": [{"notReadyAddresses": ready, "ports": [{"name": "http", "port": port}]}],
                         # an address the pod no longer has (isValidAddress skips it)
                         "stale": [{"addresses": [{"ip": "192.0.2.254", "targetRef": {"kind": "Pod", "namespace": NS,
                                                                                    "name": "web"}}],
                                    "ports": [{"name": "http", "port": port}]}]}
            for name, subsets in endpoints.items():
                admin.post(f"/api/v1/namespaces/{NS}/endpoints", json={"metadata": {"name": name}, "subsets": subsets}
                           ).raise_for_status()
            # kubectl sends tokens over TLS only: it and the Python client use a second API server on the same
            # etcd, without a token file.
            with start_apiserver(etcd.url) as open_url:
                config = kubeconfigs.write(tmp / "kubeconfig", open_url)
                yield {"url": url, "open_url": open_url, "admin": admin, "ip": ip, "port": port, "tmp": tmp,
                       "kubeconfig": config, "closed": closed.getsockname()[1]}
            admin.close()
    finally:
        closed.close()


def svc(path: str = "/", name: str = "web:80") -> str:
    return f"/api/v1/namespaces/{NS}/services/{name}/proxy{path}"


def pod(path: str = "/", name: str = "web") -> str:
    return f"/api/v1/namespaces/{NS}/pods/{name}/proxy{path}"


# --- through kubectl and the Python client ---------------------------------------------------------

@pytest.mark.parametrize("version", ["1.29", "1.33"])
def test_kubectl_get_raw_reaches_the_pod_behind_a_service(cluster: dict[str, Any], version: str) -> None:
    kubectl = Kubectl(version, cluster["kubeconfig"], cluster["tmp"] / f"cache-{version}")
    seen = json.loads(kubectl.ok("get", "--raw", svc("/hello/world?x=1&x=2")))
    assert (seen["method"], seen["path"]) == ("GET", "/hello/world?x=1&x=2")
    seen = json.loads(kubectl.ok("get", "--raw", pod("/by/pod")))
    assert seen["path"] == "/by/pod"


def test_kubectl_get_raw_shows_kubes_error_for_a_service_without_endpoints(cluster: dict[str, Any]) -> None:
    kubectl = Kubectl("1.33", cluster["kubeconfig"], cluster["tmp"] / "cache-1.33")
    failed = kubectl("get", "--raw", svc(name="empty")).failed()
    assert 'Error from server (ServiceUnavailable): no endpoints available for service "empty"' in failed.stderr


def test_kubectl_proxy_then_curl(cluster: dict[str, Any]) -> None:
    """The way a user reaches a Service from their machine: `kubectl proxy`, then any HTTP client."""
    kubectl = Kubectl("1.33", cluster["kubeconfig"], cluster["tmp"] / "cache-1.33")
    proc = kubectl.popen("proxy", "--port=0")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "Starting to serve on 127.0.0.1:PORT"
        local = "http://" + line.strip().rsplit(" ", 1)[1]
        with httpx.Client(base_url=local, timeout=30) as client:
            seen = client.get(svc("/via/kubectl-proxy")).json()
            assert seen["path"] == "/via/kubectl-proxy"
            posted = client.post(pod("/form"), content=b"a=1&b=2",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"}).json()
            assert (posted["method"], posted["body"]) == ("POST", "a=1&b=2")
            moved = client.get(svc("", name="web:http"))
            assert moved.status_code == 301
            assert moved.headers["location"] == svc("/", name="web:http")
    finally:
        proc.terminate()
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_python_client_connect_calls(cluster: dict[str, Any]) -> None:
    config = kubernetes.client.Configuration()
    config.host = cluster["open_url"]
    with kubernetes.client.ApiClient(config) as client:
        core = kubernetes.client.CoreV1Api(client)
        got = core.connect_get_namespaced_service_proxy_with_path("web:http", NS, "from/python", path2="x")
        # The client decodes the JSON answer into a str of its repr; the path is in there either way.
        assert "/from/python" in str(got)
        posted = core.connect_post_namespaced_pod_proxy_with_path("web", NS, "posted")
        assert "POST" in str(posted)
        with pytest.raises(kubernetes.client.ApiException) as failure:
            core.connect_get_namespaced_service_proxy("empty", NS)
        assert failure.value.status == 503


# --- what reaches the pod, and what comes back -------------------------------------------------------

@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_every_method_reaches_the_pod_with_its_body(cluster: dict[str, Any], method: str) -> None:
    resp = cluster["admin"].request(method, svc("/m"), content=b"payload" if method not in ("GET", "OPTIONS") else None)
    assert resp.status_code == 200, resp.text
    seen = resp.json()
    assert seen["method"] == method
    assert seen["body"] == ("payload" if method not in ("GET", "OPTIONS") else "")


def test_head_gets_the_pods_headers_and_no_body(cluster: dict[str, Any]) -> None:
    resp = cluster["admin"].head(svc("/h"))
    assert resp.status_code == 200
    assert resp.headers["x-pod"] == "yes"
    assert resp.content == b""


def test_a_streamed_request_body_arrives_whole(cluster: dict[str, Any]) -> None:
    def pieces() -> Iterator[bytes]:
        yield b"one,"
        yield b"two"

    seen = cluster["admin"].post(pod("/chunked"), content=pieces()).json()  # no length: chunked on the way in
    assert seen["body"] == "one,two"


def test_headers_the_pod_sees(cluster: dict[str, Any]) -> None:
    seen = cluster["admin"].get(svc("/hdr"), headers={"X-Custom": "kept", "X-Forwarded-For": "10.1.1.1"}).json()
    headers = seen["headers"]
    assert headers["x-custom"] == "kept"
    assert "authorization" not in headers  # the API server consumed the credentials
    assert headers["x-forwarded-for"] == "10.1.1.1, 127.0.0.1"
    assert headers["x-forwarded-uri"] == svc("/hdr")


def test_cors_headers_of_the_pod_are_removed(cluster: dict[str, Any]) -> None:
    resp = cluster["admin"].get(svc("/cors"))
    assert resp.status_code == 200
    assert "access-control-allow-origin" not in resp.headers
    assert resp.headers["x-pod"] == "yes"


def test_the_path_is_cleaned_and_its_trailing_slash_kept(cluster: dict[str, Any]) -> None:
    assert cluster["admin"].get(svc("/a/../b/")).json()["path"] == "/b/"
    assert cluster["admin"].get(svc("/")).json()["path"] == "/"


def test_proxy_without_a_path_redirects_to_the_slash(cluster: dict[str, Any]) -> None:
    resp = cluster["admin"].get(svc("") + "?q=1", follow_redirects=False)
    assert resp.status_code == 301
    assert resp.headers["location"] == svc("/") + "?q=1"


def test_a_location_on_the_pod_goes_back_through_the_proxy(cluster: dict[str, Any]) -> None:
    resp = cluster["admin"].get(svc("/redirect"), follow_redirects=False)
    assert resp.status_code == 302
    assert resp.headers["location"] == svc("/target/page") + "?x=1"
    elsewhere = cluster["admin"].get(svc("/elsewhere"), follow_redirects=False)
    assert elsewhere.headers["location"] == "http://example.com/away"


def test_an_upgrade_is_spliced_to_the_pod(cluster: dict[str, Any]) -> None:
    host, port = cluster["url"].removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall((f"GET {svc('/upgrade')} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer admin-{SUFFIX}\r\n"
                      "Connection: Upgrade\r\nUpgrade: echo\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(4096)
            assert data, head
            head += data
        assert head.startswith(b"HTTP/1.1 101"), head
        conn.sendall(b"hello")
        echoed = b""
        while len(echoed) < 5:
            data = conn.recv(4096)
            assert data
            echoed += data
        assert echoed == b"HELLO"


# --- kube's words when there is nowhere to go --------------------------------------------------------

@pytest.mark.parametrize(("path", "code", "reason", "message"), [
    pytest.param(svc(name="empty"), 503, "ServiceUnavailable", 'no endpoints available for service "empty"',
                 id="no endpoints"),
    pytest.param(svc(name="notready"), 503, "ServiceUnavailable", 'no endpoints available for service "notready"',
                 id="only not-ready addresses"),
    pytest.param(svc(name="stale:http"), 503, "ServiceUnavailable", 'no endpoints available for service "stale:http"',
                 id="address its pod no longer has"),
    pytest.param(svc(name="web:81"), 503, "ServiceUnavailable", 'no service port 81 found for service "web"',
                 id="no such service port"),
    pytest.param(svc(name="web:nope"), 503, "ServiceUnavailable", 'no endpoints available for service "web:nope"',
                 id="no such port name"),
    pytest.param(svc(name="nosuch:80"), 404, "NotFound", 'services "nosuch" not found', id="no such service"),
    pytest.param(svc(name="nosuch"), 404, "NotFound", 'endpoints "nosuch" not found',
                 id="no such service, no port: its endpoints are read first"),
    pytest.param(svc(name="a:b:c:d"), 400, "BadRequest", 'invalid service request "a:b:c:d"', id="too many colons"),
    pytest.param(svc(name="ftp:web:80"), 400, "BadRequest", 'invalid service request "ftp:web:80"', id="bad scheme"),
    pytest.param(pod(name="nosuch"), 404, "NotFound", 'pods "nosuch" not found', id="no such pod"),
    pytest.param(pod(name="pending"), 400, "BadRequest", "address not allowed", id="pod without an IP"),
    pytest.param(pod(name="local"), 400, "BadRequest", "address not allowed", id="pod on loopback"),
    pytest.param(pod(name=":80"), 400, "BadRequest", 'invalid pod request ":80"', id="no pod name"),
])
def test_kubes_errors(cluster: dict[str, Any], path: str, code: int, reason: str, message: str) -> None:
    assert_status(cluster["admin"].get(path), code, reason, message)


def test_a_pod_that_refuses_is_503_with_the_dial_error(cluster: dict[str, Any]) -> None:
    resp = cluster["admin"].get(pod(name="shut"))
    assert_status(resp, 503, "ServiceUnavailable",
                  f"error trying to reach service: dial tcp {cluster['ip']}:{cluster['closed']}: connect: "
                  "connection refused")


def test_a_pod_without_ports_is_reached_on_port_80(cluster: dict[str, Any]) -> None:
    resp = cluster["admin"].get(pod(name="bare"))
    body = assert_status(resp, 503, "ServiceUnavailable")
    assert body["message"].startswith(f"error trying to reach service: dial tcp {cluster['ip']}:80: ")


def test_the_port_in_the_pod_name_is_used(cluster: dict[str, Any]) -> None:
    assert cluster["admin"].get(pod("/p", name=f"bare:{cluster['port']}")).json()["path"] == "/p"


def test_discovery_names_the_proxy_kinds(cluster: dict[str, Any]) -> None:
    resources = {r["name"]: r for r in cluster["admin"].get("/api/v1").json()["resources"]}
    assert resources["pods/proxy"]["kind"] == "PodProxyOptions"
    assert resources["services/proxy"]["kind"] == "ServiceProxyOptions"
    assert resources["nodes/proxy"]["kind"] == "NodeProxyOptions"


# --- who may proxy ----------------------------------------------------------------------------------

def test_a_node_may_not_proxy(cluster: dict[str, Any]) -> None:
    resp = httpx.get(cluster["url"] + svc(), headers={"Authorization": f"Bearer node-{SUFFIX}"}, timeout=30)
    assert_status(resp, 403, "Forbidden", f'services "web:80" is forbidden: User "system:node:n1" cannot get resource '
                                          f'"services/proxy" in API group "" in the namespace "{NS}"')


@pytest.mark.parametrize(("method", "verb"), [("GET", "get"), ("POST", "create"), ("PUT", "update"),
                                              ("DELETE", "delete"), ("OPTIONS", "options")])
def test_a_service_account_may_not_proxy(cluster: dict[str, Any], method: str, verb: str) -> None:
    made = cluster["admin"].post(f"/api/v1/namespaces/{NS}/serviceaccounts/default/token",
                                 json={"spec": {"expirationSeconds": 3600}})
    assert made.status_code == 201, made.text
    token = made.json()["status"]["token"]
    resp = httpx.request(method, cluster["url"] + pod(), headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert_status(resp, 403, "Forbidden",
                  f'pods "web" is forbidden: User "system:serviceaccount:{NS}:default" cannot {verb} resource '
                  f'"pods/proxy" in API group "" in the namespace "{NS}"')


def test_anonymous_is_401(cluster: dict[str, Any]) -> None:
    assert_status(httpx.get(cluster["url"] + svc(), timeout=30), 401, "Unauthorized", "Unauthorized")


def test_the_pod_is_reached_again_after_the_refusals(cluster: dict[str, Any]) -> None:
    """Nothing above left the API server unable to proxy (no leaked connection state)."""
    wait_for("the proxy answers", lambda: cluster["admin"].get(svc("/again")).json()["path"] == "/again" or None)


def test_a_request_abandoned_before_the_pod_answers_is_cleaned_up(cluster: dict[str, Any]) -> None:
    """A pod that accepts and never answers, and a client that gives up: the API server closes its
    connection to the pod (nothing left waiting forever)."""
    silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    silent.bind((cluster["ip"], 0))
    silent.listen(1)
    silent.settimeout(30)
    try:
        made = cluster["admin"].post(f"/api/v1/namespaces/{NS}/pods", json=_pod("silent", silent.getsockname()[1]))
        assert made.status_code == 201, made.text
        status = {**made.json(), "status": {"podIP": cluster["ip"], "podIPs": [{"ip": cluster["ip"]}]}}
        cluster["admin"].put(f"/api/v1/namespaces/{NS}/pods/silent/status", json=status).raise_for_status()
        host, port = cluster["url"].removeprefix("http://").split(":")
        client = socket.create_connection((host, int(port)), timeout=30)
        client.sendall((f"GET {pod('/never', name='silent')} HTTP/1.1\r\nHost: {host}\r\n"
                        f"Authorization: Bearer admin-{SUFFIX}\r\n\r\n").encode())
        backend, _ = silent.accept()
        with backend:
            backend.settimeout(30)
            seen = b""
            while b"\r\n\r\n" not in seen:
                data = backend.recv(4096)
                assert data, seen
                seen += data
            assert seen.startswith(b"GET /never HTTP/1.1")
            client.close()  # the client gives up before the pod says anything
            assert backend.recv(4096) == b""  # the API server closed its side (a timeout here fails the test)
    finally:
        silent.close()


@pytest.mark.parametrize(("answer", "message"), [
    pytest.param(b"garbage\r\n\r\n", "error trying to reach service: net/http: malformed HTTP response 'garbage'",
                 id="not HTTP"),
    pytest.param(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
                 "error trying to reach service: net/http: server response headers exceeded 65536 bytes; aborted",
                 id="headers too large"),
    pytest.param(b"", "error trying to reach service: EOF", id="closed without an answer"),
])
def test_a_pod_answering_nonsense_is_503(cluster: dict[str, Any], answer: bytes, message: str) -> None:
    rogue = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    rogue.bind((cluster["ip"], 0))
    rogue.listen(1)
    rogue.settimeout(30)
    name = f"rogue-{secrets.token_hex(2)}"

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = rogue.accept()
            with conn:
                conn.settimeout(30)
                seen = b""
                while b"\r\n\r\n" not in seen and (data := conn.recv(4096)):
                    seen += data
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        made = cluster["admin"].post(f"/api/v1/namespaces/{NS}/pods", json=_pod(name, rogue.getsockname()[1]))
        assert made.status_code == 201, made.text
        status = {**made.json(), "status": {"podIP": cluster["ip"], "podIPs": [{"ip": cluster["ip"]}]}}
        cluster["admin"].put(f"/api/v1/namespaces/{NS}/pods/{name}/status", json=status).raise_for_status()
        assert_status(cluster["admin"].get(pod("/x", name=name)), 503, "ServiceUnavailable", message)
    finally:
        rogue.close()
        thread.join(30)

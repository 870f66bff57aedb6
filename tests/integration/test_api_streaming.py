"""pods/exec, pods/log, pods/portforward and nodes/proxy through a real API server (with a token file) to a
real kubelet API (kubeletstub/server.py) on a loopback port, driven by the real kubectl (1.29: SPDY/3.1;
1.33: WebSocket) and the official Python client's stream().

The kubelet here is a node whose "containers" run on the host (the dataplane of `kubelab node --dataplane
host` without the namespaces: no root needed); the netns lab's end-to-end run is tests/e2e/test_streaming.py.
Its log files are written by this test in the CRI format (crilog.format_line), as the runtime writes them.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import re
import secrets
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import polling
import pytest
from apitools import assert_status
from kubectltools import Kubectl

from kubelab import kubeconfig as kubeconfigs
from kubelab.etcd import Etcd
from kubelab.models import Pod
from kubeletstub import crilog
from kubeletstub.server import KubeletApiConfig, KubeletServer

SUFFIX = secrets.token_hex(3)
NS = f"stream-{SUFFIX}"
NODE, RENDER_NODE, DEAD_NODE = f"stream-{SUFFIX}-1", f"stream-{SUFFIX}-2", f"stream-{SUFFIX}-3"
MARKER = 31_000 + secrets.randbelow(999)  # `sleep MARKER.N`: this test's processes, found by command line


class HostPods:
    """The kubelet's dataplane for this test: a pod's commands run on the host, its ports are the host's."""

    def pod_argv(self, pod_key: str, cmd: Sequence[str]) -> list[str] | None:
        return list(cmd)

    def pod_netns(self, pod_key: str) -> str | None:
        return None


class ProcessStdio:
    """The runtime's part in attach (kubeletstub.attach.AttachableContainer), played by a real process: its
    stdin held open, its output fanned out to whoever is attached."""

    tty = False
    has_stdin = True

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.queues: set[asyncio.Queue[tuple[int, bytes] | None]] = set()
        self.pumps = [asyncio.create_task(self._pump(proc.stdout, 1)), asyncio.create_task(self._pump(proc.stderr, 2))]

    @classmethod
    async def start(cls, argv: list[str]) -> ProcessStdio:
        proc = await asyncio.create_subprocess_exec(*argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                    stderr=subprocess.PIPE)
        return cls(proc)

    async def _pump(self, stream: asyncio.StreamReader | None, channel: int) -> None:
        assert stream is not None
        while data := await stream.read(4096):
            for queue in list(self.queues):
                queue.put_nowait((channel, data))
        if channel == 1:
            await self.proc.wait()
            for queue in list(self.queues):
                queue.put_nowait(None)

    def subscribe(self) -> asyncio.Queue[tuple[int, bytes] | None]:
        queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue()
        self.queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[tuple[int, bytes] | None]) -> None:
        self.queues.discard(queue)

    async def write_stdin(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def resize(self, columns: int, rows: int) -> None:
        return None

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        await self.proc.wait()


class KubeletThread:
    """A KubeletServer on 127.0.0.1, on an event loop of its own in a thread."""

    def __init__(self, pods: dict[str, Pod], log_root: Path, *, node_name: str = NODE,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.stdio: dict[tuple[str, str], ProcessStdio] = {}
        self.server = KubeletServer(KubeletApiConfig(node_name, pods, HostPods(), log_root,
                                                     attachable=lambda pod, c: self.stdio.get((pod.key, c))),
                                    ssl_context=ssl_context)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.thread = threading.Thread(target=self.loop.run_forever, name="kubelet-api", daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(sock), self.loop).result(10)

    def run_container(self, pod_key: str, container: str, argv: list[str]) -> ProcessStdio:
        stdio = asyncio.run_coroutine_threadsafe(ProcessStdio.start(argv), self.loop).result(10)
        self.stdio[(pod_key, container)] = stdio
        return stdio

    def stop(self) -> None:
        for stdio in self.stdio.values():
            asyncio.run_coroutine_threadsafe(stdio.kill(), self.loop).result(10)
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def node(name: str, port: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}


def pod(name: str, node_name: str | None, *containers: str, init: Sequence[str] = (),
        annotations: dict[str, str] | None = None, stdin: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": c, "image": "busybox", **({"stdin": True} if stdin else {})}
                                           for c in containers]}
    if init:
        spec["initContainers"] = [{"name": c, "image": "busybox"} for c in init]
    if node_name:
        spec["nodeName"] = node_name
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def running(obj: dict[str, Any], *, restarts: int = 0, waiting: str | None = None) -> Pod:
    """The kubelet's view of a pod it runs: every container running (or waiting), `restarts` times over."""
    model = Pod.model_validate(obj)
    names = [c["name"] for c in obj["spec"]["containers"]]
    state: dict[str, Any] = {"waiting": {"reason": waiting}} if waiting else {"running": {"startedAt": "x"}}
    last = {"terminated": {"exitCode": 1}} if restarts else {}
    model.status = Pod.model_validate({"status": {"containerStatuses": [
        {"name": n, "restartCount": restarts, "state": state, "lastState": last} for n in names]}}).status
    return model


@pytest.fixture(scope="module")
def cluster(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("streaming")
    tokens = tmp / "tokens.csv"
    tokens.write_text(f'admin-{SUFFIX},alice,1,"system:masters"\n'
                      f"node-{SUFFIX},system:node:{NODE},n1,system:nodes\n")
    pods: dict[str, Pod] = {}
    kubelet = KubeletThread(pods, tmp / "logs")
    dead = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    dead.bind(("127.0.0.1", 0))  # bound, never listening: connection refused
    try:
        with start_apiserver(etcd.url, token_auth_file=str(tokens)) as url:
            admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer admin-{SUFFIX}"}, timeout=30)
            admin.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
            for name, port in ((NODE, kubelet.port), (RENDER_NODE, 0), (DEAD_NODE, dead.getsockname()[1])):
                admin.post("/api/v1/nodes", json=node(name, port)).raise_for_status()
            for obj in (pod("one", NODE, "main"), pod("two", NODE, "web", "side", init=["setup"]),
                        pod("picky", NODE, "web", "side",
                            annotations={"kubectl.kubernetes.io/default-container": "side"}),
                        pod("pending", None, "main"), pod("rendered", RENDER_NODE, "main"),
                        pod("lost", DEAD_NODE, "main"), pod("starting", NODE, "main"), pod("restarted", NODE, "main"),
                        pod("attached", NODE, "main", stdin=True)):
                created = admin.post(f"/api/v1/namespaces/{NS}/pods", json=obj)
                assert created.status_code == 201, created.text
                stored = created.json()
                name = stored["metadata"]["name"]
                pods[f"{NS}/{name}"] = running(stored, waiting="ContainerCreating" if name == "starting" else None,
                                               restarts=1 if name == "restarted" else 0)
            # kubectl sends tokens over TLS only: it and the Python client use a second API server on the
            # same etcd, without a token file.
            with start_apiserver(etcd.url) as open_url:
                config = kubeconfigs.write(tmp / "kubeconfig", open_url)
                yield {"url": url, "admin": admin, "pods": pods, "kubelet": kubelet, "kubeconfig": config, "logs": tmp / "logs",
                       "tmp": tmp}
            admin.close()
    finally:
        dead.close()
        kubelet.stop()


@pytest.fixture(scope="module")
def kubectl_of(cluster: dict[str, Any]) -> Callable[[str], Kubectl]:
    def make(version: str) -> Kubectl:
        cache = cluster["tmp"] / f"cache-{version}"
        return Kubectl(version, cluster["kubeconfig"], cache)
    return make


def exec_path(name: str, *, query: str = "command=true&stdout=true") -> str:
    return f"/api/v1/namespaces/{NS}/pods/{name}/exec?{query}"


WS_UPGRADE = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "v5.channel.k8s.io"}


# --- what the API server answers before any kubelet is dialed ------------------------------------

@pytest.mark.parametrize(("path", "headers", "code", "reason", "message"), [
    pytest.param(exec_path("nope"), WS_UPGRADE, 404, "NotFound", 'pods "nope" not found', id="no such pod"),
    pytest.param(exec_path("one", query="container=nope&command=true&stdout=1"), WS_UPGRADE, 400, "BadRequest",
                 "container nope is not valid for pod one", id="no such container"),
    pytest.param(exec_path("two"), WS_UPGRADE, 400, "BadRequest",
                 "a container name must be specified for pod two, choose one of: [web side] or one of the init "
                 "containers: [setup]", id="ambiguous container"),
    pytest.param(exec_path("pending"), WS_UPGRADE, 400, "BadRequest", "pod pending does not have a host assigned",
                 id="pod not scheduled"),
    pytest.param(exec_path("one"), {}, 400, "BadRequest", "Upgrade request required", id="not an upgrade"),
    pytest.param(exec_path("one", query="stdout=true"), WS_UPGRADE, 400, "BadRequest",
                 "you must specify at least one command for the container", id="no command"),
    pytest.param(exec_path("rendered"), WS_UPGRADE, 503, "ServiceUnavailable", None, id="node without kubelet API"),
    pytest.param(f"/api/v1/namespaces/{NS}/pods/one/log?container=nope", {}, 400, "BadRequest",
                 "container nope is not valid for pod one", id="log of no such container"),
    pytest.param(f"/api/v1/namespaces/{NS}/pods/one/log?tailLines=-1", {}, 422, "Invalid",
                 'PodLogOptions "one" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0',
                 id="negative tailLines"),
    pytest.param(f"/api/v1/namespaces/{NS}/pods/one/log?sinceSeconds=5&sinceTime=2024-01-01T00:00:00Z", {}, 422,
                 "Invalid", 'PodLogOptions "one" is invalid: : Forbidden: at most one of `sinceTime` or '
                            "`sinceSeconds` may be specified", id="two kinds of since"),
])
def test_bad_requests_get_kubes_status(cluster: dict[str, Any], path: str, headers: dict[str, str], code: int,
                                       reason: str, message: str | None) -> None:
    assert_status(cluster["admin"].get(path, headers=headers), code, reason, message)


def test_a_dead_kubelet_is_an_error_not_a_hang(cluster: dict[str, Any]) -> None:
    resp = cluster["admin"].get(exec_path("lost"), headers=WS_UPGRADE)
    body = assert_status(resp, 500, "")
    assert body["message"].startswith("error dialing backend: dial tcp 127.0.0.1:")
    assert body["message"].endswith("connect: connection refused")


@pytest.mark.parametrize(("method", "headers", "verb"), [
    pytest.param("GET", WS_UPGRADE, "get", id="websocket GET"),
    pytest.param("POST", {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"}, "create", id="SPDY POST"),
])
@pytest.mark.parametrize("subresource", ["exec", "attach", "portforward"])
def test_a_node_may_not_stream_into_pods(cluster: dict[str, Any], method: str, headers: dict[str, str], verb: str,
                                         subresource: str) -> None:
    """system:node's rules give a kubelet no pods/exec, attach or portforward, not even its own pods'."""
    with httpx.Client(base_url=cluster["url"], headers={"Authorization": f"Bearer node-{SUFFIX}"}) as node_api:
        resp = node_api.request(method, f"/api/v1/namespaces/{NS}/pods/one/{subresource}?command=id&stdout=1",
                                headers=headers)
    assert_status(resp, 403, "Forbidden",
                  f'pods "one" is forbidden: User "system:node:{NODE}" cannot {verb} resource "pods/{subresource}" '
                  f'in API group "" in the namespace "{NS}"')


def test_discovery_lists_the_connect_subresources(cluster: dict[str, Any]) -> None:
    resources = {r["name"]: r for r in cluster["admin"].get("/api/v1").json()["resources"]}
    assert resources["pods/exec"] == {"name": "pods/exec", "singularName": "", "namespaced": True,
                                      "kind": "PodExecOptions", "verbs": ["create", "get"]}
    assert resources["pods/log"]["verbs"] == ["get"]
    assert resources["pods/portforward"]["kind"] == "PodPortForwardOptions"
    assert resources["nodes/proxy"]["kind"] == "NodeProxyOptions"
    # metrics.k8s.io, which `kubectl top` looks for before it asks (served from the kubelets, never stored).
    groups = {g["name"] for g in cluster["admin"].get("/apis").json()["groups"]}
    assert "metrics.k8s.io" in groups
    metrics = {r["name"]: r for r in cluster["admin"].get("/apis/metrics.k8s.io/v1beta1").json()["resources"]}
    assert (metrics["nodes"]["kind"], metrics["pods"]["kind"], metrics["pods"]["verbs"]) == (
        "NodeMetrics", "PodMetrics", ["get", "list"])
    missing = cluster["admin"].get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods/nope")
    assert_status(missing, 404, "NotFound", f'podmetrics.metrics.k8s.io "{NS}/nope" not found')


# --- exec through to the kubelet -------------------------------------------------------------------

@pytest.mark.parametrize("version", ["1.29", "1.33"])
def test_kubectl_exec(kubectl_of: Callable[[str], Kubectl], version: str) -> None:
    kubectl = kubectl_of(version)
    assert kubectl.ok("exec", "-n", NS, "one", "--", "echo", "hello") == "hello\n"
    failed = kubectl("exec", "-n", NS, "one", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (failed.returncode, failed.stdout) == (3, "out\n")
    assert failed.stderr == "err\ncommand terminated with exit code 3\n"
    assert kubectl.ok("exec", "-i", "-n", NS, "one", "--", "sh", "-c", "tr a-z A-Z; echo done",
                      input="piped in\n") == "PIPED IN\ndone\n"
    # As against a containerd node: kubelet's InternalError around containerd's words, kubectl's exit 1.
    missing = kubectl("exec", "-n", NS, "one", "--", "no-such-binary")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert re.fullmatch(r'error: Internal error occurred: error executing command in container: failed to exec in '
                        r'container: failed to start exec "[0-9a-f]{64}": OCI runtime exec failed: exec failed: '
                        r'unable to start container process: exec: "no-such-binary": executable file not found '
                        r'in \$PATH: unknown\n', missing.stderr), missing.stderr
    # The default-container annotation is kubectl's to honour: it names the container in its request.
    assert kubectl.ok("exec", "-n", NS, "picky", "--", "true") == ""


def test_python_client_stream(cluster: dict[str, Any]) -> None:
    from kubernetes import client, config
    from kubernetes.stream import stream

    api = client.CoreV1Api(config.new_client_from_config(str(cluster["kubeconfig"])))
    out = stream(api.connect_get_namespaced_pod_exec, "one", NS, command=["sh", "-c", "echo hi; echo there >&2"],
                 stderr=True, stdin=False, stdout=True, tty=False)
    # stdout and stderr are two pipes read concurrently (as by any container runtime): the client joins the
    # frames in arrival order, which under load may put stderr's line first.
    assert out in ("hi\nthere\n", "there\nhi\n")
    resp = stream(api.connect_get_namespaced_pod_exec, "one", NS, command=["sh", "-c", "read x; echo got $x; exit 7"],
                  stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False)
    resp.write_stdin("abc\n")
    resp.run_forever(timeout=30)
    assert resp.read_stdout() == "got abc\n"
    assert resp.returncode == 7
    resp.close()


def _processes(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _ptys_open() -> int:
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            if os.readlink(fd) == "/dev/ptmx":
                count += 1
        except OSError:
            continue
    return count


def _raw_exec(url: str, command: str, *, tty: bool) -> socket.socket:
    """A WebSocket exec opened by hand and then simply dropped: a client that goes away."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    query = f"command=sh&command=-c&command={command.replace(' ', '%20')}&stdout=true&stdin=true" + \
        ("&tty=true" if tty else "&stderr=true")
    head = (f"GET /api/v1/namespaces/{NS}/pods/one/exec?{query} HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer admin-{SUFFIX}\r\n" +
            "".join(f"{k}: {v}\r\n" for k, v in WS_UPGRADE.items()) + "\r\n")
    sock.sendall(head.encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(4096)
        assert chunk, answer
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return sock


@pytest.mark.parametrize("tty", [False, True], ids=["pipes", "tty"])
def test_an_abandoned_stream_leaves_no_process_and_no_descriptor(cluster: dict[str, Any], tty: bool) -> None:
    before = _ptys_open()
    markers = [f"{MARKER}.{i}{int(tty)}" for i in range(5)]
    sockets = [_raw_exec(cluster["url"], f"sleep {m}", tty=tty) for m in markers]
    polling.wait_for("the commands to run", lambda: all(_processes(f"sleep {m}") for m in markers), timeout=30)
    for sock in sockets:
        sock.close()  # no close frame, no goodbye
    polling.wait_for("the abandoned commands to be gone", lambda: not any(_processes(f"sleep {m}") for m in markers),
                     timeout=30)
    polling.wait_for("the pseudo-terminals to be closed", lambda: _ptys_open() == before, timeout=30)


# --- logs ------------------------------------------------------------------------------------------

def write_log(cluster: dict[str, Any], name: str, container: str, restart: int, lines: list[tuple[str, str]],
              start: datetime.datetime) -> Path:
    pod_obj = cluster["pods"][f"{NS}/{name}"]
    path = crilog.container_log_path(cluster["logs"], NS, name, pod_obj.metadata.uid, container, restart)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as f:
        for i, (stream_name, text) in enumerate(lines):
            f.write(crilog.format_line(stream_name, text.encode(),  # type: ignore[arg-type]
                                       when=start + datetime.timedelta(seconds=i)))
    return path


def test_kubectl_logs(cluster: dict[str, Any], kubectl_of: Callable[[str], Kubectl]) -> None:
    start = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    rotated = write_log(cluster, "one", "main", 0, [("stdout", "rotated away")], start)
    rotated.rename(rotated.with_name("0.log.20260101-000000"))  # kubelet reads the current file only
    write_log(cluster, "one", "main", 0, [("stdout", f"line {i}") for i in range(1, 6)], start)
    write_log(cluster, "restarted", "main", 0, [("stderr", "before the restart")], start)
    write_log(cluster, "restarted", "main", 1, [("stdout", "after the restart")], start)
    kubectl = kubectl_of("1.33")
    assert kubectl.ok("logs", "-n", NS, "one") == "".join(f"line {i}\n" for i in range(1, 6))
    assert kubectl.ok("logs", "-n", NS, "one", "--tail=2") == "line 4\nline 5\n"
    assert kubectl.ok("logs", "-n", NS, "one", "--tail=1", "--timestamps") == \
        "2026-01-02T03:04:09.000000000Z line 5\n"
    assert kubectl.ok("logs", "-n", NS, "one", "--since-time=2026-01-02T03:04:08Z") == "line 4\nline 5\n"
    assert kubectl.ok("logs", "-n", NS, "one", "--limit-bytes=9") == "line 1\nli"
    assert kubectl.ok("logs", "-n", NS, "restarted") == "after the restart\n"
    assert kubectl.ok("logs", "-n", NS, "restarted", "-p") == "before the restart\n"
    previous = kubectl("logs", "-n", NS, "one", "-p")
    assert previous.returncode == 1
    assert previous.stderr == 'Error from server (BadRequest): previous terminated container "main" in pod "one" ' \
                              "not found\n"
    waiting = kubectl("logs", "-n", NS, "starting")
    assert waiting.stderr == 'Error from server (BadRequest): container "main" in pod "starting" is waiting to ' \
                             "start: ContainerCreating\n"
    wrong = kubectl("logs", "-n", NS, "one", "-c", "nope")
    assert wrong.stderr == "error: container nope is not valid for pod one\n"  # kubectl checks this itself


def test_kubectl_logs_follow(cluster: dict[str, Any], kubectl_of: Callable[[str], Kubectl]) -> None:
    start = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    path = write_log(cluster, "picky", "side", 0, [("stdout", "first")], start)
    follower = kubectl_of("1.33").popen("logs", "-f", "-n", NS, "picky", "-c", "side")
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == "first\n"
        write_log(cluster, "picky", "side", 0, [("stdout", "second")], start)
        assert follower.stdout.readline() == "second\n"
        with path.open("ab") as f:  # a line the runtime wrote in two parts (P, then F): one line out
            f.write(crilog.format_line("stdout", b"thi", partial=True, when=start))
            f.write(crilog.format_line("stdout", b"rd", when=start))
        assert follower.stdout.readline() == "third\n"
        # The runtime rotates the file (renamed, a new one started): the follower goes on with the new one.
        path.rename(path.with_name(path.name + ".20260102-030405"))
        write_log(cluster, "picky", "side", 0, [("stdout", "after rotation")], start)
        assert follower.stdout.readline() == "after rotation\n"
    finally:
        follower.kill()
        follower.wait()


def test_nodes_proxy(cluster: dict[str, Any]) -> None:
    resp = cluster["admin"].get(f"/api/v1/nodes/{NODE}/proxy/healthz")
    assert (resp.status_code, resp.text) == (200, "ok")
    pods = cluster["admin"].get(f"/api/v1/nodes/{NODE}/proxy/pods").json()
    assert f"{NS}/one" in {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods["items"]}


def test_the_kubelet_refuses_a_client_without_upgrade(cluster: dict[str, Any]) -> None:
    """What the API server answers when the kubelet says no: the kubelet's code and words, as a Status."""
    resp = cluster["admin"].get(exec_path("one", query="command=true"), headers=WS_UPGRADE)
    assert_status(resp, 400, "BadRequest", "you must specify at least 1 of stdin, stdout, stderr")


# --- the kubelet API over TLS ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tls_cluster(cluster: dict[str, Any], etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]]
                ) -> Iterator[dict[str, Any]]:
    """A kubelet with the lab PKI's serving certificate that wants the API server's client certificate,
    and an API server that presents it (kube-apiserver's --kubelet-client-certificate/-key and
    --kubelet-certificate-authority)."""
    from kubelab.pki import ensure_lab_pki
    from kubeletstub.server import server_context

    pki = ensure_lab_pki(cluster["tmp"] / "pki", ips=[], kubelet_ips=["127.0.0.1"])
    pods = dict(cluster["pods"])
    for key, value in list(pods.items()):  # the same pods, on the TLS node
        copy = value.model_copy(deep=True)
        assert copy.spec is not None
        copy.spec.node_name = TLS_NODE
        pods[key] = copy
    kubelet = KubeletThread(pods, cluster["logs"], node_name=TLS_NODE,
                            ssl_context=server_context(str(pki.kubelet_cert_file), str(pki.kubelet_key_file),
                                                       str(pki.ca_file)))
    try:
        cluster["admin"].post("/api/v1/nodes", json=node(TLS_NODE, kubelet.port)).raise_for_status()
        created = cluster["admin"].post(f"/api/v1/namespaces/{NS}/pods", json=pod("secure", TLS_NODE, "main"))
        assert created.status_code == 201, created.text
        pods[f"{NS}/secure"] = running(created.json())
        with start_apiserver(etcd.url, kubelet_client_certificate=str(pki.kubelet_client_cert_file),
                             kubelet_client_key=str(pki.kubelet_client_key_file),
                             kubelet_certificate_authority=str(pki.ca_file)) as url:
            yield {"url": url, "pki": pki, "port": kubelet.port, "kubeconfig": kubeconfigs.write(
                cluster["tmp"] / "tls-kubeconfig", url)}
    finally:
        kubelet.stop()


TLS_NODE = f"stream-{SUFFIX}-tls"


def test_exec_over_tls_to_the_kubelet(tls_cluster: dict[str, Any], cluster: dict[str, Any]) -> None:
    kubectl = Kubectl("1.33", tls_cluster["kubeconfig"], cluster["tmp"] / "cache-tls")
    assert kubectl.ok("exec", "-n", NS, "secure", "--", "echo", "over tls") == "over tls\n"
    failed = kubectl("exec", "-n", NS, "secure", "--", "sh", "-c", "exit 9")
    assert (failed.returncode, failed.stderr) == (9, "command terminated with exit code 9\n")


def test_the_tls_kubelet_serves_only_the_api_server(tls_cluster: dict[str, Any]) -> None:
    pki = tls_cluster["pki"]
    url = f"https://127.0.0.1:{tls_cluster['port']}/pods"
    with pytest.raises(httpx.HTTPError):  # no client certificate: the handshake fails
        httpx.get(url, verify=ssl.create_default_context(cafile=str(pki.ca_file)), timeout=10)
    # A certificate of the same CA that is not the API server's (etcd's client) is refused as kubelet does.
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    context.load_cert_chain(str(pki.etcd_client_cert_file), str(pki.etcd_client_key_file))
    refused = httpx.get(url, verify=context, timeout=10)
    assert (refused.status_code, refused.text) == (
        403, "Forbidden (user=kube-apiserver-etcd-client, verb=get, resource=nodes, subresource=proxy)")
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    context.load_cert_chain(str(pki.kubelet_client_cert_file), str(pki.kubelet_client_key_file))
    assert httpx.get(url, verify=context, timeout=10).status_code == 200


def test_render_mode_kubelets_listen_on_loopback(tmp_path: Path) -> None:
    """`kubelab up --dataplane render`: nodes' addresses exist nowhere, so each kubelet API listens on a free
    loopback port, advertised in daemonEndpoints, and the API server dials 127.0.0.1 there (never the
    10.240.0.x InternalIP, which would leave the machine)."""
    from kubectltools import RenderCluster

    cluster = RenderCluster(tmp_path / "render", nodes=2).start()
    try:
        with httpx.Client(base_url=cluster.server, timeout=30) as api:
            ports = set()
            for name in ("node-1", "node-2"):
                node_obj = api.get(f"/api/v1/nodes/{name}").json()
                port = node_obj["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
                assert 0 < port < 65536
                ports.add(port)
                resp = api.get(f"/api/v1/nodes/{name}/proxy/healthz")
                assert (resp.status_code, resp.text) == (200, "ok")
            assert len(ports) == 2
    finally:
        cluster.stop()


# --- attach ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["1.29", "1.33"])
def test_kubectl_attach(cluster: dict[str, Any], kubectl_of: Callable[[str], Kubectl], version: str) -> None:
    """kubectl attach -i joins the container's own stdin and output; the container's end ends it."""
    cluster["kubelet"].run_container(f"{NS}/attached", "main",
                                     ["sh", "-c", "while read l; do echo got $l; done; echo bye >&2"])
    result = kubectl_of(version)("attach", "-i", "-n", NS, "attached", "-c", "main", input="hello\nagain\n")
    assert (result.returncode, result.stdout) == (0, "got hello\ngot again\n"), result.stderr
    assert result.stderr.endswith("bye\n")


def test_attach_without_a_runtime_stdio_is_an_error(cluster: dict[str, Any], kubectl_of: Callable[[str], Kubectl]
                                                    ) -> None:
    result = kubectl_of("1.33")("attach", "-n", NS, "one")
    assert result.returncode == 1
    assert result.stderr.endswith("Error from server (InternalError): container main of pod "
                                  f"{NS}/one cannot be attached to: the runtime gives no access to its stdio\n")

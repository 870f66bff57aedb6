"""Streaming through the API server (issue K): exec round-trip latency and port-forward throughput through
the API server's upgrade-aware proxy vs a direct connection, and memory per idle stream.

Runs `kubelab up --dataplane netns --nodes 1` (root) with one pod, then measures, each side by side:

* exec, one command start to exit status (`true`): through the API server (WebSocket v5), straight to the
  kubelet API from the API server's namespace, and `ip netns exec` in the pod's namespace (no stream);
* exec, interactive round trip: one `cat` session, a line out and its echo back, through the API server
  and straight to the kubelet;
* port-forward throughput, 64 MiB from a sender in the pod: a direct TCP connection to the pod IP from the
  lab network, the v4 WebSocket port-forward through the API server, and `kubectl port-forward` 1.33 (SPDY
  in a WebSocket) and 1.29 (SPDY/3.1);
* memory: RSS of the `kubelab up` process (API server and kubelet together) with 100 idle exec streams,
  per stream.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from harness import ROOT, Lab, machine, rss_mib, summary_ms

sys.path.insert(0, str(ROOT))

from kubelab.etcd import free_port
from kubelab.netnsthread import run_in_netns
from kubelab.processes import stop_process
from kubeletstub.streaming.websocket import WebSocket, new_key

BULK = 64 * 1024 * 1024
SENDER = ("import socket,sys\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
          "s.bind(('0.0.0.0',9000));s.listen(16)\nblock=b'x'*65536\n"
          f"while True:\n c,_=s.accept()\n for _ in range({BULK // 65536}): c.sendall(block)\n c.close()\n")
KUBECTL = {"1.29": "/usr/lib/google-cloud-sdk/bin/kubectl.1.29", "1.33": "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"}


async def connect(host: str, port: int, netns: str | None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = run_in_netns(netns, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)) if netns else \
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, port))
    return await asyncio.open_connection(sock=sock, limit=1 << 20)


async def websocket(host: str, port: int, path: str, protocol: str, netns: str | None = None) -> WebSocket:
    reader, writer = await connect(host, port, netns)
    writer.write((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                  f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {new_key()}\r\n"
                  f"Sec-WebSocket-Protocol: {protocol}\r\n\r\n").encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(head.decode(errors="replace"))
    return WebSocket(reader, writer, client=True, subprotocol=protocol)


def exec_query(*command: str, stdin: bool = False) -> str:
    return "&".join(f"command={c}" for c in command) + "&stdout=true&stderr=true" + ("&stdin=true" if stdin else "")


async def run_exec(ws: WebSocket) -> bytes:
    """Until the status on the error channel."""
    while True:
        _, payload = await ws.receive()
        if payload[:1] == b"\x03":
            await ws.close()
            return payload[1:]


async def exec_latency(api: tuple[str, int], kubelet: tuple[str, int, str], pod_netns: str, n: int) -> dict[str, Any]:
    api_times, kubelet_times, netns_times = [], [], []
    for _ in range(n):
        start = time.perf_counter()
        await run_exec(await websocket(*api, f"/api/v1/namespaces/default/pods/bench/exec?{exec_query('true')}",
                                       "v5.channel.k8s.io"))
        api_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        await run_exec(await websocket(kubelet[0], kubelet[1], f"/exec/default/bench/web?{exec_query('true')}",
                                       "v5.channel.k8s.io", kubelet[2]))
        kubelet_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        proc = await asyncio.create_subprocess_exec("ip", "netns", "exec", pod_netns, "true")
        await proc.wait()
        netns_times.append(time.perf_counter() - start)
    return {"through_apiserver": summary_ms(api_times), "direct_to_kubelet": summary_ms(kubelet_times),
            "ip_netns_exec_no_stream": summary_ms(netns_times)}


async def echo_rtt(ws: WebSocket, n: int) -> list[float]:
    times = []
    for i in range(n):
        line = f"{i}\n".encode()
        start = time.perf_counter()
        await ws.send(b"\x00" + line)
        got = b""
        while not got.endswith(line):
            _, payload = await ws.receive()
            if payload[:1] == b"\x01":
                got += payload[1:]
        times.append(time.perf_counter() - start)
    await ws.send(bytes([255, 0]))
    await run_exec(ws)
    return times


async def interactive(api: tuple[str, int], kubelet: tuple[str, int, str], n: int) -> dict[str, Any]:
    through = await echo_rtt(await websocket(*api, "/api/v1/namespaces/default/pods/bench/exec?" +
                                             exec_query("cat", stdin=True), "v5.channel.k8s.io"), n)
    direct = await echo_rtt(await websocket(kubelet[0], kubelet[1], "/exec/default/bench/web?" +
                                            exec_query("cat", stdin=True), "v5.channel.k8s.io", kubelet[2]), n)
    return {"through_apiserver": summary_ms(through), "direct_to_kubelet": summary_ms(direct)}


async def bulk_direct(pod_ip: str, netns: str) -> float:
    reader, writer = await connect(pod_ip, 9000, netns)
    start, got = time.perf_counter(), 0
    while chunk := await reader.read(1 << 20):
        got += len(chunk)
    writer.close()
    assert got == BULK, got
    return BULK / (time.perf_counter() - start) / 2**20


async def bulk_websocket(api: tuple[str, int]) -> float:
    ws = await websocket(*api, "/api/v1/namespaces/default/pods/bench/portforward?ports=9000", "v4.channel.k8s.io")
    start, got = time.perf_counter(), 0
    seen: set[int] = set()
    while got < BULK:
        _, payload = await ws.receive()
        if payload[0] not in seen:  # each channel's first message is the port
            seen.add(payload[0])
            continue
        if payload[0] == 0:
            got += len(payload) - 1
    elapsed = time.perf_counter() - start
    await ws.close()
    return BULK / elapsed / 2**20


def bulk_kubectl(version: str, kubeconfig: Path) -> float:
    port = free_port()
    proc = subprocess.Popen([KUBECTL[version], "--kubeconfig", str(kubeconfig), "port-forward", "pod/bench",
                             f"{port}:9000"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            start, got = time.perf_counter(), 0
            while chunk := sock.recv(1 << 20):
                got += len(chunk)
        assert got == BULK, got
        return BULK / (time.perf_counter() - start) / 2**20
    finally:
        stop_process(proc, sig=signal.SIGTERM)


async def idle_streams(api: tuple[str, int], pid: int, n: int) -> dict[str, Any]:
    marker = f"{secrets.randbelow(10**6)}"
    before = rss_mib(pid)
    streams = [await websocket(*api, "/api/v1/namespaces/default/pods/bench/exec?" +
                               exec_query("sleep", f"600.{marker}{i}", stdin=True), "v5.channel.k8s.io")
               for i in range(n)]
    await asyncio.sleep(2)
    after = rss_mib(pid)
    for ws in streams:
        ws.writer.close()
    return {"streams": n, "rss_before_mib": round(before, 1), "rss_after_mib": round(after, 1),
            "kib_per_idle_stream": round((after - before) * 1024 / n, 1)}


def run(quick: bool) -> dict[str, Any]:
    lab = Lab()
    data_dir = lab.base / "up"
    port = free_port()
    proc = lab.spawn("up", "up", "--nodes", "1", "--dataplane", "netns", "--data-dir", str(data_dir),
                     "--listen", f"127.0.0.1:{port}")
    sender: subprocess.Popen[bytes] | None = None
    try:
        lab.wait_for_up("up")
        state = json.loads((data_dir / "cluster.json").read_text())
        api = httpx.Client(base_url=f"http://127.0.0.1:{port}")
        api.post("/api/v1/namespaces/default/pods", json={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bench"},
            "spec": {"containers": [{"name": "web", "image": "x", "ports": [{"containerPort": 8080}]}]}},
        ).raise_for_status()
        while (api.get("/api/v1/namespaces/default/pods/bench").json().get("status") or {}).get("phase") != "Running":
            time.sleep(0.2)
        pod_ip = api.get("/api/v1/namespaces/default/pods/bench").json()["status"]["podIP"]
        pod_netns = next(n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                                   check=True).stdout.split() if n.endswith("_default_bench"))
        sender = subprocess.Popen(["ip", "netns", "exec", pod_netns, sys.executable, "-c", SENDER])
        time.sleep(1)
        apiserver_netns = state["apiserver"]["netns"]
        node_ip = state["nodes"]["node-1"]["ip"]
        n = 20 if quick else 100

        async def measure() -> dict[str, Any]:
            target = ("127.0.0.1", port)
            kubelet = (node_ip, 10250, apiserver_netns)
            result: dict[str, Any] = {"exec_start_to_status": await exec_latency(target, kubelet, pod_netns, n),
                                      "exec_interactive_round_trip": await interactive(target, kubelet, n * 5)}
            direct = [await bulk_direct(pod_ip, apiserver_netns) for _ in range(3)]
            through = [await bulk_websocket(target) for _ in range(3)]
            result["port_forward_mib_per_s"] = {"direct_tcp_to_pod": [round(x) for x in direct],
                                                "websocket_v4_through_apiserver": [round(x) for x in through]}
            result["idle_streams"] = await idle_streams(target, proc.pid, 100)
            return result

        result = asyncio.run(measure())
        for version in ("1.33", "1.29"):
            result["port_forward_mib_per_s"][f"kubectl_{version}"] = [
                round(bulk_kubectl(version, data_dir / "kubeconfig")) for _ in range(2)]
        return result
    finally:
        if sender is not None:
            stop_process(sender)
        stop_process(proc, sig=signal.SIGINT, timeout=60)
        lab.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (kubelab up --dataplane netns)")
    results = {"machine_before": machine(), "run": run(args.quick), "machine_after": machine()}
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

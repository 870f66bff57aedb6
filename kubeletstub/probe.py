"""One probe, run where the kubelet runs: `python -m kubeletstub.probe http|tcp|grpc ...` inside a node's namespace.

The kubelet stub starts this with `ip netns exec <node> ...` so that a probe travels the way kubelet's
does: from the node to the pod IP. Exit status 0 means success, 1 failure; one line on stdout says why,
in kubelet's words (pkg/probe/http, tcp, grpc: Go's `dial tcp HOST:PORT: connect: connection refused`).
Standard library only for http and tcp (it starts once per probe, so it must start fast); grpc imports
grpcio, and only then.

    python -m kubeletstub.probe http URL TIMEOUT [HEADER=VALUE ...]   2xx/3xx succeeds (kubelet's rule)
    python -m kubeletstub.probe tcp HOST PORT TIMEOUT                 a completed TCP connect succeeds
    python -m kubeletstub.probe grpc HOST PORT SERVICE TIMEOUT        grpc.health.v1.Health/Check says SERVING
"""

from __future__ import annotations

import errno
import socket
import sys
import urllib.error
import urllib.request

# Go's net package's words for the errors a dial meets (syscall.Errno's strings).
_GO_ERRNO = {errno.ECONNREFUSED: "connection refused", errno.EHOSTUNREACH: "no route to host",
             errno.ENETUNREACH: "network is unreachable", errno.ECONNRESET: "connection reset by peer",
             errno.ETIMEDOUT: "connection timed out"}
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_SERVING_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def go_duration(seconds: float) -> str:
    """time.Duration's String for the whole seconds a probe's timeoutSeconds is: 1s, 1m30s."""
    total = int(seconds)
    return f"{total}s" if total < 60 else f"{total // 60}m{total % 60}s"


def dial_error(host: str, port: int | str, exc: BaseException) -> str:
    """`dial tcp HOST:PORT: ...` as Go's net.Dial words a failure."""
    if isinstance(exc, TimeoutError):
        return f"dial tcp {host}:{port}: i/o timeout"
    if isinstance(exc, OSError) and exc.errno in _GO_ERRNO:
        return f"dial tcp {host}:{port}: connect: {_GO_ERRNO[exc.errno]}"
    return f"dial tcp {host}:{port}: {exc}"


def http_probe(url: str, timeout: float, headers: dict[str, str]) -> tuple[bool, str]:
    request = urllib.request.Request(url, headers={"User-Agent": "kube-probe/1.32", **headers})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:  # pod IPs only
            code = resp.status
    except urllib.error.HTTPError as exc:
        code = exc.code
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, OSError):
            host, port = _host_port(url)
            if isinstance(reason, TimeoutError):
                return False, f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
            return False, f'Get "{url}": {dial_error(host, port, reason)}'
        return False, f'Get "{url}": {reason}'
    except TimeoutError:
        return False, f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
    except (OSError, ValueError) as exc:
        return False, f'Get "{url}": {exc}'
    if 200 <= code < 400:
        return True, f"HTTP probe succeeded with statuscode: {code}"
    return False, f"HTTP probe failed with statuscode: {code}"


def _host_port(url: str) -> tuple[str, str]:
    netloc = url.split("://", 1)[-1].split("/", 1)[0]
    host, _, port = netloc.rpartition(":")
    return host.strip("[]"), port


def tcp_probe(host: str, port: int, timeout: float) -> tuple[bool, str]:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True, ""
    except OSError as exc:
        return False, dial_error(host, port, exc)


def _health_request(service: str) -> bytes:
    """grpc.health.v1.HealthCheckRequest{service} in protobuf's wire format (field 1, a string)."""
    raw = service.encode()
    if not raw:
        return b""
    length, out = len(raw), bytearray(b"\x0a")
    while length >= 0x80:
        out.append((length & 0x7F) | 0x80)
        length >>= 7
    out.append(length)
    return bytes(out) + raw


def _health_status(raw: bytes) -> int:
    """HealthCheckResponse.status (field 1, an enum) from its wire format; 0 (UNKNOWN) when absent."""
    i, status = 0, 0
    while i < len(raw):
        tag = raw[i]
        i += 1
        value = shift = 0
        while i < len(raw):
            byte = raw[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if tag == 0x08:
            status = value
        elif tag & 7 == 2:  # a length-delimited field of a newer version: skipped
            i += value
    return status


def grpc_probe(host: str, port: int, service: str, timeout: float) -> tuple[bool, str]:
    """kubelet's gRPC probe (pkg/probe/grpc): the standard health check over plaintext, its words."""
    import grpc  # only gRPC probes pay for it

    target = f"{host}:{port}"
    with grpc.insecure_channel(target) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            return False, f'timeout: failed to connect service "{target}" within {go_duration(timeout)}'
        check = channel.unary_unary(_HEALTH_CHECK)
        try:
            raw = check(_health_request(service), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            if code == grpc.StatusCode.UNIMPLEMENTED:
                return False, ("this server does not implement the grpc health protocol (grpc.health.v1.Health): "
                               f"{exc.details() if hasattr(exc, 'details') else exc}")
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return False, f"timeout: health rpc did not complete within {go_duration(timeout)}"
            return False, f"error: health rpc probe failed: {exc}"
    status = _health_status(raw if isinstance(raw, bytes) else b"")
    if status != 1:
        return False, f'service unhealthy (responded with "{_SERVING_STATUS.get(status, str(status))}")'
    return True, "service healthy"


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "http":
        headers = dict(h.split("=", 1) for h in argv[3:] if "=" in h)
        ok, why = http_probe(argv[1], float(argv[2]), headers)
    elif len(argv) == 4 and argv[0] == "tcp":
        ok, why = tcp_probe(argv[1], int(argv[2]), float(argv[3]))
    elif len(argv) == 5 and argv[0] == "grpc":
        ok, why = grpc_probe(argv[1], int(argv[2]), argv[3], float(argv[4]))
    else:
        print("usage: python -m kubeletstub.probe http URL TIMEOUT | tcp HOST PORT TIMEOUT | "
              "grpc HOST PORT SERVICE TIMEOUT", file=sys.stderr)
        return 2
    print(why)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

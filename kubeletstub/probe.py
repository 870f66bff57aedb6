"""One probe, run where the kubelet runs: `python -m kubeletstub.probe http|tcp ...` inside a node's namespace.

The kubelet stub starts this with `ip netns exec <node> ...` so that a probe travels the way kubelet's
does: from the node to the pod IP. Exit status 0 means success, 1 failure; one line on stdout says why.
Standard library only (it starts once per probe, so it must start fast).

    python -m kubeletstub.probe http URL TIMEOUT [HEADER=VALUE ...]   2xx/3xx succeeds (kubelet's rule)
    python -m kubeletstub.probe tcp HOST PORT TIMEOUT                 a completed TCP connect succeeds
"""

from __future__ import annotations

import socket
import sys
import urllib.error
import urllib.request


def http_probe(url: str, timeout: float, headers: dict[str, str]) -> tuple[bool, str]:
    request = urllib.request.Request(url, headers={"User-Agent": "kube-probe/1.32", **headers})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:  # pod IPs only
            code = resp.status
    except urllib.error.HTTPError as exc:
        code = exc.code
    except (OSError, ValueError) as exc:
        return False, f'Get "{url}": {exc}'
    if 200 <= code < 400:
        return True, f"HTTP probe succeeded with statuscode: {code}"
    return False, f"HTTP probe failed with statuscode: {code}"


def tcp_probe(host: str, port: int, timeout: float) -> tuple[bool, str]:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True, ""
    except OSError as exc:
        return False, f"dial tcp {host}:{port}: {exc}"


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "http":
        headers = dict(h.split("=", 1) for h in argv[3:] if "=" in h)
        ok, why = http_probe(argv[1], float(argv[2]), headers)
    elif len(argv) == 4 and argv[0] == "tcp":
        ok, why = tcp_probe(argv[1], int(argv[2]), float(argv[3]))
    else:
        print("usage: python -m kubeletstub.probe http URL TIMEOUT | tcp HOST PORT TIMEOUT", file=sys.stderr)
        return 2
    print(why)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

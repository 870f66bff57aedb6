"""A tiny HTTP server for a proxy agent: /metrics, /healthz, /livez and /proxyMode.

kube-proxy serves its metrics on --metrics-bind-address (127.0.0.1:10249) and its health on
--healthz-bind-address (0.0.0.0:10256); here one listener answers both kinds of question, which is
all a lab needs. /healthz answers like kube-proxy's ProxierHealthServer: 200 while no requested
sync has been waiting longer than twice the sync period, 503 otherwise, with the JSON body
`{"lastUpdated": ..., "currentTime": ..., "nodeEligible": true}`.

The listener is kubelab's metrics server (kubelab/metricsserver.py); only the answers differ.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

from kubelab import metricsserver
from kubelab.metricsserver import split_bind_address

from .metrics import CONTENT_TYPE

DEFAULT_BIND_ADDRESS = "127.0.0.1:10249"  # kube-proxy's --metrics-bind-address default

__all__ = ["DEFAULT_BIND_ADDRESS", "MetricsServer", "split_bind_address"]


def _timestamp(seconds: float | None) -> str:
    return "" if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


class MetricsServer(metricsserver.MetricsServer):
    """Serves one agent. `metrics()` gives the exposition bytes, `healthy()` the health verdict,
    `last_updated()` when its last sync succeeded (epoch seconds, or None)."""

    def __init__(self, host: str, port: int, *, metrics: Callable[[], bytes], healthy: Callable[[], bool],
                 last_updated: Callable[[], float | None] = lambda: None, proxy_mode: str = "iptables") -> None:
        super().__init__(host, port, exposition=metrics, name="proxy")
        self._healthy = healthy
        self._last_updated = last_updated
        self._proxy_mode = proxy_mode

    def respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a request. Pure apart from asking the agent."""
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"method not allowed\n"
        path = path.split("?", 1)[0]
        if path == "/metrics":
            return 200, CONTENT_TYPE, self._exposition()
        if path in ("/healthz", "/livez"):
            healthy = self._healthy()
            body = json.dumps({"lastUpdated": _timestamp(self._last_updated()),
                               "currentTime": _timestamp(datetime.now(UTC).timestamp()), "nodeEligible": True})
            return (200 if healthy else 503), "application/json", body.encode()
        if path == "/proxyMode":
            return 200, "text/plain; charset=utf-8", self._proxy_mode.encode()
        return 404, "text/plain; charset=utf-8", b"404 page not found\n"

"""The proxy agent's tiny HTTP server: /metrics, /healthz, /proxyMode, and nothing else."""

from __future__ import annotations

import httpx
import pytest

from proxyagent.metrics import CONTENT_TYPE, ProxyMetrics
from proxyagent.metricserver import MetricsServer, split_bind_address


async def test_serves_metrics_and_health() -> None:
    metrics = ProxyMetrics()
    metrics.restore_failures.inc()
    healthy = [True]
    server = MetricsServer("127.0.0.1", 0, metrics=metrics.exposition, healthy=lambda: healthy[0],
                           last_updated=lambda: 1_700_000_000.0)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as http:
            scraped = await http.get("/metrics")
            ok = await http.get("/healthz")
            healthy[0] = False
            late = await http.get("/healthz")
            mode = await http.get("/proxyMode")
            missing = await http.get("/nothing")
            posted = await http.post("/metrics")
    finally:
        await server.close()

    assert scraped.status_code == 200 and scraped.headers["content-type"] == CONTENT_TYPE
    assert "kubeproxy_sync_proxy_rules_iptables_restore_failures_total 1.0" in scraped.text
    assert ok.status_code == 200 and ok.json()["lastUpdated"] == "2023-11-14T22:13:20Z"
    assert late.status_code == 503
    assert (mode.status_code, mode.text) == (200, "iptables")
    assert missing.status_code == 404
    assert posted.status_code == 405


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:10249", ("127.0.0.1", 10249)),
    (":9000", ("0.0.0.0", 9000)),
    ("[::1]:10249", ("::1", 10249)),
])
def test_split_bind_address(text: str, expected: tuple[str, int]) -> None:
    assert split_bind_address(text) == expected


@pytest.mark.parametrize("text", ["10249", "host:port", "127.0.0.1:70000"])
def test_bad_bind_addresses(text: str) -> None:
    with pytest.raises(ValueError):
        split_bind_address(text)

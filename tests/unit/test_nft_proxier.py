"""The nftables proxier's bookkeeping, on the table model (no root): the proxy mode flag on `kubelab up`
and `kubelab node`, one transaction per sync, full then partial, kube-proxy's metrics, the trace
reports and the state file `kubelab nftables NODE` reads in render mode. The kernel's side is in
tests/e2e/test_nft_proxier_netns.py and tests/e2e/test_nft_cluster.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from proxyobjects import endpoint_slice, ep, listed, port, service

from launcher.cli import build_parser
from proxyagent import ProxyAgent, ProxyConfig
from proxyagent.nftables.apply import RecordingNftApplier
from proxyagent.nftproxier import NftProxier
from proxyagent.proxier import Proxier

CONFIG = ProxyConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16")
SERVICES = [service("default", "web", cluster_ip="10.96.100.100", ports=[port("", 5555)])]
SLICES = [endpoint_slice("default", "web", [ep("10.244.1.3"), ep("10.244.1.4"), ep("10.244.2.3")], [port("", 5000)])]


def test_proxy_mode_flag_defaults_to_iptables_as_kube_proxy() -> None:
    parser = build_parser()
    for command in (["up"], ["node", "--name", "n1"]):
        assert parser.parse_args(command).proxy_mode == "iptables"
        assert parser.parse_args([*command, "--proxy-mode", "nftables"]).proxy_mode == "nftables"
        with pytest.raises(SystemExit):
            parser.parse_args([*command, "--proxy-mode", "ipvs"])


def test_the_agent_builds_the_proxier_of_its_mode() -> None:
    api = object()
    assert type(ProxyAgent(api, CONFIG).proxier) is Proxier  # type: ignore[arg-type]
    assert type(ProxyAgent(api, CONFIG, proxy_mode="nftables").proxier) is NftProxier  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown proxy mode 'ipvs'"):
        ProxyAgent(api, CONFIG, proxy_mode="ipvs")  # type: ignore[arg-type]


async def test_full_then_partial_sync_with_metrics_reports_and_state(tmp_path: Path) -> None:
    applier = RecordingNftApplier()
    state = tmp_path / "nodes" / "node-1" / "nftables.rules"
    proxier = listed(NftProxier(CONFIG, applier, state_file=state), [*SERVICES, *SLICES])
    reports: list[dict[str, object]] = []
    proxier.on_synced = reports.append

    await proxier.sync_proxy_rules()
    assert applier.transactions == 1 and proxier.last_nft is not None and proxier.last_nft.full_sync
    assert "numgen random mod 3 vmap" in state.read_text()
    assert "add element ip kube-proxy service-ips { 10.96.100.100 . tcp . 5555 : goto service-" in state.read_text()

    new_slice = endpoint_slice("default", "web", [ep("10.244.1.3"), ep("10.244.2.3")], [port("", 5000)])
    proxier.on_slice("MODIFIED", SLICES[0], new_slice)
    await proxier.sync_proxy_rules()
    assert applier.transactions == 2 and proxier.last_nft is not None and not proxier.last_nft.full_sync
    assert "numgen random mod 2 vmap" in state.read_text()
    assert "add table" not in applier.last_transaction  # partial: only the Service's chains and elements
    assert proxier.last_nft.stale_chains  # the dropped endpoint's chain, flushed now, deleted later

    sample = proxier.metrics.registry.get_sample_value
    assert sample("kubeproxy_sync_full_proxy_rules_duration_seconds_count") == 1
    assert sample("kubeproxy_sync_partial_proxy_rules_duration_seconds_count") == 1
    assert sample("kubeproxy_sync_proxy_rules_last_timestamp_seconds") == pytest.approx(proxier.last_updated)
    assert sample("kubeproxy_sync_proxy_rules_nftables_sync_failures_total") == 0
    assert [(r["type"], r["full"], r["services"]) for r in reports] == [
        ("proxy-sync", True, ["default/web"]), ("proxy-sync", False, ["default/web"])]
    assert reports[1]["applied"] == [["/registry/endpointslices/default/web-abcde", 0]]

"""One proxy agent as a process of its own, for the fault tests to SIGKILL: it watches the API server
at --server and applies its rules with iptables-restore inside --netns (with --proxy-mode nftables:
kube-proxy's nftables mode, through the applier `kubelab node` picks, libnftables in a thread
inside --netns).

(`kubelab node --iptables` applies in the namespace it runs in, which has no route to an API server on
the host's loopback; this runs the same ProxyAgent and IptablesApplier from the host side.)

    python tests/faults/proxy_agent_process.py --server URL --netns NS --node-name node-1 [--metrics-port N]
        [--proxy-mode iptables|nftables]

With --metrics-port it also serves the agent's /metrics (kube-proxy's, and the count of objects it left
out of its rules) on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from kubelab import addressing
from kubelab.client import ApiClient
from proxyagent import ProxyAgent, ProxyConfig
from proxyagent.apply import IptablesApplier
from proxyagent.metricserver import MetricsServer
from proxyagent.nftables.libnft import nft_applier

CONFIG_DEFAULTS = {"node_ip": "10.240.0.11", "cluster_cidr": addressing.POD_CIDR}


def config(node_name: str) -> ProxyConfig:
    """The agent's configuration; the test renders its expectation with the same one."""
    return ProxyConfig(node_name=node_name, node_ips=(CONFIG_DEFAULTS["node_ip"],),
                       cluster_cidr=CONFIG_DEFAULTS["cluster_cidr"])


async def main(args: argparse.Namespace) -> None:
    async with ApiClient(args.server, user_agent="kubelab-fault-proxy") as api:
        agent = ProxyAgent(api, config(args.node_name), IptablesApplier(args.netns),
                           min_sync_period=args.min_sync_period, sync_period=args.sync_period,
                           proxy_mode=args.proxy_mode,
                           nft=nft_applier(args.netns) if args.proxy_mode == "nftables" else None)
        if args.metrics_port is None:
            await agent.run()
            return
        server = MetricsServer("127.0.0.1", args.metrics_port, metrics=agent.metrics_text, healthy=agent.is_healthy)
        await server.start()
        try:
            await agent.run()
        finally:
            await server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--netns", required=True)
    parser.add_argument("--node-name", default="node-1")
    parser.add_argument("--min-sync-period", type=float, default=0.05)
    parser.add_argument("--sync-period", type=float, default=2.0)
    parser.add_argument("--metrics-port", type=int, default=None)
    parser.add_argument("--proxy-mode", choices=["iptables", "nftables"], default="iptables")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(main(parser.parse_args()))

"""`kubelab proxy render`: the rules kube-proxy would write for Services and EndpointSlices read from a
file, in iptables mode (an iptables-restore payload) or nftables mode (`nft -f` input). Pure: no root, no
cluster."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cmd_proxy_render(args: argparse.Namespace) -> int:
    from kubelab.manifests import ManifestError, load_objects, pick_family
    from proxyagent import ProxyConfig, render
    from proxyagent.apply import chains_of
    from proxyagent.canonical import canonical_sort
    from proxyagent.serviceports import IPFamily

    def fail(message: str) -> int:
        print(f"kubelab proxy render: {message}", file=sys.stderr)
        return 1

    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        services, slices = load_objects(text)
        existing = chains_of(Path(args.existing_rules).read_text(), "nat") if args.existing_rules else frozenset()
        family: IPFamily = "IPv6" if args.ipv6 else "IPv4"
        # kube-proxy takes one CIDR per family from a dual-stack --cluster-cidr list.
        cluster_cidr = pick_family(args.cluster_cidr, family) if args.cluster_cidr else None
        if args.cluster_cidr and cluster_cidr is None:
            return fail(f"--cluster-cidr {args.cluster_cidr!r} has no valid {family} CIDR")
    except (OSError, ManifestError) as exc:
        return fail(str(exc))
    if not 0 <= args.masquerade_bit <= 31:
        return fail(f"--masquerade-bit must be within 0..31, not {args.masquerade_bit}")
    config = ProxyConfig(
        node_name=args.node_name, node_ips=tuple(args.node_ip or ()), cluster_cidr=cluster_cidr,
        masquerade_all=args.masquerade_all, masquerade_bit=args.masquerade_bit, random_fully=args.random_fully,
        localhost_nodeports=args.iptables_localhost_nodeports, nfacct=args.nfacct,
        conntrack_tcp_be_liberal=args.conntrack_tcp_be_liberal,
        nodeport_addresses=tuple(a.strip() for a in (args.nodeport_addresses or "").split(",") if a.strip()),
        ip_family=family)
    services, slices = _screened(services, slices)
    if args.proxy_mode == "nftables":
        return _proxy_render_nft(args, text, services, slices, config, fail)
    changed = set(args.changed) if args.changed is not None else None
    payload = render(services, slices, config, changed=changed, existing_nat_chains=existing).text
    sys.stdout.write(canonical_sort(payload) if args.sort else payload)
    return 0


def _screened(services: list[Any], slices: list[Any]) -> tuple[list[Any], list[Any]]:
    """What the API server would have refused never reaches the payload (proxyagent/screening.py, as the
    agent does): iptables-restore and nft take a payload whole, so one bad name would leave every Service
    without rules, and a name with a newline could inject a rule. Each object left out is named on stderr."""
    from proxyagent.screening import service_problems, slice_problems

    def screened(kind: str, objs: list[Any], problems: Callable[[Any], list[str]]) -> list[Any]:
        kept = []
        for obj in objs:
            found = problems(obj)
            if found:
                print(f"kubelab proxy render: left out {kind} {obj.namespace}/{obj.name}: {found[0]}", file=sys.stderr)
            else:
                kept.append(obj)
        return kept

    return screened("Service", services, service_problems), screened("EndpointSlice", slices, slice_problems)


def _proxy_render_nft(args: argparse.Namespace, text: str, services: list[Any], slices: list[Any], config: Any,
                      fail: Callable[[str], int]) -> int:
    """`kubelab proxy render --proxy-mode nftables`: the first transaction a fresh kube-proxy in
    nftables mode sends for these objects, as `nft -f` input; with --sort, the table it leaves in
    knftables' dump order (the order upstream's tests compare in)."""
    from kubelab.manifests import ManifestError, service_cidrs_in
    from proxyagent.nftables import NftConfig, apply_transaction, render_nft

    if args.changed is not None or args.existing_rules:
        return fail("--changed and --existing-rules are iptables-mode flags (an nftables partial sync needs the "
                    "previous sync's elements)")
    try:
        service_cidrs = service_cidrs_in(text)
    except ManifestError as exc:
        return fail(str(exc))
    # kube-proxy defaults --nodeport-addresses to "primary" in nftables mode (platformApplyDefaults).
    nft_config = NftConfig(
        node_name=config.node_name, node_ips=config.node_ips, cluster_cidr=config.cluster_cidr,
        masquerade_all=config.masquerade_all, masquerade_bit=config.masquerade_bit,
        nodeport_addresses=config.nodeport_addresses or ("primary",), service_cidrs=tuple(service_cidrs),
        ip_family=config.ip_family)
    transaction = render_nft(services, slices, nft_config, first_sync=True).text
    if args.sort:
        family = "ip6" if config.ip_family == "IPv6" else "ip"
        transaction = apply_transaction(None, transaction, family=family).dump()
    sys.stdout.write(transaction)
    return 0

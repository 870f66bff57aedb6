"""kube-proxy's metrics (pkg/proxy/metrics/metrics.go), iptables and nftables modes, one registry per agent.

Names, help texts, types and buckets are kube-proxy's, so dashboards and alerts written for
kube-proxy read kubelab's agents unchanged. Each `ProxyMetrics` owns its own `CollectorRegistry`:
several agents (one per simulated node) can live in one process without sharing counters.
Metrics are labelled as in kube-proxy before v1.32 (no `ip_family` label): an agent is one
single-stack proxier.

`ProxyMetrics.exposition()` is the body of a `/metrics` answer (`CONTENT_TYPE` is its type).
prometheus-client also writes a `<counter>_created` sample next to every counter; Go's client
does not. It is harmless and left alone (turning it off is a process-wide switch).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .render import Ruleset


class LocalPolicyCounts(Protocol):
    """What record_success reads of a sync's result: an iptables Ruleset or an nftables NftRuleset."""

    @property
    def no_local_endpoints_internal(self) -> int: ...

    @property
    def no_local_endpoints_external(self) -> int: ...

CONTENT_TYPE = CONTENT_TYPE_LATEST
SUBSYSTEM = "kubeproxy"


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """prometheus.ExponentialBuckets."""
    return [start * factor**i for i in range(count)]


def linear_buckets(start: float, width: float, count: int) -> list[float]:
    """prometheus.LinearBuckets."""
    return [start + width * i for i in range(count)]


def merge_buckets(*groups: list[float]) -> list[float]:
    """component-base's MergeBuckets, which starts its result with a 0 bucket."""
    return [0.0, *(b for group in groups for b in group)]


# 1 ms doubling up to 16.384 s.
SYNC_BUCKETS = exponential_buckets(0.001, 2, 15)
# 0, 0.25 s, 0.5 s, then every second to 59 s, every 5 s to 115 s, every 30 s to 5 min.
NETWORK_PROGRAMMING_BUCKETS = merge_buckets(linear_buckets(0.25, 0.25, 2), linear_buckets(1, 1, 59),
                                            linear_buckets(60, 5, 12), linear_buckets(120, 30, 7))


class ProxyMetrics:
    """The metrics of one proxy agent, registered in its own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        ns = SUBSYSTEM
        self.sync_duration = Histogram("sync_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds",
                                       namespace=ns, buckets=SYNC_BUCKETS, registry=r)
        self.sync_full_duration = Histogram("sync_full_proxy_rules_duration_seconds",
                                            "SyncProxyRules latency in seconds for full resyncs",
                                            namespace=ns, buckets=SYNC_BUCKETS, registry=r)
        self.sync_partial_duration = Histogram("sync_partial_proxy_rules_duration_seconds",
                                               "SyncProxyRules latency in seconds for partial resyncs",
                                               namespace=ns, buckets=SYNC_BUCKETS, registry=r)
        self.last_timestamp = Gauge("sync_proxy_rules_last_timestamp_seconds",
                                    "The last time proxy rules were successfully synced", namespace=ns, registry=r)
        self.last_queued_timestamp = Gauge("sync_proxy_rules_last_queued_timestamp_seconds",
                                           "The last time a sync of proxy rules was queued", namespace=ns, registry=r)
        self.network_programming = Histogram("network_programming_duration_seconds",
                                             "In Cluster Network Programming Latency in seconds", namespace=ns,
                                             buckets=NETWORK_PROGRAMMING_BUCKETS, registry=r)
        self.endpoint_changes_pending = Gauge("sync_proxy_rules_endpoint_changes_pending",
                                              "Pending proxy rules Endpoint changes", namespace=ns, registry=r)
        self.endpoint_changes_total = Counter("sync_proxy_rules_endpoint_changes_total",
                                              "Cumulative proxy rules Endpoint changes", namespace=ns, registry=r)
        self.service_changes_pending = Gauge("sync_proxy_rules_service_changes_pending",
                                             "Pending proxy rules Service changes", namespace=ns, registry=r)
        self.service_changes_total = Counter("sync_proxy_rules_service_changes_total",
                                             "Cumulative proxy rules Service changes", namespace=ns, registry=r)
        self.restore_failures = Counter("sync_proxy_rules_iptables_restore_failures_total",
                                        "Cumulative proxy iptables restore failures", namespace=ns, registry=r)
        self.partial_restore_failures = Counter("sync_proxy_rules_iptables_partial_restore_failures_total",
                                                "Cumulative proxy iptables partial restore failures",
                                                namespace=ns, registry=r)
        # nftables mode (pkg/proxy/metrics: NFTablesSyncFailuresTotal): transactions nft refused.
        self.nftables_sync_failures = Counter("sync_proxy_rules_nftables_sync_failures_total",
                                              "Cumulative proxy nftables sync failures", namespace=ns, registry=r)
        self.iptables_total = Gauge("sync_proxy_rules_iptables_total",
                                    "Total number of iptables rules owned by kube-proxy", ["table"],
                                    namespace=ns, registry=r)
        self.iptables_last = Gauge("sync_proxy_rules_iptables_last",
                                   "Number of iptables rules written by kube-proxy in last sync", ["table"],
                                   namespace=ns, registry=r)
        # Not kube-proxy's (it trusts the API server's validation): objects left out of the rules because
        # a name, port or protocol in them could not be written into one (proxyagent/screening.py).
        self.invalid_objects = Counter("sync_proxy_rules_invalid_objects",
                                       "Cumulative Services and EndpointSlices found invalid and left out of the "
                                       "proxy rules", ["kind"], namespace=ns, registry=r)
        self.skipped_objects = Gauge("sync_proxy_rules_skipped_objects",
                                     "Services and EndpointSlices now left out of the proxy rules because they are "
                                     "invalid", ["kind"], namespace=ns, registry=r)
        self.no_local_endpoints = Gauge("sync_proxy_rules_no_local_endpoints_total",
                                        "Number of services with a Local traffic policy and no endpoints",
                                        ["traffic_policy"], namespace=ns, registry=r)

    def observe_sync(self, seconds: float, *, full: bool) -> None:
        """Every sync, failed or not, is timed (syncProxyRules' deferred observation)."""
        self.sync_duration.observe(seconds)
        (self.sync_full_duration if full else self.sync_partial_duration).observe(seconds)

    def record_ruleset(self, ruleset: Ruleset) -> None:
        """The rule counts of a payload about to be restored (set before the restore, as upstream)."""
        self.iptables_total.labels("filter").set(ruleset.filter_rules)
        self.iptables_last.labels("filter").set(ruleset.filter_rules)
        # nat: rules written plus those of unchanged services left in place, minus `-X` lines.
        self.iptables_total.labels("nat").set(ruleset.nat_rules_total)
        self.iptables_last.labels("nat").set(ruleset.nat_rules)

    def record_success(self, ruleset: LocalPolicyCounts, trigger_times: Iterable[float], *, now: float | None = None) -> None:
        """After a successful restore: latency of every endpoint change it applied, the Local-policy
        services without local endpoints, and the time of the sync."""
        now = time.time() if now is None else now
        for when in trigger_times:
            self.network_programming.observe(max(0.0, now - when))
        self.no_local_endpoints.labels("internal").set(ruleset.no_local_endpoints_internal)
        self.no_local_endpoints.labels("external").set(ruleset.no_local_endpoints_external)
        self.last_timestamp.set(now)

    def exposition(self) -> bytes:
        """This agent's metrics in the Prometheus text format (the body of GET /metrics)."""
        return generate_latest(self.registry)

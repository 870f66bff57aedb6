"""kube-apiserver's metrics (k8s.io/apiserver/pkg/endpoints/metrics, .../storage/etcd3/metrics and the
watch cache's), in one `CollectorRegistry` per API server, served at GET /metrics.

Names, label sets and buckets are kube-apiserver's, so its dashboards and alerts read kubelab's API
server unchanged:

* `apiserver_request_total{verb,dry_run,group,version,resource,subresource,scope,component,code}`
* `apiserver_request_duration_seconds{verb,dry_run,group,version,resource,subresource,scope,component}`
  (a WATCH is observed when its stream ends, as upstream)
* `apiserver_watch_events_total{group,version,kind}` and `apiserver_watch_events_sizes`: one per event
  sent to one watcher
* `etcd_request_duration_seconds{operation,type}`, `etcd_requests_total`, `etcd_request_errors_total`
  (type is the group-resource, as kube-apiserver labels it since 1.26: `pods`, `deployments.apps`)
* `apiserver_current_inflight_requests{request_kind}` and `apiserver_dropped_requests_total{request_kind}`
  (the in-flight limits of flowcontrol.py: `readOnly`, `mutating`, and kubelab's own `nodeHigh` for nodes)
* `apiserver_watch_cache_events_dispatched_total{resource}`, `apiserver_watch_cache_resource_version`,
  `apiserver_watch_cache_initializations_total` and `apiserver_registered_watchers{group,version,kind}`
  for the watch cache (cacher.py).

Verbs are kube's: GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION; scope is
`resource` (a named object), `namespace` or `cluster` (a collection).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kubelab.kinds import BUILTIN, ResourceType

CONTENT_TYPE = CONTENT_TYPE_LATEST
COMPONENT = "apiserver"

# requestLatencies' and etcdRequestLatency's buckets: 5 ms to a minute.
REQUEST_BUCKETS = [0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30,
                   45, 60]
# watchEventsSizes: ExponentialBuckets(1024, 2.0, 8).
WATCH_EVENT_SIZE_BUCKETS = [1024 * 2.0**i for i in range(8)]
REQUEST_LABELS = ["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"]


def group_resource(rt: ResourceType) -> str:
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


class ApiserverMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry if registry is not None else CollectorRegistry()
        self.request_total = Counter(
            "apiserver_request_total", "Counter of apiserver requests broken out for each verb, dry run value, "
            "group, version, resource, scope, component, and HTTP response code.", [*REQUEST_LABELS, "code"],
            registry=r)
        self.request_duration = Histogram(
            "apiserver_request_duration_seconds", "Response latency distribution in seconds for each verb, dry run "
            "value, group, version, resource, subresource, scope and component.", REQUEST_LABELS,
            buckets=REQUEST_BUCKETS, registry=r)
        self.watch_events = Counter("apiserver_watch_events_total", "Number of events sent in watch clients",
                                    ["group", "version", "kind"], registry=r)
        self.watch_event_sizes = Histogram("apiserver_watch_events_sizes", "Watch event size distribution in bytes",
                                           ["group", "version", "kind"], buckets=WATCH_EVENT_SIZE_BUCKETS, registry=r)
        self.registered_watchers = Gauge("apiserver_registered_watchers",
                                         "Number of currently registered watchers for a given resources",
                                         ["group", "version", "kind"], registry=r)
        self.etcd_duration = Histogram("etcd_request_duration_seconds", "Etcd request latency in seconds for each "
                                       "operation and object type.", ["operation", "type"], buckets=REQUEST_BUCKETS,
                                       registry=r)
        self.etcd_total = Counter("etcd_requests_total", "Etcd request counts for each operation and object type.",
                                  ["operation", "type"], registry=r)
        self.etcd_errors = Counter("etcd_request_errors_total", "Etcd failed request counts for each operation and "
                                   "object type.", ["operation", "type"], registry=r)
        self.cache_dispatched = Counter("apiserver_watch_cache_events_dispatched_total",
                                        "Counter of events dispatched in watch cache broken by resource type.",
                                        ["resource"], registry=r)
        self.cache_received = Counter("apiserver_watch_cache_events_received_total",
                                      "Counter of events received in watch cache broken by resource type.",
                                      ["resource"], registry=r)
        self.cache_rv = Gauge("apiserver_watch_cache_resource_version",
                              "Current resource version of watch cache broken by resource type.", ["resource"],
                              registry=r)
        self.cache_inits = Counter("apiserver_watch_cache_initializations_total",
                                   "Counter of watch cache initializations broken by resource type.", ["resource"],
                                   registry=r)
        self.inflight = Gauge("apiserver_current_inflight_requests", "Maximal number of currently used inflight "
                              "request limit of this apiserver per request kind in last second.", ["request_kind"],
                              registry=r)
        self.dropped = Counter("apiserver_dropped_requests_total", "Number of requests dropped with 'Try again "
                               "later' response", ["request_kind"], registry=r)
        # etcd keys -> the type label, resolved once per resource.
        self._types = {rt.storage_path: group_resource(rt) for rt in BUILTIN}
        # The labelled children, looked up once per label set (prometheus-client's labels() is a
        # lock, a tuple and a dict lookup on every call).
        self._children: dict[tuple[str, str], tuple[Histogram, Counter, Counter]] = {}
        self._request_children: dict[tuple[str | bool | int, ...], tuple[Counter, Histogram]] = {}
        self._watch_children: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}

    # --- requests --------------------------------------------------------------------------------

    def observe_request(self, verb: str, rt: ResourceType | None, *, subresource: str, scope: str, dry_run: bool,
                        code: int, seconds: float) -> None:
        group, version, resource = (rt.group, rt.version, rt.plural) if rt is not None else ("", "", "")
        ident = (verb, group, version, resource, subresource, scope, dry_run, code)
        children = self._request_children.get(ident)
        if children is None:
            labels = (verb, "All" if dry_run else "", group, version, resource, subresource, scope, COMPONENT)
            children = self._request_children[ident] = (self.request_total.labels(*labels, str(code)),
                                                         self.request_duration.labels(*labels))
        children[0].inc()
        children[1].observe(seconds)

    def watch_event(self, rt: ResourceType, size: int) -> None:
        ident = (rt.group, rt.version, rt.kind)  # not the plural alone: core and events.k8s.io both have events
        children = self._watch_children.get(ident)
        if children is None:
            children = self._watch_children[ident] = (self.watch_events.labels(*ident),
                                                      self.watch_event_sizes.labels(*ident))
        children[0].inc()
        children[1].observe(size)

    # --- etcd (Storage.observe) ------------------------------------------------------------------

    def type_of(self, key: str) -> str:
        parts = key.split("/", 3)
        prefix = f"/{parts[1]}/{parts[2]}/" if len(parts) > 2 else key
        return self._types.get(prefix) or (parts[2] if len(parts) > 2 else key)

    def observe_etcd(self, operation: str, key: str, seconds: float, ok: bool) -> None:
        ident = (operation, self.type_of(key))
        children = self._children.get(ident)
        if children is None:
            children = self._children[ident] = (self.etcd_duration.labels(*ident), self.etcd_total.labels(*ident),
                                                 self.etcd_errors.labels(*ident))
        children[0].observe(seconds)
        children[1].inc()
        if not ok:
            children[2].inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

"""Change traces: where the latest change of an object went, and when (`kubelab trace KIND/NAME`).

The API server records, in bounded in-memory rings:

* `accepted`: every write it made — (key, revision, when etcd acknowledged it, verb, client);
* `delivered`: every event it sent to a watcher — (key, revision, watcher's user agent, when);
* `reports`: milestones components POST to `/apis/kubelab.dev/v1alpha1/traces` (kubelab-only; not in
  discovery): the endpoints controllers' "wrote the Endpoints / an EndpointSlice of Service S at
  revision R, caused by these (key, revision) changes", a proxy agent's "iptables-restore done at t,
  applying these (key, revision) changes".

`timeline()` joins them for one object, by construction: its latest accepted write, the watchers it
reached, the writes that name it among their causes, their deliveries, and each node's first sync
that applied it or one of those writes. Nothing is reconstructed or guessed from revisions being
later: every row is a record made when the thing happened, and a row is in a trace only if its
record names the change. Records older than the rings' capacity are gone, and a trace says so.
"""

from __future__ import annotations

import time
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from kubelab import tracing

ACCEPTED_CAPACITY = 50_000
DELIVERED_CAPACITY = 500_000
REPORTS_CAPACITY = 50_000

GROUP, VERSION, PATH = tracing.GROUP, tracing.VERSION, tracing.PATH

# The user agent of the request being served (set by the router, read where writes are recorded).
client: ContextVar[str] = ContextVar("trace_client", default="")

ENDPOINTS_REPORT = "endpoints"
PROXY_SYNC_REPORT = "proxy-sync"
REPORT_TYPES = (ENDPOINTS_REPORT, PROXY_SYNC_REPORT)
MAX_PAIRS = 5000  # causes or applied changes per report
# The pairs the whole reports ring may hold: full syncs of a big cluster name thousands each, so the
# ring gives up its oldest reports before it holds more (a deterministic memory bound, ~100 MB).
PAIRS_CAPACITY = 1_000_000


@dataclass(frozen=True)
class Accepted:
    key: str
    revision: int
    at: float  # when the write went to etcd (the request was accepted and validated)
    acked: float  # when etcd acknowledged it
    verb: str
    client: str


class TraceRecorder:
    def __init__(self, *, accepted: int = ACCEPTED_CAPACITY, delivered: int = DELIVERED_CAPACITY,
                 reports: int = REPORTS_CAPACITY) -> None:
        self.accepted: deque[Accepted] = deque(maxlen=accepted)
        self.delivered: deque[tuple[str, int, str, float]] = deque(maxlen=delivered)
        self.reports: deque[dict[str, Any]] = deque(maxlen=reports)
        self.pairs_held = 0  # causes and applied pairs across the ring, kept under PAIRS_CAPACITY

    # --- recording (hot paths: one append each) --------------------------------------------------

    def accept(self, key: str, revision: int, verb: str, sent: float) -> None:
        self.accepted.append(Accepted(key, revision, sent, time.time(), verb, client.get()))

    def deliver(self, key: str, revision: int, watcher: str) -> None:
        self.delivered.append((key, revision, watcher, time.time()))

    def report(self, body: dict[str, Any], reporter: str) -> dict[str, Any]:
        """Keep a component's milestone; raises ValueError for one that is not well-formed."""
        kind = body.get("type")
        if kind not in REPORT_TYPES:
            raise ValueError(f"type must be one of {', '.join(REPORT_TYPES)}")
        record: dict[str, Any] = {"type": kind, "reporter": reporter, "receivedAt": time.time()}
        if kind == ENDPOINTS_REPORT:
            fields = {"controller": str, "service": str, "object": str, "revision": int, "triggerRevision": int,
                      "at": float}
        else:
            fields = {"node": str, "servicesRevision": int, "slicesRevision": int, "full": bool, "startedAt": float,
                      "doneAt": float, "restoreSeconds": float, "syncSeconds": float}
        for name, want in fields.items():
            value = body.get(name)
            if want is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, want) or (want is int and isinstance(value, bool)):
                raise ValueError(f"{name} must be a {want.__name__}")
            record[name] = value
        if kind == PROXY_SYNC_REPORT:
            services = body.get("services") or []
            if not isinstance(services, list) or not all(isinstance(s, str) for s in services):
                raise ValueError("services must be a list of strings")
            record["services"] = services[:1000]
        # What the record's write or sync is a consequence of: the (storage key, revision) changes it
        # reflects (the controllers' CauseTracker) or applied (the proxier). Attribution joins on these.
        field = "causes" if kind == ENDPOINTS_REPORT else "applied"
        record[field] = frozenset(_pairs(body.get(field) or [], field))
        if len(self.reports) == self.reports.maxlen:
            self.pairs_held -= _pair_count(self.reports[0])
        self.reports.append(record)
        self.pairs_held += _pair_count(record)
        while self.pairs_held > PAIRS_CAPACITY and len(self.reports) > 1:
            self.pairs_held -= _pair_count(self.reports.popleft())
        return record

    # --- reading ---------------------------------------------------------------------------------

    def latest(self, key: str) -> Accepted | None:
        for record in reversed(self.accepted):
            if record.key == key:
                return record
        return None

    def accepted_at(self, key: str, revision: int) -> Accepted | None:
        for record in reversed(self.accepted):
            if record.key == key and record.revision == revision:
                return record
        return None

    def deliveries(self, key: str, revision: int) -> list[tuple[str, float]]:
        """(watcher, when) for every watcher that was sent this change, first delivery per watcher."""
        seen: dict[str, float] = {}
        for k, rev, watcher, at in self.delivered:
            if rev == revision and k == key and watcher not in seen:
                seen[watcher] = at
        return sorted(seen.items(), key=lambda item: item[1])

    def writes_caused_by(self, key: str, revision: int) -> list[dict[str, Any]]:
        """The Endpoints/EndpointSlice writes whose causes include this change, first per object."""
        found: dict[tuple[str, str], dict[str, Any]] = {}
        wanted = (key, revision)
        for record in self.reports:
            if record["type"] == ENDPOINTS_REPORT and wanted in record["causes"]:
                found.setdefault((record["controller"], record["object"]), record)
        return sorted(found.values(), key=lambda r: r["at"])

    def syncs_applying(self, changes: set[tuple[str, int]]) -> list[dict[str, Any]]:
        """Per node, the first sync that applied one of these (key, revision) changes."""
        found: dict[str, dict[str, Any]] = {}
        for record in self.reports:
            if record["type"] != PROXY_SYNC_REPORT or record["node"] in found:
                continue
            if not changes.isdisjoint(record["applied"]):
                found[record["node"]] = record
        return sorted(found.values(), key=lambda r: r["doneAt"])


def _pair_count(record: dict[str, Any]) -> int:
    return len(record.get("causes") or record.get("applied") or ())


def _pairs(value: Any, field: str) -> list[tuple[str, int]]:
    if not isinstance(value, list) or len(value) > MAX_PAIRS:
        raise ValueError(f"{field} must be a list of at most {MAX_PAIRS} [key, revision] pairs")
    pairs = []
    for item in value:
        if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str)
                or not isinstance(item[1], int) or isinstance(item[1], bool)):
            raise ValueError(f"{field} must be a list of [key, revision] pairs")
        pairs.append((item[0], item[1]))
    return pairs


def step(at: float, what: str, component: str, detail: str = "", took: float | None = None) -> dict[str, Any]:
    return {"at": at, "step": what, "component": component, "detail": detail, "took": took}


def timeline(recorder: TraceRecorder, key: str) -> dict[str, Any]:
    """The latest change of the object at `key` and what it caused, by construction: the Endpoints
    and EndpointSlice writes whose reported causes name this (key, revision), their deliveries, and
    per node the first sync that applied this change or one of those writes. A change that moved no
    endpoint has no write in its trace, whatever was written after it."""
    accepted = recorder.latest(key)
    if accepted is None:
        return {"key": key, "found": False, "steps": [],
                "message": "no write of this object is recorded (the API server keeps the last "
                           f"{ACCEPTED_CAPACITY} writes since it started)"}
    steps = [step(accepted.at, "accepted", "apiserver", f"{accepted.verb} by {accepted.client or '?'}, written to "
                                                        f"etcd at revision {accepted.revision}",
                  took=accepted.acked - accepted.at)]
    for watcher, at in recorder.deliveries(key, accepted.revision):
        steps.append(step(at, "delivered", watcher, f"watch event, revision {accepted.revision}"))
    services: list[str] = []
    consequences = {(key, accepted.revision)}
    slices_revision = 0
    for write in recorder.writes_caused_by(key, accepted.revision):
        if write["service"] not in services:
            services.append(write["service"])
        written = recorder.accepted_at(write["object"], write["revision"])
        at = written.at if written is not None else write["at"]
        steps.append(step(at, "endpoints written", write["reporter"] or write["controller"],
                          f"{write['controller']}: {write['object'].removeprefix('/registry/')} at revision "
                          f"{write['revision']}", took=written.acked - written.at if written else None))
        for watcher, delivered in recorder.deliveries(write["object"], write["revision"]):
            steps.append(step(delivered, "delivered", watcher, f"{write['object'].split('/')[2]} revision "
                                                               f"{write['revision']}"))
        consequences.add((write["object"], write["revision"]))
        if "endpointslices" in write["object"]:
            slices_revision = max(slices_revision, write["revision"])
    for sync in recorder.syncs_applying(consequences):
        steps.append(step(sync["doneAt"], "rules applied", f"proxy {sync['node']}",
                          f"{'full' if sync['full'] else 'partial'} iptables-restore "
                          f"(services <= {sync['servicesRevision']}, slices <= {sync['slicesRevision']})",
                          took=sync["restoreSeconds"]))
    steps.sort(key=lambda s: s["at"])
    start = accepted.at
    for s in steps:
        s["sinceAccepted"] = s["at"] - start
    services_revision = accepted.revision if key.startswith("/registry/services/") else 0
    return {"key": key, "found": True, "revision": accepted.revision, "acceptedAt": accepted.at, "steps": steps,
            "services": services, "servicesRevision": services_revision, "slicesRevision": slices_revision}

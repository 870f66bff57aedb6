"""The API server's metrics as /metrics shows them: each label set counted on its own, also now that the
labelled children are looked up once (apiserver/metrics.py)."""

from __future__ import annotations

from dataclasses import replace

from apiserver.metrics import ApiserverMetrics
from kubelab import kinds, models


def exposition_lines(metrics: ApiserverMetrics, name: str) -> list[str]:
    return [line for line in metrics.exposition().decode().splitlines() if line.startswith(name + "{")]


def test_watch_events_of_two_groups_with_the_same_plural_are_counted_apart() -> None:
    core_events = replace(kinds.PODS, plural="events", kind="Event", model=models.Event)
    other_events = replace(core_events, group="events.k8s.io")
    metrics = ApiserverMetrics()
    metrics.watch_event(core_events, 100)
    metrics.watch_event(core_events, 100)
    metrics.watch_event(other_events, 100)
    assert sorted(exposition_lines(metrics, "apiserver_watch_events_total")) == [
        'apiserver_watch_events_total{group="",kind="Event",version="v1"} 2.0',
        'apiserver_watch_events_total{group="events.k8s.io",kind="Event",version="v1"} 1.0']


def test_requests_are_counted_per_verb_resource_and_code() -> None:
    metrics = ApiserverMetrics()
    for code in (201, 201, 409):
        metrics.observe_request("POST", kinds.PODS, subresource="", scope="namespace", dry_run=False, code=code,
                                seconds=0.001)
    metrics.observe_request("POST", kinds.PODS, subresource="", scope="namespace", dry_run=True, code=201,
                            seconds=0.001)
    lines = exposition_lines(metrics, "apiserver_request_total")
    assert len(lines) == 3
    counts = {(('dry_run="All"' in line), ('code="409"' in line)): line.rsplit(" ", 1)[1] for line in lines}
    assert counts == {(False, False): "2.0", (False, True): "1.0", (True, False): "1.0"}

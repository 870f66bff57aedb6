"""stats/summary's node figures are the node's own readings (/proc/stat, /proc/meminfo, as kubelet's come from
cAdvisor's root container), not the sum of its pods."""

from __future__ import annotations

from kubeletstub.dataplane import RenderDataplane
from kubeletstub.stats import CLOCK_TICK_NS, StatsProvider, parse_machine

PROC_STAT = """cpu  100 5 50 9000 40 3 2 1 0 0
cpu0 50 2 25 4500 20 1 1 0 0 0
intr 12345
"""
MEMINFO = """MemTotal:        8000000 kB
MemFree:         1000000 kB
MemAvailable:    5000000 kB
Buffers:          100000 kB
AnonPages:       2000000 kB
"""


def test_machine_readings_are_parsed_as_cadvisor_counts_them() -> None:
    machine = parse_machine(PROC_STAT, MEMINFO)
    assert machine is not None
    assert machine.cpu_ns == (100 + 5 + 50 + 3 + 2 + 1) * CLOCK_TICK_NS  # idle and iowait are not usage
    assert machine.working_set_bytes == 3_000_000 * 1024
    assert machine.usage_bytes == 7_000_000 * 1024
    assert machine.available_bytes == 5_000_000 * 1024
    assert machine.rss_bytes == 2_000_000 * 1024


def test_unreadable_machine_readings_give_none() -> None:
    assert parse_machine("", MEMINFO) is None
    assert parse_machine(PROC_STAT, "MemTotal: 1 kB\n") is None
    assert parse_machine("cpu  x y z\n", MEMINFO) is None


async def test_a_node_without_pods_reports_the_machines_usage() -> None:
    summary = await StatsProvider("node-1", RenderDataplane()).summary({})
    node = summary["node"]
    assert summary["pods"] == []
    assert node["cpu"]["usageCoreNanoSeconds"] > 0
    assert node["memory"]["workingSetBytes"] > 0 and node["memory"]["availableBytes"] > 0
    assert node["memory"]["usageBytes"] >= node["memory"]["workingSetBytes"] - node["memory"]["availableBytes"]

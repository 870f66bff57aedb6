"""Pod IPs handed out the host-local way: sequential from .2 (never the network address or the .1
gateway), the next address after the last one given rather than the lowest free one, wrapping at the end
of the range, re-adopting the addresses pods already have after a restart, and a clear error when full."""

from __future__ import annotations

import pytest

from kubeletstub.ipam import PodIPAllocator, RangeExhausted


def test_sequential_from_two() -> None:
    ipam = PodIPAllocator("10.244.1.0/24")
    assert [ipam.allocate(f"ns/p{i}") for i in range(3)] == ["10.244.1.2", "10.244.1.3", "10.244.1.4"]
    assert ipam.gateway.compressed == "10.244.1.1"


def test_same_pod_keeps_its_address() -> None:
    ipam = PodIPAllocator("10.244.1.0/24")
    first = ipam.allocate("ns/a")
    assert ipam.allocate("ns/a") == first
    assert ipam.ip_of("ns/a") == first
    assert ipam.allocate("ns/b") == "10.244.1.3"


def test_released_address_is_not_reused_at_once() -> None:
    ipam = PodIPAllocator("10.244.1.0/24")
    ipam.allocate("ns/a")  # .2
    ipam.allocate("ns/b")  # .3
    ipam.release("ns/a")
    assert ipam.ip_of("ns/a") is None
    assert ipam.allocate("ns/a") == "10.244.1.4"  # the recreated pod comes back with a new IP


def test_wraps_and_skips_addresses_in_use() -> None:
    ipam = PodIPAllocator("10.244.1.0/29")  # .2-.6 usable: .0 network, .1 gateway, .7 broadcast
    got = [ipam.allocate(f"ns/p{i}") for i in range(5)]
    assert got == [f"10.244.1.{i}" for i in range(2, 7)]
    ipam.release("ns/p3")  # frees .5
    ipam.release("ns/p1")  # frees .3
    assert ipam.allocate("ns/x") == "10.244.1.3"  # wrapped to the start, first free after .6
    assert ipam.allocate("ns/y") == "10.244.1.5"


def test_exhaustion() -> None:
    ipam = PodIPAllocator("10.244.1.0/30")  # only .2: .3 is the broadcast address
    assert ipam.allocate("ns/a") == "10.244.1.2"
    with pytest.raises(RangeExhausted, match="no free addresses left in 10.244.1.0/30"):
        ipam.allocate("ns/b")
    ipam.release("ns/a")
    assert ipam.allocate("ns/b") == "10.244.1.2"


def test_reserve_after_restart_continues_after_the_highest() -> None:
    ipam = PodIPAllocator("10.244.1.0/24")
    assert ipam.reserve("ns/a", "10.244.1.7")
    assert ipam.reserve("ns/b", "10.244.1.3")
    assert ipam.ip_of("ns/a") == "10.244.1.7"
    assert ipam.allocate("ns/a") == "10.244.1.7"  # an adopted pod keeps its address
    assert ipam.allocate("ns/c") == "10.244.1.8"


@pytest.mark.parametrize(("ip", "accepted"), [
    pytest.param("10.244.1.9", True, id="in range"),
    pytest.param("10.244.1.254", True, id="last usable"),
    pytest.param("10.244.1.0", False, id="network address"),
    pytest.param("10.244.1.1", False, id="gateway"),
    pytest.param("10.244.1.255", False, id="broadcast"),
    pytest.param("10.244.2.9", False, id="another node's range"),
    pytest.param("not-an-ip", False, id="garbage"),
])
def test_reserve_only_our_addresses(ip: str, accepted: bool) -> None:
    ipam = PodIPAllocator("10.244.1.0/24")
    assert ipam.reserve("ns/a", ip) is accepted
    assert ipam.ip_of("ns/a") == (ip if accepted else None)


def test_reserve_refuses_an_address_held_by_another_pod() -> None:
    ipam = PodIPAllocator("10.244.1.0/24")
    ip = ipam.allocate("ns/a")
    assert not ipam.reserve("ns/b", ip)
    assert ipam.reserve("ns/a", ip)


def test_reserve_of_a_new_address_frees_the_old_one() -> None:
    ipam = PodIPAllocator("10.244.1.0/29")
    ipam.reserve("ns/a", "10.244.1.2")
    ipam.reserve("ns/a", "10.244.1.6")
    # .2 is free again: after .6 the allocator wraps and finds it.
    assert ipam.allocate("ns/b") == "10.244.1.2"


def test_last_address_wraps_next_allocation_to_the_start() -> None:
    ipam = PodIPAllocator("10.244.1.0/24")
    assert ipam.reserve("ns/a", "10.244.1.254")
    assert ipam.allocate("ns/b") == "10.244.1.2"

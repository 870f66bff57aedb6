"""Chain names must be bit-for-bit kube-proxy's: the expected hashes below all appear in upstream
kube-proxy's own tests (pkg/proxy/iptables/proxier_test.go), so they are checked against Go's
sha256 + base32.StdEncoding, not just against this implementation."""

from __future__ import annotations

import pytest

from proxyagent.hashing import (
    SERVICE_CHAIN_PREFIXES,
    endpoint_chain_name,
    hash16,
    is_service_chain,
    service_chain_names,
)


@pytest.mark.parametrize(("svc_port_name", "protocol", "expected"), [
    pytest.param("ns1/svc1:p80", "tcp", "XPGD46QRK7WJZT7O", id="reference example"),
    pytest.param("ns2/svc2:p80", "tcp", "GNZBNJ2PO5MGZ6GT", id="overall test svc2"),
    pytest.param("ns3/svc3:p80", "tcp", "X27LE4BHSL4DOUIK", id="overall test svc3"),
    pytest.param("ns4/svc4:p80", "tcp", "4SW47YFZTEDKD3PK", id="overall test svc4"),
    pytest.param("ns5/svc5:p80", "tcp", "NUKIZ6OKUXPJNT4C", id="overall test svc5"),
    pytest.param("ns2/svc2:p8080", "tcp", "2VJB64SDSIJUP5T6", id="repeated sync svc2"),
    pytest.param("ns4/svc4:p8082", "tcp", "EBDQOQU5SJFXRIL3", id="large cluster svc4"),
])
def test_service_chains(svc_port_name: str, protocol: str, expected: str) -> None:
    chains = service_chain_names(svc_port_name, protocol)
    assert (chains.svc, chains.svl, chains.ext, chains.fw) == (
        f"KUBE-SVC-{expected}", f"KUBE-SVL-{expected}", f"KUBE-EXT-{expected}", f"KUBE-FW-{expected}")


@pytest.mark.parametrize(("svc_port_name", "endpoint", "expected"), [
    pytest.param("ns1/svc1:p80", "10.180.0.1:80", "KUBE-SEP-SXIVWICOYRO3J4NJ", id="reference example"),
    pytest.param("ns2/svc2:p80", "10.180.0.2:80", "KUBE-SEP-RS4RBKLTHTF2IUXJ", id="overall svc2"),
    pytest.param("ns3/svc3:p80", "10.180.0.3:80", "KUBE-SEP-OYPFS5VJICHGATKP", id="overall svc3"),
    pytest.param("ns4/svc4:p80", "10.180.0.4:80", "KUBE-SEP-UKSFD7AGPMPPLUHC", id="overall svc4 first"),
    pytest.param("ns4/svc4:p80", "10.180.0.5:80", "KUBE-SEP-C6EBXVWJJZMIWKLZ", id="overall svc4 second"),
    # Same endpoint as svc3's, different service: the service name is part of the hash.
    pytest.param("ns5/svc5:p80", "10.180.0.3:80", "KUBE-SEP-I77PXRDZVX7PMWMN", id="overall svc5"),
    pytest.param("ns1/svc1:p80", "10.0.0.0:80", "KUBE-SEP-DKGQUZGBKLTPAR56", id="large cluster svc1"),
    pytest.param("ns3/svc3:p8081", "203.0.113.4:8081", "KUBE-SEP-RUVVH7YV3PHQBDOS", id="large cluster svc3"),
    pytest.param("ns4/svc4:p8082", "10.4.0.1:8082", "KUBE-SEP-SU5STNODRYEWJAUF", id="large cluster svc4"),
    pytest.param("ns1/svc1:p80", "10.0.1.1:80", "KUBE-SEP-SNQ3ZNILQDEJNDQO", id="repeated sync svc1"),
    pytest.param("ns2/svc2:p8080", "10.0.2.1:8080", "KUBE-SEP-UHEGFW77JX3KXTOV", id="repeated sync svc2"),
    pytest.param("ns3/svc3:p80", "10.0.3.1:80", "KUBE-SEP-BSWRHOQ77KEXZLNL", id="repeated sync svc3"),
    pytest.param("ns3/svc3:p80", "10.0.3.2:80", "KUBE-SEP-DKCFIS26GWF2WLWC", id="repeated sync svc3 moved"),
    pytest.param("ns3/svc3:p80", "10.0.3.3:80", "KUBE-SEP-JVVZVJ7BSEPPRNBS", id="repeated sync svc3 added"),
    pytest.param("ns4/svc4:p80", "10.0.4.1:80", "KUBE-SEP-AYCN5HPXMIRJNJXU", id="repeated sync svc4"),
])
def test_endpoint_chain(svc_port_name: str, endpoint: str, expected: str) -> None:
    assert endpoint_chain_name(svc_port_name, "tcp", endpoint) == expected


def test_hash16_is_sha256_base32_prefix() -> None:
    # The protocol is appended without a separator, lower-case.
    assert hash16("ns1/svc1:p80tcp") == "XPGD46QRK7WJZT7O"
    assert hash16("ns1/svc1:p80tcp10.180.0.1:80") == "SXIVWICOYRO3J4NJ"


def test_upper_case_protocol_hashes_differently_so_names_lower_it() -> None:
    # Hashing "TCP" gives another chain name, which kube-proxy never uses ...
    assert hash16("ns1/svc1:p80TCP") == "3UP2Z6VMNQ3MME3P"
    # ... so the name helpers lower-case the protocol as kube-proxy does before hashing.
    assert service_chain_names("ns1/svc1:p80", "TCP").svc == "KUBE-SVC-XPGD46QRK7WJZT7O"
    assert endpoint_chain_name("ns1/svc1:p80", "TCP", "10.180.0.1:80") == "KUBE-SEP-SXIVWICOYRO3J4NJ"


def test_protocol_is_part_of_the_hash() -> None:
    # DNS on 53/UDP and 53/TCP under the same port name would otherwise collide.
    assert service_chain_names("ns/dns:dns", "udp").svc != service_chain_names("ns/dns:dns", "tcp").svc


def test_unnamed_port_has_no_colon() -> None:
    assert service_chain_names("default/web", "tcp").svc == "KUBE-SVC-" + hash16("default/webtcp")


def test_chain_names_fit_iptables_limit() -> None:
    # iptables chain names are at most 28 characters.
    chains = service_chain_names("a-very-long-namespace-name/a-very-long-service-name:https", "sctp")
    assert max(len(c) for c in (chains.svc, chains.svl, chains.ext, chains.fw)) <= 28
    assert len(endpoint_chain_name("n/s:p", "udp", "[fd00:10:180::2:1]:53")) <= 28


@pytest.mark.parametrize(("chain", "owned"), [
    pytest.param("KUBE-SVC-XPGD46QRK7WJZT7O", True, id="svc"),
    pytest.param("KUBE-SVL-XPGD46QRK7WJZT7O", True, id="svl"),
    pytest.param("KUBE-EXT-XPGD46QRK7WJZT7O", True, id="ext"),
    pytest.param("KUBE-FW-XPGD46QRK7WJZT7O", True, id="fw"),
    pytest.param("KUBE-SEP-SXIVWICOYRO3J4NJ", True, id="sep"),
    pytest.param("KUBE-SERVICES", False, id="fixed chain"),
    pytest.param("KUBE-XLB-XPGD46QRK7WJZT7O", False, id="old xlb chain"),
    pytest.param("DOCKER", False, id="foreign chain"),
])
def test_is_service_chain(chain: str, owned: bool) -> None:
    assert is_service_chain(chain) is owned
    assert len(SERVICE_CHAIN_PREFIXES) == 5


@pytest.mark.parametrize(
    ("endpoint", "chain"),
    [
        pytest.param("10.244.1.3:5000", "KUBE-SEP-37QFZ7WS6YCMEGGL", id="seed lb-svc first endpoint"),
        pytest.param("10.244.1.4:5000", "KUBE-SEP-6SMVGQRJXVZRRJRN", id="seed lb-svc second endpoint"),
        pytest.param("10.244.2.3:5000", "KUBE-SEP-TQN37TW44HP3RSKY", id="seed lb-svc third endpoint"),
    ],
)
def test_seed_article_chain_names(endpoint: str, chain: str) -> None:
    """The first seed printed `iptables -L -t nat` of a real cluster: Service default/lb-svc, an unnamed
    TCP port, three endpoints on port 5000. kubelab must name those chains exactly as kube-proxy did."""
    assert endpoint_chain_name("default/lb-svc", "tcp", endpoint) == chain

"""canonical_sort and check_consistency: the comparison machinery kube-proxy's own tests use (§12)."""

from __future__ import annotations

import pytest

from proxyagent.canonical import canonical_sort, check_consistency, rule_comment

LAST = '"kubernetes service nodeports; NOTE: this must be the last rule in this chain"'


def lines(*ls: str) -> str:
    return "".join(line + "\n" for line in ls)


@pytest.mark.parametrize(("raw", "expected"), [
    pytest.param(
        lines(
            "*nat",
            ":KUBE-SERVICES - [0:0]",
            ":KUBE-NODEPORTS - [0:0]",
            ":KUBE-POSTROUTING - [0:0]",
            ":KUBE-MARK-MASQ - [0:0]",
            ":KUBE-SVC-B - [0:0]",
            ":KUBE-SVC-A - [0:0]",
            "-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000",
            "-A KUBE-SERVICES -m comment --comment \"ns2/b:p cluster IP\" -d 10.0.0.2 -j KUBE-SVC-B",
            "-A KUBE-SVC-B -m comment --comment \"ns2/b:p -> 10.1.0.2:80\" -j DNAT",
            "-A KUBE-NODEPORTS -m comment --comment ns2/b:p --dport 30002 -j KUBE-SVC-B",
            "-A KUBE-SERVICES -m comment --comment \"ns1/a:p cluster IP\" -d 10.0.0.1 -j KUBE-SVC-A",
            "-A KUBE-SVC-A -m comment --comment \"ns1/a:p -> 10.1.0.1:80\" -j DNAT",
            "-A KUBE-NODEPORTS -m comment --comment ns1/a:p --dport 30001 -j KUBE-SVC-A",
            f"-A KUBE-SERVICES -m comment --comment {LAST} -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS",
            "COMMIT",
            "*filter",
            ":KUBE-SERVICES - [0:0]",
            ":KUBE-NODEPORTS - [0:0]",
            "-A KUBE-SERVICES -m comment --comment \"ns2/b:p has no endpoints\" -d 10.0.0.2 -j REJECT",
            "-A KUBE-NODEPORTS -m comment --comment \"ns2/b:p health check node port\" --dport 30000 -j ACCEPT",
            "-A KUBE-SERVICES -m comment --comment \"ns1/a:p has no endpoints\" -d 10.0.0.1 -j REJECT",
            "COMMIT",
        ),
        lines(
            "*filter",
            ":KUBE-NODEPORTS - [0:0]",
            ":KUBE-SERVICES - [0:0]",
            "-A KUBE-NODEPORTS -m comment --comment \"ns2/b:p health check node port\" --dport 30000 -j ACCEPT",
            "-A KUBE-SERVICES -m comment --comment \"ns1/a:p has no endpoints\" -d 10.0.0.1 -j REJECT",
            "-A KUBE-SERVICES -m comment --comment \"ns2/b:p has no endpoints\" -d 10.0.0.2 -j REJECT",
            "COMMIT",
            "*nat",
            ":KUBE-NODEPORTS - [0:0]",
            ":KUBE-SERVICES - [0:0]",
            ":KUBE-MARK-MASQ - [0:0]",
            ":KUBE-POSTROUTING - [0:0]",
            ":KUBE-SVC-A - [0:0]",
            ":KUBE-SVC-B - [0:0]",
            "-A KUBE-NODEPORTS -m comment --comment ns1/a:p --dport 30001 -j KUBE-SVC-A",
            "-A KUBE-NODEPORTS -m comment --comment ns2/b:p --dport 30002 -j KUBE-SVC-B",
            "-A KUBE-SERVICES -m comment --comment \"ns1/a:p cluster IP\" -d 10.0.0.1 -j KUBE-SVC-A",
            "-A KUBE-SERVICES -m comment --comment \"ns2/b:p cluster IP\" -d 10.0.0.2 -j KUBE-SVC-B",
            f"-A KUBE-SERVICES -m comment --comment {LAST} -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS",
            "-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000",
            "-A KUBE-SVC-A -m comment --comment \"ns1/a:p -> 10.1.0.1:80\" -j DNAT",
            "-A KUBE-SVC-B -m comment --comment \"ns2/b:p -> 10.1.0.2:80\" -j DNAT",
            "COMMIT",
        ),
        id="tables chains and service rules",
    ),
    pytest.param(
        # The sort key is the comment up to its first space or colon, and the sort is stable:
        # rules of one service keep their emission order whatever their comment style.
        lines(
            "*nat",
            ":KUBE-SERVICES - [0:0]",
            "-A KUBE-SERVICES -m comment --comment \"ns2/svc2:p80 cluster IP\" svc2 line 1",
            "-A KUBE-SERVICES -m comment --comment ns2/svc2 svc2 line 2",
            "-A KUBE-SERVICES -m comment --comment \"ns2/svc2 blah\" svc2 line 3",
            "-A KUBE-SERVICES -m comment --comment ns1/svc1 svc1 line 1",
            "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 cluster IP\" svc1 line 2",
            "COMMIT",
        ),
        lines(
            "*nat",
            ":KUBE-SERVICES - [0:0]",
            "-A KUBE-SERVICES -m comment --comment ns1/svc1 svc1 line 1",
            "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 cluster IP\" svc1 line 2",
            "-A KUBE-SERVICES -m comment --comment \"ns2/svc2:p80 cluster IP\" svc2 line 1",
            "-A KUBE-SERVICES -m comment --comment ns2/svc2 svc2 line 2",
            "-A KUBE-SERVICES -m comment --comment \"ns2/svc2 blah\" svc2 line 3",
            "COMMIT",
        ),
        id="same service in different comment styles",
    ),
    pytest.param(
        # Foreign chains go after KUBE-* chains; rules in ordinary chains keep their order.
        lines(
            "*nat",
            ":WHY-IS-THIS-HERE - [0:0]",
            ":KUBE-ZZZ - [0:0]",
            ":KUBE-SERVICES - [0:0]",
            ":KUBE-AAA - [0:0]",
            "-A KUBE-ZZZ -m comment --comment \"mystery 1\"",
            "-A WHY-IS-THIS-HERE -j ACCEPT",
            "-A KUBE-AAA -m comment --comment \"mystery 2\"",
            "-A KUBE-AAA -m comment --comment \"mystery 0\"",
            "COMMIT",
        ),
        lines(
            "*nat",
            ":KUBE-SERVICES - [0:0]",
            ":KUBE-AAA - [0:0]",
            ":KUBE-ZZZ - [0:0]",
            ":WHY-IS-THIS-HERE - [0:0]",
            "-A KUBE-AAA -m comment --comment \"mystery 2\"",
            "-A KUBE-AAA -m comment --comment \"mystery 0\"",
            "-A KUBE-ZZZ -m comment --comment \"mystery 1\"",
            "-A WHY-IS-THIS-HERE -j ACCEPT",
            "COMMIT",
        ),
        id="foreign chains last and rule order kept",
    ),
    pytest.param(
        # Raw payloads put -X lines before the final KUBE-SERVICES rule; canonical form prints
        # them after all rules, in chain order.
        lines(
            "*nat",
            ":KUBE-SERVICES - [0:0]",
            ":KUBE-SVC-OLD - [0:0]",
            ":KUBE-SEP-OLD - [0:0]",
            "-X KUBE-SVC-OLD",
            "-X KUBE-SEP-OLD",
            f"-A KUBE-SERVICES -m comment --comment {LAST} -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS",
            "COMMIT",
        ),
        lines(
            "*nat",
            ":KUBE-SERVICES - [0:0]",
            ":KUBE-SEP-OLD - [0:0]",
            ":KUBE-SVC-OLD - [0:0]",
            f"-A KUBE-SERVICES -m comment --comment {LAST} -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS",
            "-X KUBE-SEP-OLD",
            "-X KUBE-SVC-OLD",
            "COMMIT",
        ),
        id="deleted chains",
    ),
    pytest.param(
        # With --nodeport-addresses there is one "last rule" per node IP; all of them go last.
        lines(
            "*nat",
            ":KUBE-SERVICES - [0:0]",
            f"-A KUBE-SERVICES -m comment --comment {LAST} -d 192.168.0.2 -j KUBE-NODEPORTS",
            "-A KUBE-SERVICES -m comment --comment \"zz/last:p cluster IP\" -j KUBE-SVC-Z",
            f"-A KUBE-SERVICES -m comment --comment {LAST} -d 127.0.0.1 -j KUBE-NODEPORTS",
            "-A KUBE-SERVICES -m comment --comment \"aa/first:p cluster IP\" -j KUBE-SVC-A",
            "COMMIT",
        ),
        lines(
            "*nat",
            ":KUBE-SERVICES - [0:0]",
            "-A KUBE-SERVICES -m comment --comment \"aa/first:p cluster IP\" -j KUBE-SVC-A",
            "-A KUBE-SERVICES -m comment --comment \"zz/last:p cluster IP\" -j KUBE-SVC-Z",
            f"-A KUBE-SERVICES -m comment --comment {LAST} -d 192.168.0.2 -j KUBE-NODEPORTS",
            f"-A KUBE-SERVICES -m comment --comment {LAST} -d 127.0.0.1 -j KUBE-NODEPORTS",
            "COMMIT",
        ),
        id="must be the last rule goes last",
    ),
    pytest.param(
        # Indentation (as in a dedented test literal) and counters are tolerated; counters kept.
        "\n    *filter\n    :KUBE-FORWARD - [3:120]\n    -A KUBE-FORWARD -j ACCEPT\n    COMMIT\n",
        lines("*filter", ":KUBE-FORWARD - [3:120]", "-A KUBE-FORWARD -j ACCEPT", "COMMIT"),
        id="leading whitespace and counters",
    ),
])
def test_canonical_sort(raw: str, expected: str) -> None:
    assert canonical_sort(raw) == expected
    assert canonical_sort(expected) == expected  # idempotent


@pytest.mark.parametrize(("raw", "message"), [
    pytest.param(lines("*nat", "-A KUBE-SVC-X -j DNAT", "COMMIT"), "no such chain", id="rule for undeclared chain"),
    pytest.param(lines("*nat", ":KUBE-SVC-X - [0:0]", "-A KUBE-SVC-X -j DNAT", "-X KUBE-SVC-X", "COMMIT"),
                 "cannot delete chain", id="delete after rules"),
    pytest.param(lines("*nat", ":KUBE-SVC-X - [0:0]", "-X KUBE-SVC-X", "-A KUBE-SVC-X -j DNAT", "COMMIT"),
                 "deleted chain", id="rule after delete"),
    pytest.param(lines("*nat", ":KUBE-SVC-X - [0:0]"), "no COMMIT", id="missing commit"),
    pytest.param(lines(":KUBE-SVC-X - [0:0]", "COMMIT"), "not a table name", id="missing table"),
    pytest.param(lines("*nat", "junk", "COMMIT"), "error parsing rule", id="junk line"),
])
def test_canonical_sort_rejects_bad_payloads(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        canonical_sort(raw)


@pytest.mark.parametrize(("payload", "problems"), [
    pytest.param(
        lines("*filter", "COMMIT", "*nat", ":KUBE-MARK-MASQ - [0:0]", ":KUBE-SERVICES - [0:0]",
              ":KUBE-SVC-X - [0:0]", "-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000",
              "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 cluster IP\" -j KUBE-SVC-X",
              "-A KUBE-SVC-X -m comment --comment \"ns1/svc1:p80 cluster IP\" -j KUBE-MARK-MASQ", "COMMIT"),
        [], id="consistent"),
    pytest.param(
        lines("*filter", "COMMIT", "*nat", ":KUBE-SERVICES - [0:0]",
              "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 cluster IP\" -j KUBE-SVC-X", "COMMIT"),
        ["some chains in nat are used but were not created: ['KUBE-SVC-X']",
         "some chains in nat are jumped to but have no rules: ['KUBE-SVC-X']"],
        id="jump to undeclared chain"),
    pytest.param(
        lines("*filter", "COMMIT", "*nat", ":KUBE-SERVICES - [0:0]", ":KUBE-SVC-X - [0:0]",
              "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 cluster IP\" -j KUBE-SVC-X", "COMMIT"),
        ["some chains in nat are jumped to but have no rules: ['KUBE-SVC-X']"],
        id="jump to empty chain"),
    pytest.param(
        lines("*filter", "COMMIT", "*nat", ":KUBE-SERVICES - [0:0]", ":KUBE-SVC-X - [0:0]",
              "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 cluster IP\" -j DNAT", "COMMIT"),
        ["some chains in nat are created but not used: ['KUBE-SVC-X']"],
        id="declared but unused"),
    pytest.param(
        lines("*filter", "COMMIT", "*nat", ":KUBE-SERVICES - [0:0]", ":KUBE-SEP-OLD - [0:0]",
              f"-A KUBE-SERVICES -m comment --comment {LAST} -j KUBE-NODEPORTS", "-X KUBE-SEP-OLD", "COMMIT"),
        ["some chains in nat are used but were not created: ['KUBE-NODEPORTS']"],
        id="deleted chain is not unused but undeclared chain is"),
    pytest.param(lines("*filter", "COMMIT"), ["bad ruleData (1 tables)"], id="one table"),
])
def test_check_consistency(payload: str, problems: list[str]) -> None:
    assert check_consistency(payload) == problems


@pytest.mark.parametrize(("rule", "comment"), [
    pytest.param('-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -j X', "ns1/svc1:p80 cluster IP",
                 id="quoted"),
    pytest.param("-A KUBE-SEP-X -m comment --comment ns1/svc1:p80 -s 10.0.0.1 -j X", "ns1/svc1:p80", id="bare"),
    pytest.param("-A KUBE-SEP-X -m tcp -p tcp -j DNAT --to-destination 10.0.0.1:80", None, id="none"),
])
def test_rule_comment(rule: str, comment: str | None) -> None:
    assert rule_comment(rule) == comment

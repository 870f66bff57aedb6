"""Canonical order for iptables-restore payloads, and the consistency check, as kube-proxy's tests do.

kube-proxy walks its services in Go map order, so the raw payload order changes from run to run.
Upstream tests therefore compare `sortIPTablesRules(got)` with an expected text that is written
already canonical (pkg/proxy/iptables/proxier_test.go, parsing as in
pkg/util/iptables/testing/parse.go); `checkIPTablesRuleJumps` then checks that the expected text
hangs together. This module reproduces both (reference §12). Pure: no clock, no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

# Whole lines (fullmatch: Python's `$` would also match before a trailing newline).
_TABLE = re.compile(r"\*(.*)")
_CHAIN = re.compile(r":([^ ]*) - \[([0-9]*):([0-9]*)\]")
_ADD = re.compile(r"-A ([^ ]*) (.*)")
_DELETE = re.compile(r"-X (.*)")
# A word, or a double-quoted string, at the start or after whitespace (parse.go's wordRegex).
_WORD = re.compile(r'(?:^|\s)("[^"]*"|[^"]\S*)', re.ASCII)

# Parameters parse.go knows to take a value: their argument is consumed, never read as a flag.
_VALUED = frozenset({
    "-A", "--comment", "-p", "-s", "--src-type", "--sport", "-d", "--dst-type", "--dport",
    "--match-set", "-j", "--probability", "--to-destination", "--mark", "--ctstate", "--name",
    "--seconds", "--mode",
})


@dataclass
class _Chain:
    name: str
    counters: str  # "[p:b]" as declared
    rules: list[str] = field(default_factory=list)
    deleted: bool = False


@dataclass
class _Table:
    name: str
    chains: list[_Chain] = field(default_factory=list)

    def chain(self, name: str, line: str) -> _Chain:
        for c in self.chains:
            if c.name == name:
                return c
        raise ValueError(f"error parsing rule {line!r}: no such chain {name!r}")


def _parse(payload: str) -> list[_Table]:
    """ParseIPTablesDump: `*table`, `:CHAIN - [p:b]` lines, then `-A`/`-X` lines, `COMMIT`."""
    tables: list[_Table] = []
    state = "table"
    table: _Table | None = None
    for raw in payload.strip("\n").split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if state == "table":
            m = _TABLE.fullmatch(line)
            if m is None:
                raise ValueError(f"table {len(tables) + 1} starts with {line!r}, not a table name")
            table = _Table(m.group(1))
            tables.append(table)
            state = "chains"
            continue
        assert table is not None
        if state == "chains":
            m = _CHAIN.fullmatch(line)
            if m is not None:
                table.chains.append(_Chain(m.group(1), f"[{int(m.group(2) or 0)}:{int(m.group(3) or 0)}]"))
                continue
            state = "rules"
        if (m := _ADD.fullmatch(line)) is not None:
            chain = table.chain(m.group(1), line)
            if chain.deleted:
                raise ValueError(f"cannot add rules to deleted chain {chain.name!r}")
            chain.rules.append(line)
        elif (m := _DELETE.fullmatch(line)) is not None:
            chain = table.chain(m.group(1), line)
            if chain.rules:
                raise ValueError(f"cannot delete chain {chain.name!r} after adding rules")
            chain.deleted = True
        elif line == "COMMIT":
            state = "table"
        else:
            raise ValueError(f"error parsing rule {line!r}")
    if state != "table":
        raise ValueError("could not parse iptables data (no COMMIT line?)")
    return tables


def rule_comment(rule: str) -> str | None:
    """The value of a rule's `--comment`, quotes stripped (parse.go's ParseRule), or None."""
    words = [w.strip('"') for w in _WORD.findall(rule)]
    comment = None
    i = 0
    while i < len(words):
        if words[i] == "-m" and i < len(words) - 1:
            i += 2  # "-m MODULE" is skipped whole
        elif words[i] in _VALUED and i < len(words) - 1:
            if words[i] == "--comment":
                comment = words[i + 1]
            i += 2
        else:
            i += 1
    return comment


def _service_name(comment: str) -> str:
    # The service name is the comment up to its first space or colon.
    return re.split(r"[ :]", comment, maxsplit=1)[0]


def _by_service(a: str, b: str) -> bool:
    """orderByCommentServiceName: undefined (false) when either rule lacks a comment."""
    ca, cb = rule_comment(a), rule_comment(b)
    if ca is None or cb is None:
        return False
    return _service_name(ca) < _service_name(cb)


def _nat_services_less(a: str, b: str) -> bool:
    last_a = "must be the last rule" in (rule_comment(a) or "")
    last_b = "must be the last rule" in (rule_comment(b) or "")
    if last_a:
        return False
    if last_b:
        return True
    return _by_service(a, b)


def _stable_sort(rules: list[str], less: Callable[[str, str], bool]) -> list[str]:
    def cmp(a: str, b: str) -> int:
        return -1 if less(a, b) else (1 if less(b, a) else 0)
    return sorted(rules, key=functools.cmp_to_key(cmp))  # Python's sort is stable, like SliceStable


def _chain_order(name: str) -> tuple[int, str]:
    if name == "KUBE-NODEPORTS":
        return (0, "")
    if name == "KUBE-SERVICES":
        return (1, "")
    return (2 if name.startswith("KUBE-") else 3, name)


def canonical_sort(payload: str) -> str:
    """sortIPTablesRules: the payload in canonical order (reference §12). Pure.

    Tables by name; chains KUBE-NODEPORTS, KUBE-SERVICES, other KUBE-* then the rest, each group
    alphabetically; rules of both KUBE-NODEPORTS chains and of filter KUBE-SERVICES stably sorted
    by service name; in nat KUBE-SERVICES the "must be the last rule" rule goes last; all other
    chains keep their order. Raises ValueError on input iptables-restore would not take.
    """
    tables = sorted(_parse(payload.lstrip(" \t\n")), key=lambda t: t.name)
    out: list[str] = []
    for table in tables:
        table.chains.sort(key=lambda c: _chain_order(c.name))
        for chain in table.chains:
            if chain.name == "KUBE-NODEPORTS" or (chain.name == "KUBE-SERVICES" and table.name == "filter"):
                chain.rules = _stable_sort(chain.rules, _by_service)
            elif chain.name == "KUBE-SERVICES" and table.name == "nat":
                chain.rules = _stable_sort(chain.rules, _nat_services_less)
        out.append(f"*{table.name}")
        out.extend(f":{c.name} - {c.counters}" for c in table.chains)
        out.extend(rule for c in table.chains for rule in c.rules)
        out.extend(f"-X {c.name}" for c in table.chains if c.deleted)
        out.append("COMMIT")
    return "".join(line + "\n" for line in out)


_BUILTIN_TARGETS = frozenset({"ACCEPT", "REJECT", "DROP", "MARK", "RETURN", "DNAT", "SNAT", "MASQUERADE"})
_FIXED_CHAINS = frozenset({"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING",
                           "KUBE-FORWARD", "KUBE-MARK-MASQ", "KUBE-PROXY-FIREWALL", "KUBE-FIREWALL"})


def _matches(lines: list[str], pattern: str) -> set[str]:
    """The first group of the first match of `pattern` on each line (findAllMatches)."""
    return {m.group(1) for m in (re.search(pattern, line) for line in lines) if m is not None}


def check_consistency(payload: str) -> list[str]:
    """checkIPTablesRuleJumps: problems with a (full-sync) payload, [] if none. Pure.

    Every chain that is jumped to or appended to must be declared (and not deleted); every chain
    jumped to must have rules (KUBE-NODEPORTS excepted: KUBE-SERVICES always jumps there); every
    declared chain must be used, except kube-proxy's fixed chains.
    """
    problems: list[str] = []
    raw_tables = payload.lstrip("\n").split("COMMIT\n")
    if len(raw_tables) < 3 or raw_tables[-1] != "":
        return [f"bad ruleData ({len(raw_tables) - 1} tables)"]
    names = {raw.strip("\n").split("\n")[0][1:] for raw in raw_tables[:-1]}
    problems.extend(f"bad ruleData (no {t!r} table)" for t in ("nat", "filter") if t not in names)
    for raw in raw_tables[:-1]:
        lines = raw.strip("\n").split("\n")
        if not lines[0].startswith("*"):
            problems.append(f"bad ruleData (table starts with {lines[0]!r})")
            continue
        name = lines[0][1:]
        created = _matches(lines, r"^:([^ ]*)") - _matches(lines, r"-X ([^ ]*)")
        filled = _matches(lines, r"-A ([^ ]*)")
        jumped = _matches(lines, r"-j ([^ ]*)") - _BUILTIN_TARGETS
        missing = (jumped - created) | (filled - created)
        if missing:
            problems.append(f"some chains in {name} are used but were not created: {sorted(missing)}")
        empty = jumped - filled - {"KUBE-NODEPORTS"}
        if empty:
            problems.append(f"some chains in {name} are jumped to but have no rules: {sorted(empty)}")
        extra = created - jumped - _FIXED_CHAINS
        if extra:
            problems.append(f"some chains in {name} are created but not used: {sorted(extra)}")
    return problems

"""What an `nft -f` transaction leaves in kube-proxy's table: a small model of nftables' semantics.

Upstream compares nftables transactions by the table they produce (knftables.Fake: chains with
their rules in order, sets and maps as collections of elements), not by text: a transaction writes
a Service's elements in Go-map order, and a partial sync's text means nothing without the table it
is applied to. `apply_transaction` plays the subset of the nft grammar kube-proxy writes (add /
flush / delete of the table, chains, sets and maps; add of rules; add / delete of elements) onto an
`NftTable`, and refuses what nft itself refuses: an object in a table that does not exist, a flush
or delete of a missing object, an element key added twice with different values, a rule or element
jumping to a chain (or naming a set) that is not there. All or nothing, as nft applies a batch.

Pure: no I/O; the real kernel check lives in the tests that run `nft` in a network namespace.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field


class TableError(ValueError):
    """A transaction nft would refuse; the table is left as it was."""


@dataclass
class NftChain:
    props: str = ""  # "type nat hook output priority -100 ;", a comment, or ""
    rules: list[str] = field(default_factory=list)  # rule text, with its ` comment "..."` if any


@dataclass
class NftSet:
    kind: str  # "set" or "map"
    props: str
    elements: dict[str, str] = field(default_factory=dict)  # key -> ` comment "..." : value` tail


@dataclass
class NftTable:
    family: str
    name: str
    props: str = ""
    chains: dict[str, NftChain] = field(default_factory=dict)
    sets: dict[str, NftSet] = field(default_factory=dict)  # sets and maps share one namespace

    def dump(self) -> str:
        """The table as knftables.Fake.Dump writes it: table, chains (by name) each followed by its
        rules, then sets and maps (by name) each followed by its elements (sorted)."""
        prefix = f"{self.family} {self.name}"
        lines = [f"add table {prefix}" + (f" {{ {self.props} }}" if self.props else "")]
        for name in sorted(self.chains):
            chain = self.chains[name]
            lines.append(f"add chain {prefix} {name}" + (f" {{ {chain.props} }}" if chain.props else ""))
            lines += [f"add rule {prefix} {name} {rule}" for rule in chain.rules]
        for name in sorted(self.sets):
            s = self.sets[name]
            lines.append(f"add {s.kind} {prefix} {name} {{ {s.props} }}")
            lines += [f"add element {prefix} {name} {{ {key}{tail} }}" for key, tail in sorted(s.elements.items())]
        return "".join(line + "\n" for line in lines)


_HEAD = re.compile(r"(add|flush|delete) (table|chain|set|map|rule|element) (ip6?) (\S+)(?: (.*))?", re.ASCII)
_BODY = re.compile(r"(\S+)(?: \{ (.*) \})?", re.ASCII)
# "NAME { KEY[ comment "C"][ : VALUE] }": keys hold no '"' and no " : " (an IPv6 address has bare colons).
_ELEMENT = re.compile(r'(\S+) \{ ((?:(?! : )[^"])*?)( comment "(?:[^"\\]|\\.)*")?(?: : (.*))? \}', re.ASCII)
_REF = re.compile(r"\b(?:goto|jump) (\S+)|@([A-Za-z0-9_./-]+)", re.ASCII)


def apply_transaction(table: NftTable | None, text: str, *, family: str = "ip", name: str = "kube-proxy",
                      check_references: bool = True) -> NftTable:
    """The table after applying `text` (blank lines and `#` comments skipped) to `table` (None: no
    table yet). Raises TableError, leaving `table` untouched, for anything nft would refuse.
    `check_references=False` reads a dump (knftables.Fake.ParseDump), whose rules may name chains
    listed further down."""
    current = copy.deepcopy(table)
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            current = _apply(current, line, family, name, check_references)
        except TableError as exc:
            raise TableError(f"line {number}: {exc}: {line}") from None
    if current is None:
        raise TableError(f"no table {family} {name}")
    return current


def _apply(table: NftTable | None, line: str, family: str, name: str, check: bool) -> NftTable | None:
    m = _HEAD.fullmatch(line)
    if m is None or m.group(3) != family or m.group(4) != name:
        raise TableError("not an operation on this table")
    verb, kind, rest = m.group(1), m.group(2), m.group(5) or ""
    if kind == "table":
        if verb == "add":
            props = rest.removeprefix("{ ").removesuffix(" }") if rest else ""
            return table if table is not None else NftTable(family, name, props)
        if table is None:
            raise TableError("no such table")
        return None if verb == "delete" else NftTable(family, name, table.props)
    if table is None:
        raise TableError("no such table")
    if kind == "chain":
        _chain_op(table, verb, rest)
    elif kind in ("set", "map"):
        _set_op(table, verb, kind, rest)
    elif kind == "rule":
        chain, _, rule = rest.partition(" ")
        if verb != "add" or chain not in table.chains or not rule:
            raise TableError("no such chain" if verb == "add" else f"{verb} rule is not modelled")
        if check:
            _check_refs(table, rule)
        table.chains[chain].rules.append(rule)
    else:
        _element_op(table, verb, rest, check)
    return table


def _chain_op(table: NftTable, verb: str, rest: str) -> None:
    m = _BODY.fullmatch(rest)
    if m is None:
        raise TableError("bad chain")
    chain, props = m.group(1), m.group(2) or ""
    existing = table.chains.get(chain)
    if verb == "add":
        if existing is None:
            table.chains[chain] = NftChain(props)
        elif props and props != existing.props and "hook" in props + existing.props:
            raise TableError("a base chain's hook or priority cannot change")
        return
    if existing is None:
        raise TableError("no such chain")
    if verb == "flush":
        existing.rules.clear()
        return
    users = [c for c, ch in table.chains.items() if c != chain and any(_refers(r, chain) for r in ch.rules)]
    users += [s for s, st in table.sets.items() if any(_refers(v, chain) for v in st.elements.values())]
    if users:
        raise TableError(f"chain is in use by {users[0]}")
    del table.chains[chain]


def _set_op(table: NftTable, verb: str, kind: str, rest: str) -> None:
    m = _BODY.fullmatch(rest)
    if m is None:
        raise TableError(f"bad {kind}")
    name, props = m.group(1), m.group(2) or ""
    existing = table.sets.get(name)
    if verb == "add":
        if existing is None:
            table.sets[name] = NftSet(kind, props)
        elif existing.kind != kind:
            raise TableError(f"{name} is a {existing.kind}")
        return
    if existing is None or existing.kind != kind:
        raise TableError(f"no such {kind}")
    if verb == "flush":
        existing.elements.clear()
    else:
        if any(f"@{name}" in r.split() or f"@{name}" in r for ch in table.chains.values() for r in ch.rules):
            raise TableError(f"{kind} is in use")
        del table.sets[name]


def _element_op(table: NftTable, verb: str, rest: str, check: bool) -> None:
    m = _ELEMENT.fullmatch(rest)
    if m is None:
        raise TableError("bad element")
    name, key, comment, value = m.group(1), m.group(2).strip(), m.group(3) or "", m.group(4)
    s = table.sets.get(name)
    if s is None:
        raise TableError("no such set or map")
    if verb == "delete":
        if key not in s.elements:
            raise TableError("no such element")
        del s.elements[key]
        return
    if verb != "add":
        raise TableError("flush element is not modelled")
    if (s.kind == "map") != (value is not None):
        raise TableError("a map element needs a value, a set element has none")
    tail = comment + (f" : {value}" if value is not None else "")
    if value is not None and check:
        _check_refs(table, value)
    old = s.elements.get(key)
    if old is not None and old.rsplit(" : ", 1)[-1] != tail.rsplit(" : ", 1)[-1]:
        raise TableError("element exists with another value")
    s.elements[key] = tail if old is None else old


def _refers(text: str, chain: str) -> bool:
    return any(m.group(1) == chain for m in _REF.finditer(text))


def _check_refs(table: NftTable, text: str) -> None:
    for m in _REF.finditer(text.split(' comment "', 1)[0]):
        if m.group(1) is not None and m.group(1) not in table.chains:
            raise TableError(f"no such chain {m.group(1)}")
        if m.group(2) is not None and m.group(2) not in table.sets:
            raise TableError(f"no such set {m.group(2)}")

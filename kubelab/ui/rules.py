"""A Service's path through one node's real nat rules, as the seed articles read `iptables-save` by hand:
the KUBE-SERVICES (cluster IP, external IP, load-balancer IP) and KUBE-NODEPORTS jumps whose comment names
the Service, through a KUBE-EXT chain when there is one, to its KUBE-SVC (or KUBE-SVL) chain, to each
KUBE-SEP chain with the `--probability` the rule carries as the node prints it, to the DNAT destination.

Pure: text in, a plain dict out. The chains are found by following the jumps and the comments kube-proxy
writes on every KUBE-SERVICES and KUBE-NODEPORTS rule ("ns/name[:port] cluster IP", "ns/name[:port]"),
never by recomputing chain names, so what is shown is what the kernel holds.

Only what a path needs is split into words. At 10k Services a node's nat table is ~60,000 rules (4 MB);
splitting all of them took 1.2-2.8 s per node on a loaded machine, and it happened again at every change
of the node's rules, so under churn every path read waited for it. `parse_nat` only files each rule's
text under its chain (one `split` per line, tens of milliseconds); a chain's rules are split when a
path first walks it, and the two big entry chains are searched for the Service's name as text first.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from typing import Any

Chains = Mapping[str, list[list[str]]]


def _words(line: str) -> list[str] | None:
    """A rule's words as the shell would split them, None when it is not a rule iptables would print.
    iptables-save quotes only whole words ("--comment \"ns/name:port cluster IP\""), so the common
    case is str.split: shlex costs half a millisecond a line, 35 s for the 70,000 nat rules of 10k
    Services; it is kept for the rare line with a backslash."""
    if '"' not in line:
        return line.split()
    if "\\" in line:
        try:
            return shlex.split(line)
        except ValueError:
            return None
    pieces = line.split('"')
    if len(pieces) % 2 == 0:
        return None  # an unterminated quote
    words: list[str] = []
    for i, piece in enumerate(pieces):
        if i % 2:
            words.append(piece)
        else:
            words.extend(piece.split())
    return words


class NatRules(Mapping[str, list[list[str]]]):
    """The nat table's rules by chain (each rule's arguments after `-A CHAIN`), a chain's text split into
    words the first time it is asked for. A chain none of whose rules iptables would print is absent."""

    def __init__(self, lines: dict[str, list[str]]) -> None:
        self._lines = lines
        self._split: dict[str, list[list[str]]] = {}

    @staticmethod
    def _rules(lines: list[str]) -> list[list[str]]:
        rules = []
        for line in lines:
            words = _words(line)
            if words is not None and len(words) >= 2:  # else not a rule iptables would print: nothing to show
                rules.append(words[2:])
        return rules

    def __getitem__(self, chain: str) -> list[list[str]]:
        rules = self._split.get(chain)
        if rules is None:
            rules = self._split[chain] = self._rules(self._lines[chain])
        if not rules:
            raise KeyError(chain)
        return rules

    def __iter__(self) -> Iterator[str]:
        return (chain for chain in self._lines if chain in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, chain: object) -> bool:
        try:
            self[chain]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def naming(self, chain: str, text: str) -> list[list[str]]:
        """The chain's rules whose line holds the name `text` ending a word, split: the one or two rules of
        a Service among the 10k of KUBE-SERVICES, without splitting the others. A superset of the rules
        whose comment names it (a name is DNS labels: iptables-save prints it as it is); the caller checks
        each comment word by word."""
        if chain in self._split:
            return self._split[chain]
        # The name ends the word ("ns/name:port", "ns/name cluster IP", "ns/name" quoted): so default/s1
        # does not pick up default/s10..s19.
        ends = (f"{text}:", f"{text} ", f'{text}"')
        return self._rules([line for line in self._lines.get(chain, ()) if any(end in line for end in ends)])


def parse_nat(text: str) -> NatRules:
    """The nat table's rules by chain, from iptables-save or iptables-restore text; other tables are
    skipped. Each rule's text is filed under its chain here; its words are split when asked for."""
    lines: dict[str, list[str]] = {}
    table = ""
    for line in text.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif table == "nat" and line.startswith("-A "):
            head = line.split(None, 2)
            if len(head) >= 2:
                lines.setdefault(head[1], []).append(line)
    return NatRules(lines)


def _option(rule: list[str], name: str) -> str | None:
    for i, word in enumerate(rule[:-1]):
        if word == name:
            return rule[i + 1]
    return None


def _port_of(comment: str, service: str) -> tuple[str, str] | None:
    """("port name", "entry kind") when the comment names this Service, else None."""
    head, _, kind = comment.partition(" ")
    name, _, port = head.partition(":")
    return (port, kind) if name == service else None


def _branches(chains: Chains, chain: str) -> list[dict[str, Any]]:
    branches = []
    for rule in chains.get(chain, []):
        target = _option(rule, "-j") or ""
        if not target.startswith("KUBE-SEP-"):
            continue
        destination = next((_option(r, "--to-destination") for r in chains.get(target, [])
                            if _option(r, "-j") == "DNAT"), None)
        branches.append({"chain": target, "probability": _option(rule, "--probability"),
                         "destination": destination})
    return branches


def _service_chain(chains: Chains, chain: str) -> str | None:
    """The KUBE-SVC/KUBE-SVL chain an entry leads to (directly, or through its KUBE-EXT chain)."""
    if chain.startswith(("KUBE-SVC-", "KUBE-SVL-")):
        return chain
    if chain.startswith("KUBE-EXT-"):
        for rule in chains.get(chain, []):
            target = _option(rule, "-j") or ""
            if target.startswith(("KUBE-SVC-", "KUBE-SVL-")):
                return target
    return None


def service_path(chains: Chains, service: str) -> list[dict[str, Any]]:
    """Per service port of `service` ("namespace/name") the node's entries (kind, destination, chain),
    its service chain and the branches: [{"port", "entries", "chain", "branches"}], ports in name order."""
    ports: dict[str, dict[str, Any]] = {}
    for source in ("KUBE-SERVICES", "KUBE-NODEPORTS"):
        rules = chains.naming(source, service) if isinstance(chains, NatRules) else chains.get(source, [])
        for rule in rules:
            comment = _option(rule, "--comment")
            named = _port_of(comment, service) if comment else None
            target = _option(rule, "-j")
            if named is None or target is None:
                continue
            port, kind = named
            if source == "KUBE-NODEPORTS":
                kind = "nodePort"
            destination = _option(rule, "-d")
            if destination is not None:
                destination = destination.removesuffix("/32").removesuffix("/128")  # as iptables-save prints a host
            entry = {"kind": kind or "cluster IP", "destination": destination,
                     "port": _option(rule, "--dport"), "protocol": _option(rule, "-p"), "chain": target}
            found = ports.setdefault(port, {"port": port, "entries": [], "chain": None, "branches": []})
            found["entries"].append(entry)
            chain = _service_chain(chains, target)
            if chain is not None and (found["chain"] is None or chain.startswith("KUBE-SVC-")):
                found["chain"], found["branches"] = chain, _branches(chains, chain)
    return [ports[p] for p in sorted(ports)]

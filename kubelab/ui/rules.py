"""A Service's path through one node's real nat rules, as the seed articles read `iptables-save` by hand:
the KUBE-SERVICES (cluster IP, external IP, load-balancer IP) and KUBE-NODEPORTS jumps whose comment names
the Service, through a KUBE-EXT chain when there is one, to its KUBE-SVC (or KUBE-SVL) chain, to each
KUBE-SEP chain with the `--probability` the rule carries as the node prints it, to the DNAT destination.

Pure: text in, a plain dict out. The chains are found by following the jumps and the comments kube-proxy
writes on every KUBE-SERVICES and KUBE-NODEPORTS rule ("ns/name[:port] cluster IP", "ns/name[:port]"),
never by recomputing chain names, so what is shown is what the kernel holds.
"""

from __future__ import annotations

import shlex
from typing import Any

Chains = dict[str, list[list[str]]]


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


def parse_nat(text: str) -> Chains:
    """The nat table's rules by chain (each rule's arguments after `-A CHAIN`), from iptables-save or
    iptables-restore text; other tables are skipped."""
    chains: Chains = {}
    table = ""
    for line in text.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif table == "nat" and line.startswith("-A "):
            words = _words(line)
            if words is None:
                continue  # not a rule iptables would print; nothing to show of it
            if len(words) >= 2:
                chains.setdefault(words[1], []).append(words[2:])
    return chains


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
        for rule in chains.get(source, []):
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

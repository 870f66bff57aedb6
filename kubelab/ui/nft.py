"""A Service's path through one node's real nftables state, in kube-proxy's nftables mode: the
`service-ips` / `service-nodeports` verdict-map elements that send the Service's addresses to a
chain, on (through an `external-` chain for a NodePort) to the Service port's `service-` chain, its
`numgen random mod N vmap` and each arm's `endpoint-` chain, with its share (1/N) and the DNAT
destination.

Input is `nft -j list table ip kube-proxy` (the kernel's table as JSON, libnftables' schema); pure:
JSON in, the same plain dicts rules.py gives for iptables out, so the page draws both modes alike.
Which Service a map element belongs to is read from the chain it jumps to: kube-proxy names every
per-service-port chain `<kind>-<hash>-<namespace>/<name>/<protocol>/<port name>`
(pkg/proxy/nftables/proxier.go, servicePortChainNameBase), and that name is what the kernel holds.
"""

from __future__ import annotations

import json
from typing import Any

MAPS = {"service-ips": "cluster IP", "service-nodeports": "nodePort"}
FOLLOWED = ("external-", "local-", "service-")  # chains on the way from a map element to the vmap


class Table:
    """The parts of kube-proxy's table a path needs: the two maps' elements and each chain's rules."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.elements: dict[str, list[tuple[list[Any], str]]] = {name: [] for name in MAPS}
        self.rules: dict[str, list[list[dict[str, Any]]]] = {}
        for entry in document.get("nftables", []):
            if "map" in entry and entry["map"].get("name") in MAPS:
                for key, verdict in entry["map"].get("elem") or []:
                    target = _target(verdict)
                    if target is not None:
                        keys = key["concat"] if isinstance(key, dict) and "concat" in key else [key]
                        self.elements[entry["map"]["name"]].append((keys, target))
            elif "rule" in entry:
                rule = entry["rule"]
                self.rules.setdefault(rule.get("chain", ""), []).append(rule.get("expr") or [])


def parse_table(text: str) -> Table:
    """`nft -j list table ...` output; an empty text (no table: the node does not run nftables mode,
    or has not synced) is an empty table."""
    return Table(json.loads(text) if text.strip() else {})


def _target(verdict: Any) -> str | None:
    if isinstance(verdict, dict):
        for how in ("goto", "jump"):
            if how in verdict and isinstance(verdict[how], dict):
                target = verdict[how].get("target")
                return target if isinstance(target, str) else None
    return None


def service_of(chain: str) -> tuple[str, str, str] | None:
    """("namespace/name", protocol, port name) from a per-service-port chain name, else None."""
    for prefix in FOLLOWED:
        if chain.startswith(prefix):
            _, _, rest = chain[len(prefix):].partition("-")  # past the 8-character hash
            parts = rest.split("/")
            if len(parts) == 4:
                return f"{parts[0]}/{parts[1]}", parts[2], parts[3]
    return None


def _vmap(rules: list[list[dict[str, Any]]]) -> tuple[int, list[tuple[int, str]]] | None:
    """The `numgen random mod N vmap { i : goto endpoint-... }` of a chain: N and its arms in order."""
    for expr in rules:
        for statement in expr:
            vmap = statement.get("vmap") if isinstance(statement, dict) else None
            numgen = vmap.get("key", {}).get("numgen") if isinstance(vmap, dict) and isinstance(vmap.get("key"), dict) \
                else None
            if not isinstance(numgen, dict):
                continue
            data = vmap.get("data")  # type: ignore[union-attr]
            arms = []
            for item in (data.get("set") if isinstance(data, dict) else None) or []:
                target = _target(item[1]) if isinstance(item, list) and len(item) == 2 else None
                if target is not None and isinstance(item[0], int):
                    arms.append((item[0], target))
            return int(numgen.get("mod", len(arms))), sorted(arms)
    return None


def _dnat(rules: list[list[dict[str, Any]]]) -> str | None:
    for expr in rules:
        for statement in expr:
            dnat = statement.get("dnat") if isinstance(statement, dict) else None
            if isinstance(dnat, dict) and dnat.get("addr") is not None:
                return f"{dnat['addr']}:{dnat['port']}" if dnat.get("port") is not None else str(dnat["addr"])
    return None


def _next_chains(rules: list[list[dict[str, Any]]]) -> list[str]:
    found = []
    for expr in rules:
        for statement in expr:
            target = _target(statement) if isinstance(statement, dict) else None
            if target is not None and target.startswith(FOLLOWED):
                found.append(target)
    return found


def _dispatch(table: Table, chain: str) -> tuple[str | None, dict[str, Any] | None]:
    """From an element's chain to the chain holding the numgen vmap (at most three hops: external- ->
    service- or local-), and that vmap."""
    seen: set[str] = set()
    todo = [chain]
    while todo:
        current = todo.pop(0)
        if current in seen or len(seen) > 3:
            continue
        seen.add(current)
        found = _vmap(table.rules.get(current, []))
        if found is not None:
            mod, arms = found
            return current, {"mod": mod, "arms": arms}
        todo.extend(_next_chains(table.rules.get(current, [])))
    return None, None


def service_path(table: Table, service: str) -> list[dict[str, Any]]:
    """Per service port of `service` ("namespace/name"): its map elements, the chain with the numgen
    vmap and one branch per arm: [{"port", "entries", "chain", "numgen", "branches"}], in port-name
    order. A branch is {"chain", "index", "share", "probability": None, "destination"}."""
    ports: dict[str, dict[str, Any]] = {}
    for map_name, kind in MAPS.items():
        for keys, target in table.elements[map_name]:
            owner = service_of(target)
            if owner is None or owner[0] != service:
                continue
            port_name = owner[2]
            if map_name == "service-ips" and len(keys) == 3:
                destination, protocol, port = str(keys[0]), str(keys[1]), str(keys[2])
            else:
                destination, protocol, port = None, str(keys[0]), str(keys[-1])
            found = ports.setdefault(port_name, {"port": port_name, "entries": [], "chain": None, "numgen": None,
                                                 "branches": []})
            found["entries"].append({"kind": kind, "destination": destination, "port": port, "protocol": protocol,
                                     "chain": target})
            chain, vmap = _dispatch(table, target)
            if chain is None or vmap is None or (found["chain"] or "").startswith("service-"):
                continue
            found["chain"], found["numgen"] = chain, f"numgen random mod {vmap['mod']}"
            found["branches"] = [{"chain": arm, "index": index, "share": f"1/{vmap['mod']}", "probability": None,
                                  "destination": _dnat(table.rules.get(arm, []))} for index, arm in vmap["arms"]]
    return [ports[p] for p in sorted(ports)]

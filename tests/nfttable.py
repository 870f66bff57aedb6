"""Reading kube-proxy's nftables table back from the kernel, for tests that compare it: `nft -j list table`
in a namespace, as chain -> rule count and set/map -> element keys, the keys spelled as kube-proxy writes
them ("10.96.0.10 . tcp . 53", "10.96.0.0/12")."""

from __future__ import annotations

import json
import subprocess
from typing import Any

Table = tuple[dict[str, int], dict[str, set[str]]]


def list_table(netns: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`nft [args] list table ip kube-proxy` in `netns`."""
    return subprocess.run(["ip", "netns", "exec", netns, "nft", *args, "list", "table", "ip", "kube-proxy"],
                          capture_output=True, text=True, timeout=60, check=False)


def read_table(netns: str) -> Table | None:
    """The kube-proxy table now (chain -> rule count, set/map -> element keys), None if there is none."""
    done = list_table(netns, "-j")
    if done.returncode != 0:
        return None
    chains: dict[str, int] = {}
    sets: dict[str, set[str]] = {}
    for item in json.loads(done.stdout)["nftables"]:
        if "chain" in item:
            chains[item["chain"]["name"]] = 0
        elif "rule" in item:
            chains[item["rule"]["chain"]] += 1
        elif "set" in item or "map" in item:
            s = item.get("set") or item.get("map")
            sets[s["name"]] = {element_key(e) for e in s.get("elem") or []}
    return chains, sets


def element_key(elem: Any) -> str:
    """An element's key from nft's JSON: a map element is [key, verdict], a key with a comment is
    {"elem": {"val": key, "comment": ...}}, a concatenation {"concat": [...]}, a CIDR {"prefix": ...}."""
    if isinstance(elem, list):
        elem = elem[0]
    if isinstance(elem, dict) and "elem" in elem:
        elem = elem["elem"]["val"]
    if isinstance(elem, dict) and "concat" in elem:
        return " . ".join(str(part) for part in elem["concat"])
    if isinstance(elem, dict) and "prefix" in elem:
        return f"{elem['prefix']['addr']}/{elem['prefix']['len']}"
    return str(elem)

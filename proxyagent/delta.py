"""Delta syncs: leave out of a partial sync's payload the shared chains the kernel already holds.

kube-proxy's partial sync (§11) writes only the changed Services' own chains, but it always
rewrites its shared chains whole: KUBE-SERVICES and KUBE-NODEPORTS in nat (one rule per service
port), KUBE-POSTROUTING and KUBE-MARK-MASQ, and every chain of the filter table. At 10,000
Services that is 10,000 rules rewritten to change one, and iptables-nft's `--noflush` restore pays
for each of them (measured in BENCHMARKS.md: 0.6-0.9 s instead of about 40 ms).

With `--delta-sync` the agent remembers what it last wrote to each shared chain and leaves a chain
out of a partial payload when its rules are the same as then. Under `--noflush` a chain the payload
does not mention stays as it is, so the kernel ends up with exactly the rules the full kube-proxy
payload would have left there; only the restore input shrinks. What this gives up: kube-proxy's
habit of repairing a hand-edited shared chain at the next partial sync. Here that waits for the
next full sync (hourly, after a failure, or when the canary finds the tables flushed).
"""

from __future__ import annotations

from .render import (
    KUBE_EXTERNAL_SERVICES,
    KUBE_FIREWALL,
    KUBE_FORWARD,
    KUBE_MARK_MASQ,
    KUBE_NODEPORTS,
    KUBE_POSTROUTING,
    KUBE_PROXY_FIREWALL,
    KUBE_SERVICES,
)

SHARED_CHAINS = frozenset({KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_NODEPORTS,
                           KUBE_PROXY_FIREWALL, KUBE_FIREWALL, KUBE_POSTROUTING, KUBE_MARK_MASQ})

# (table, chain) -> that chain's `-A` lines, in order, as last written.
ChainRules = dict[tuple[str, str], tuple[str, ...]]


def _chain_of(line: str) -> str:
    """The chain a `:CHAIN ...`, `-A CHAIN ...` or `-X CHAIN` line is about."""
    if line[0] == ":":
        return line[1:].split(" ", 1)[0]
    return line.split(" ", 2)[1]


def _shared_lines(lines: list[str]) -> tuple[ChainRules, list[tuple[str, str] | None]]:
    """One pass over a payload's lines (kube-proxy's own text, so no validation; canonical.py's strict
    parser looks chains up one by one, too slow for 10k of them on every sync): every shared chain it
    declares with its rules, and for each line the (table, chain) it belongs to if that chain is shared."""
    rules: dict[tuple[str, str], list[str]] = {}
    owner: list[tuple[str, str] | None] = []
    table = ""
    for line in lines:
        key = None
        if line.startswith("*"):
            table = line[1:]
        elif line[:1] == ":" or line[:2] in ("-A", "-X"):
            chain = _chain_of(line)
            if chain in SHARED_CHAINS:
                key = (table, chain)
                if line[1] == "A":
                    rules.setdefault(key, []).append(line)
                elif line[0] == ":":
                    rules.setdefault(key, [])
        owner.append(key)
    return {key: tuple(chain_lines) for key, chain_lines in rules.items()}, owner


def shared_rules(text: str) -> ChainRules:
    """Every shared chain a payload declares, with its rules."""
    return _shared_lines(text.splitlines())[0]


def minimize(text: str, applied: ChainRules) -> tuple[str, ChainRules, int]:
    """`text` without the shared chains whose rules equal `applied` (what the kernel holds), and
    without any table left with nothing to do. Returns (payload, the shared chains' rules after
    this payload, rules left out)."""
    lines = text.splitlines()
    current, owner = _shared_lines(lines)
    unchanged = {key for key, chain_lines in current.items() if applied.get(key) == chain_lines}
    out: list[str] = []
    section: list[str] = []
    omitted = 0
    for line, key in zip(lines, owner, strict=True):
        if line.startswith("*"):
            section = [line]
        elif line == "COMMIT":
            if len(section) > 1:
                out += section
                out.append(line)
        elif key is not None and key in unchanged:
            omitted += line[0] == "-"
        else:
            section.append(line)
    return ("\n".join(out) + "\n" if out else ""), {**applied, **current}, omitted

"""Where an nftables transaction goes: the real `nft` in a node's network namespace, or a model.

`NftApplier` is what knftables does for kube-proxy's nftables proxier: one `nft -f -` per sync, fed
the whole transaction on stdin (nft applies a batch all or nothing), and `nft -j list chains` /
`nft -j list sets` for the names that exist in the `kube-proxy` table (kube-proxy's `List` calls,
which find the stale chains and affinity sets to remove). `RecordingNftApplier` keeps the table in
memory with table.py's model of nft's semantics, for render mode (no root) and tests. Every command
is an argv list; nothing goes through a shell.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, Protocol

from ..apply import ApplyError
from .render import TABLE
from .table import NftTable, TableError, apply_transaction


class NftApplierLike(Protocol):
    async def transact(self, transaction: str) -> None: ...

    async def existing(self) -> tuple[frozenset[str], frozenset[str]]: ...

    async def listed(self) -> str: ...

    async def cleanup_leftovers(self) -> None: ...


class RecordingNftApplier:
    """Render mode: the table as table.py models it; refuses what nft would refuse."""

    def __init__(self, family: str = "ip") -> None:
        self.family = family
        self.table: NftTable | None = None
        self.transactions = 0  # one per sync
        self.last_transaction = ""

    async def transact(self, transaction: str) -> None:
        self.transactions += 1
        self.last_transaction = transaction
        try:
            self.table = apply_transaction(self.table, transaction, family=self.family, name=TABLE)
        except TableError as exc:
            raise ApplyError(f"nft -f failed: {exc}", exit_code=1) from exc

    async def existing(self) -> tuple[frozenset[str], frozenset[str]]:
        if self.table is None:
            return frozenset(), frozenset()
        return (frozenset(self.table.chains),
                frozenset(name for name, s in self.table.sets.items() if s.kind == "set"))

    async def listed(self) -> str:
        return self.table.dump() if self.table is not None else ""

    async def cleanup_leftovers(self) -> None:
        self.table = None


class NftApplier:
    """The real thing: `nft` in a network namespace (or the current one if `netns` is None)."""

    def __init__(self, netns: str | None, *, family: str = "ip", nice: int = 0) -> None:
        self.netns = netns
        self.family = family
        self.nice = nice  # the niceness of every nft (see apply.NetnsCommands)
        self.transactions = 0  # `nft -f` calls: one per sync

    def command(self, *args: str) -> list[str]:
        argv = ["nft", *args]
        argv = ["ip", "netns", "exec", self.netns, *argv] if self.netns else argv
        return ["nice", "-n", str(self.nice), *argv] if self.nice > 0 else argv

    async def _run(self, argv: Sequence[str], stdin: bytes | None = None) -> tuple[int, str, str]:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except OSError as exc:  # nft (or ip) is not installed
            raise ApplyError(f"{argv[0]}: {exc}") from exc
        out, err = await proc.communicate(stdin)
        return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")

    async def transact(self, transaction: str) -> None:
        """One `nft -f -`: the whole sync or nothing."""
        self.transactions += 1
        code, _, err = await self._run(self.command("-f", "-"), transaction.encode())
        if code != 0:
            raise ApplyError(f"nft -f failed (exit {code}): {_nft_error(err)}", exit_code=code)

    async def _names(self, what: str) -> frozenset[str]:
        # `list chains ip` rather than `list table`: the table's elements (tens of thousands at 10k
        # Services) are not needed to find stale chains. A family with no table lists nothing.
        code, out, err = await self._run(self.command("-j", "list", what, self.family))
        if code != 0:
            raise ApplyError(f"nft list {what} failed (exit {code}): {err.strip()}", exit_code=code)
        names: set[str] = set()
        key = what[:-1]  # "chains" -> "chain"
        try:
            items: list[Any] = json.loads(out)["nftables"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ApplyError(f"nft list {what}: unreadable output: {exc}") from exc
        for item in items:
            obj = item.get(key) if isinstance(item, dict) else None
            if isinstance(obj, dict) and obj.get("table") == TABLE:
                names.add(str(obj.get("name")))
        return frozenset(names)

    async def existing(self) -> tuple[frozenset[str], frozenset[str]]:
        """The chains and the sets (not maps) of the kube-proxy table now."""
        return await self._names("chains"), await self._names("sets")

    async def listed(self) -> str:
        """`nft list table ip kube-proxy`, or "" when there is no such table."""
        code, out, err = await self._run(self.command("list", "table", self.family, TABLE))
        if code != 0:
            if "No such file or directory" in err:
                return ""
            raise ApplyError(f"nft list table failed (exit {code}): {err.strip()}", exit_code=code)
        return out


    async def cleanup_leftovers(self) -> None:
        """nftables.CleanupLeftovers, run when the agent starts in iptables mode: delete the `ip` and
        `ip6` kube-proxy tables if they exist (nothing else of nftables mode lives outside them)."""
        for family in ("ip", "ip6"):
            code, _, err = await self._run(self.command("delete", "table", family, TABLE))
            if code != 0 and "No such file or directory" not in err:
                raise ApplyError(f"nft delete table {family} {TABLE} failed (exit {code}): {err.strip()}",
                                 exit_code=code)


def _nft_error(stderr: str) -> str:
    """nft's error, which already quotes the offending line ("/dev/stdin:12:1-40: Error: ..."),
    cut to a readable size: a full sync's transaction can be megabytes."""
    message = stderr.strip()
    return message if len(message) < 4000 else message[:4000] + " ..."

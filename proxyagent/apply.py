"""Appliers: where a rendered payload goes.

`IptablesApplier` feeds it to one `iptables-restore -w 5 -W 100000 --noflush --counters` inside the
node's network namespace, as kube-proxy does, and on full syncs first makes sure the jumps from the
built-in chains exist (`iptables -N`, `-C`, `-I`, §3). `RecordingApplier` keeps it in memory (render
mode, no root). Every command is an argv list; nothing goes through a shell.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Protocol

from .canonical import canonical_sort
from .render import JUMP_RULES

log = logging.getLogger(__name__)

_CHAIN_LINE = re.compile(r"^:(\S+) ")


class ApplyError(RuntimeError):
    pass


class Applier(Protocol):
    async def apply(self, payload: str, *, full: bool) -> None: ...

    async def existing_nat_chains(self) -> frozenset[str]: ...

    async def saved(self) -> str: ...


def _chains(save_output: str) -> frozenset[str]:
    return frozenset(m.group(1) for line in save_output.splitlines() if (m := _CHAIN_LINE.match(line)))


class RecordingApplier:
    """Render mode: remember what would have been applied, and which chains would exist."""

    def __init__(self) -> None:
        self.last_payload = ""
        self._state: dict[str, dict[str, list[str]]] = {}

    async def apply(self, payload: str, *, full: bool) -> None:
        self.last_payload = payload
        self._merge(payload)

    def _merge(self, payload: str) -> None:
        # The same semantics as iptables-restore --noflush: declared chains are flushed and refilled,
        # `-X` deletes, chains not mentioned keep their rules.
        table = ""
        for line in payload.splitlines():
            if line.startswith("*"):
                table = line[1:]
                self._state.setdefault(table, {})
            elif line.startswith(":"):
                self._state[table][line[1:].split(" ", 1)[0]] = []
            elif line.startswith("-A "):
                chain = line.split(" ", 2)[1]
                self._state[table].setdefault(chain, []).append(line)
            elif line.startswith("-X "):
                self._state[table].pop(line.split(" ", 1)[1].strip(), None)

    async def existing_nat_chains(self) -> frozenset[str]:
        return frozenset(self._state.get("nat", {}))

    async def saved(self) -> str:
        lines = []
        for table in sorted(self._state):
            lines.append(f"*{table}")
            chains = self._state[table]
            lines += [f":{chain} - [0:0]" for chain in chains]
            for rules in chains.values():
                lines += rules
            lines.append("COMMIT")
        return canonical_sort("\n".join(lines) + "\n") if lines else ""


class IptablesApplier:
    """The real thing: iptables-restore in a network namespace (or the current one if `netns` is None)."""

    def __init__(self, netns: str | None, *, backend: str = "iptables") -> None:
        if backend not in ("iptables", "iptables-nft", "iptables-legacy"):
            raise ValueError(f"unknown iptables backend {backend!r}")
        self.netns = netns
        self.backend = backend

    def _argv(self, tool: str, *args: str) -> list[str]:
        # iptables, iptables-save, iptables-restore; iptables-nft-save, iptables-legacy-restore, ...
        argv = [self.backend + tool, *args]
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else argv

    async def _run(self, argv: Sequence[str], stdin: bytes | None = None) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE if stdin else None,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate(stdin)
        return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")

    async def supports_random_fully(self) -> bool:
        code, out, err = await self._run(self._argv("", "-j", "MASQUERADE", "--help"))
        return "--random-fully" in out + err

    async def ensure_jumps(self) -> None:
        for rule in JUMP_RULES:
            await self._run(self._argv("", "-w", "5", "-t", rule.table, "-N", rule.dst_chain))
            args = list(rule.args())
            code, _, _ = await self._run(self._argv("", "-w", "5", "-t", rule.table, "-C", rule.src_chain, *args))
            if code != 0:
                code, _, err = await self._run(self._argv("", "-w", "5", "-t", rule.table, "-I", rule.src_chain,
                                                          *args))
                if code != 0:
                    raise ApplyError(f"could not add jump {rule.src_chain} -> {rule.dst_chain}: {err.strip()}")

    async def apply(self, payload: str, *, full: bool) -> None:
        if full:
            await self.ensure_jumps()
        code, _, err = await self._run(self._argv("-restore", "-w", "5", "-W", "100000", "--noflush", "--counters"),
                                       payload.encode())
        if code != 0:
            raise ApplyError(f"iptables-restore failed (exit {code}): {err.strip()}")

    async def existing_nat_chains(self) -> frozenset[str]:
        code, out, err = await self._run(self._argv("-save", "-t", "nat"))
        if code != 0:
            raise ApplyError(f"iptables-save failed (exit {code}): {err.strip()}")
        return _chains(out)

    async def saved(self) -> str:
        code, out, err = await self._run(self._argv("-save"))
        if code != 0:
            raise ApplyError(f"iptables-save failed (exit {code}): {err.strip()}")
        return out

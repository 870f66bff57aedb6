"""Appliers: where a rendered payload goes.

`IptablesApplier` is kube-proxy's utiliptables runner, inside a node's network namespace (or the
current one): one `iptables-restore -w 5 -W 100000 --noflush --counters` per sync, fed on stdin;
on full syncs, the jumps from the built-in chains via `iptables -N`, `-C` and `-I` (§3); the nat
chains that exist now via `iptables-save -t nat`; and the KUBE-PROXY-CANARY chains of kube-proxy's
iptables monitor. The backend is `iptables` (whatever the system's alternative is),
`iptables-nft` or `iptables-legacy`; one namespace should be driven by one backend only, as on a
real node. `RecordingApplier` keeps the same state in memory, with iptables-restore --noflush
semantics (render mode, no root), and refuses what iptables-restore refuses that a renderer can get
wrong: a rule jumping to a chain that neither the payload nor the kernel has. Every command is an
argv list; nothing goes through a shell.

The commands are spawned from a thread of the applier's that has entered the node's namespace (the
child inherits the thread's namespace), not through `ip netns exec` from the event loop: in `kubelab up`
twenty agents each sync about once a second during a rollout, two commands per sync, and spawning
them on the loop's thread (asyncio's subprocess transport, a child-watcher thread per child, and one
more exec of `ip`) was a tenth of the process's time and stalled every other component meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from typing import Protocol

from kubelab.netnsthread import enter_netns, lower_priority, run_in_netns

from .canonical import canonical_sort
from .hashing import is_service_chain
from .render import (
    JUMP_RULES,
    KUBE_EXTERNAL_SERVICES,
    KUBE_FORWARD,
    KUBE_MARK_MASQ,
    KUBE_NODEPORTS,
    KUBE_POSTROUTING,
    KUBE_PROXY_FIREWALL,
    KUBE_SERVICES,
)

log = logging.getLogger(__name__)

BACKENDS = ("iptables", "iptables-nft", "iptables-legacy")
CANARY_CHAIN = "KUBE-PROXY-CANARY"
# kube-proxy's monitor watches mangle first: nobody else cleans it, so its canary vanishing means
# someone flushed everything.
CANARY_TABLES = ("mangle", "nat", "filter")
# iptables >= 1.6.2: wait up to 5 s for the xtables lock, polling every 100 ms (utiliptables).
WAIT_FLAGS = ("-w", "5", "-W", "100000")
# iptables exits 4 for "resource problem", e.g. it could not get the lock (isResourceError).
EXIT_RESOURCE_PROBLEM = 4

# After a newline rather than at ^ in MULTILINE mode: a pattern that starts with a literal is searched for
# as one (7x faster on a 1,000-endpoint nat table); chains_of puts a newline before the first line.
_CHAIN_DECLARATION = re.compile(r"\n:(\S+) ", re.ASCII)
_TABLE_OR_CHAIN = re.compile(r"\n(?:\*(\S+)|:(\S+) )", re.ASCII)


class ApplyError(RuntimeError):
    """An iptables command failed."""

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Applier(Protocol):
    async def ensure_jumps(self) -> None: ...

    async def restore(self, payload: str) -> None: ...

    async def existing_nat_chains(self) -> frozenset[str]: ...

    async def saved(self) -> str: ...

    async def supports_random_fully(self) -> bool | None: ...

    async def ensure_canary(self) -> None: ...

    async def canary_exists(self, table: str) -> bool: ...

    async def enable_route_localnet(self) -> None: ...

    async def cleanup_leftovers(self) -> None: ...


# What iptables.CleanupLeftovers flushes and deletes (besides every service chain in nat), per table,
# when kube-proxy starts in another mode (KUBE-FIREWALL is the kubelet's and stays).
CLEANUP_CHAINS = {
    "nat": (KUBE_SERVICES, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ, CANARY_CHAIN),
    "filter": (KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_NODEPORTS, KUBE_PROXY_FIREWALL,
               CANARY_CHAIN),
}


def cleanup_payload(table: str, existing: frozenset[str]) -> str:
    """The iptables-restore input that flushes and deletes kube-proxy's chains of `table` that exist."""
    chains = [c for c in CLEANUP_CHAINS[table] if c in existing]
    if table == "nat":
        chains += sorted(c for c in existing if is_service_chain(c))
    if not chains:
        return ""
    return "".join([f"*{table}\n", *(f":{c} - [0:0]\n" for c in chains), *(f"-X {c}\n" for c in chains),
                    "COMMIT\n"])


def chains_of(save_output: str, table: str | None = None) -> frozenset[str]:
    """The chains declared in iptables-save output (GetChainsFromTable), only those of `table`
    if given. One regular-expression scan rather than a loop over lines: the agent reads the nat
    table this way on every sync, and in `kubelab up` twenty agents share the event loop."""
    if save_output[:1] in ("*", ":"):  # the patterns find lines after a newline
        save_output = "\n" + save_output
    if table is None:
        return frozenset(_CHAIN_DECLARATION.findall(save_output))
    current = None
    chains = set()
    for match in _TABLE_OR_CHAIN.finditer(save_output):
        if match.group(1) is not None:
            current = match.group(1)
        elif current == table:
            chains.add(match.group(2))
    return frozenset(chains)


class RecordingApplier:
    """Render mode: the kernel's tables as a dict, changed the way iptables-restore --noflush does:
    declared chains are flushed and refilled, `-X` deletes, chains not mentioned keep their rules."""

    def __init__(self) -> None:
        self.last_payload = ""
        self.restores = 0  # iptables-restore calls: one per sync
        self._state: dict[str, dict[str, list[str]]] = {}

    async def ensure_jumps(self) -> None:
        for rule in JUMP_RULES:
            chains = self._state.setdefault(rule.table, {})
            chains.setdefault(rule.dst_chain, [])
            line = " ".join(("-A", rule.src_chain, *(f'"{a}"' if " " in a else a for a in rule.args())))
            rules = chains.setdefault(rule.src_chain, [])
            if line not in rules:
                rules.insert(0, line)

    async def restore(self, payload: str) -> None:
        self.restores += 1
        self.last_payload = payload
        problem = _missing_chain(payload, self._state)
        if problem is not None:
            raise ApplyError(f"iptables-restore failed (exit 1): {_restore_error(problem, payload)}", exit_code=1)
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

    async def supports_random_fully(self) -> bool | None:
        return None  # nothing to probe: keep what the configuration says

    async def ensure_canary(self) -> None:
        for table in CANARY_TABLES:
            self._state.setdefault(table, {}).setdefault(CANARY_CHAIN, [])

    async def canary_exists(self, table: str) -> bool:
        return CANARY_CHAIN in self._state.get(table, {})

    async def enable_route_localnet(self) -> None:
        pass  # no kernel to configure

    async def cleanup_leftovers(self) -> None:
        self._state.clear()


class IptablesApplier:
    """The real thing: iptables in a network namespace (or the current one if `netns` is None)."""

    def __init__(self, netns: str | None, *, backend: str = "iptables", nice: int = 0) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown iptables backend {backend!r} (one of {', '.join(BACKENDS)})")
        self.netns = netns
        self.backend = backend
        self.restores = 0  # iptables-restore calls: one per sync
        # A command thread for the node's namespace, and one for this namespace (the --random-fully probe);
        # `nice`: the niceness of both threads and so of every command (see NetnsCommands).
        self._commands = {netns or None: NetnsCommands(netns or None, nice=nice), None: NetnsCommands(None, nice=nice)}

    def command(self, tool: str, *args: str) -> list[str]:
        """argv of `<backend><tool> args...`, e.g. tool "-restore" runs iptables-nft-restore for the nft
        backend; `_run` runs it inside the node's namespace."""
        return [self.backend + tool, *args]

    async def _run(self, argv: Sequence[str], stdin: bytes | None = None, *, in_netns: bool = True
                   ) -> tuple[int, str, str]:
        """Exit code, stdout and stderr of `argv`, run inside the node's namespace (`in_netns`) or this one."""
        netns = (self.netns or None) if in_netns else None
        try:
            done = await self._commands[netns].run(argv, stdin)
        except OSError as exc:
            if netns is None:  # iptables outside a namespace is missing
                raise ApplyError(f"{argv[0]}: {exc}") from exc
            # What `ip netns exec` (which this used to go through) answered, so that callers see the same
            # exit codes: 255 when the namespace is gone or not made yet, 1 when the binary is missing.
            if exc.filename == argv[0]:
                return 1, "", f'exec of "{argv[0]}" failed: {exc.strerror}\n'
            return 255, "", f'Cannot open network namespace "{netns}": {exc.strerror}\n'
        return done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")

    async def _iptables(self, table: str, *args: str) -> tuple[int, str]:
        code, _, err = await self._run(self.command("", *WAIT_FLAGS, "-t", table, *args))
        return code, err.strip()

    async def supports_random_fully(self) -> bool | None:
        """Does MASQUERADE take --random-fully (iptables >= 1.6.2, kernel >= 3.13)? kube-proxy asks
        the iptables binary the same way."""
        if shutil.which(self.backend) is None:
            return None
        # What the binary supports does not depend on the namespace, and the node's namespace may not
        # exist yet when the agent starts, so ask the binary outside it.
        _, out, err = await self._run([self.backend, "-j", "MASQUERADE", "--help"], in_netns=False)
        return "--random-fully" in out + err

    async def _ensure_chain(self, table: str, chain: str) -> None:
        code, err = await self._iptables(table, "-N", chain)
        # "Chain already exists" is success (EnsureChain).
        if code != 0 and "exists" not in err:
            raise ApplyError(f"could not create chain {chain} in {table}: {err}", exit_code=code)

    async def ensure_jumps(self) -> None:
        """EnsureChain + EnsureRule(Prepend) for every jump (full syncs only)."""
        for rule in JUMP_RULES:
            await self._ensure_chain(rule.table, rule.dst_chain)
            args = list(rule.args())
            code, _ = await self._iptables(rule.table, "-C", rule.src_chain, *args)
            if code == 0:
                continue
            code, err = await self._iptables(rule.table, "-I", rule.src_chain, *args)
            if code != 0:
                raise ApplyError(f"could not add jump {rule.src_chain} -> {rule.dst_chain}: {err}", exit_code=code)

    async def restore(self, payload: str) -> None:
        """One iptables-restore of both tables, without flushing what the payload does not name."""
        self.restores += 1
        code, _, err = await self._run(self.command("-restore", *WAIT_FLAGS, "--noflush", "--counters"),
                                       payload.encode())
        if code != 0:
            raise ApplyError(f"{self.backend}-restore failed (exit {code}): {_restore_error(err, payload)}",
                             exit_code=code)

    async def existing_nat_chains(self) -> frozenset[str]:
        code, out, err = await self._run(self.command("-save", "-t", "nat"))
        if code != 0:
            raise ApplyError(f"{self.backend}-save failed (exit {code}): {err.strip()}", exit_code=code)
        return chains_of(out)

    async def saved(self) -> str:
        code, out, err = await self._run(self.command("-save"))
        if code != 0:
            raise ApplyError(f"{self.backend}-save failed (exit {code}): {err.strip()}", exit_code=code)
        return out

    async def ensure_canary(self) -> None:
        for table in CANARY_TABLES:
            await self._ensure_chain(table, CANARY_CHAIN)

    async def canary_exists(self, table: str) -> bool:
        """`iptables -S CANARY -t table` (chainExists); a resource problem (lock) is an error, not
        an answer."""
        code, _, err = await self._run(self.command("", *WAIT_FLAGS, "-S", CANARY_CHAIN, "-t", table))
        if code == EXIT_RESOURCE_PROBLEM:
            raise ApplyError(f"could not check {CANARY_CHAIN} in {table}: {err.strip()}", exit_code=code)
        return code == 0

    async def cleanup_leftovers(self) -> None:
        """iptables.CleanupLeftovers, run when the agent starts in nftables mode: unlink kube-proxy's
        chains from the built-in ones, flush and delete them (nat: the fixed ones and every service
        chain; filter: the fixed ones) with one restore per table, and drop the mangle canary. A
        namespace that never saw iptables mode has nothing to remove and gets no restore."""
        problems = []
        for rule in JUMP_RULES:
            # -D of a rule that is not there fails; like kube-proxy, that is not an error.
            await self._iptables(rule.table, "-D", rule.src_chain, *rule.args())
        for table in ("nat", "filter"):
            code, out, err = await self._run(self.command("-save", "-t", table))
            if code != 0:
                problems.append(f"{self.backend}-save -t {table}: {err.strip()}")
                continue
            payload = cleanup_payload(table, chains_of(out, table))
            if payload:
                try:
                    await self.restore(payload)
                except ApplyError as exc:
                    problems.append(str(exc))
        await self._iptables("mangle", "-X", CANARY_CHAIN)  # may not exist: ignored, as upstream
        if problems:
            raise ApplyError("could not remove iptables-mode rules: " + "; ".join(problems))

    async def enable_route_localnet(self) -> None:
        """net.ipv4.conf.all.route_localnet=1, which NodePorts on 127.0.0.1 need (kube-proxy sets it
        when --iptables-localhost-nodeports is on; the KUBE-FIREWALL rule closes the hole it opens).
        Written to /proc/sys as kube-proxy's sysctl package does, not with the sysctl binary, which a
        node image need not have; left alone when it already holds 1, so a container whose /proc/sys
        is read-only but whose runtime set it (compose's `sysctls:`) passes."""
        try:
            await asyncio.to_thread(run_in_netns, self.netns, _route_localnet_on, name="route-localnet")
        except OSError as exc:
            raise ApplyError(f"could not set route_localnet: {exc.strerror or exc}; set "
                             "net.ipv4.conf.all.route_localnet=1 for the container (compose `sysctls:`)") from exc


def _missing_chain(payload: str, state: dict[str, dict[str, list[str]]]) -> str | None:
    """iptables-restore's check that every chain a rule jumps to exists once the payload is in:
    declared by it or already in the kernel (and not deleted by it). The error as iptables-nft
    words it, with the line, or None. Only kube-proxy's own chains are checked (KUBE-...); other
    targets (DNAT, MARK, ...) are extensions, not chains."""
    table = ""
    chains: set[str] = set()
    jumps: list[tuple[int, str, str]] = []  # (line number, table, target)
    deleted: dict[str, set[str]] = {}
    declared: dict[str, set[str]] = {}
    for number, line in enumerate(payload.splitlines(), start=1):
        if line.startswith("*"):
            table = line[1:]
            chains = declared.setdefault(table, set())
        elif line.startswith(":"):
            chains.add(line[1:].split(" ", 1)[0])
        elif line.startswith("-A ") and (m := _JUMP.search(line)) is not None:
            jumps.append((number, table, m.group(1)))
        elif line.startswith("-X "):
            deleted.setdefault(table, set()).add(line[3:].strip())
    # The chains each table has after the payload, once per table: built per jump, this was quadratic (at
    # 10k Services ~40,000 jumps each copying ~30,000 chain names, minutes per sync in render mode).
    have = {table: (declared.get(table, set()) | set(state.get(table, {}))) - deleted.get(table, set())
            for table in {table for _, table, _ in jumps}}
    for number, table, target in jumps:
        if target not in have[table]:
            return f"Chain '{target}' does not exist\nError occurred at line: {number}"
    return None


_JUMP = re.compile(r" -j (KUBE-\S+)", re.ASCII)

# Seconds a namespace's command thread waits for more work before it ends (a new one starts on demand).
COMMAND_THREAD_IDLE = 30.0

_Job = tuple[list[str], bytes | None, asyncio.AbstractEventLoop, "asyncio.Future[subprocess.CompletedProcess[bytes]]"]


class NetnsCommands:
    """Runs commands inside one network namespace (None: this one) from a thread of its own that entered
    it once: a child is born in its parent thread's namespace (setns(2) is per thread), so the event loop
    neither forks nor watches the child, and no thread that serves anything else ever changes namespace
    (see kubelab.netnsthread). The thread is made on demand and ends after `idle` seconds without work, so
    starting one (which waits for it to run) happens once per burst, not once per command. With `nice`, the
    thread runs at that niceness, and so does every command it starts (`kubelab up`: its nodes' rules take
    the CPU the control plane they share the machine with leaves them)."""

    def __init__(self, netns: str | None, *, idle: float = COMMAND_THREAD_IDLE, nice: int = 0) -> None:
        self.netns = netns
        self.idle = idle
        self.nice = nice
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    async def run(self, argv: Sequence[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """`argv` run to completion in the namespace; OSError if the namespace or the binary is missing."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[subprocess.CompletedProcess[bytes]] = loop.create_future()
        with self._lock:
            self._jobs.put((list(argv), stdin, loop, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=f"iptables-{self.netns or 'host'}",
                                                daemon=True)
                self._thread.start()
        return await future

    def _serve(self) -> None:
        entered: OSError | None = None
        lower_priority(self.nice)
        if self.netns:
            try:
                enter_netns(self.netns)
            except OSError as exc:  # every job of this thread fails; the next job gets a new thread
                entered = exc
        while True:
            try:
                argv, stdin, loop, future = self._jobs.get(timeout=0 if entered else self.idle)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():
                        self._thread = None
                        return
                continue
            result: subprocess.CompletedProcess[bytes] | None = None
            error: BaseException | None = entered
            if error is None:
                try:
                    # No preexec_fn: subprocess uses vfork, and no fork handler runs in the child.
                    result = subprocess.run(argv, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                                            capture_output=True, check=False)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    error = exc
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:
                pass  # that loop has closed (kubelab is exiting): nobody is waiting


def _settle(future: asyncio.Future[subprocess.CompletedProcess[bytes]],
            result: subprocess.CompletedProcess[bytes] | None, error: BaseException | None) -> None:
    if future.done():  # the caller was cancelled: nobody waits for this command any more
        return
    if error is not None:
        future.set_exception(error)
    else:
        assert result is not None
        future.set_result(result)


ROUTE_LOCALNET = "/proc/sys/net/ipv4/conf/all/route_localnet"


def _route_localnet_on() -> None:
    """In the calling thread's network namespace (/proc/sys/net is the opener's)."""
    with open(ROUTE_LOCALNET) as f:
        if f.read().strip() == "1":
            return
    with open(ROUTE_LOCALNET, "w") as f:
        f.write("1")


def _restore_error(stderr: str, payload: str) -> str:
    """The error with the offending line and its neighbours, as kube-proxy logs a ParseError
    (utiliptables.ExtractLines)."""
    message = stderr.strip()
    match = re.search(r"line:? ([0-9]+)", message)
    if match is None:
        return message
    number = int(match.group(1))
    lines = payload.splitlines()
    context = [f"{i}: {lines[i - 1]}" for i in range(max(1, number - 2), min(len(lines), number + 2) + 1)]
    return message + "\n" + "\n".join(context)

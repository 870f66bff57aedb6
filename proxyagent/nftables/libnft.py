"""The fast way to apply a transaction: libnftables (Debian's libnftables1) in the agent's own process.

`nft -f` costs a process (`ip netns exec` + `nft`) per sync; libnftables is the same parser and
the same all-or-nothing batch without it. The library talks netlink from the calling thread's
network namespace, so each `LibNftApplier` owns one thread that enters the node's namespace once
(setns(2) affects that thread only) and makes every library call; the rest of the agent stays
where it is. The thread lives in the agent's process, so it dies with the agent and holds nothing
outside it; `close()` ends it earlier. Before each transaction the thread checks that it is still
in the namespace the name points at (a lab that recreated the namespace gets a fresh thread).

What the library does not save with nft 1.0.6 (Debian 12): each transaction that adds a rule or an
element reloads nft's cache of the table's chains and sets, because 1.0.6 keeps a cache only while
the kernel's generation id is the one it read, and its own commit bumps it (later nft releases
accept genid + 1). That reload is proportional to the table (~0.1 s at 1k Services, 0.3-5 s at 10k);
`nft -f` pays it too, plus the process. So, with `netlink_batches`, a transaction whose every line
netlink.py can encode (a partial sync's chains, rules and elements) is sent by this thread as one
nf_tables netlink batch on a NETLINK_NETFILTER socket opened inside the namespace, with no cache at
all; the kernel applies it all or nothing, as it applies nft's. A GETGEN sent after it is answered
after every answer to the batch, so the refusals are known without a timeout. Anything else (full
syncs, IPv6, source-range sets) goes through the library as text. What is left is the kernel's:
any rule, or any verdict-map element naming a chain, makes the commit validate the whole table's
chain graph (measured at 10k Services: ~80-100 ms of CPU per commit, against ~5 ms for a commit
without it).

The listings (`existing`, `listed`) and the cleanup run rarely (full syncs, start) and stay with
`nft` (NftApplier). `nft_applier()` picks this applier when the library loads, `nft -f` otherwise.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kubelab.netnsthread import NETNS_RUN_DIR, enter_netns, lower_priority

from ..apply import ApplyError
from . import netlink
from .apply import NftApplier, _nft_error

log = logging.getLogger(__name__)

LIBRARY = "libnftables.so.1"
NETNS_DIR = Path(NETNS_RUN_DIR)  # where `ip netns add` names namespaces
SOL_NETLINK = 270
NETLINK_CAP_ACK = 10  # errors do not echo the (possibly large) message they refuse
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33  # <asm-generic/socket.h>; root may exceed wmem_max
BATCH_LIMIT = 4 << 20  # bytes; a larger partial sync goes to libnftables (the socket's send buffer)


class LibraryUnavailable(RuntimeError):
    """libnftables (or setns) cannot be used here: use `nft -f`."""


def _load() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(LIBRARY)
    except OSError as exc:
        raise LibraryUnavailable(f"{LIBRARY}: {exc}") from exc
    lib.nft_ctx_new.restype = ctypes.c_void_p
    lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
    lib.nft_ctx_free.restype = None
    lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_get_output_buffer.restype = ctypes.c_char_p
    lib.nft_ctx_get_output_buffer.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
    lib.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
    lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    return lib


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_malloc_trim = getattr(_libc, "malloc_trim", None)


def _netns_inode(netns: str | None) -> int:
    """The namespace the name points at now (the current thread's when None)."""
    path = NETNS_DIR / netns if netns is not None else Path("/proc/thread-self/ns/net")
    try:
        return os.stat(path).st_ino
    except OSError as exc:
        raise ApplyError(f"network namespace {netns}: {exc}") from exc


class _Worker:
    """One thread inside `netns` that makes every library call; a libnftables context lives only for its
    transaction (`run`)."""

    def __init__(self, lib: ctypes.CDLL, netns: str | None, nice: int = 0) -> None:
        self.lib = lib
        self.netns = netns
        self.nice = nice
        self.ctx: int | None = None
        self.sock: socket.socket | None = None
        self.seq = 1
        self.inode = 0
        # CPU time (user + system) of the worker thread in its last call: the kernel's share of a
        # batch, and nft's cache reload, run in this thread; a figure a loaded machine inflates less
        # than the wall clock.
        self.last_cpu = 0.0
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"libnft-{netns or 'host'}")
        try:
            # Fails here (not at the first sync) if the namespace cannot be entered.
            self.pool.submit(self._enter).result()
        except BaseException:
            self.pool.shutdown(wait=True)
            raise

    def _enter(self) -> None:
        """In the worker thread: enter the namespace and make the context there."""
        lower_priority(self.nice)
        if self.netns is not None:
            try:
                enter_netns(self.netns)
            except OSError as exc:
                raise LibraryUnavailable(f"network namespace {self.netns}: {exc}") from exc
        self.inode = _netns_inode(None)
        self._new_context()  # fails here, at the start, if the library cannot make one

    def _new_context(self) -> int:
        """In the worker thread: a libnftables context (its netlink socket opens in the namespace)."""
        ctx = self.lib.nft_ctx_new(0)  # NFT_CTX_DEFAULT
        if not ctx:
            raise LibraryUnavailable("nft_ctx_new failed")
        self.lib.nft_ctx_buffer_output(ctx)  # nothing reaches the agent's stdout/stderr
        self.lib.nft_ctx_buffer_error(ctx)
        self.ctx = ctx
        return int(ctx)

    def _free_context(self) -> None:
        """In the worker thread: free the context and give the heap back to the system.

        A transaction leaves the context with nft's cache of the table and this thread's malloc arena
        with the heap the transaction grew: ~0.5 GiB of the agent's RSS at 10k Services, most of it blocks
        already freed that glibc keeps for the thread. Nothing later uses either: nft 1.0.6 reloads the
        cache for the next transaction that adds a rule or an element anyway (its own commit bumped the
        generation id), and the partial syncs that go as netlink batches use none. malloc_trim hands
        the free pages back (glibc; absent elsewhere)."""
        if self.ctx is not None:
            self.lib.nft_ctx_free(self.ctx)
            self.ctx = None
            if _malloc_trim is not None:
                _malloc_trim(0)

    def run(self, text: bytes) -> tuple[int, str]:
        """In the worker thread: one nft_run_cmd_from_buffer (one batch: all or nothing), in a context
        made for it and freed after it."""
        ctx = self.ctx if self.ctx is not None else self._new_context()
        try:
            cpu = time.thread_time()
            code = self.lib.nft_run_cmd_from_buffer(ctx, text)
            self.last_cpu = time.thread_time() - cpu
            error = self.lib.nft_ctx_get_error_buffer(ctx) or b""
        finally:
            self._free_context()
        return code, error.decode(errors="replace")

    def _socket(self) -> socket.socket:
        """In the worker thread: the netlink socket, made (inside the namespace) at first use."""
        if self.sock is None:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, netlink.NETLINK_NETFILTER)
            try:
                sock.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1)
                sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, BATCH_LIMIT + (1 << 16))
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 1 << 20)
                sock.bind((0, 0))
            except OSError:
                sock.close()
                raise
            self.sock = sock
        return self.sock

    def send_batch(self, batch: netlink.Batch) -> list[tuple[int, int]]:
        """In the worker thread: one batch (applied all or nothing by the kernel), then a GETGEN whose
        answer comes after every answer to the batch. Returns the refusals: (message index, errno)."""
        cpu = time.thread_time()
        try:
            return self._send(batch)
        finally:
            self.last_cpu = time.thread_time() - cpu

    def _send(self, batch: netlink.Batch) -> list[tuple[int, int]]:
        sock = self._socket()
        data, last = netlink.frame(batch, self.seq)
        first, self.seq = self.seq, last + 1
        barrier = self.seq
        self.seq += 1
        sock.sendall(data)
        sock.sendall(netlink.message(netlink.NFT_MSG_GETGEN, 0, barrier, b"", family=0))
        errors: list[tuple[int, int]] = []
        while True:
            buf = sock.recv(1 << 20)
            offset = 0
            while offset + 16 <= len(buf):
                length, msg_type, _, seq, _ = struct.unpack_from("=IHHII", buf, offset)
                if length < 16:
                    raise OSError("malformed netlink answer")
                if seq == barrier:
                    return errors
                if msg_type == netlink.NLMSG_ERROR:
                    (code,) = struct.unpack_from("=i", buf, offset + 16)
                    if code != 0 and first < seq <= last:
                        errors.append((seq - first - 1, -code))
                offset += (length + 3) & ~3

    def close(self) -> None:
        def free() -> None:
            if self.sock is not None:
                self.sock.close()
                self.sock = None
            self._free_context()
        try:
            self.pool.submit(free).result()
        finally:
            self.pool.shutdown(wait=True)


class LibNftApplier(NftApplier):
    """NftApplier whose transactions go through libnftables in a thread inside the namespace."""

    def __init__(self, netns: str | None, *, family: str = "ip", netlink_batches: bool = False,
                 nice: int = 0) -> None:
        super().__init__(netns, family=family, nice=nice)
        # Partial syncs as nf_tables netlink batches (netlink.py) when every line encodes.
        self.netlink_batches = netlink_batches and family == "ip"
        self.netlink_transactions = 0
        self._lib = _load()
        self._lock = threading.Lock()
        # Made at the first transaction: the node's namespace may not exist yet when the agent is built.
        self._worker: _Worker | None = None

    def _current(self) -> _Worker:
        """The worker, made again if the namespace's name now points at another namespace."""
        with self._lock:
            worker = self._worker
            if worker is not None and (self.netns is None or _netns_inode(self.netns) == worker.inode):
                return worker
            if worker is not None:
                log.info("network namespace %s was recreated: libnftables follows it", self.netns)
                worker.close()
            self._worker = None
            try:
                self._worker = _Worker(self._lib, self.netns, self.nice)
            except LibraryUnavailable as exc:
                raise ApplyError(str(exc)) from exc
            return self._worker

    async def transact(self, transaction: str) -> None:
        """One batch, as `nft -f -` applies it: the whole sync or nothing."""
        self.transactions += 1
        worker = self._current()  # a stat; a new thread only if the namespace was recreated
        batch = netlink.try_encode(transaction) if self.netlink_batches else None
        if batch is not None and batch.size() > BATCH_LIMIT:
            batch = None
        if batch is not None and batch.messages:
            try:
                refused = await asyncio.wrap_future(worker.pool.submit(worker.send_batch, batch))
            except OSError as exc:
                raise ApplyError(f"nf_tables netlink batch failed: {exc}") from exc
            self.netlink_transactions += 1
            if refused:
                # nft's own words for a refused message, with the line it came from.
                text = "; ".join(f"{batch.lines[index]}: Could not process rule: {os.strerror(errno)}"
                                 for index, errno in refused[:20])
                raise ApplyError(f"nft -f failed (netlink batch, {len(refused)} refused): {text}", exit_code=1)
            return
        code, err = await asyncio.wrap_future(worker.pool.submit(worker.run, transaction.encode()))
        if code != 0:
            raise ApplyError(f"nft -f failed (libnftables, exit {code}): {_nft_error(err)}", exit_code=1)

    @property
    def last_cpu_seconds(self) -> float:
        """The worker thread's CPU time in the last transaction (0 before the first)."""
        worker = self._worker
        return worker.last_cpu if worker is not None else 0.0

    def close(self) -> None:
        """End the thread (it would end with the process anyway)."""
        with self._lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None


def nft_applier(netns: str | None, *, family: str = "ip", library: bool = True,
                netlink_batches: bool = True, nice: int = 0) -> NftApplier:
    """The applier for a node: libnftables in a thread inside its namespace when the library
    loads and the namespace can be entered (partial syncs as netlink batches from that thread unless
    netlink_batches=False), `nft -f` otherwise (and with library=False). `nice`: the niceness of that
    thread, or of every nft."""
    if library:
        try:
            return LibNftApplier(netns, family=family, netlink_batches=netlink_batches, nice=nice)
        except LibraryUnavailable as exc:
            log.info("applying nftables transactions with nft -f: %s", exc)
    return NftApplier(netns, family=family, nice=nice)

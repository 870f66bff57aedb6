"""Storage: the only module in kubelab that talks to etcd.

Objects are JSON documents under `/registry/<resource>/<namespace>/<name>` (cluster-scoped objects
have no namespace part). An object's resourceVersion is its key's etcd mod_revision, so it is never
written into the stored bytes: it is filled in on every read, as kube-apiserver's etcd3 store does.

Every write is one etcd transaction with compares, so a write either happens whole or not at all:
create compares create_revision == 0, update and delete compare mod_revision with the revision the
caller read. Writes can carry extra keys in the same transaction (a Service and the ClusterIP and
NodePort reservations it holds), which is what makes allocation race-free.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import aetcd
import aetcd.exceptions
import aetcd.rpc
import aetcd.utils
import aetcd.watcher
import grpc
import orjson

from . import offload
from .etcdstream import ThreadedWatch

log = logging.getLogger(__name__)


# --- errors: etcd's are translated here and nowhere else ---------------------------------------

class StorageError(Exception):
    """Base of storage errors."""


class KeyNotFound(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class KeyExists(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class RevisionConflict(StorageError):
    """The object changed since the caller read it (update/delete with a stale mod_revision)."""

    def __init__(self, key: str, current: int) -> None:
        super().__init__(key)
        self.key = key
        self.current = current


class Compacted(StorageError):
    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"requested revision {requested} was compacted (compact revision {compacted})")
        self.requested = requested
        self.compacted = compacted


class FutureRevision(StorageError):
    """A read at a revision etcd has not reached yet (`mvcc: required revision is a future revision`)."""

    def __init__(self, requested: int) -> None:
        super().__init__(f"requested revision {requested} is a future revision")
        self.requested = requested


class Unavailable(StorageError):
    """etcd could not be reached or did not answer in time."""


class Timeout(Unavailable):
    """etcd did not answer within the storage timeout. Unlike a refused connection, a write that timed
    out may still be applied (it can sit in a hung etcd's socket), so the API answers 504, not 503."""


class RequestTooLarge(StorageError):
    """etcd refused a write for its size (--max-request-bytes, 1.5 MiB by default): a client's mistake,
    not an outage."""


def _translate(exc: Exception) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    text = str(exc) or type(exc).__name__
    if "request is too large" in text or "received message larger than max" in text:
        return RequestTooLarge(text)
    return Unavailable(text)


# gRPC channel options. The default reconnect backoff grows to 120 s, so after a long etcd outage
# the API server kept answering 503 for up to two minutes after etcd was back; reconnecting at least
# every second bounds that. Keepalive pings find a dead or hung etcd under an open watch stream
# (which otherwise waits forever): a ping every 10 s, given up after 5 s (gRPC core enforces
# ping_timeout_ms; keepalive_timeout_ms alone did not end the stream). etcd accepts pings every 5 s
# (--grpc-keepalive-min-time) while a stream is open, and pings are only sent then.
CHANNEL_OPTIONS: dict[str, int] = {
    "grpc.initial_reconnect_backoff_ms": 500,
    "grpc.min_reconnect_backoff_ms": 500,
    "grpc.max_reconnect_backoff_ms": 1000,
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
    "grpc.http2.ping_timeout_ms": 5_000,
    "grpc.http2.max_pings_without_data": 0,
    # gRPC's default 4 MiB receive limit fails a list of ~4,000 pods; etcd's own request limit is
    # 1.5 MiB per object, so whole-prefix reads need room (kube-apiserver raises it the same way).
    "grpc.max_receive_message_length": 2**31 - 1,
}


# What a watch sends to ask etcd for a progress notification.
PROGRESS_REQUEST = aetcd.rpc.WatchRequest(progress_request=aetcd.rpc.WatchProgressRequest())


# --- data ----------------------------------------------------------------------------------------

@dataclass
class Stored:
    """One object as read from etcd."""

    key: str
    obj: dict[str, Any]
    mod_revision: int
    create_revision: int
    size: int = 0  # bytes of the stored value (list reads): what the watch cache budgets by


@dataclass
class StorageEvent:
    type: str  # PUT | DELETE
    key: str
    obj: dict[str, Any] | None       # the new object (PUT) or None (DELETE)
    prev: dict[str, Any] | None      # the previous object, if etcd still had it
    revision: int                    # the revision of this change
    created: bool                    # PUT that created the key
    size: int = 0                    # bytes of the stored value (PUT): what the watch cache budgets by


@dataclass
class Range:
    """One range read: the objects (at most the limit asked for), whether etcd has more keys after them,
    how many keys the whole range holds, and the store revision the read was made at."""

    items: list[Stored]
    more: bool
    count: int
    revision: int


@dataclass
class Txn:
    """Extra keys carried by one write: created (must not exist), deleted, required to exist, or
    required to be absent (checked, not written)."""

    create: dict[str, bytes] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    require: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)


def range_end(prefix: str) -> str:
    """The end of the key range holding every key that starts with `prefix` (etcd's prefix range end)."""
    end: bytes = aetcd.utils.prefix_range_end(prefix.encode())
    return end.decode()


def encode(obj: dict[str, Any]) -> bytes:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
    return orjson.dumps(obj)


def decode(value: bytes, revision: int) -> dict[str, Any]:
    obj: dict[str, Any] = orjson.loads(value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
    return obj


def _decode_all(kvs: builtins.list[Any]) -> builtins.list[Stored]:
    return [Stored(kv.key.decode(), decode(kv.value, kv.mod_revision), kv.mod_revision, kv.create_revision,
                   len(kv.value)) for kv in kvs]


async def _decoded(kvs: builtins.list[Any]) -> builtins.list[Stored]:
    """A range's objects, decoded off the event loop when there are many bytes of them (offload.py): 3,000
    ConfigMaps of 1 KiB held the loop ~40 ms per LIST."""
    return await offload.run(sum(len(kv.value) for kv in kvs), _decode_all, kvs)


class ForbiddenKeyPresent(StorageError):
    """A key that had to be absent for the write (e.g. a namespace's terminating marker) exists."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class RequiredKeyMissing(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class Leases:
    """etcd leases for objects that expire some time after their last write (events: kube-apiserver's
    --event-ttl), shared as kube-apiserver's etcd3 lease manager shares them: granting a lease per write
    would double the etcd calls of every event. A lease is granted with `ttl` plus a reuse window and
    serves every write in that window (up to MAX_KEYS of them), so each key lives at least `ttl` and at
    most `ttl` plus the window after its write."""

    MAX_KEYS = 1000
    MAX_REUSE = 60.0

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._lock = asyncio.Lock()
        # (lease ID, its TTL as asked, when the grant was asked for (monotonic), keys attached)
        self._current: tuple[int, int, float, int] | None = None

    @classmethod
    def reuse_window(cls, ttl: int) -> float:
        return min(cls.MAX_REUSE, max(1.0, ttl / 10))

    async def for_ttl(self, ttl: int) -> int:
        """A lease ID under which a key written now lives between `ttl` and `ttl` + the window seconds."""
        async with self._lock:
            now = time.monotonic()
            current = self._current
            if current is not None:
                lease_id, lease_ttl, asked, keys = current
                if lease_ttl == ttl and now - asked <= self.reuse_window(ttl) and keys < self.MAX_KEYS:
                    self._current = (lease_id, lease_ttl, asked, keys + 1)
                    return lease_id
            window = self.reuse_window(ttl)
            lease = await self.storage._call(lambda c: c.lease(int(ttl + window + 0.999)),
                                             ("grant", "lease"))
            self._current = (int(lease.id), ttl, now, 1)
            return int(lease.id)

    def forget(self) -> None:
        """After a write under the current lease failed: the next one gets a fresh lease."""
        self._current = None


@dataclass(frozen=True)
class EtcdTLS:
    """kube-apiserver's --etcd-cafile, --etcd-certfile and --etcd-keyfile: the CA etcd's certificate must
    chain to (None: the system's) and the client certificate shown to an etcd with --client-cert-auth."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        """Read now, so a missing or unreadable file stops the API server at start (OSError)."""
        def read(path: str | None) -> bytes | None:
            return Path(path).read_bytes() if path else None

        return grpc.ssl_channel_credentials(root_certificates=read(self.ca_file), private_key=read(self.key_file),
                                            certificate_chain=read(self.cert_file))


class _TLSClient(aetcd.Client):  # type: ignore[misc]  # aetcd has no type hints
    """aetcd 1.0's Client dials etcd in plaintext only (its connect() makes an insecure gRPC channel);
    this one makes that channel over TLS, and the same stubs on it. (No etcd user/password here.)"""

    def __init__(self, *, credentials: grpc.ChannelCredentials, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._credentials = credentials

    async def connect(self) -> None:
        if self._connected.is_set():
            return
        self.channel = aetcd.rpc.secure_channel(f"{self._host}:{self._port}", self._credentials,
                                                options=list(self._options.items()))
        self.kvstub = aetcd.rpc.KVStub(self.channel)
        self.clusterstub = aetcd.rpc.ClusterStub(self.channel)
        self.leasestub = aetcd.rpc.LeaseStub(self.channel)
        self.maintenancestub = aetcd.rpc.MaintenanceStub(self.channel)
        self._watcher = aetcd.watcher.Watcher(aetcd.rpc.WatchStub(self.channel), timeout=self._timeout,
                                              metadata=self.metadata)
        self._connected.set()


# How long (in storage timeouts) a channel failed over from stays open for calls still on it at most: unary
# calls end within one timeout, so only a watch stream is still there after two.
RETIRED_CHANNEL_GRACE = 2.0


def cancelled_from_outside() -> bool:
    """Whether the running task is being cancelled (the request went away, the server stops), as opposed to
    gRPC raising CancelledError for a call whose channel was closed."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _connected(client: aetcd.Client) -> aetcd.Client:
    await client.connect()
    return client


class _Connection:
    """One gRPC channel to one etcd server and the unary calls in flight on it, and a synchronous channel to
    the same server for the watch streams read by threads (apiserver/etcdstream.py). A connection failed over
    from is `retired`: closed once its last call is done (Storage._failover); closing it ends its watches."""

    def __init__(self, client: aetcd.Client, server: str, credentials: grpc.ChannelCredentials | None) -> None:
        self.client = client
        self.server = server
        self.calls = 0
        self.retired = False
        self.closing: asyncio.Task[None] | None = None
        self._credentials = credentials
        self._watch_channel: grpc.Channel | None = None

    def watch_channel(self) -> grpc.Channel:
        if self._watch_channel is None:
            url = urlparse(self.server)
            target, options = f"{url.hostname or '127.0.0.1'}:{url.port or 2379}", list(CHANNEL_OPTIONS.items())
            self._watch_channel = grpc.secure_channel(target, self._credentials, options=options) \
                if url.scheme == "https" and self._credentials is not None \
                else grpc.insecure_channel(target, options=options)
        return self._watch_channel

    def close_soon(self, retired: set[_Connection]) -> None:
        if self.closing is not None:
            return

        async def close() -> None:
            try:
                with contextlib.suppress(Exception):  # closing a broken channel may fail; it is gone either way
                    if self._watch_channel is not None:
                        self._watch_channel.close()  # its watches end with CANCELLED: Unavailable to readers
                    await self.client.close()
            finally:
                retired.discard(self)

        self.closing = asyncio.get_running_loop().create_task(close(), name=f"etcd-close-{self.server}")


class Storage:
    """An etcd v3 connection (aetcd) with the object operations the registry needs. `https://` servers
    are dialled over TLS (with `tls`'s CA and client certificate), as kube-apiserver's etcd client does."""

    def __init__(self, servers: Sequence[str], *, timeout: float = 10.0, tls: EtcdTLS | None = None) -> None:
        if not servers:
            raise ValueError("at least one etcd server is needed")
        self.servers = list(servers)
        self.timeout = timeout
        self._credentials = (tls or EtcdTLS()).credentials() if any(
            urlparse(s).scheme == "https" for s in self.servers) else None
        self._connection: _Connection | None = None
        self._retired: set[_Connection] = set()  # failed over from, closed once their calls are done
        self._index = 0
        # observe(operation, key, seconds, ok): etcd_request_duration_seconds and friends (apiserver/metrics.py).
        self.observe: Callable[[str, str, float, bool], None] | None = None
        self.leases = Leases(self)

    def _make_client(self, server: str | None = None) -> aetcd.Client:
        url = urlparse(server or self.servers[self._index % len(self.servers)])
        where = {"host": url.hostname or "127.0.0.1", "port": url.port or 2379, "timeout": self.timeout,
                 "options": dict(CHANNEL_OPTIONS)}
        if url.scheme == "https" and self._credentials is not None:
            return _TLSClient(credentials=self._credentials, **where)
        return aetcd.Client(**where)

    def _current(self) -> _Connection:
        if self._connection is None:
            server = self.servers[self._index % len(self.servers)]
            self._connection = _Connection(self._make_client(server), server, self._credentials)
        return self._connection

    @property
    def client(self) -> aetcd.Client:
        return self._current().client

    def _failover(self, broken: _Connection) -> None:
        """Move to the next server in the list, once per broken connection: every request that was on
        `broken` fails on it, and only the first to get here moves on; the others find it already left (a
        second move would leave the server the first one chose, and close a channel requests now use).
        The old channel is closed when the calls on it are done: gRPC cancels a closed channel's calls,
        which each ended as a CancelledError past every handler, a plain-text 500 from uvicorn (SIGKILL
        of one member of three under 32 concurrent creates: 32 of them). No await here, so no request
        can come between the check and the move."""
        if broken is not self._connection:
            return
        self._connection = None
        self._index += 1
        log.warning("etcd %s failed; moving to %s", broken.server, self.servers[self._index % len(self.servers)])
        broken.retired = True
        self._retired.add(broken)
        if broken.calls == 0:
            broken.close_soon(self._retired)
        else:
            # A backstop: every unary call ends within the storage timeout, but a watch stream on the old
            # channel (not counted) would hold it open for as long as it lives. Closing ends such a watch
            # with Unavailable, and its reader resumes on the new connection.
            asyncio.get_running_loop().call_later(RETIRED_CHANNEL_GRACE * self.timeout, broken.close_soon,
                                                  self._retired)

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        connections = [*self._retired, *([connection] if connection is not None else [])]
        for each in connections:
            each.close_soon(self._retired)
        await asyncio.gather(*(each.closing for each in connections if each.closing is not None),
                             return_exceptions=True)

    async def _call(self, op: Callable[[aetcd.Client], Awaitable[Any]], metric: tuple[str, str] | None = None
                    ) -> Any:
        """Run `op` on the current connection's client. `op` gets the client rather than being a coroutine
        made beforehand, so the connection a call runs on is the one it is counted on and failed over from."""
        if metric is None or self.observe is None:
            return await self._call_unobserved(op)
        start, ok = time.perf_counter(), False
        try:
            result = await self._call_unobserved(op)
            ok = True
            return result
        finally:
            self.observe(metric[0], metric[1], time.perf_counter() - start, ok)

    async def _call_unobserved(self, op: Callable[[aetcd.Client], Awaitable[Any]]) -> Any:
        connection = self._current()
        connection.calls += 1
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for runs the call as a task of its own,
            # a measurable share of a request's CPU at three etcd calls per scheduled pod.
            async with asyncio.timeout(self.timeout):
                return await op(connection.client)
        except StorageError:
            raise
        except asyncio.CancelledError:
            if cancelled_from_outside():
                raise
            # gRPC cancels the calls of a channel closed under them (Storage.close, or the backstop above):
            # etcd is out of reach for this call, not the request cancelled.
            raise Unavailable(f"the connection to etcd {connection.server} was closed") from None
        except (TimeoutError, aetcd.exceptions.ConnectionTimeoutError) as exc:
            if len(self.servers) > 1:
                self._failover(connection)
            raise Timeout(f"etcd did not answer within {self.timeout:g}s ({str(exc) or type(exc).__name__})"
                          ) from exc
        except (aetcd.exceptions.ConnectionFailedError, OSError) as exc:
            if len(self.servers) > 1:
                self._failover(connection)
            raise Unavailable(str(exc) or type(exc).__name__) from exc
        except aetcd.exceptions.ClientError as exc:
            raise _translate(exc) from exc
        finally:
            connection.calls -= 1
            if connection.retired and connection.calls == 0:
                connection.close_soon(self._retired)

    # --- reads -----------------------------------------------------------------------------------

    async def revision(self) -> int:
        """The store's current revision (the header of an empty range read)."""
        result = await self._call(lambda c: c.get_range(b"/kubelab-revision", b"/kubelab-revision\x00"))
        return int(result.header.revision)

    async def versions(self) -> builtins.list[str]:
        """The etcd version of every server in the list (the maintenance Status of each endpoint, as
        kube-apiserver's feature support checker asks each one)."""
        found = []
        for server in self.servers:
            client = self._make_client(server)
            try:
                # Not through _call: a server that does not answer must not fail the main connection over.
                async with asyncio.timeout(self.timeout):
                    await client.connect()
                    status = await client.maintenancestub.Status(aetcd.rpc.StatusRequest(), timeout=self.timeout,
                                                                 metadata=client.metadata)
                found.append(str(status.version))
            except (TimeoutError, OSError, grpc.RpcError, aetcd.exceptions.ClientError) as exc:
                raise Unavailable(f"{server}: {exc}") from exc
            finally:
                with contextlib.suppress(Exception):
                    await client.close()
        return found

    async def get(self, key: str) -> Stored:
        resp = await self._call(lambda c: c.get(key.encode()), ("get", key))
        if resp is None:
            raise KeyNotFound(key)
        return Stored(key, decode(resp.value, resp.mod_revision), resp.mod_revision, resp.create_revision)

    async def list(self, prefix: str) -> tuple[list[Stored], int]:
        """Every object under `prefix` (which should end in '/'), and the store revision of the read."""
        result = await self._call(lambda c: c.get_prefix(prefix.encode()), ("list", prefix))
        return await _decoded(list(result)), int(result.header.revision)

    async def list_range(self, start: str, end: str, *, limit: int = 0, revision: int = 0) -> Range:
        """Keys from `start` (inclusive) to `end` (exclusive), in key order: at most `limit` of them (0: all),
        as of `revision` (0: the current one). A paged LIST reads every page at the first page's
        revision, so its pages are one consistent snapshot (kube's etcd3 store GetList does the same).
        Compacted if etcd no longer has `revision`, FutureRevision if it has not reached it."""
        request = aetcd.rpc.RangeRequest(key=start.encode(), range_end=end.encode(), limit=limit, revision=revision)
        response = await self._call(lambda c: self._range(c, request), ("list", start))
        items = await _decoded(list(response.kvs))
        return Range(items, bool(response.more), int(response.count), int(response.header.revision))

    async def _range(self, client: aetcd.Client, request: Any) -> Any:
        await client.connect()
        try:
            return await client.kvstub.Range(request, timeout=self.timeout, metadata=client.metadata)
        except aetcd.rpc.AioRpcError as exc:
            details = exc.details() or ""
            if "required revision has been compacted" in details:
                raise Compacted(request.revision, 0) from exc
            if "required revision is a future revision" in details:
                raise FutureRevision(request.revision) from exc
            if exc.code() == aetcd.rpc.StatusCode.DEADLINE_EXCEEDED:
                raise aetcd.exceptions.ConnectionTimeoutError(details) from exc
            if exc.code() == aetcd.rpc.StatusCode.UNAVAILABLE:
                raise aetcd.exceptions.ConnectionFailedError(details) from exc
            raise aetcd.exceptions.ClientError(details) from exc

    async def compacted(self, revision: int) -> bool:
        """Whether etcd compacted `revision` away (a read at it is refused). The watch cache asks before
        replaying from its own history, so a compacted revision still answers 410 Gone."""
        request = aetcd.rpc.RangeRequest(key=b"/kubelab-revision", revision=revision, count_only=True)

        async def ask(client: aetcd.Client) -> None:
            await client.connect()
            await client.kvstub.Range(request, timeout=self.timeout, metadata=client.metadata)

        try:
            await self._call(ask)
        except aetcd.rpc.AioRpcError as exc:
            if "compacted" in (exc.details() or ""):
                return True
            raise Unavailable(exc.details() or str(exc.code())) from exc
        except StorageError as exc:
            if "compacted" in str(exc):
                return True
            raise
        return False

    async def count(self, prefix: str) -> int:
        result = await self._call(lambda c: c.get_prefix(prefix.encode(), keys_only=True))
        return len(result)

    # Below `async def list`, a bare `list` in a signature names that method: hence builtins.list.
    async def keys(self, prefix: str) -> builtins.list[str]:
        result = await self._call(lambda c: c.get_prefix(prefix.encode(), keys_only=True))
        return [kv.key.decode() for kv in result]

    # --- writes ----------------------------------------------------------------------------------

    async def _txn(self, compares: builtins.list[Any], ops: builtins.list[Any],
                   check_keys: builtins.list[str], metric: tuple[str, str] | None = None) -> tuple[bool, Any]:
        t = self.client.transactions
        failure = [t.get(k.encode()) for k in check_keys]
        result: tuple[bool, Any] = await self._call(
            lambda c: c.transaction(compare=compares, success=ops, failure=failure), metric)
        return result

    def _extra(self, extra: Txn | None) -> tuple[builtins.list[Any], builtins.list[Any], builtins.list[str]]:
        t = self.client.transactions
        compares: list[Any] = []
        ops: list[Any] = []
        checks: list[str] = []
        if extra is None:
            return compares, ops, checks
        for key, value in extra.create.items():
            compares.append(t.create(key.encode()) == 0)
            ops.append(t.put(key.encode(), value))
            checks.append(key)
        for key in extra.delete:
            ops.append(t.delete(key.encode()))
        for key in extra.require:
            compares.append(t.create(key.encode()) > 0)
            checks.append(key)
        for key in extra.absent:
            compares.append(t.create(key.encode()) == 0)
            checks.append(key)
        return compares, ops, checks

    @staticmethod
    def _explain_failure(checks: builtins.list[str], responses: builtins.list[Any], extra: Txn | None
                         ) -> StorageError | None:
        """Which compare of a failed transaction failed: an extra key that exists or is missing."""
        found = {}
        for key, resp in zip(checks, responses, strict=False):
            found[key] = bool(resp)
        if extra is not None:
            # Required and forbidden keys first: they are the namespace checks, which kube-apiserver's
            # admission makes before allocation, so a create into a missing namespace is a 404 even
            # when it also asks for a NodePort that is taken.
            for key in extra.require:
                if not found.get(key):
                    return RequiredKeyMissing(key)
            for key in extra.absent:
                if found.get(key):
                    return ForbiddenKeyPresent(key)
            for key in extra.create:
                if found.get(key):
                    return KeyExists(key)
        return None

    @staticmethod
    def _put_revision(responses: builtins.list[Any]) -> int:
        return int(responses[0].response_put.header.revision)

    async def create(self, key: str, obj: dict[str, Any], *, extra: Txn | None = None, lease: int | None = None
                     ) -> int:
        """Store a new object; KeyExists if `key` (or an extra create key) exists. Returns its revision.
        With a `lease` (Leases.for_ttl), etcd deletes the object when the lease expires."""
        t = self.client.transactions
        compares, ops, checks = self._extra(extra)
        compares.insert(0, t.create(key.encode()) == 0)
        ops.insert(0, t.put(key.encode(), encode(obj), lease=lease))
        checks.insert(0, key)
        ok, responses = await self._txn(compares, ops, checks, ("create", key))
        if ok:
            return self._put_revision(responses)
        if responses and responses[0]:
            raise KeyExists(key)
        raise self._explain_failure(checks, responses, extra) or KeyExists(key)

    async def update(self, key: str, obj: dict[str, Any], expected_revision: int, *,
                     extra: Txn | None = None, lease: int | None = None) -> int:
        """Replace an object if its mod_revision still equals `expected_revision` (a put without a lease
        detaches the key from any lease it had: objects that expire pass theirs on every write)."""
        t = self.client.transactions
        compares, ops, checks = self._extra(extra)
        compares.insert(0, t.mod(key.encode()) == expected_revision)
        ops.insert(0, t.put(key.encode(), encode(obj), lease=lease))
        checks.insert(0, key)
        ok, responses = await self._txn(compares, ops, checks, ("update", key))
        if ok:
            return self._put_revision(responses)
        current = responses[0] if responses else None
        if not current:
            raise KeyNotFound(key)
        current_rev = current[0][1].mod_revision
        if current_rev != expected_revision:
            raise RevisionConflict(key, current_rev)
        raise self._explain_failure(checks, responses, extra) or RevisionConflict(key, current_rev)

    async def delete(self, key: str, expected_revision: int | None = None, *, extra: Txn | None = None) -> int:
        """Delete an object (if unchanged since `expected_revision`); returns the deletion revision."""
        t = self.client.transactions
        compares, ops, checks = self._extra(extra)
        if expected_revision is not None:
            compares.insert(0, t.mod(key.encode()) == expected_revision)
        else:
            compares.insert(0, t.create(key.encode()) > 0)
        ops.insert(0, t.delete(key.encode()))
        checks.insert(0, key)
        ok, responses = await self._txn(compares, ops, checks, ("delete", key))
        if ok:
            resp = responses[0].response_delete_range
            if resp.deleted == 0:
                raise KeyNotFound(key)
            return int(resp.header.revision)
        current = responses[0] if responses else None
        if not current:
            raise KeyNotFound(key)
        raise RevisionConflict(key, current[0][1].mod_revision)

    async def put_raw(self, key: str, value: bytes) -> None:
        await self._call(lambda c: c.put(key.encode(), value))

    async def delete_raw(self, key: str) -> None:
        await self._call(lambda c: c.delete(key.encode()))

    async def put_expiring(self, key: str, value: bytes, ttl: int) -> None:
        """Write `value` under a fresh lease of `ttl` seconds: etcd deletes the key unless it is written
        again before then (kube's storage with a TTL, as the master leases of the endpoint reconciler use it)."""
        lease = await self._call(lambda c: c.lease(ttl), ("grant", "lease"))
        await self._call(lambda c: c.put(key.encode(), value, lease=int(lease.id)))

    async def list_raw(self, prefix: str) -> builtins.list[tuple[str, bytes]]:
        """Every key under `prefix` with its undecoded value, in key order."""
        result = await self._call(lambda c: c.get_prefix(prefix.encode()))
        return [(kv.key.decode(), bytes(kv.value)) for kv in result]

    async def compact(self, revision: int) -> None:
        await self._call(lambda c: c.compact(revision, physical=True))

    # --- watch -----------------------------------------------------------------------------------

    async def watch(self, prefix: str, start_revision: int, *, progress_notify: bool = False,
                    progress_requests: asyncio.Queue[None] | None = None, prev_kv: bool = True
                    ) -> AsyncIterator[StorageEvent]:
        """Changes under `prefix` from `start_revision` (inclusive). Raises Compacted if too old.

        Each watch is its own gRPC Watch stream rather than a callback on aetcd's shared watcher:
        etcd serves many streams well, and a stream is cancelled cleanly when the HTTP client that
        asked for it goes away. A thread reads it (etcdstream.ThreadedWatch), so a busy event loop
        takes a backlog of responses in one turn rather than one per turn. A progress notification (no
        events) is yielded as a StorageEvent of type PROGRESS carrying the store revision, which the API
        server turns into a BOOKMARK.
        Each item put on `progress_requests` asks etcd for one (WatchProgressRequest): the watch
        cache uses the answer to know it has seen everything up to a revision. Without `prev_kv`,
        events carry no previous object (the watch cache keeps its own).
        """
        key = prefix.encode()
        create = aetcd.rpc.WatchCreateRequest(key=key, range_end=aetcd.utils.prefix_range_end(key),
                                              start_revision=start_revision, prev_kv=prev_kv,
                                              progress_notify=progress_notify)
        try:
            client = await self._call(_connected)
            stub = aetcd.rpc.WatchStub(self._current().watch_channel())
            call = ThreadedWatch(lambda requests: stub.Watch(requests, metadata=client.metadata),
                                 aetcd.rpc.WatchRequest(create_request=create), PROGRESS_REQUEST, progress_requests)
        except StorageError:
            raise
        except Exception as exc:  # any failure to open the stream means etcd is not there
            raise Unavailable(str(exc)) from exc
        try:
            responses = call.__aiter__()
            # etcd answers a create request at once (created, or compact_revision for a revision that
            # was compacted). A hung etcd does not, and the watch would wait forever without a word.
            try:
                first = await asyncio.wait_for(anext(responses), self.timeout)
            except StopAsyncIteration:
                raise Unavailable("etcd ended the watch stream") from None
            except TimeoutError:
                raise Timeout(f"etcd did not open the watch within {self.timeout:g}s") from None

            async def rest() -> AsyncIterator[Any]:
                yield first
                async for more in responses:
                    yield more

            async for response in rest():
                if response.compact_revision:
                    raise Compacted(start_revision, int(response.compact_revision))
                if response.canceled:
                    raise Unavailable(f"etcd cancelled the watch: {response.cancel_reason}")
                if not response.events:
                    if not response.created:
                        yield StorageEvent("PROGRESS", "", None, None, int(response.header.revision), False)
                    continue
                for event in response.events:
                    kv = event.kv
                    prev = decode(event.prev_kv.value, event.prev_kv.mod_revision) if prev_kv and event.prev_kv.key \
                        else None
                    if event.type == aetcd.rpc.Event.PUT:
                        yield StorageEvent("PUT", kv.key.decode(), decode(kv.value, kv.mod_revision), prev,
                                           kv.mod_revision, kv.create_revision == kv.mod_revision, len(kv.value))
                    else:
                        yield StorageEvent("DELETE", kv.key.decode(), None, prev, kv.mod_revision, False)
            raise Unavailable("etcd ended the watch stream")
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.CANCELLED:
                # The channel was closed under the stream (a failover's backstop, or Storage.close): the
                # reader hears etcd is unavailable and watches again, on the current connection.
                raise Unavailable("the watch's connection to etcd was closed") from None
            raise Unavailable(exc.details() or str(exc.code())) from exc
        finally:
            call.cancel()

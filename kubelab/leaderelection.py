"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's tools/leaderelection runs it.

Several replicas of a component (`kubelab scheduler`, `kubelab controllers`) campaign for one Lease
(`kube-system/kube-scheduler`, `kube-system/kube-controller-manager`); the one whose identity the Lease
holds acts, the others wait. The Lease's resourceVersion is the fence between candidates: every
acquire, renew and release is a PUT of the object last read, so of two replicas racing for an expired
Lease exactly one write lands and the other gets 409 Conflict (the API server compares etcd's
mod_revision).

What client-go does and this module does the same way:
- A candidate trusts no timestamp written by another machine: it takes over only once it has watched
  the record stay unchanged for leaseDuration by its own clock (`observed_at`), or the holder is empty
  (a released Lease).
- The leader renews every retryPeriod, first optimistically with the object it last wrote (no GET),
  then by the slow path (GET, then PUT); it gives up when no renewal has succeeded for renewDeadline.
- Acquiring is retried every retryPeriod with client-go's jitter (JitterFactor 1.2).
- On a clean stop (ReleaseOnCancel) the leader, once its work has stopped, writes the Lease back with
  no holder and leaseDurationSeconds 1, so a standby takes over at its next try instead of after 15 s.

What kubelab adds, because kube's guarantee is weaker than kubelab's: client-go's elector "does not
guarantee that only one client is acting as a leader" (its package comment); kube-scheduler and
kube-controller-manager exit when renewing fails, but a paused process (SIGSTOP, a long GC, a frozen
VM) wakes up with its writes already queued. Here the component's API client asks `check()` before
every write: a write is sent only while the last successful renewal started less than renewDeadline
ago by this process's monotonic clock. Another candidate can take over no sooner than leaseDuration
after it observed that renewal, which was after the renewal started; so every write a leader sends
leaves at least leaseDuration - renewDeadline (5 s) before anyone else may lead. A write that was
checked and then held up longer than that between the check and the socket (a pause landing in that
instant) is the one case not covered; the API server's own preconditions (a pod already bound is 409,
updates carry a resourceVersion) catch most of those.

When the Lease is lost the component's task is cancelled and awaited, and the replica campaigns again
with a fresh component (fresh informers, a fresh queue): the same clean slate kube gets by exiting and
being restarted by the kubelet, without needing anything to restart the process.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import pydantic

from . import kinds, models, timeutil
from .client import ApiClient, ApiError, NotFound, TransportError
from .events import EventRecorder

log = logging.getLogger(__name__)

# client-go's JitterFactor: acquire retries wait retryPeriod plus up to 1.2 x retryPeriod more.
JITTER_FACTOR = 1.2

# The defaults of kube-scheduler's and kube-controller-manager's --leader-elect-* flags.
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
LEASE_NAMESPACE = "kube-system"
SCHEDULER_LEASE = "kube-scheduler"
CONTROLLER_MANAGER_LEASE = "kube-controller-manager"


# What a try at the Lease may fail with and be tried again after: the API's answer, the transport
# (the client's TransportError), a timeout, a body that is not a Lease.
TRY_ERRORS = (ApiError, TransportError, TimeoutError, OSError, pydantic.ValidationError)


class NotLeading(Exception):
    """A write was about to be sent by a replica that does not (or may no longer) hold the Lease."""


@dataclass(frozen=True)
class Record:
    """client-go's LeaderElectionRecord: the part of a Lease's spec the election reads and writes."""
    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int = 0

    @classmethod
    def of(cls, lease: models.Lease) -> Record:
        spec = lease.spec or models.LeaseSpec()
        return cls(spec.holder_identity or "", spec.lease_duration_seconds or 0, spec.acquire_time,
                   spec.renew_time, spec.lease_transitions or 0)

    def spec(self) -> models.LeaseSpec:
        return models.LeaseSpec(holder_identity=self.holder_identity,
                                lease_duration_seconds=self.lease_duration_seconds,
                                acquire_time=self.acquire_time, renew_time=self.renew_time,
                                lease_transitions=self.lease_transitions)


@dataclass(frozen=True)
class Config:
    """One election: the Lease it is for, who campaigns, and client-go's three durations (seconds)."""
    namespace: str
    name: str
    identity: str
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    release_on_cancel: bool = True

    @property
    def description(self) -> str:
        return f"{self.namespace}/{self.name}"


def config_errors(lease_duration: float, renew_deadline: float, retry_period: float) -> list[str]:
    """NewLeaderElector's checks, in its words (a leader must be able to retry renewing at least once
    before its deadline, and give up before others may take over)."""
    errors = []
    if lease_duration <= renew_deadline:
        errors.append("leaseDuration must be greater than renewDeadline")
    if renew_deadline <= JITTER_FACTOR * retry_period:
        errors.append("renewDeadline must be greater than retryPeriod*JitterFactor")
    for name, value in (("leaseDuration", lease_duration), ("renewDeadline", renew_deadline),
                        ("retryPeriod", retry_period)):
        if value <= 0:
            errors.append(f"{name} must be greater than zero")
    return errors


def new_identity() -> str:
    """`<hostname>_<uuid>`, as kube-scheduler and kube-controller-manager form theirs: unique per process,
    so a restarted replica is a new candidate, not the old leader come back."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def next_record(current: Record, *, identity: str, leading: bool, lease_duration: float, now: str) -> Record:
    """The record a candidate writes to acquire, or the leader to renew (tryAcquireOrRenew's step 4):
    the leader keeps acquireTime and leaseTransitions; a new holder counts one more transition. Pure."""
    if leading:
        return Record(identity, int(lease_duration), current.acquire_time, now, current.lease_transitions)
    return Record(identity, int(lease_duration), now, now, current.lease_transitions + 1)


def held_by_other(observed: Record, *, identity: str, observed_at: float, now: float) -> bool:
    """Whether another holder's Lease is still valid by our own clock: its record has changed less than
    its leaseDurationSeconds ago as we saw it (client-go's isLeaseValid; never the timestamps written in
    it, which come from another machine's clock). An empty holder is a released Lease. Pure."""
    if not observed.holder_identity or observed.holder_identity == identity:
        return False
    return observed_at + observed.lease_duration_seconds > now


class LeaderElector:
    """Campaigns for one Lease through `api` (a client of its own: the component's client has this
    elector's `check` as its write fence, which the Lease's own writes must not pass through)."""

    def __init__(self, api: ApiClient, config: Config, *, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = timeutil.now, rng: random.Random | None = None) -> None:
        self.api = api
        self.config = config
        self._clock = clock
        self._wall = wall
        self._rng = rng or random.Random()
        self._lease: models.Lease | None = None  # the object last read or written (its resourceVersion)
        self._observed = Record()
        self._observed_at = 0.0
        self._renew_started: float | None = None  # when the last successful acquire/renew was sent
        self._leading = False
        self.transitions_seen = 0  # leaderships this replica has won (for logs and tests)

    # --- the fence ----------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        return self._observed.holder_identity == self.config.identity

    @property
    def leader(self) -> str:
        """The identity last seen holding the Lease ("" before any was seen)."""
        return self._observed.holder_identity

    def leading(self) -> bool:
        """Whether this replica may act now: it holds the Lease and its last successful renewal started
        less than renewDeadline ago (so nobody else can have taken it over yet)."""
        started = self._renew_started
        return (self._leading and started is not None
                and self._clock() < started + self.config.renew_deadline)

    def check(self) -> None:
        """The write fence: raises NotLeading unless `leading()`. The component's ApiClient calls it
        before each write it sends."""
        if not self.leading():
            raise NotLeading(f"not the holder of lease {self.config.description} (or its renewal is overdue): "
                             "write not sent")

    # --- one try ------------------------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """client-go's tryAcquireOrRenew: True when this replica holds the Lease afterwards."""
        started = self._clock()
        now = timeutil.rfc3339_micro(self._wall())
        identity, duration = self.config.identity, self.config.lease_duration
        # 1. The leader's fast path: update the object it last wrote, without reading it first.
        if self.is_leader() and self._lease is not None and \
                self._observed_at + self._observed.lease_duration_seconds > started:
            record = next_record(self._observed, identity=identity, leading=True, lease_duration=duration, now=now)
            try:
                await self._update(self._lease, record, started)
                return True
            except ApiError as exc:
                log.info("failed to update lease %s optimistically: %s, falling back to slow path",
                         self.config.description, exc)
        # 2. Read it, or create it.
        try:
            lease = await self.api.get(kinds.LEASES, self.config.name, self.config.namespace)
        except NotFound:
            # A new Lease starts at 0 transitions (client-go's Create path counts none).
            record = Record(identity, int(duration), now, now, 0)
            body = models.Lease(metadata=models.ObjectMeta(name=self.config.name, namespace=self.config.namespace),
                                spec=record.spec())
            try:
                self._lease = await self.api.create(kinds.LEASES, body)
            except ApiError as exc:  # AlreadyExists: another candidate created it first
                log.info("error initially creating leader election record %s: %s", self.config.description, exc)
                return False
            self._observe(record, started, renewed=True)
            return True
        # 3. A changed record restarts the clock it is judged by.
        self._lease = lease
        current = Record.of(lease)
        if current != self._observed:
            self._observe(current, self._clock(), renewed=False)
        if held_by_other(self._observed, identity=identity, observed_at=self._observed_at, now=started):
            return False
        # 4. Take it (or renew it on the slow path); the resourceVersion just read is the fence.
        record = next_record(current, identity=identity, leading=self.is_leader(), lease_duration=duration, now=now)
        try:
            await self._update(lease, record, started)
        except ApiError as exc:  # 409: another candidate wrote first
            log.info("failed to update lease %s: %s", self.config.description, exc)
            return False
        return True

    async def _update(self, lease: models.Lease, record: Record, started: float) -> None:
        lease = lease.model_copy(update={"spec": record.spec()})
        self._lease = await self.api.update(kinds.LEASES, lease)
        self._observe(record, started, renewed=True)

    def _observe(self, record: Record, at: float, *, renewed: bool) -> None:
        self._observed, self._observed_at = record, at
        if renewed:
            self._renew_started = at

    async def _try(self, deadline: float | None) -> bool:
        """One try, bounded by `deadline` (monotonic) when given; any failure is a False."""
        try:
            if deadline is None:
                return await self.try_acquire_or_renew()
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + (deadline - self._clock())):
                return await self.try_acquire_or_renew()
        except TRY_ERRORS as exc:
            log.info("lease %s: %s: %s", self.config.description, type(exc).__name__, exc)
            return False

    # --- the loops ----------------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Try at once, then every retryPeriod (+ jitter) until this replica holds the Lease."""
        log.info("attempting to acquire leader lease %s as %s...", self.config.description, self.config.identity)
        reported = None
        while True:
            if await self._try(None):
                self._leading = True
                self.transitions_seen += 1
                log.info("successfully acquired lease %s", self.config.description)
                await self._record_event("became leader")
                return
            if self._observed.holder_identity != reported:
                reported = self._observed.holder_identity
                log.info("lease %s is held by %s", self.config.description, reported or "nobody")
            period = self.config.retry_period
            await asyncio.sleep(period + self._rng.random() * JITTER_FACTOR * period)

    async def _record_event(self, what: str) -> None:
        """The LeaseLock's RecordEvent: a Normal LeaderElection event on the Lease, "<identity> became
        leader" (best effort, as every event). kube also records "stopped leading"; here a replica that
        lost its Lease writes nothing at all, so that one is not sent."""
        if self._lease is not None:
            await EventRecorder(self.api, self.config.name).post(self._lease, "Normal", "LeaderElection",
                                                                 f"{self.config.identity} {what}")

    async def renew(self) -> None:
        """Renew every retryPeriod; return once no renewal has succeeded for renewDeadline."""
        while True:
            await asyncio.sleep(self.config.retry_period)
            while True:
                started = self._renew_started
                assert started is not None
                deadline = started + self.config.renew_deadline
                if self._clock() >= deadline:
                    self._leading = False
                    log.warning("failed to renew lease %s: timed out waiting for the condition",
                                self.config.description)
                    return
                if await self._try(deadline) and self.is_leader():
                    break
                if not self.is_leader():  # someone else holds it now
                    self._leading = False
                    log.warning("lease %s was taken by %s", self.config.description, self.leader)
                    return
                await asyncio.sleep(min(self.config.retry_period, max(deadline - self._clock(), 0)))

    async def release(self) -> None:
        """ReleaseOnCancel: hand the Lease back (no holder, leaseDurationSeconds 1) if we still hold it."""
        if not self.is_leader() or self._lease is None:
            return
        now = timeutil.rfc3339_micro(self._wall())
        record = Record("", 1, now, now, self._observed.lease_transitions)
        try:
            await asyncio.wait_for(self._update(self._lease, record, self._clock()), self.config.renew_deadline)
            log.info("released lease %s", self.config.description)
        except TRY_ERRORS as exc:
            log.warning("failed to release lease %s: %s", self.config.description, exc)

    async def run(self, lead: Callable[[], Awaitable[None]]) -> bool:
        """One term: acquire, run `lead()` while renewing. Returns False when the Lease was lost (the
        lead was cancelled and has stopped); True when `lead()` returned. Cancelled (a clean stop), the
        lead is stopped first and the Lease released after, as ReleaseOnCancel asks."""
        self._leading = False
        await self.acquire()
        work = asyncio.create_task(_call(lead), name=f"lead-{self.config.name}")
        renewing = asyncio.create_task(self.renew(), name=f"renew-{self.config.name}")
        try:
            await asyncio.wait({work, renewing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost = renewing.done() and not renewing.cancelled()
            if lost or not work.done():
                self._leading = False  # the fence closes before anything else happens
            for task in (work, renewing):
                task.cancel()
            results = await asyncio.gather(work, renewing, return_exceptions=True)
            if not lost and self.config.release_on_cancel:
                await asyncio.shield(self.release())
        if lost:
            log.warning("leaderelection lost: %s stopped acting", self.config.description)
            return False
        error = results[0]
        if isinstance(error, NotLeading):
            return False
        if isinstance(error, BaseException):
            raise error
        return True

    async def campaign(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Lead whenever elected, forever: a lost term is followed by a new candidacy (and a fresh
        `lead()`); `lead()` returning ends the campaign."""
        while not await self.run(lead):
            self._lease = None  # read it again: the next holder has written since


async def _call(lead: Callable[[], Awaitable[None]]) -> None:
    await lead()


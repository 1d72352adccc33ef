"""Holding the Service's Lease for the length of a command: take it, renew it, give it back.

The rules are in `lease_rules`; this module tells the story with the cluster adapter. Every write is a
compare-and-swap on the Lease's resourceVersion, so two Jobs racing for a free Lease cannot both win.
Renewal runs in a named background task; if another holder ever takes the Lease from us (we were
paused longer than its duration), `Held.lost` is set and the caller must not commit. Called by the
phases that write (postsync, run, rollback).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import Any

import structlog

from cutover.core.clock import Now
from cutover.errors import ClusterConflict, ClusterError, LockHeld
from cutover.kube import lease_rules
from cutover.kube.cluster import Cluster
from cutover.kube.lease_rules import LeaseView

log = structlog.get_logger("cutover")


@dataclasses.dataclass
class Held:
    namespace: str
    lease: LeaseView
    lost: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


def _micro(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _spec(me: str | None, now: datetime, previous: LeaseView | None, *, duration: float) -> dict[str, Any]:
    changed = previous is None or previous.holder != me
    spec: dict[str, Any] = {"holderIdentity": me, "leaseDurationSeconds": int(duration), "renewTime": _micro(now),
                            "leaseTransitions": (previous.transitions if previous else 0) + (1 if changed else 0)}
    if changed:
        spec["acquireTime"] = _micro(now)
    return spec


@contextlib.asynccontextmanager
async def hold(cluster: Cluster, *, namespace: str, service: str, me: str, now: Now,
               annotations: Mapping[str, str] | None = None) -> AsyncIterator[Held]:
    """`now()` gives wall-clock time that follows the event loop (clock.Clock.now)."""
    held = await _take(cluster, namespace=namespace, name=lease_rules.lease_name(service), me=me, now=now,
                       annotations=annotations or {})
    renewer = asyncio.create_task(_renew(cluster, held, me=me, now=now), name=f"renew lease {held.lease.name}")
    try:
        yield held
    finally:
        renewer.cancel()
        try:
            await asyncio.gather(renewer, return_exceptions=True)
        finally:  # a SIGTERM that lands as the block ends arrives in the await above: give the Lease back anyway
            await _release(cluster, held, now=now)


async def _take(cluster: Cluster, *, namespace: str, name: str, me: str, now: Now,
                annotations: Mapping[str, str]) -> Held:
    loop = asyncio.get_running_loop()
    watch: lease_rules.Watch | None = None
    told: lease_rules.Watch | None = None  # the watch whose wait was last logged
    gone: dict[str, bool] = {}  # holder -> whether its pod is gone, read once per holder
    while True:
        current = await cluster.lease(namespace, name)
        watch = lease_rules.observe(watch, current, now=loop.time())
        holder = current.holder if current else None
        if holder and holder != me and holder not in gone:
            gone[holder] = await _holder_gone(cluster, holder)
        verdict = lease_rules.judge(current, me=me, watch=watch, now=loop.time(),
                                    holder_gone=gone.get(holder or "", False))
        if verdict is lease_rules.Verdict.HELD:
            raise _held(current, namespace=namespace, now=now())
        if verdict is lease_rules.Verdict.WAIT:
            assert current is not None
            left = current.duration - watch.age(loop.time())
            if told is not watch:  # once per renewTime seen: what we wait for, and for how long at most
                told = watch
                log.info("lock.waiting", lease=name, holder=holder, expires_in=round(left, 1),
                         then="take it unless it is renewed meanwhile")
            await asyncio.sleep(min(lease_rules.POLL, left))
            continue
        if verdict is lease_rules.Verdict.TAKE_OVER:
            log.warning("lock.taken_over", lease=name, holder=holder, reason="its pod is gone or has ended")
        kept = {**(current.annotations if current else {}), **annotations}
        try:
            spec = _spec(me, now(), current, duration=lease_rules.DURATION)
            taken = await cluster.write_lease(namespace, name, spec=spec,
                                              annotations=kept, previous=current)
        except ClusterConflict:
            await asyncio.sleep(0)  # someone wrote it between our read and write: read and judge again
            continue
        log.info("lock.acquired", lease=name, holder=me)
        return Held(namespace, taken)


async def _holder_gone(cluster: Cluster, holder: str) -> bool:
    """Whether the holder is a pod that no longer exists or has ended (restartPolicy Never: its process is over).
    A holder that is no pod, or a pod we may not read, is judged by its renewals alone."""
    where = lease_rules.holder_pod(holder)
    if where is None:
        return False
    try:
        pod = await cluster.pod(*where)
    except ClusterError as exc:
        log.info("lock.holder_unknown", holder=holder, error=exc.message)
        return False
    return pod is None or pod.phase in ("Succeeded", "Failed")


async def confirm(cluster: Cluster, held: Held) -> None:
    """Right before a write: the Lease, read again now, is still ours (a renewal may not have run for 20 s)."""
    current = await cluster.lease(held.namespace, held.lease.name)
    if held.lost.is_set() or current is None or current.holder != held.lease.holder:
        held.lost.set()
        raise LockHeld(f"the Service's Lease was taken over during the cutover (held by "
                       f"{current.holder if current else 'nobody'} now)", cause="lock_lost",
                       hint="another cutover runs now; this one committed nothing")


def _held(current: LeaseView | None, *, namespace: str, now: datetime) -> LockHeld:
    assert current is not None
    assert current.renewed is not None  # judge() says HELD only for a renewed Lease
    quiet = (now - current.renewed).total_seconds()
    pod = lease_rules.holder_pod(current.holder)  # a Job's pod: its namespace is where its Job is
    jobs = f"kubectl -n {pod[0]} get jobs" if pod is not None else "kubectl get jobs in cutover's namespace"
    return LockHeld(f"another cutover holds Lease {namespace}/{current.name}: {current.holder}, renewed "
                    f"{quiet:.0f}s ago while we watched", hint=f"wait for {current.holder} to finish "
                    f"({jobs}); the Lease frees itself {lease_rules.DURATION}s after its holder stops")


async def _renew(cluster: Cluster, held: Held, *, me: str, now: Now) -> None:
    while True:
        await asyncio.sleep(lease_rules.RENEW_EVERY)
        try:
            held.lease = await cluster.write_lease(held.namespace, held.lease.name,
                                                   spec=_spec(me, now(), held.lease, duration=lease_rules.DURATION),
                                                   annotations=held.lease.annotations, previous=held.lease)
        except ClusterConflict:
            current = await cluster.lease(held.namespace, held.lease.name)
            if current is None or current.holder != me:
                held.lost.set()
                log.error("lock.lost", lease=held.lease.name, holder=current.holder if current else None,
                          cause="lock_lost", hint="another cutover took over; this one must not commit")
                return
            held.lease = current
        except ClusterError as exc:  # keep trying: the Lease only expires after a whole duration
            log.warning("lock.renew_failed", lease=held.lease.name, error=exc.message)


RELEASE_BUDGET = 5.0  # seconds for giving the Lease back at the end: within the exit bound (docs/guarantees.md #7)


async def _release(cluster: Cluster, held: Held, *, now: Now) -> None:
    if held.lost.is_set():
        return
    try:
        async with asyncio.timeout(RELEASE_BUDGET):  # an API that stopped answering would hold the exit
            await _give_back(cluster, held, now=now)
    except TimeoutError:
        log.warning("lock.release_failed", lease=held.lease.name,
                    error=f"no answer within {RELEASE_BUDGET:g}s; the Lease expires by itself")
    except ClusterError as exc:  # best effort: it expires by itself
        log.warning("lock.release_failed", lease=held.lease.name, error=exc.message)


async def _give_back(cluster: Cluster, held: Held, *, now: Now) -> None:
    for _ in range(3):  # a renewal cut short may have moved the Lease past the version we know
        current = await cluster.lease(held.namespace, held.lease.name)
        if current is None or current.holder != held.lease.holder:
            return
        try:
            await cluster.write_lease(held.namespace, held.lease.name, spec=_spec(None, now(), current, duration=1),
                                      annotations=current.annotations, previous=current)
        except ClusterConflict:
            continue
        log.info("lock.released", lease=held.lease.name)
        return


VERIFIED = "cutover.dev/verified"  # the cutover commit whose switch was last verified through the Service
HOLD_LIFTED = "cutover.dev/hold-lifted"  # the rollback commit whose hold a change of the plan's target ended
RETIRE_AT = "cutover.dev/retire-at"  # handoff.retire: when the backend that switch left is retired (docs/capacity.md)


async def annotate(cluster: Cluster, *, namespace: str, service: str, notes: Mapping[str, str]) -> None:
    """Add `notes` to the Service's Lease annotations (they outlive each holder), compare-and-swap, keeping the
    holder and its renewals as they are; best effort (Slack threads, the verified mark: never an outcome)."""
    name = lease_rules.lease_name(service)
    for _ in range(3):
        try:
            current = await cluster.lease(namespace, name)
            spec: dict[str, Any] = {"holderIdentity": None, "leaseDurationSeconds": 1}
            if current is not None:
                spec = {"holderIdentity": current.holder, "leaseDurationSeconds": int(current.duration),
                        "leaseTransitions": current.transitions}
                if current.renewed:
                    spec["renewTime"] = _micro(current.renewed)
            await cluster.write_lease(namespace, name, spec=spec,
                                      annotations={**(current.annotations if current else {}), **notes},
                                      previous=current)
            return
        except ClusterConflict:
            continue
        except ClusterError as exc:
            log.info("lease.note_failed", lease=name, error=exc.message)  # info: never a Slack message of its own
            return


async def notes(cluster: Cluster, *, namespace: str, service: str) -> dict[str, str]:
    """The Service's Lease annotations, or none when it cannot be read."""
    try:
        current = await cluster.lease(namespace, lease_rules.lease_name(service))
    except ClusterError:
        return {}
    return dict(current.annotations) if current else {}


@dataclasses.dataclass(frozen=True)
class Notes:
    """The Service's Lease annotations as a small store that outlives each holder, for a wing that keeps something
    for the next hook Job (the Slack thread store) without knowing the Lease: `read` and `add`, both best effort."""

    cluster: Cluster
    namespace: str
    service: str

    async def read(self) -> dict[str, str]:
        return await notes(self.cluster, namespace=self.namespace, service=self.service)

    async def add(self, values: Mapping[str, str]) -> None:
        await annotate(self.cluster, namespace=self.namespace, service=self.service, notes=values)

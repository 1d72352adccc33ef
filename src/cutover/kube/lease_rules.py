"""One cutover per Service at a time: the decisions about its `coordination.k8s.io` Lease. Pure.

The Lease is held by one process (its identity: `<namespace>/<pod>#<nonce>` in a Job, host and pid elsewhere), renewed
every third of its duration and given back at the end. A holder that was killed (SIGKILL, OOM, node loss)
gives nothing back, so a re-run must tell a dead holder from a live one without trusting clocks:

- a holder that is a pod which no longer exists or has ended is gone: take the Lease over at once;
- a holder seen renewing while we watch is alive: exit 8 (another cutover runs);
- otherwise the Lease expires one `leaseDurationSeconds` after we first saw its current renewTime, on our
  own clock: client-go's leader election judges expiry the same way (observedTime + leaseDuration), because
  the holder's renewTime was written by another machine's clock.

Called by `lease`, with `cluster` doing the reads and compare-and-swap writes.
"""

from __future__ import annotations

import dataclasses
import enum
from datetime import datetime

from cutover.core.views import LeaseView

__all__ = ["DURATION", "POLL", "RENEW_EVERY", "LeaseView", "Verdict", "Watch", "holder_pod", "judge",
           "lease_name", "observe"]

DURATION = 60  # seconds a Lease lives without renewal
RENEW_EVERY = DURATION / 3
POLL = 5.0  # seconds between reads of a Lease we wait on: a live holder shows a renewal within RENEW_EVERY


class Verdict(enum.Enum):
    TAKE = "take"  # free, ours, or expired on our clock: write ourselves in (compare-and-swap)
    TAKE_OVER = "take_over"  # the holder's pod is gone or has ended: it will never renew or give it back
    WAIT = "wait"  # not renewed since we first saw it: watch until it renews (HELD) or expires (TAKE)
    HELD = "held"  # renewed while we watched: a live cutover holds it, exit 8


@dataclasses.dataclass(frozen=True)
class Watch:
    """What we have seen of the Lease, on our own monotonic clock: the holder and renewTime we saw, since when,
    and whether that holder renewed while we watched."""

    holder: str | None
    renewed: datetime | None
    since: float
    renewals: int = 0

    def age(self, now: float) -> float:
        return now - self.since


def observe(previous: Watch | None, lease: LeaseView | None, *, now: float) -> Watch:
    """The watch after reading `lease` at monotonic time `now`."""
    holder, renewed = (lease.holder, lease.renewed) if lease else (None, None)
    if previous is not None and (previous.holder, previous.renewed) == (holder, renewed):
        return previous
    same_holder = previous is not None and holder is not None and previous.holder == holder
    return Watch(holder, renewed, now, previous.renewals + 1 if same_holder and previous else 0)


def judge(lease: LeaseView | None, *, me: str, watch: Watch, now: float, holder_gone: bool = False) -> Verdict:
    if lease is None or not lease.holder or lease.holder == me:
        return Verdict.TAKE
    if holder_gone:
        return Verdict.TAKE_OVER
    if watch.renewals:
        return Verdict.HELD
    if watch.age(now) >= lease.duration:
        return Verdict.TAKE
    return Verdict.WAIT


def holder_pod(identity: str | None) -> tuple[str, str] | None:
    """(namespace, pod) of a holder identity written by a Job's pod (`<namespace>/<pod>#<nonce>`, or without the
    nonce as older releases wrote it); None for any other holder."""
    namespace, slash, pod = (identity or "").partition("#")[0].partition("/")
    return (namespace, pod) if slash and namespace and pod and "/" not in pod else None


def lease_name(service: str) -> str:
    """`cutover-<service>`, within the 253 characters of an object name."""
    return f"cutover-{service}"[:253]

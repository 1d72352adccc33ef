"""One cutover per Service at a time: the decisions about its `coordination.k8s.io` Lease. Pure.

The Lease is held by one Job pod (its identity), renewed every third of its duration, and free for
anyone once it has not been renewed for a whole duration: a holder that ArgoCD deleted mid-run stops
renewing, so its Lease expires by itself. A re-run finds a Lease whose holder has gone quiet and waits
for it to expire rather than failing; a Lease renewed recently belongs to a live cutover: exit 8.
Called by the phases, with `cluster` doing the reads and compare-and-swap writes.
"""

from __future__ import annotations

import enum
from datetime import datetime

from cutover.views import LeaseView

__all__ = ["DURATION", "RENEW_EVERY", "LeaseView", "Verdict", "judge", "lease_name"]

DURATION = 60  # seconds a Lease lives without renewal
RENEW_EVERY = DURATION / 3


class Verdict(enum.Enum):
    TAKE = "take"  # free, expired or ours: write ourselves in (compare-and-swap)
    WAIT = "wait"  # the holder went quiet: it expires soon, then take it
    HELD = "held"  # a live cutover holds it: exit 8


def judge(lease: LeaseView | None, *, me: str, now: datetime) -> Verdict:
    if lease is None or not lease.holder or lease.holder == me:
        return Verdict.TAKE
    expires = lease.expires()
    if expires is None or expires <= now:
        return Verdict.TAKE
    quiet = (now - lease.renewed).total_seconds() if lease.renewed else lease.duration
    return Verdict.WAIT if quiet > 2 * RENEW_EVERY else Verdict.HELD


def lease_name(service: str) -> str:
    """`cutover-<service>`, within the 253 characters of an object name."""
    return f"cutover-{service}"[:253]

"""The commit gate: docs/guarantees.md #1 as one pure rule, asked right before every write of a selector.

A selector may be committed only if it picks at least `minReadyPods` Ready pods that proved every served name
within the last 60 s, and none of another backend's pods. The phases list the pods the selector picks just
before the write (one request) and ask `judge`; a proof that went stale, or pods that stopped being Ready since,
mean "prove again"; a pod of another backend is final. Used by `phases._advance`; driven through random
histories by tests/core/test_invariants.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime

from cutover.core.views import PodView

__all__ = ["FRESH", "Verdict", "foreign", "judge"]

FRESH = 60.0  # seconds a proof stays good enough to commit on (docs/guarantees.md #1)


@dataclasses.dataclass(frozen=True)
class Verdict:
    good: tuple[str, ...]  # Ready pods with a fresh proof
    foreign: tuple[tuple[str, str], ...]  # (pod, backend) of other backends the selector picks: final
    short: str | None  # why there are too few good pods; proving again may fix it

    @property
    def open(self) -> bool:
        return not self.foreign and self.short is None


def foreign(selected: Sequence[PodView], *, target: str,
            backends: Mapping[str, Mapping[str, str]]) -> tuple[tuple[str, str], ...]:
    """Pods the target's selector picks that belong to another backend (they match its selector)."""
    return tuple((pod.name, name) for pod in selected for name, selector in backends.items()
                 if name != target and pod.matches(selector))


def judge(selected: Sequence[PodView], *, target: str, backends: Mapping[str, Mapping[str, str]],
          proven: Mapping[str, datetime], now: datetime, min_ready: int) -> Verdict:
    """`selected`: the pods the target's selector picks now; `proven`: pod name → when it last proved every
    served name."""
    good = tuple(pod.name for pod in selected if pod.ready and not pod.deleting and pod.name in proven
                 and (now - proven[pod.name]).total_seconds() <= FRESH)
    short = None
    if len(good) < min_ready:
        ready = sum(1 for pod in selected if pod.ready and not pod.deleting)
        short = (f"{len(good)} of {ready} Ready pod(s) proved every name in the last {FRESH:.0f} s; "
                 f"{min_ready} needed")
    return Verdict(good, foreign(selected, target=target, backends=backends), short)

"""Image pulls that fail for good (a wrong name or tag, no access) or for now (a rate limit, a registry
outage, a timeout). Pure.

The kubelet reports a failing pull as `ErrImagePull`, whose message is the container runtime's error, then
`ImagePullBackOff` between retries, whose message (on kubelets before 1.33) is only `Back-off pulling image
"…"`. So the last error seen is kept per pod (`PullLog`), and a back-off whose reason was never seen is given
until the kubelet's back-off, which tops out at 300 s, must have shown an `ErrImagePull` again. The texts
matched are containerd's and CRI-O's (examples in tests/kube/test_readiness.py).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from datetime import datetime

from cutover.core.views import ContainerView, PodView

__all__ = ["NEVER", "PULLING", "UNKNOWN_FOR", "PullLog", "kind", "why"]

PULLING = ("ErrImagePull", "ImagePullBackOff")
NEVER = ("InvalidImageName", "ErrImageNeverPull")  # waiting cannot change these
UNKNOWN_FOR = 330.0  # seconds a pull may back off with no reason seen before it counts as failed

# Status codes as words only: a digest (sha256:ab503…) holds digits too.
_PERMANENT = re.compile(r"code = notfound|not found|manifest unknown|name unknown|unauthorized|\b40[13]\b|"
                        r"access denied|pull access denied|authorization failed|forbidden|invalid reference|"
                        r"no such host", re.IGNORECASE)
_TRANSIENT = re.compile(r"\b(429|50[0-4])\b|too ?many ?requests|service unavailable|bad gateway|timeout|"
                        r"timed out|deadline exceeded|connection reset|connection refused|\beof\b|temporar",
                        re.IGNORECASE)


def kind(text: str | None) -> str | None:
    """"permanent", "transient", or None when the text tells neither (a bare back-off)."""
    if not text:
        return None
    if _PERMANENT.search(text):
        return "permanent"
    if _TRANSIENT.search(text):
        return "transient"
    return None


def why(text: str, *, width: int = 160) -> str:
    """The part of a runtime's long error that says why: from the clause holding the match (the image name
    and the runtime's own framing come first and say nothing)."""
    flat = " ".join(text.split())
    found = _PERMANENT.search(flat) or _TRANSIENT.search(flat)
    if found is None:
        return flat[:width]
    start = flat.rfind(": ", 0, found.start())
    return flat[start + 2 if start >= 0 else 0:][:width]


@dataclasses.dataclass
class PullLog:
    """What a wait has seen of failing pulls, per pod: the last error that said why, and since when a pod
    has been backing off without one."""

    errors: dict[str, str] = dataclasses.field(default_factory=dict)
    unknown_since: dict[str, datetime] = dataclasses.field(default_factory=dict)

    def see(self, pods: Iterable[PodView], *, now: datetime) -> None:
        for pod in pods:
            failing = [container for container in pod.containers if container.waiting_reason in PULLING]
            for container in failing:
                if kind(container.waiting_message):
                    self.errors[pod.name] = str(container.waiting_message)
            pulled = bool(pod.containers) and all(container.started_at for container in pod.containers)
            if pulled or pod.name in self.errors:
                self.unknown_since.pop(pod.name, None)
            elif failing:  # between two back-offs (ContainerCreating while the kubelet retries) it stays
                self.unknown_since.setdefault(pod.name, now)
            if pulled:
                self.errors.pop(pod.name, None)  # pulled after all: a later failure starts afresh

    def reason(self, pod: PodView, container: ContainerView) -> str | None:
        """The text that says why `container`'s pull fails: its own message, else the last one seen."""
        own = container.waiting_message
        return own if kind(own) else self.errors.get(pod.name, own)

    def unknown_for(self, pod: PodView, *, now: datetime) -> float:
        since = self.unknown_since.get(pod.name)
        return (now - since).total_seconds() if since else 0.0

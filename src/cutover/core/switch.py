"""The switch as the writer and the verification see it: what to do with the file just read (`git_step`), and
whether an applied switch checks out through the Service (`switch_problems`, and when to look again). Pure;
called by the writer and the verification."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence

from cutover.core.proofs import PodProof
from cutover.core.trailers import Trailers
from cutover.core.views import ServiceView


class GitStep(enum.Enum):
    ALREADY = "already"  # Git holds the target selector: nothing to write (docs/guarantees.md #5)
    WRITE = "write"  # Git holds another backend's selector: write ours
    FOREIGN = "foreign"  # Git holds a selector that is no backend of the plan: someone else's change


def git_step(current: Mapping[str, str], *, target: Mapping[str, str], known: Sequence[Mapping[str, str]]) -> GitStep:
    """What the writer does with the file it just read."""
    if dict(current) == dict(target):
        return GitStep.ALREADY
    if any(dict(current) == dict(selector) for selector in known):
        return GitStep.WRITE
    return GitStep.FOREIGN


@dataclasses.dataclass(frozen=True)
class SwitchProblems:
    """What is wrong with an applied switch: `final` (a re-created Service, a new ClusterIP) cannot be waited
    away; `endpoints` (the EndpointSlices are not the target's Ready pods) may settle within seconds."""

    final: tuple[str, ...] = ()
    endpoints: str | None = None

    def __bool__(self) -> bool:
        return bool(self.final or self.endpoints)

    def messages(self) -> list[str]:
        return [*self.final, *([self.endpoints] if self.endpoints else [])]


def switch_problems(trailers: Trailers, live: ServiceView, *, ready: set[str], serving: set[str]) -> SwitchProblems:
    """The applied switch against the cutover commit's trailers (recorded before the switch) and the
    endpoints: the same Service object, and endpoints that are exactly the target's Ready pods."""
    final = []
    if trailers.service_uid and trailers.service_uid != live.uid:
        final.append(f"the Service was re-created (uid {live.uid}, was {trailers.service_uid})")
    if trailers.cluster_ip and trailers.cluster_ip != live.cluster_ip:
        final.append(f"the ClusterIP changed to {live.cluster_ip} (was {trailers.cluster_ip})")
    endpoints = None
    if serving != ready or not ready:
        endpoints = f"EndpointSlices serve {sorted(serving)}, the target's Ready pods are {sorted(ready)}"
    return SwitchProblems(tuple(final), endpoints)


def look_again(problems: SwitchProblems, *, now: float, deadline: float, poll: float) -> bool:
    """The endpoint-finality rule: only endpoints that differ are looked at again (the EndpointSlice
    controller rewrites the slices seconds after it sees the selector change), and only while time is left."""
    return bool(problems.endpoints) and not problems.final and now + poll <= deadline


def retry_through_service(proof: PodProof, *, now: float, deadline: float, retry_in: float) -> bool:
    """A proof through the Service is tried again only when every problem may pass (kube-proxy may trail the
    EndpointSlice) and the next try still falls within the window."""
    return not proof.ok and all(problem.retryable for problem in proof.problems) and now + retry_in <= deadline

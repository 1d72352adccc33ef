"""The startup-probe timeline and the fail-fast classification of pod states. Pure: no I/O, no clock.

A model server may take up to its startupProbe's budget to come up (initialDelaySeconds +
failureThreshold × periodSeconds, counted from container start; 120 × 15 s = 30 min in the reference
scenario). `assess()` looks at a snapshot of the target pods at a given instant and says: ready, keep
waiting (with progress figures and when to look again), or failed (with a cause code and a hint).
Called by `wait` on every watch event and every progress tick; `after_failed_proof` is its rule for a proof
that met a problem (fail now, ask the NetworkPolicies, or try again), `after_capacity` for a pod the scheduler
could not place.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from cutover.core.proofs import PodProof, Problem
from cutover.core.views import ContainerView, PodView
from cutover.kube import capacity, image_pulls

# The kubelet's own defaults for an unset field of a probe are in views.Probe.
NO_POD_GRACE = 120.0  # seconds to wait for a first pod matching the selector to appear
MAX_RESTARTS = 2  # container restarts during the wait before we stop hoping
PROGRESS_EVERY = 30.0  # seconds between `target.waiting` progress events

_CONFIG_REASONS = ("CreateContainerConfigError", "CreateContainerError")


@dataclasses.dataclass(frozen=True)
class Settings:
    max_wait: float  # the ceiling from the plan's verify.maxWait (or what is left of handoff.maxGap, when shorter)
    min_ready: int = 1
    no_pod_grace: float = NO_POD_GRACE
    max_restarts: int = MAX_RESTARTS
    bound: str = "verify.maxWait"  # the plan key that set max_wait, as messages name it


@dataclasses.dataclass(frozen=True)
class Failure:
    cause: str
    message: str
    hint: str
    pod: str | None = None


@dataclasses.dataclass(frozen=True)
class PodProgress:
    name: str
    state: str  # scheduling | pulling | starting | ready | terminating
    budget_left: float | None  # seconds until its startupProbe gives up; None before container start
    probe_failures_allowed: int | None
    restarts: int
    pull_error: str | None = None  # why its image pull fails for now (a rate limit, a timeout), while we wait


@dataclasses.dataclass(frozen=True)
class Assessment:
    ready: tuple[PodView, ...]
    failure: Failure | None
    elapsed: float
    budget_left: float  # until the whole wait gives up
    pods: tuple[PodProgress, ...]

    @property
    def satisfied(self) -> bool:
        return self.failure is None and bool(self.ready)


def assess(
    pods: Iterable[PodView],
    *,
    now: datetime,
    started: datetime,
    settings: Settings,
    baseline_restarts: Mapping[str, int] | None = None,
    seen_any: bool = False,
    pulled: image_pulls.PullLog | None = None,
) -> Assessment:
    """Decide what the target pods' state means at `now`, for a wait that began at `started`; `pulled` is what
    the wait has seen of failing image pulls so far (updated by the caller)."""
    live = sorted((pod for pod in pods if not pod.deleting), key=lambda pod: pod.name)
    elapsed = (now - started).total_seconds()
    ends = _wait_deadline(live, started=started, settings=settings)
    budget_left = max(0.0, ends - elapsed)
    ready = tuple(pod for pod in live if pod.ready and pod.ip)
    pulled = pulled or image_pulls.PullLog()
    progress = tuple(_progress(pod, now, pulled) for pod in live)
    failure = _failure(live, ready, elapsed=elapsed, budget_left=budget_left, settings=settings,
                       baseline=baseline_restarts or {}, seen_any=seen_any, pulled=pulled, now=now,
                       capped=ends >= settings.max_wait)
    satisfied = len(ready) >= settings.min_ready
    return Assessment(ready=ready if satisfied else (), failure=failure if not satisfied else None,
                      elapsed=elapsed, budget_left=budget_left, pods=progress)


def _wait_deadline(pods: list[PodView], *, started: datetime, settings: Settings) -> float:
    """Seconds after `started` when the wait gives up: the latest pod's startup budget, capped."""
    if not pods:
        return min(settings.no_pod_grace, settings.max_wait)
    ends = [_pod_deadline(pod, started=started, settings=settings) for pod in pods]
    return min(max(ends), settings.max_wait)


def _pod_deadline(pod: PodView, *, started: datetime, settings: Settings) -> float:
    budgets = []
    for container in pod.containers:
        if container.started_at is None:
            return settings.max_wait  # not started yet: only the ceiling limits it
        probe_budget = container.startup_probe.budget if container.startup_probe else settings.max_wait
        budgets.append((container.started_at - started).total_seconds() + probe_budget)
    return max(budgets, default=settings.max_wait)


def _progress(pod: PodView, now: datetime, pulled: image_pulls.PullLog) -> PodProgress:
    lefts, allowed = [], []
    for container in pod.containers:
        if container.started_at is None or container.startup_probe is None:
            continue
        probe = container.startup_probe
        running = (now - container.started_at).total_seconds()
        lefts.append(probe.budget - running)
        failures = max(0, int((running - probe.initial_delay) // probe.period))
        allowed.append(max(0, probe.failure_threshold - failures))
    return PodProgress(
        name=pod.name,
        state=pod_state(pod),
        budget_left=max(0.0, min(lefts)) if lefts else None,
        probe_failures_allowed=min(allowed) if allowed else None,
        restarts=pod.restarts,
        pull_error=next((image_pulls.why(pulled.reason(pod, container) or str(container.waiting_reason))
                         for container in pod.containers if container.waiting_reason in image_pulls.PULLING), None),
    )


def pod_state(pod: PodView) -> str:
    """One word for where a pod is on its way to serving."""
    if pod.deleting:
        return "terminating"
    if pod.ready:
        return "ready"
    if pod.unschedulable_message is not None or not pod.containers:
        return "scheduling"
    if any(container.started_at is None for container in pod.containers):
        return "pulling"
    return "starting"


def _failure(
    live: list[PodView],
    ready: tuple[PodView, ...],
    *,
    elapsed: float,
    budget_left: float,
    settings: Settings,
    baseline: Mapping[str, int],
    seen_any: bool,
    pulled: image_pulls.PullLog,
    now: datetime,
    capped: bool,  # the plan's ceiling ends the wait before the pods' own startupProbe budget would
) -> Failure | None:
    for pod in live:
        failure = classify(pod, baseline_restarts=baseline.get(pod.name, 0), max_restarts=settings.max_restarts,
                           pulled=pulled, now=now)
        if failure is not None:
            return failure
    if not live and seen_any:
        return Failure(
            cause="pod_deleted",
            message="every target pod was deleted during the wait, and no replacement exists",
            hint="check who deleted it (eviction, preemption, a scale-down) with `kubectl get events`",
        )
    if budget_left > 0:
        return None
    if not live:
        return Failure(
            cause="no_target_pods",
            message=f"no pod matches the target selector after {elapsed:.0f}s",  # `wait` adds the near misses
            hint="check that the target workload is committed and synced, and that its labels match the plan",
        )
    # which limit ran out: the plan's ceiling (verify.maxWait, or what is left of handoff.maxGap), or the pods' own
    # startupProbe budget
    spent = (f"{settings.bound} ({settings.max_wait:g}s) is spent before the pods' startupProbe budget" if capped
             else "the pods' startupProbe budget (failureThreshold × periodSeconds) is spent")
    return Failure(
        cause="startup_budget_exhausted",
        message=f"{len(ready)} of {settings.min_ready} required pods Ready after {elapsed:.0f}s; {spent}",
        hint=(f"read the target pod's logs and events; raise {settings.bound} if it loads slower" if capped else
              "read the target pod's logs and events; raise startupProbe.failureThreshold if it loads slower"),
    )


def classify(pod: PodView, *, baseline_restarts: int = 0, max_restarts: int = MAX_RESTARTS,
             pulled: image_pulls.PullLog | None = None, now: datetime | None = None) -> Failure | None:
    """A state from which this pod will not become ready by waiting, or None."""
    if pod.unschedulable_message is not None:
        return Failure(
            cause="unschedulable", pod=pod.name,
            message=f"pod {pod.name} cannot be scheduled: {pod.unschedulable_message}",
            hint="free or add capacity (GPUs, memory) or fix node selectors and tolerations",
        )
    for container in pod.containers:
        failure = _container_failure(pod, container) or _pull_failure(pod, container, pulled or image_pulls.PullLog(),
                                                                      now=now)
        if failure is not None:
            return failure
    if pod.restarts - baseline_restarts > max_restarts:
        return Failure(
            cause="restarting", pod=pod.name,
            message=f"pod {pod.name} restarted {pod.restarts - baseline_restarts} times during the wait",
            hint="read `kubectl logs --previous`; a failing startupProbe also restarts the container",
        )
    return None


def _container_failure(pod: PodView, container: ContainerView) -> Failure | None:
    reason, where = container.waiting_reason, f"pod {pod.name} container {container.name}"
    detail = f": {container.waiting_message}" if container.waiting_message else ""
    if container.last_terminated_reason == "OOMKilled":
        return Failure(cause="oom_killed", pod=pod.name, message=f"{where} was OOMKilled",
                       hint="raise the memory limit, or lower the model's context or batch size")
    if reason == "CrashLoopBackOff":
        return Failure(cause="crash_loop", pod=pod.name, message=f"{where} is in CrashLoopBackOff{detail}",
                       hint=f"read `kubectl -n {pod.namespace} logs {pod.name} --previous`")
    if reason in image_pulls.NEVER:
        return Failure(cause="image_pull", pod=pod.name, message=f"{where}: {reason}{detail}", hint=_PULL_HINT)
    if reason in _CONFIG_REASONS:
        return Failure(cause="container_config", pod=pod.name, message=f"{where}: {reason}{detail}",
                       hint="a referenced Secret, ConfigMap or volume is missing")
    return None


_PULL_HINT = "check the image name and tag, and the registry credentials (imagePullSecrets)"


def _pull_failure(pod: PodView, container: ContainerView, pulled: image_pulls.PullLog, *,
                  now: datetime | None) -> Failure | None:
    """A pull that fails for good fails the wait now; one that fails for now (429, 5xx, timeouts) is waited
    through within the budget; one that only ever backs off, without a reason, after image_pulls.UNKNOWN_FOR."""
    if container.waiting_reason not in image_pulls.PULLING:
        return None
    where, reason = f"pod {pod.name} container {container.name}", container.waiting_reason
    text = pulled.reason(pod, container)
    found = image_pulls.kind(text)
    if found == "permanent":
        return Failure(cause="image_pull", pod=pod.name, message=f"{where}: {reason}: {text}", hint=_PULL_HINT)
    unknown_for = pulled.unknown_for(pod, now=now) if now is not None else 0.0
    if found is None and unknown_for >= image_pulls.UNKNOWN_FOR:
        return Failure(cause="image_pull", pod=pod.name, hint=_PULL_HINT,
                       message=f"{where}: {reason} for {unknown_for:.0f}s without a reason that passes"
                               f"{': ' + text if text else ''}")
    return None


# Seconds an unschedulable target pod that fits by the figures is waited for: the scheduler retries a pod it
# parked as soon as a pod or node changes (its unschedulable queue), so room that has just been freed is used
# within seconds; longer, and something the figures do not count keeps it off the nodes (docs/capacity.md).
CAPACITY_GRACE = 60.0


def after_capacity(failure: Failure, verdict: capacity.Verdict, *, strategy: str, waited: float,
                   source_freed: bool = False) -> Failure | None:
    """What an unschedulable pod means once capacity is judged: held by a source that is freed already is waited on
    (its pods are going); held by a running source is `capacity_held_by_source` (under strategy parallel a gap
    nobody consented to is never opened; under recreate the caller frees the source); fits now is waited on (None)
    until `waited` reaches CAPACITY_GRACE, then the scheduler's word is taken; anything else is `unschedulable` with
    the figures, or with what could not be read."""
    if verdict.held_by_source and source_freed:
        return None
    if verdict.held_by_source:
        hint = (f"strategy parallel never opens a gap nobody consented to: set handoff.strategy: bridge with "
                f"handoff.bridge (another backend that answers the names while {verdict.source} is freed), or "
                f"recreate with handoff.maxGap (the consent to a gap in service), or add capacity for "
                f"{verdict.target} (docs/capacity.md)"
                ) if strategy == "parallel" else f"free {verdict.source} first (handoff.strategy: {strategy}; " \
                                                  "docs/capacity.md)"
        return Failure(cause="capacity_held_by_source", pod=failure.pod,
                       message=f"{failure.message}; {verdict.summary()}", hint=hint)
    if verdict.fit is capacity.Fit.NOW:
        if waited < CAPACITY_GRACE:
            return None
        return dataclasses.replace(failure, message=f"{failure.message}; by requests it fits ({verdict.summary()}), "
                                                    f"yet the scheduler still refuses it after {CAPACITY_GRACE:g}s",
                                   hint="read the pod's scheduling events: topology spread, pod (anti-)affinity, "
                                        "volume binding or a scheduler plugin keeps it off the nodes that have room")
    if verdict.fit is capacity.Fit.UNKNOWN:
        return dataclasses.replace(failure, message=f"{failure.message} ({verdict.unseen})")
    return dataclasses.replace(failure, message=f"{failure.message}; {verdict.summary()}")


class ProofStep(enum.Enum):
    FAIL = "fail"  # waiting cannot help: say why, with the problem's own cause
    DIAGNOSE = "diagnose"  # a connect timeout: first ask whether a NetworkPolicy drops the packets
    RETRY = "retry"  # it may pass (still binding, 503 while loading): prove again in a moment


def worst(problems: Sequence[tuple[PodProof, Problem]]) -> tuple[PodProof, Problem]:
    """The problem that decides: a permanent one where there is one, else the first."""
    return next(((proof, problem) for proof, problem in problems if not problem.retryable), problems[0])


def retry_window(*, budget_left: float, failing_for: float | None, grace: float, wait_left: float) -> float:
    """Seconds left to retry failing proofs: what the startup budget leaves, or, while waiting (`failing_for`: how
    long the proofs have failed), at least `grace` from the first failure, since a pod Ready for days has no startup
    budget left; never past what is left of verify.maxWait. Without a wait (`failing_for` None), the budget alone."""
    if failing_for is None:
        return budget_left
    return min(max(budget_left, grace - failing_for), wait_left)


def after_failed_proof(problem: Problem, *, budget_left: float, retry_in: float, diagnosed: bool = False) -> ProofStep:
    """What a failed proof means: a permanent problem fails at once; a connect timeout is diagnosed before
    anything else; a passing problem is tried again while the budget allows another try."""
    if not problem.retryable:
        return ProofStep.FAIL
    if problem.kind == "connect_timeout" and not diagnosed:
        return ProofStep.DIAGNOSE
    return ProofStep.FAIL if budget_left <= retry_in else ProofStep.RETRY

"""The startup-probe timeline and the fail-fast rules, as tables over hand-built pod views (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cutover.core.views import ContainerView, PodView, Probe
from cutover.kube import image_pulls, readiness

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = readiness.Settings(max_wait=1800.0)


REFERENCE_PROBE = Probe(0, 15, 120)
IMAGE = "registry.example/acme/candle-vllm@sha256:4015035004290000000000000000000000000000000000000000000000000000"
# The container runtimes' own words, as the kubelet puts them in ErrImagePull (containerd 1.7 and 2.0, CRI-O).
NOT_FOUND = (f'rpc error: code = NotFound desc = failed to pull and unpack image "{IMAGE}": failed to resolve '
             f'reference "{IMAGE}": {IMAGE}: not found')
UNAUTHORIZED = (f'rpc error: code = Unknown desc = failed to pull and unpack image "{IMAGE}": failed to resolve '
                f'reference "{IMAGE}": failed to authorize: failed to fetch anonymous token: unexpected status '
                'from GET request to https://auth.example/token: 401 Unauthorized')
DENIED = ('rpc error: code = Unknown desc = failed to pull and unpack image "docker.io/acme/private:1": failed to '
          'resolve reference "docker.io/acme/private:1": pull access denied, repository does not exist or may '
          'require authorization: server message: insufficient_scope: authorization failed')
MANIFEST = ('initializing source docker://quay.io/acme/engine:v9: reading manifest v9 in quay.io/acme/engine: '
            'manifest unknown')  # CRI-O
RATE_LIMITED = (f'rpc error: code = Unknown desc = failed to pull and unpack image "{IMAGE}": failed to copy: '
                'httpReadSeeker: failed open: unexpected status code https://registry.example/v2/acme/candle-vllm/'
                'blobs/sha256:ab: 429 Too Many Requests - Server message: toomanyrequests: You have reached your '
                'pull rate limit.')
UNAVAILABLE = (f'rpc error: code = Unknown desc = failed to pull and unpack image "{IMAGE}": failed to resolve '
               f'reference "{IMAGE}": unexpected status from HEAD request to https://registry.example/v2/: '
               '503 Service Unavailable')
TIMEOUT = (f'rpc error: code = Unknown desc = failed to pull and unpack image "{IMAGE}": failed to resolve '
           f'reference "{IMAGE}": failed to do request: Head "https://registry.example/v2/": dial tcp '
           '10.0.0.9:443: i/o timeout')
RESET = ('rpc error: code = Unknown desc = failed to pull and unpack image "docker.io/library/python:3.11": failed '
         'to copy: read tcp 10.1.2.3:51234->104.16.0.1:443: read: connection reset by peer')
BACKOFF = f'Back-off pulling image "{IMAGE}"'


def pod(name: str = "p", *, started: float | None = 0.0, probe: Probe | None = REFERENCE_PROBE,
        ready: bool = False, restarts: int = 0, waiting: str | None = None, last: str | None = None,
        unschedulable: str | None = None, deleting: bool = False, message: str = "details") -> PodView:
    container = ContainerView("engine", ready=ready,
                              started_at=T0 + timedelta(seconds=started) if started is not None else None,
                              restarts=restarts, waiting_reason=waiting, waiting_message=message if waiting else None,
                              last_terminated_reason=last, startup_probe=probe)
    return PodView("ns", name, f"uid-{name}", {"app": "x"}, ip="10.0.0.1" if ready else None, ready=ready,
                   deleting=deleting, unschedulable_message=unschedulable, containers=(container,))


def at(seconds: float, *pods: PodView, settings: readiness.Settings = SETTINGS,
       **kwargs: object) -> readiness.Assessment:
    return readiness.assess(pods, now=T0 + timedelta(seconds=seconds), started=T0, settings=settings, **kwargs)


@pytest.mark.parametrize(("probe", "budget"), [
    (Probe(), 30.0),  # Kubernetes defaults: period 10 s, failureThreshold 3, no initial delay
    (Probe(0, 15, 120), 1800.0),  # the reference vLLM pod: 120 × 15 s
    (Probe(60, 10, 30), 360.0),  # an initial delay counts too
    (Probe(0, 1, 1), 1.0),
])
def test_a_probe_budget_is_delay_plus_threshold_times_period(probe: Probe, budget: float) -> None:
    assert probe.budget == budget


def test_the_wait_ends_when_the_slowest_pod_budget_ends_counted_from_its_container_start() -> None:
    late = pod(started=100.0, probe=Probe(0, 10, 30))  # started 100 s into the wait: ends at 400 s
    assert at(399, late).failure is None
    found = at(400, late)
    assert found.failure is not None and found.failure.cause == "startup_budget_exhausted"
    assert found.budget_left == 0
    assert "startupProbe budget (failureThreshold × periodSeconds) is spent" in found.failure.message
    assert "raise startupProbe.failureThreshold" in found.failure.hint  # the limit that ran out, named


def test_max_wait_caps_a_longer_probe_budget() -> None:
    capped = readiness.Settings(max_wait=600.0)
    assert at(599, pod(), settings=capped).failure is None
    failure = at(600, pod(), settings=capped).failure
    assert failure is not None and failure.cause == "startup_budget_exhausted"
    # the plan's ceiling ran out, not the probe's 30 minutes: raising failureThreshold would change nothing
    assert "verify.maxWait (600s) is spent before the pods' startupProbe budget" in failure.message
    assert "raise verify.maxWait" in failure.hint and "failureThreshold" not in failure.hint
    gap = readiness.Settings(max_wait=300.0, bound="handoff.maxGap")
    assert "raise handoff.maxGap" in at(300, pod(), settings=gap).failure.hint  # type: ignore[union-attr]


def test_a_pod_without_a_startup_probe_waits_for_the_ceiling() -> None:
    assert at(1799, pod(probe=None)).failure is None
    assert at(1800, pod(probe=None)).failure is not None


def test_a_container_not_started_yet_is_bounded_by_the_ceiling_only() -> None:
    pulling = pod(started=None)
    found = at(1000, pulling)
    assert found.failure is None and found.pods[0].state == "pulling" and found.pods[0].budget_left is None


def test_progress_counts_probe_failures_still_allowed() -> None:
    found = at(150, pod(started=0.0))
    assert found.pods[0] == readiness.PodProgress("p", "starting", 1650.0, 110, 0)
    assert found.elapsed == 150 and found.budget_left == 1650


def test_ready_pods_satisfy_the_minimum() -> None:
    two = readiness.Settings(max_wait=1800.0, min_ready=2)
    assert not at(10, pod("a", ready=True), pod("b"), settings=two).satisfied
    found = at(10, pod("a", ready=True), pod("b", ready=True), settings=two)
    assert found.satisfied and [p.name for p in found.ready] == ["a", "b"]


def test_a_terminating_pod_counts_for_nothing() -> None:
    found = at(10, pod("a", ready=True, deleting=True))
    assert not found.satisfied and found.pods == ()


@pytest.mark.parametrize(("state", "cause", "words"), [
    ({"waiting": "CrashLoopBackOff"}, "crash_loop", "is in CrashLoopBackOff: details"),
    ({"waiting": "ErrImagePull", "message": NOT_FOUND}, "image_pull", "ErrImagePull: rpc error: code = NotFound"),
    ({"waiting": "ImagePullBackOff", "message": UNAUTHORIZED}, "image_pull", "401 Unauthorized"),
    ({"waiting": "InvalidImageName"}, "image_pull", "InvalidImageName: details"),
    ({"waiting": "CreateContainerConfigError"}, "container_config", "CreateContainerConfigError"),
    ({"last": "OOMKilled", "restarts": 1}, "oom_killed", "was OOMKilled"),
    ({"unschedulable": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}, "unschedulable",
     "cannot be scheduled: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."),
    ({"restarts": 3}, "restarting", "restarted 3 times during the wait"),
])
def test_states_that_waiting_cannot_fix_fail_at_once(state: dict[str, object], cause: str, words: str) -> None:
    found = at(5, pod(**state))  # type: ignore[arg-type]
    assert found.failure is not None
    assert found.failure.cause == cause
    assert words in found.failure.message
    assert found.failure.hint and found.failure.pod == "p"


def test_restarts_count_from_the_start_of_the_wait() -> None:
    assert at(5, pod(restarts=5), baseline_restarts={"p": 4}).failure is None
    assert at(5, pod(restarts=7), baseline_restarts={"p": 4}).failure.cause == "restarting"  # type: ignore[union-attr]


def test_no_pod_at_all_gives_up_after_the_grace() -> None:
    assert at(119).failure is None
    found = at(120)
    assert found.failure is not None and found.failure.cause == "no_target_pods"


def test_every_pod_deleted_during_the_wait_fails_at_once() -> None:
    found = at(30, seen_any=True)
    assert found.failure is not None and found.failure.cause == "pod_deleted"


def test_enough_ready_pods_outweigh_a_broken_extra_one() -> None:
    found = at(30, pod("a", ready=True), pod("b", waiting="CrashLoopBackOff"))
    assert found.satisfied and found.failure is None


@pytest.mark.parametrize(("text", "expected"), [
    (NOT_FOUND, "permanent"), (UNAUTHORIZED, "permanent"), (DENIED, "permanent"), (MANIFEST, "permanent"),
    (RATE_LIMITED, "transient"), (UNAVAILABLE, "transient"), (TIMEOUT, "transient"), (RESET, "transient"),
    (BACKOFF, None), (None, None),
])
def test_a_failing_pull_is_told_permanent_or_transient(text: str | None, expected: str | None) -> None:
    assert image_pulls.kind(text) == expected  # the digest's digits (…4015035004290…) are no status code


def test_a_transient_pull_failure_is_waited_through_and_shown() -> None:
    seen = image_pulls.PullLog()
    for seconds, waiting, message in [(5, "ErrImagePull", RATE_LIMITED), (6, "ImagePullBackOff", BACKOFF),
                                      (400, "ImagePullBackOff", BACKOFF)]:
        now_pod = pod(started=None, waiting=waiting, message=message)
        seen.see([now_pod], now=T0 + timedelta(seconds=seconds))
        found = at(seconds, now_pod, pulled=seen)
        assert found.failure is None  # the back-off's own text says nothing: the 429 before it does
        assert found.pods[0].pull_error is not None and "429 Too Many Requests" in found.pods[0].pull_error


def test_a_permanent_reason_seen_before_the_back_off_fails_it_at_once() -> None:
    seen = image_pulls.PullLog()
    seen.see([pod(started=None, waiting="ErrImagePull", message=NOT_FOUND)], now=T0)
    backing_off = pod(started=None, waiting="ImagePullBackOff", message=BACKOFF)
    seen.see([backing_off], now=T0 + timedelta(seconds=1))
    found = at(1, backing_off, pulled=seen)
    assert found.failure is not None and found.failure.cause == "image_pull" and "not found" in found.failure.message


def test_a_back_off_that_never_says_why_fails_after_the_kubelets_longest_back_off() -> None:
    seen = image_pulls.PullLog()
    backing_off = pod(started=None, waiting="ImagePullBackOff", message=BACKOFF)
    seen.see([backing_off], now=T0)
    assert at(image_pulls.UNKNOWN_FOR - 1, backing_off, pulled=seen).failure is None
    found = at(image_pulls.UNKNOWN_FOR, backing_off, pulled=seen)
    assert found.failure is not None and "without a reason that passes" in found.failure.message


@pytest.mark.parametrize(("budget_left", "failing_for", "wait_left", "window"), [
    (600.0, None, 1800.0, 600.0),  # without a wait: the startup budget alone
    (0.0, None, 1800.0, 0.0),  # ...so a pod Ready for days fails at its first refusal
    (0.0, 0.0, 1800.0, 30.0),  # with a wait: the grace from the first failure
    (0.0, 25.0, 1800.0, 5.0),
    (0.0, 40.0, 1800.0, 0.0),  # the grace spent: nothing left, fail
    (600.0, 40.0, 1800.0, 600.0),  # a budget longer than the grace keeps going
    (600.0, 0.0, 12.0, 12.0),  # never past verify.maxWait
])
def test_retry_window(budget_left: float, failing_for: float | None, wait_left: float, window: float) -> None:
    assert readiness.retry_window(budget_left=budget_left, failing_for=failing_for, grace=30.0,
                                  wait_left=wait_left) == window

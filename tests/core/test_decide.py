"""The decision core as tables: every choice of `decide.next_step` and its siblings, and docs/guarantees.md #1–#5 a row
each, on plain data (no cluster, no Git host, no clock)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cutover import plan
from cutover.core import audit_rules, commits, decide, gate, hops, steps, switch
from cutover.core.proofs import PodProof, Problem
from cutover.core.trailers import Trailers
from cutover.core.views import ApplicationView, Commit, HydratorView, LeaseView, PodView, ServiceView, SourceView
from cutover.demo.world import World
from cutover.errors import InvalidInput
from cutover.kube import cluster, lease_rules
from cutover.sources import yaml_edit
from cutover.sources.yaml_edit import GuardFailed, SelectorEdit

_world = World.__new__(World)
_world.port = 8080
(PLAN,) = plan.parse(_world.plan_text())
VLLM, CANDLE = dict(PLAN.backends["vllm"].selector), dict(PLAN.backends["candle"].selector)
CANARY = {"component": "canary"}
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def live(selector: dict[str, str]) -> ServiceView:
    return ServiceView("llm-serving", "reasoning-long-predictor", "uid-1", "10.96.0.1", selector, ())


def cutover(source: str | None, to: str, *, hold: str | None = None, plan_name: str = PLAN.name) -> Commit:
    return Commit("c0ffee" + "0" * 34, f"cutover: {source} -> {to}", "cutover", NOW,
                  Trailers(id="i", source=source, to=to, plan=plan_name, hold=hold))


def observed(live_selector: dict[str, str], in_git: dict[str, str], last: Commit | None = None,
             **more: Any) -> steps.Observed:
    return steps.Observed(live(live_selector), in_git, last, **more)


NO_AUTO = dataclasses.replace(PLAN, rollback_auto=False)


@pytest.mark.parametrize(("seen", "the_plan", "options", "expected"), [
    # PostSync (no `to`): advance, wait for ArgoCD, verify
    (observed(VLLM, VLLM), PLAN, {}, steps.Advance("vllm", "candle")),
    (observed(VLLM, CANARY), PLAN, {}, steps.Advance(None, "candle")),  # the writer then refuses someone's selector
    (observed(VLLM, CANDLE, cutover("vllm", "candle")), PLAN, {}, steps.AwaitApply("candle")),
    (observed(CANDLE, CANDLE, cutover("vllm", "candle")), PLAN, {}, steps.Verify("candle")),
    # a rollback's hold stops PostSync while the plan names the target rolled back from
    (observed(VLLM, VLLM, cutover("candle", "vllm", hold="vllm")), PLAN, {},
     steps.Hold("vllm", "c0ffee" + "0" * 34, "cutover")),  # its commit and author, named in the report
    # ...and is forgotten once the plan's target changes (the hold came from another target)
    (observed(VLLM, VLLM, cutover("other", "vllm", hold="vllm")), PLAN, {}, steps.Advance("vllm", "candle")),
    # another plan's commit holds nothing here
    (observed(VLLM, VLLM, None), PLAN, {}, steps.Advance("vllm", "candle")),
    # a failed verification: roll back where the cutover came from, unless rollback.auto is off
    (observed(CANDLE, CANDLE, cutover("vllm", "candle"), verification_failed=True), PLAN, {}, steps.RollBack("vllm")),
    (observed(CANDLE, CANDLE, cutover("vllm", "candle"), verification_failed=True), NO_AUTO, {},
     steps.Nothing("verification failed; no rollback (rollback.auto is off)")),
    # an explicit run: ignores the hold (how a person lifts it), advances, then waits for ArgoCD
    (observed(VLLM, VLLM, cutover("candle", "vllm", hold="vllm")), PLAN, {"to": "candle"},
     steps.Advance("vllm", "candle")),
    (observed(VLLM, CANDLE), PLAN, {"to": "candle"}, steps.AwaitApply("candle")),
    # a rollback always advances (the writer finds a rollback already in Git), and is never rolled back again
    (observed(VLLM, VLLM), PLAN, {"to": "vllm", "hold": "vllm"}, steps.Advance("vllm", "vllm", "vllm")),
    (observed(VLLM, VLLM, verification_failed=True), PLAN, {"to": "vllm", "hold": "vllm"},
     steps.Nothing("verification failed; no rollback (a rollback is not rolled back)")),
    # the first sync of an install (or a switch made by hand): nothing of cutover's to roll back (the real tier's
    # install once tried to roll back to a backend that did not exist yet)
    (observed(CANDLE, CANDLE, None, verification_failed=True), PLAN, {},
     steps.Nothing("verification failed; no rollback (no cutover commit switched the Service)")),
], ids=["advance", "advance-from-foreign", "await-apply", "verify", "hold", "hold-forgotten", "no-history",
        "roll-back", "no-auto-rollback", "run-lifts-hold", "run-awaits", "rollback-advances", "rollback-not-again",
        "no-cutover-to-undo"])
def test_next_step(seen: steps.Observed, the_plan: plan.Plan, options: dict[str, str],
                   expected: steps.Step) -> None:
    assert decide.next_step(seen, the_plan, **options) == expected


@pytest.mark.parametrize(("git", "live_selector", "auto", "expected"), [
    (CANDLE, VLLM, True, steps.RollBack("vllm")),  # Git holds what the failed sync could not apply: back
    (CANDLE, VLLM, False, steps.Nothing("the Service keeps its selector")),
    (VLLM, VLLM, True, steps.Nothing("the Service keeps its selector")),  # nothing pending
    (CANDLE, CANARY, True, steps.Nothing("the Service keeps its selector")),  # serving no backend: not ours
])
def test_syncfail_step(git: dict[str, str], live_selector: dict[str, str], auto: bool,
                       expected: steps.Step) -> None:
    the_plan = dataclasses.replace(PLAN, rollback_auto=auto)
    assert decide.syncfail_step(observed(live_selector, git), the_plan) == expected


@pytest.mark.parametrize(("tried", "expected"), [
    # the failed sync kept vLLM: the PostSync's switch to candle, committed beside SyncFail (ArgoCD 3.4+), stands
    (VLLM, steps.Nothing("the Service keeps its selector")),
    (CANDLE, steps.RollBack("vllm")),  # the failed sync itself tried candle: back
    (None, steps.RollBack("vllm")),  # the failed revision unknown: Git's head stands for it
])
def test_syncfail_judges_the_revision_whose_sync_failed(tried: dict[str, str] | None,
                                                         expected: steps.Step) -> None:
    assert decide.syncfail_step(observed(VLLM, CANDLE), PLAN, tried=tried) == expected


@pytest.mark.parametrize(("wanted", "live_selector", "expected"), [
    (VLLM, VLLM, steps.Nothing("no_change")),
    (CANDLE, VLLM, steps.Gate("candle")),
    (CANARY, VLLM, steps.Nothing("not_ours")),
])
def test_presync_step(wanted: dict[str, str], live_selector: dict[str, str], expected: steps.Step) -> None:
    assert decide.presync_step(wanted, live(live_selector), PLAN) == expected


def test_rollback_to() -> None:
    assert decide.rollback_to(observed(CANDLE, CANDLE, cutover("vllm", "candle")), PLAN) == "vllm"
    # its Job was killed after the commit: Git already holds the rollback, so finish that one (docs/guarantees.md #5)
    assert decide.rollback_to(observed(CANDLE, VLLM, cutover("candle", "vllm", hold="vllm")), PLAN) == "vllm"
    three = dataclasses.replace(PLAN, backends={**PLAN.backends, "other": dataclasses.replace(
        PLAN.backends["vllm"], name="other", selector={"app": "other"})})
    with pytest.raises(InvalidInput) as caught:
        decide.rollback_to(observed(CANDLE, CANDLE), three)
    assert caught.value.cause == "rollback_unknown"


@pytest.mark.parametrize("last", [None, "a person reverted the cutover by hand"])
def test_a_rollback_never_moves_forward_to_the_target(last: str | None) -> None:
    """Git at vllm and no cutover that brought it there: the plan's only other backend is its target, so a
    rollback would be the cutover itself (with a hold): refused, saying how to stop a pending cutover."""
    history = cutover("vllm", "candle") if last else None
    with pytest.raises(InvalidInput) as caught:
        decide.rollback_to(observed(VLLM, VLLM, history), PLAN)
    assert caught.value.cause == "rollback_nothing" and "set the plan's target to vllm" in caught.value.hint


def test_history_is_read_for_this_plan_only() -> None:
    theirs, ours, older = cutover("a", "b", plan_name="other"), cutover("vllm", "candle"), cutover("candle", "vllm")
    person = Commit("d" * 40, "docs", "someone", NOW)
    history = [person, theirs, ours, older]
    assert commits.last_cutover(history, PLAN) is ours
    assert commits.commit_to(history, PLAN, "vllm") is older and commits.commit_to(history, PLAN, "x") is None


@pytest.mark.parametrize(("final", "endpoints", "now", "again"), [
    ((), "EndpointSlices serve []", 0.0, True),  # only endpoints differ, time left: look again
    ((), "EndpointSlices serve []", 59.0, False),  # no time for another look
    (("the Service was re-created",), "EndpointSlices serve []", 0.0, False),  # final at once
    ((), None, 0.0, False),  # nothing wrong
])
def test_endpoint_finality(final: tuple[str, ...], endpoints: str | None, now: float, again: bool) -> None:
    problems = switch.SwitchProblems(final, endpoints)
    assert switch.look_again(problems, now=now, deadline=60.0, poll=2.0) is again


def test_proofs_through_the_service_retry_only_what_may_pass() -> None:
    def proof(*problems: Problem) -> PodProof:
        return PodProof("Service port 80", "10.96.0.1:80", "listed", (), problems, 0.0)

    refused, rejected = Problem("refused", "refused", retryable=True), Problem("name_rejected", "404", retryable=False)
    window = {"deadline": 30.0, "retry_in": 2.0}
    assert switch.retry_through_service(proof(refused), now=0.0, **window)
    assert switch.retry_through_service(proof(refused), now=28.0, **window)
    assert not switch.retry_through_service(proof(refused), now=28.5, **window)  # the next try would be past it
    assert not switch.retry_through_service(proof(refused, rejected), now=0.0, **window)
    assert not switch.retry_through_service(proof(), now=0.0, **window)


# --- docs/guarantees.md, a row each -----------------------------------------------------------------------------------


def _pod(name: str, labels: dict[str, str], *, ready: bool = True) -> PodView:
    return PodView(namespace="llm-serving", name=name, uid=name, labels=labels, phase="Running", ip="10.0.0.1",
                   ready=ready)


def _guard_refuses_more_than_the_selector() -> bool:
    text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  selector:\n    a: b\n  type: ClusterIP\n"
    edit = SelectorEdit(text, text.replace("a: b", "a: c").replace("ClusterIP", "NodePort"), {"a": "b"}, {"a": "c"})
    try:
        yaml_edit.guard(edit, document=plan.GitDocument("Service", "s"), selector_path="spec.selector")
    except GuardFailed:
        return True
    return False


def _no_cluster_write_but_the_four() -> bool:
    writes = {name for name in vars(cluster.Cluster) if name.startswith(("write", "record", "request_", "patch",
                                                                          "delete", "create", "update"))}
    return writes == {"write_lease", "record_event", "request_refresh", "write_notice", "create_job"} and \
        len(decide.CLUSTER_WRITES) == 4


@pytest.mark.parametrize(("rule", "holds"), [
    ("#1 a stale proof does not open the gate", lambda: not gate.judge(
        [_pod("c", CANDLE)], target="candle", backends={"candle": CANDLE, "vllm": VLLM},
        proven={"c": NOW - timedelta(seconds=61)}, now=NOW, min_ready=1).open),
    ("#1 a fresh proof on a Ready pod opens it", lambda: gate.judge(
        [_pod("c", CANDLE)], target="candle", backends={"candle": CANDLE, "vllm": VLLM},
        proven={"c": NOW - timedelta(seconds=10)}, now=NOW, min_ready=1).open),
    ("#1 a selector that picks another backend's pods is final", lambda: gate.judge(
        [_pod("v", VLLM)], target="candle", backends={"candle": {"component": "predictor"}, "vllm": VLLM},
        proven={"v": NOW}, now=NOW, min_ready=1).foreign == (("v", "vllm"),)),
    ("#2 an edit beyond the selector is refused", _guard_refuses_more_than_the_selector),
    ("#3 the cluster is written only through the Lease, Events, the refresh and the nudge",
     _no_cluster_write_but_the_four),
    ("#4 a Lease its holder renews while we watch is held", lambda: lease_rules.judge(
        LeaseView("cutover-s", "job-a", NOW, 60.0, 1, "1"), me="job-b", now=20.0, watch=lease_rules.observe(
            lease_rules.observe(None, LeaseView("cutover-s", "job-a", NOW - timedelta(seconds=20), 60.0, 1, "1"),
                                now=0.0),
            LeaseView("cutover-s", "job-a", NOW, 60.0, 1, "2"), now=20.0)) is lease_rules.Verdict.HELD),
    ("#5 Git at the target: nothing to write", lambda: switch.git_step(
        CANDLE, target=CANDLE, known=[VLLM]) is switch.GitStep.ALREADY),
    ("#5 PostSync after the commit does not advance again", lambda: not isinstance(
        decide.next_step(observed(VLLM, CANDLE, cutover("vllm", "candle")), PLAN), steps.Advance)),
    ("#5 someone else's selector is never overwritten", lambda: switch.git_step(
        CANARY, target=CANDLE, known=[VLLM]) is switch.GitStep.FOREIGN),
])
def test_the_guarantees(rule: str, holds: Any) -> None:
    assert holds(), rule


@pytest.mark.parametrize(("seen", "verified", "expected"), [
    (observed(CANDLE, CANDLE, cutover("vllm", "candle")), None, steps.Verify("candle")),  # applied, unverified
    (observed(CANDLE, CANDLE, cutover("vllm", "candle")), "c0ffee" + "0" * 34, steps.Check("candle")),
    (observed(VLLM, VLLM), None, steps.Check("vllm")),  # no cutover yet: the live backend still serves?
    (observed(VLLM, CANDLE, cutover("vllm", "candle")), None,
     steps.Nothing("ArgoCD has yet to apply candle (the Service selects vllm)")),
    (observed(CANARY, VLLM), None,
     steps.Nothing("the Service or Git selects no backend of the plan: not ours to audit")),
    (observed(VLLM, VLLM, cutover("candle", "vllm", hold="vllm")), None, steps.Verify("vllm")),  # a rollback
], ids=["unverified", "verified", "no-cutover", "not-applied", "not-ours", "rollback-unverified"])
def test_audit_step(seen: steps.Observed, verified: str | None, expected: steps.Step) -> None:
    assert audit_rules.audit_step(seen, PLAN, verified=verified, now=NOW) == expected


SWITCH = cutover("vllm", "candle")
HYDRATED_SHA = "4d" * 20


def failed_sync(revision: str, *, ended: str = "Error", **hydration: Any) -> ApplicationView:
    """The Application after ArgoCD's automated sync of `revision` ended so; with `hydration` (drySHA,
    hydratedSHA, phase of the Source Hydrator's current operation) through the hydrator."""
    hydrator = HydratorView(SourceView("https://github.com/acme/gitops.git", "main", "k8s/apps/llm-serving"),
                            "environments/prod", "llm-serving", **hydration) if hydration else None
    return ApplicationView("argocd", "llm-serving", "OutOfSync", revision, "Healthy", ended, revision,
                           NOW - timedelta(minutes=1), NOW - timedelta(seconds=50), False, hydrator=hydrator,
                           operation_message="ComparisonError: context deadline exceeded")


STALLED = steps.Stalled(f"ArgoCD's sync of {SWITCH.sha[:12]} ended Error: ComparisonError: context deadline "
                         f"exceeded; ArgoCD does not sync a revision it failed again by itself", SWITCH.sha)
WAITING = steps.Nothing("ArgoCD has yet to apply candle (the Service selects vllm)")
# What the real ArgoCD (v3.5, the tier) holds once an apply was refused beside a Deployment that cannot become
# healthy, and its SyncFail hook has ended: Running, no retry pending (`finishedAt` unset), word for word.
DENIED = ("Deployment/llm-reasoning: error when patching \"/dev/shm/1508291392\": deployments.apps \"llm-reasoning\" "
          "is forbidden: ValidatingAdmissionPolicy 'keep-one-replica' with binding 'keep-one-replica' denied request: "
          "llm-reasoning keeps one replica (the platform's keep-one-replica policy)")
HEALTH = "waiting for healthy state of apps/Deployment/llm-reasoning-candle"


def runs_on(revision: str, **more: Any) -> ApplicationView:
    """A failed operation on `revision` that runs on, waiting for a Deployment's health."""
    fields: dict[str, Any] = {"operation_finished": None, "operation_failures": (DENIED,),
                              "operation_message": HEALTH, **more}
    return dataclasses.replace(failed_sync(revision, ended="Running"), **fields)


def ran_on(commit: Commit, revision: str | None = None, step: str | None = None) -> steps.Stalled:
    return steps.Stalled(f"ArgoCD's sync of {(revision or commit.sha)[:12]} failed: {DENIED}; the operation can only "
                          f"end Failed, still waits on {HEALTH}, and ArgoCD starts no other sync while it runs",
                          commit.sha, step, HEALTH)


@pytest.mark.parametrize(("application", "expected"), [
    (failed_sync(SWITCH.sha), STALLED),
    (failed_sync(SWITCH.sha, ended="Failed"), dataclasses.replace(STALLED, reason=STALLED.reason.replace(
        "ended Error", "ended Failed"))),
    (failed_sync(SWITCH.sha, ended="Running"), WAITING),  # ArgoCD's to finish
    (failed_sync("ab" * 20), WAITING),  # a person's revision failed: cutover's commit is still to sync
    # ArgoCD compared a newer revision and started no sync: one with no change in the Application's
    # manifest-generate-paths, which ArgoCD skips as attempted already (a revision with changes it syncs at once)
    (dataclasses.replace(failed_sync(SWITCH.sha), sync_revision="ab" * 20), STALLED),
    (failed_sync(HYDRATED_SHA, dry_sha=SWITCH.sha, hydrated_sha=HYDRATED_SHA, phase="Hydrated"),
     dataclasses.replace(STALLED, reason=STALLED.reason.replace(SWITCH.sha[:12], HYDRATED_SHA[:12]))),
    # a hydratedSHA left from the hydration before: the sync that failed was of the previous dry commit's
    (failed_sync(HYDRATED_SHA, dry_sha=SWITCH.sha, hydrated_sha=HYDRATED_SHA, phase="Hydrating"), WAITING),
    (failed_sync(HYDRATED_SHA, dry_sha="ab" * 20, hydrated_sha=HYDRATED_SHA, phase="Hydrated"), WAITING),
    # the dry commit is not what ArgoCD syncs: its hydrated one is
    (failed_sync(SWITCH.sha, dry_sha=SWITCH.sha, hydrated_sha=HYDRATED_SHA, phase="Hydrated"), WAITING),
    # failed, and runs on: nothing left but a wait for health that may never end, and no other sync starts
    (runs_on(SWITCH.sha), ran_on(SWITCH)),
    (runs_on(SWITCH.sha, operation_hooks_running=True), WAITING),  # its SyncFail hook still at work
    (runs_on(SWITCH.sha, operation_finished=NOW), WAITING),  # ArgoCD's own retry pending (syncPolicy.retry)
    (runs_on("ab" * 20, operation_started=NOW - timedelta(minutes=1)), ran_on(SWITCH, "ab" * 20)),  # began before
    (runs_on("ab" * 20, operation_started=NOW + timedelta(seconds=1)), WAITING),  # a person's, after all of ours
], ids=["error", "failed", "running", "a-persons", "compared-since", "hydrated", "hydrating", "hydrated-other",
        "dry-revision", "runs-on", "runs-on-syncfail-running", "runs-on-retry-pending", "runs-on-blocking-ours",
        "runs-on-a-persons"])
def test_a_cutover_commit_whose_sync_failed_is_stalled_not_waited_for(application: ApplicationView,
                                                                       expected: steps.Step) -> None:
    """ArgoCD's automated sync does not try a revision it failed again: the audit says so (`Stalled`) rather than
    wait for it; through the Source Hydrator, only once the hydrator says the failed revision is our commit's."""
    seen = observed(VLLM, CANDLE, SWITCH, application=application)
    assert audit_rules.audit_step(seen, PLAN, verified=None, now=NOW) == expected


# --- the handoff (docs/capacity.md) ---------------------------------------------------------------------------

_WORKLOADS = {"vllm": "{kind: Deployment, name: llm-reasoning}", "candle": "{kind: Deployment, name: candle}"}
(RECREATE,) = plan.parse(_world.plan_text(workloads=_WORKLOADS, handoff="{strategy: recreate, maxGap: 30m}"))


def step(backend: str, kind: str, *, to: str, hold: str | None = None, at: datetime = NOW) -> Commit:
    return Commit("5eed" + "0" * 36, f"cutover: {kind} {backend}", "cutover", at,
                  Trailers(id="i", source="vllm", to=to, plan=PLAN.name, step=kind, backend=backend, hold=hold))


def handed(freed: tuple[str, ...] = (), **newest: Commit) -> steps.Workloads:
    return steps.Workloads(frozenset(freed), newest)


@pytest.mark.parametrize(("seen", "the_plan", "expected"), [
    # recreate frees the source that holds the target's room; never twice, never under another strategy
    (observed(VLLM, VLLM), RECREATE, steps.Free("vllm", "candle")),
    (observed(VLLM, VLLM, workloads=handed(("vllm",))), RECREATE, None),  # freed already: wait for its pods to go
    (observed(VLLM, VLLM), PLAN, None),  # parallel: capacity_held_by_source
])
def test_on_capacity_held(seen: steps.Observed, the_plan: plan.Plan, expected: steps.Free | None) -> None:
    assert hops.on_capacity_held(seen, the_plan, source="vllm", to="candle") == expected


def test_a_gap_is_open_only_while_the_source_is_freed_by_a_cutover_heading_for_the_target() -> None:
    free = step("vllm", "free", to="candle")
    assert hops.gap_opened(observed(VLLM, VLLM, workloads=handed(("vllm",), vllm=free)), RECREATE,
                             source="vllm", to="candle") == free
    assert hops.gap_opened(observed(VLLM, VLLM, workloads=handed((), vllm=free)), RECREATE,
                             source="vllm", to="candle") is None  # restored since (by hand)
    assert hops.gap_opened(observed(VLLM, VLLM, workloads=handed(("vllm",))), RECREATE,
                             source="vllm", to="candle") is None  # freed by someone else: no gap of ours
    assert hops.gap_opened(observed(VLLM, VLLM, workloads=handed(("vllm",), vllm=free)), RECREATE,
                             source="vllm", to="other") is None


@pytest.mark.parametrize(("seen", "options", "expected"), [
    # a freed target is restored before anything waits for it, and under recreate the source freed in that hop
    (observed(VLLM, VLLM, workloads=handed(("candle",))), {}, steps.Restore("candle", "candle", free="vllm")),
    # a rollback to a freed source restores it first (freeing the backend serving now), keeping its hold
    (observed(CANDLE, CANDLE, cutover("vllm", "candle"), workloads=handed(("vllm",))),
     {"to": "vllm", "hold": "vllm"}, steps.Restore("vllm", "vllm", "vllm", free="candle")),
    # a restore after the gap was exceeded holds the Service on the source while the plan names that target ...
    (observed(VLLM, VLLM, cutover("candle", "vllm"),
              workloads=handed(("candle",), vllm=step("vllm", "restore", to="candle", hold="vllm",
                                                      at=NOW + timedelta(minutes=5)))), {},
     steps.Hold("vllm", "5eed" + "0" * 36, "cutover")),
    # ... which an explicit run lifts (it restores candle first)
    (observed(VLLM, VLLM, cutover("candle", "vllm"),
              workloads=handed(("candle",), vllm=step("vllm", "restore", to="candle", hold="vllm",
                                                      at=NOW + timedelta(minutes=5)))), {"to": "candle"},
     steps.Restore("candle", "candle", free="vllm")),
    # ... and a later switch made since forgets
    (observed(VLLM, VLLM, cutover("candle", "vllm"),
              workloads=handed(vllm=step("vllm", "restore", to="candle", hold="vllm",
                                         at=NOW - timedelta(minutes=5)))), {}, steps.Advance("vllm", "candle")),
])
def test_the_hops_of_a_handoff(seen: steps.Observed, options: dict[str, str], expected: steps.Step) -> None:
    assert decide.next_step(seen, RECREATE, **options) == expected


def synced(*, started: datetime, phase: str = "Succeeded", compared: str = "ab" * 20) -> ApplicationView:
    return ApplicationView("argocd", "reasoning", "Synced", compared, "Healthy", phase, compared, started,
                           started + timedelta(seconds=20), refresh_requested=False)


# The source's restore after a recreate's gap was exceeded (the Service never left it): until ArgoCD applies the
# restore the source has no pods, and an audit checking it then fails for nothing (a failed audit Job makes
# ArgoCD 3.x's CronJob health Degraded, which fails the sync of that very restore).
RESTORED = step("vllm", "restore", to="candle", hold="vllm", at=NOW - timedelta(seconds=5))
SWITCHED = dataclasses.replace(cutover("candle", "vllm"), date=NOW - timedelta(days=1))  # verified then
GIVEN_BACK = observed(VLLM, VLLM, SWITCHED, workloads=handed(("candle",), vllm=RESTORED))


@pytest.mark.parametrize(("application", "expected"), [
    (synced(started=NOW - timedelta(minutes=6)), steps.Nothing(f"ArgoCD has yet to apply {RESTORED.sha[:12]} "
                                                                f"({RESTORED.title})")),
    (synced(started=NOW - timedelta(seconds=2), phase="Running"), steps.Nothing("ArgoCD is syncing abababababab")),
    (synced(started=NOW - timedelta(seconds=2)), steps.Check("vllm")),  # an operation began after it
    (synced(started=NOW - timedelta(minutes=6), compared=RESTORED.sha), steps.Check("vllm")),  # compared, no change
    (None, steps.Check("vllm")),  # no Application to ask: as before
], ids=["not-synced-since", "syncing", "synced-since", "compared", "no-application"])
def test_the_audit_waits_while_argocd_has_yet_to_apply_a_handoff_step(application: ApplicationView | None,
                                                                      expected: steps.Step) -> None:
    seen = dataclasses.replace(GIVEN_BACK, application=application)
    assert audit_rules.audit_step(seen, RECREATE, verified=SWITCHED.sha, now=NOW) == expected


# A hop pushes its free, then its restore, within a second; ArgoCD may resolve the branch between the two (seen on
# v3.5.3) and sync the free alone. That sync's PostSync must not wait for pods only the restore's sync starts: it
# holds the operation whose end lets ArgoCD sync the restore (the wait ran out, and the hop was rolled back).
HOP_FREE = step("vllm", "free", to="candle")
HOP_RESTORE = dataclasses.replace(step("candle", "restore", to="candle"), sha="7e57" * 10)  # the same second
HOPPED = observed(VLLM, VLLM, workloads=handed(("vllm",), vllm=HOP_FREE, candle=HOP_RESTORE))


@pytest.mark.parametrize(("application", "options", "expected"), [
    (synced(started=NOW, phase="Running", compared=HOP_FREE.sha), {}, steps.AwaitApply("candle", HOP_RESTORE.sha)),
    (synced(started=NOW, phase="Running", compared=HOP_RESTORE.sha), {}, steps.Advance("vllm", "candle")),
    (synced(started=NOW, phase="Running", compared="ab" * 20), {}, steps.Advance("vllm", "candle")),
    (synced(started=NOW, compared=HOP_FREE.sha), {}, steps.Advance("vllm", "candle")),
    (synced(started=NOW, phase="Running", compared=HOP_FREE.sha), {"to": "candle"}, steps.Advance("vllm", "candle")),
    (None, {}, steps.Advance("vllm", "candle")),
], ids=["the-free-alone", "the-restores-sync", "a-persons-commit", "no-operation-running", "explicit-run",
        "no-application"])
def test_a_postsync_in_the_sync_of_a_hops_free_alone_waits_for_no_pod(application: ApplicationView | None,
                                                                       options: dict[str, str],
                                                                       expected: steps.Step) -> None:
    seen = dataclasses.replace(HOPPED, application=application)
    assert decide.next_step(seen, RECREATE, **options) == expected
    if isinstance(expected, steps.AwaitApply):  # said in the thread of the cutover whose hop it is
        hop = steps.Advance("vllm", "candle")
        assert decide.thread(seen, RECREATE, expected) == decide.thread(seen, RECREATE, hop) is not None


def test_a_restore_pushed_before_the_commit_being_synced_is_held_by_that_sync() -> None:
    older = dataclasses.replace(HOP_RESTORE, date=NOW - timedelta(minutes=5))
    seen = dataclasses.replace(HOPPED, application=synced(started=NOW, phase="Running", compared=HOP_FREE.sha),
                               workloads=handed(("vllm",), vllm=HOP_FREE, candle=older))
    assert decide.next_step(seen, RECREATE) == steps.Advance("vllm", "candle")


FREED = step("vllm", "free", to="candle", at=NOW - timedelta(seconds=30))
OPENED = dataclasses.replace(step("candle", "restore", to="candle", at=NOW - timedelta(seconds=30)), sha="7e57" * 10)
IN_THE_GAP = observed(VLLM, VLLM, SWITCHED, workloads=handed(("vllm",), vllm=FREED, candle=OPENED))


def hookless(revision: str, *, phase: str = "Succeeded", selective: bool = True) -> ApplicationView:
    return dataclasses.replace(synced(started=NOW - timedelta(seconds=20), phase=phase, compared=revision),
                               operation_selective=selective)


@pytest.mark.parametrize(("application", "expected"), [
    # the recreate's free synced without hooks (argo-cd#27875): no PostSync waits for the target; the audit does
    (hookless(OPENED.sha), steps.Continue(steps.Advance("vllm", "candle"), OPENED.sha)),
    (hookless(OPENED.sha, selective=False), steps.Check("vllm")),  # a full sync: its PostSync took the hop
    # a Terminate: no hop here, a person's call; the live backend's check (the gap's alert) comes first, then this
    (hookless(OPENED.sha, phase="Failed", selective=False), steps.Check("vllm", steps.Stalled(
        f"ArgoCD's sync of {OPENED.sha[:12]} ended Failed: no message; ArgoCD does not sync a revision it failed "
        f"again by itself", OPENED.sha, "restore candle"))),
    (hookless("ab" * 20), steps.Check("vllm")),  # a person's commit synced so: the audit starts no cutover
    (hookless(FREED.sha), steps.Check("vllm")),  # an older commit of ours: the newer one is ArgoCD's next
], ids=["selective", "full-sync", "terminated", "not-ours", "older"])
def test_the_audit_takes_the_hop_after_one_argocd_synced_without_hooks(application: ApplicationView,
                                                                       expected: steps.Step) -> None:
    older = dataclasses.replace(FREED, date=NOW - timedelta(minutes=1))
    seen = dataclasses.replace(IN_THE_GAP, application=application)
    if application.operation_revision == FREED.sha:
        seen = dataclasses.replace(seen, workloads=handed(("vllm",), vllm=older, candle=OPENED))
    assert audit_rules.audit_step(seen, RECREATE, verified=SWITCHED.sha, now=NOW) == expected


def test_a_commit_no_operation_followed_for_long_is_not_waited_for() -> None:
    """A workload in another Application, or a commit that changed nothing ArgoCD renders: past the window the
    audit goes on (it is never silenced for good)."""
    seen = dataclasses.replace(GIVEN_BACK, application=synced(started=NOW - timedelta(hours=1)))
    assert audit_rules.audit_step(seen, RECREATE, verified=SWITCHED.sha, now=NOW + audit_rules.APPLY_WINDOW) == \
        steps.Check("vllm")


def test_a_failed_operation_that_runs_on_holds_back_the_way_back_and_is_said_after_the_check() -> None:
    """A recreate whose restore a policy refused beside a target that cannot become healthy: SyncFail gave the card
    back (a commit) while the failed operation runs on, so the way back cannot sync either. The live backend is
    checked, then the stall is said for the way back; never "ArgoCD has yet to apply" (it will not until a person
    ends that operation), and never for a person's failed revision once ours are applied."""
    began = NOW - timedelta(minutes=1)
    seen = dataclasses.replace(GIVEN_BACK, application=runs_on(OPENED.sha, operation_started=began))
    assert audit_rules.audit_step(seen, RECREATE, verified=SWITCHED.sha, now=NOW) == \
        steps.Check("vllm", ran_on(RESTORED, OPENED.sha, "restore vllm"))
    after = dataclasses.replace(GIVEN_BACK, application=runs_on(OPENED.sha, operation_started=NOW))
    assert audit_rules.audit_step(after, RECREATE, verified=SWITCHED.sha, now=NOW) == steps.Check("vllm")


def test_under_parallel_a_freed_target_is_restored_alone() -> None:
    assert decide.next_step(observed(VLLM, VLLM, workloads=handed(("candle",))), PLAN) == \
        steps.Restore("candle", "candle")


def test_a_free_or_restore_commit_is_not_the_last_switch() -> None:
    made = cutover("vllm", "candle")
    history = [step("vllm", "free", to="candle"), made]
    assert commits.last_cutover(history, PLAN) is made and commits.commit_to(history, PLAN, "candle") is made
    assert commits.last_step(history, PLAN, "vllm") is history[0] and commits.last_step(history, PLAN, "candle") is None


def test_a_sync_that_fails_while_a_gap_is_open_gives_the_card_back() -> None:
    free = step("vllm", "free", to="candle")
    gap = observed(VLLM, VLLM, workloads=handed(("vllm",), vllm=free))
    assert decide.syncfail_step(gap, RECREATE) == steps.GiveBack("vllm", "candle")
    assert decide.syncfail_step(observed(VLLM, VLLM), RECREATE) == steps.Nothing("the Service keeps its selector")


# strategy bridge: vllm → coder (the bridge) → candle, each hop decided from Git
(BRIDGE,) = plan.parse(_world.plan_text(workloads=_WORKLOADS, coder=True,
                                        handoff="{strategy: bridge, bridge: coder, bridgeNames: [reasoning], "
                                                 "maxGap: 45m}"))
CODER = dict(BRIDGE.backends["coder"].selector)


def bridged(source: str, *, toward: str, hold: str | None = None) -> Commit:
    return Commit("b71d6e" + "0" * 34, f"cutover: {source} -> coder", "cutover", NOW,
                  Trailers(id="i", source=source, to="coder", plan=PLAN.name, hold=hold, bridge="coder",
                           toward=toward))


def via(source: str, to: str, *, hold: str | None = None) -> Commit:
    return Commit("f1a1" + "0" * 36, f"cutover: {source} -> {to}", "cutover", NOW,
                  Trailers(id="i", source=source, to=to, plan=PLAN.name, hold=hold, bridge="coder"))


@pytest.mark.parametrize(("seen", "options", "expected"), [
    # from a running source: switch to the bridge first, proven on the bridged names
    (observed(VLLM, VLLM), {}, steps.Advance("vllm", "coder", bridge="coder", toward="candle")),
    # on the bridge, not applied yet: ArgoCD's turn
    (observed(VLLM, CODER, bridged("vllm", toward="candle")), {}, steps.AwaitApply("coder")),
    # applied: the source is drained and freed (the target restored in the same commit when Git holds it freed)
    (observed(CODER, CODER, bridged("vllm", toward="candle")), {}, steps.Free("vllm", "candle")),
    (observed(CODER, CODER, bridged("vllm", toward="candle"), workloads=handed(("candle",))), {},
     steps.Restore("candle", "candle", free="vllm")),
    # freed: the last hop, from the bridge to the target
    (observed(CODER, CODER, bridged("vllm", toward="candle"), workloads=handed(("vllm",))), {},
     steps.Advance("vllm", "candle", bridge="coder")),
    # there: verified as any switch
    (observed(CANDLE, CANDLE, via("vllm", "candle"), workloads=handed(("vllm",))), {}, steps.Verify("candle")),
    # a rollback goes back by the bridge: to it (holding nothing yet, saying where it goes) ...
    (observed(CANDLE, CANDLE, via("vllm", "candle"), workloads=handed(("vllm",))), {"to": "vllm", "hold": "vllm"},
     steps.Advance("candle", "coder", "vllm", bridge="coder", toward="vllm")),
    # ... and PostSync finishes it, though the plan still names candle: restore vLLM freeing candle ...
    (observed(CODER, CODER, bridged("candle", toward="vllm", hold="vllm"), workloads=handed(("vllm",))), {},
     steps.Restore("vllm", "vllm", "vllm", free="candle")),
    # ... switch to it and hold there
    (observed(CODER, CODER, bridged("candle", toward="vllm", hold="vllm"), workloads=handed(("candle",))), {},
     steps.Advance("candle", "vllm", "vllm", bridge="coder")),
    (observed(VLLM, VLLM, via("candle", "vllm", hold="vllm"), workloads=handed(("candle",))), {},
     steps.Hold("vllm", "f1a1" + "0" * 36, "cutover")),
    # back where the path began while it still runs: one switch, no free
    (observed(CODER, CODER, bridged("vllm", toward="candle")), {"to": "vllm", "hold": "vllm"},
     steps.Advance("coder", "vllm", "vllm", bridge="coder")),
    # the target failed after the source was freed: going back frees the target, which never served (no drain)
    (observed(CODER, CODER, bridged("vllm", toward="candle"), workloads=handed(("vllm",))),
     {"to": "vllm", "hold": "vllm"}, steps.Restore("vllm", "vllm", "vllm", free="candle", drain=False)),
    # a bridge the plan targets, or a Service on the bridge set by hand: plain switches
    (observed(VLLM, VLLM), {"to": "coder"}, steps.Advance("vllm", "coder")),
    (observed(CODER, CODER), {}, steps.Advance("coder", "candle")),
])
def test_the_hops_through_a_bridge(seen: steps.Observed, options: dict[str, str], expected: steps.Step) -> None:
    assert decide.next_step(seen, BRIDGE, **options) == expected


# On the bridge, the hop that frees the source pushes its free and then the target's restore; ArgoCD may sync the
# free alone (seen in the tier, 3 s before the restore was pushed). That sync's PostSync waits for no pod of the
# target: the restore's sync starts them, once the free's operation has ended.
BRIDGE_FREE = step("vllm", "free", to="candle")
BRIDGE_RESTORE = dataclasses.replace(step("candle", "restore", to="candle"), sha="7e57" * 10)
ON_BRIDGE = observed(CODER, CODER, bridged("vllm", toward="candle"),
                     workloads=handed(("vllm",), vllm=BRIDGE_FREE, candle=BRIDGE_RESTORE))


@pytest.mark.parametrize(("application", "options", "expected"), [
    (synced(started=NOW, phase="Running", compared=BRIDGE_FREE.sha), {},
     steps.AwaitApply("candle", BRIDGE_RESTORE.sha)),
    (synced(started=NOW, phase="Running", compared=BRIDGE_RESTORE.sha), {},
     steps.Advance("vllm", "candle", bridge="coder")),
    (synced(started=NOW, phase="Running", compared=BRIDGE_FREE.sha), {"to": "candle"},
     steps.Advance("vllm", "candle", bridge="coder")),
], ids=["the-free-alone", "the-restores-sync", "explicit-run"])
def test_on_the_bridge_a_free_synced_alone_waits_for_no_pod(application: ApplicationView, options: dict[str, str],
                                                            expected: steps.Step) -> None:
    assert decide.next_step(dataclasses.replace(ON_BRIDGE, application=application), BRIDGE, **options) == expected


WHOLE_BRIDGE = dataclasses.replace(BRIDGE, verify=dataclasses.replace(BRIDGE.verify, served_names=("reasoning",)),
                                   handoff=dataclasses.replace(BRIDGE.handoff, max_gap=None))


def test_a_fleets_failed_sync_is_reported_and_never_rolled_back() -> None:
    """docs/fleet.md: a fleet's revert of its commit is the rollback, replayed by the engine cluster by cluster; a
    cluster's SyncFail writes nothing, whatever its Service selects or Git holds."""
    fleet = dataclasses.replace(PLAN, fleet=True, target="", rollback_auto=False)
    for live, git in ((VLLM, CANDLE), (CANDLE, VLLM), (VLLM, VLLM)):
        assert decide.syncfail_step(observed(live, git), fleet) == steps.Nothing(
            "a fleet's rollback is the revert of its commit (docs/fleet.md)")
    assert decide.syncfail_step(observed(VLLM, CANDLE), dataclasses.replace(fleet, rollback_auto=True)) == \
        steps.Nothing("a fleet's rollback is the revert of its commit (docs/fleet.md)")  # even set by hand


@pytest.mark.parametrize(("strategy", "live", "freed", "started", "to"), [
    ("recreate", "vllm", {"vllm"}, {"candle"}, "candle"),  # the swap: the next commit switches, proven first
    ("recreate", "vllm", set(), {"vllm", "candle"}, None),  # vLLM kept: candle beside it, no swap
    ("recreate", "vllm", {"vllm"}, set(), None),  # nothing started: not a swap (the verifier finds no endpoints)
    ("recreate", "vllm", {"vllm"}, {"candle", "coder"}, None),  # two started: which one is not said
    ("recreate", None, {"vllm"}, {"candle"}, None),  # the Service selects no backend of the plan
    ("parallel", "vllm", {"vllm"}, {"candle"}, None),  # parallel: no swap in a fleet's commit
])
def test_a_fleets_recreate_swaps_first_and_switches_next(strategy: str, live: str | None, freed: set[str],
                                                         started: set[str], to: str | None) -> None:
    fleet = dataclasses.replace(RECREATE, fleet=True, target="vllm", rollback_auto=False,
                                handoff=dataclasses.replace(RECREATE.handoff, strategy=strategy))
    assert decide.fleet_swap(fleet, live=live, freed=freed, started=started) == to
    assert decide.fleet_swap(dataclasses.replace(fleet, fleet=False), live=live, freed=freed,
                             started=started) is None  # one cluster's recreate frees by its own commits


def test_a_fleets_switch_to_a_target_the_same_sync_starts_is_refused() -> None:
    """docs/fleet.md: no cluster switches before its own target is proven; a switch whose target has no pod, which
    the same revision starts while it stops the engine serving, could only be proven after it applied."""
    fleet = dataclasses.replace(RECREATE, fleet=True, rollback_auto=False)  # aimed at candle
    assert decide.switch_before_start(fleet, leaving="vllm", freed={"vllm"}, started={"candle"}, target_pods=0)
    assert not decide.switch_before_start(fleet, leaving="vllm", freed={"vllm"}, started={"candle"},
                                          target_pods=1)  # running already: proven by the gate, then switched
    assert not decide.switch_before_start(fleet, leaving="vllm", freed=set(), started={"vllm", "candle"},
                                          target_pods=0)  # vLLM kept: the fit judgment says whether it can
    assert not decide.switch_before_start(dataclasses.replace(fleet, fleet=False), leaving="vllm", freed={"vllm"},
                                          started={"candle"}, target_pods=0)


def test_names_the_bridge_leaves_unanswered_are_a_gap_as_recreate_s() -> None:
    """reasoning-long has no backend while coder serves (handoff.bridgeNames): from the switch to the bridge, once
    vLLM is freed, a failed sync gives the card back as under recreate, and the path then goes back to vLLM
    through the bridge; a bridge that answers every served name leaves nothing to give back."""
    hop = bridged("vllm", toward="candle")
    on_it = observed(CODER, CODER, hop, workloads=handed(("vllm",)))
    assert BRIDGE.dark_names == ("reasoning-long",) and WHOLE_BRIDGE.dark_names == ()
    assert hops.gap_opened(on_it, BRIDGE, source="vllm", to="candle") == hop
    assert decide.syncfail_step(on_it, BRIDGE) == steps.GiveBack("vllm", "candle")
    assert decide.syncfail_step(on_it, WHOLE_BRIDGE) == steps.Nothing("the Service keeps its selector")
    assert decide.syncfail_step(observed(CODER, CODER, hop), BRIDGE) == \
        steps.Nothing("the Service keeps its selector")  # vLLM still runs: the bridge's own sync failed
    back = observed(CODER, CODER, bridged("candle", toward="vllm", hold="vllm"), workloads=handed(("candle",)))
    assert hops.gap_opened(back, BRIDGE, source="candle", to="vllm") is None  # the way back is the remedy
    # given back: candle freed, vLLM restored as a rollback's restore, newer than the hop: the switch back is next
    restored = step("vllm", "restore", to="vllm", hold="vllm", at=NOW + timedelta(minutes=1))
    given = observed(CODER, CODER, hop, workloads=handed(("candle",), vllm=restored))
    assert decide.next_step(given, BRIDGE) == steps.Advance("coder", "vllm", "vllm", bridge="coder")


def test_every_step_of_a_path_names_one_cutover_and_its_own_hop() -> None:
    """One Slack thread for vllm → coder → candle, known before a step says anything; each hop told apart, so that
    the target's proof is news after the bridge's, while a re-run of a hop repeats nothing."""
    ident = commits.cutover_id(BRIDGE, from_backend="vllm", to_backend="candle", service_uid="uid-1")
    on_bridge = dataclasses.replace(bridged("vllm", toward="candle"), trailers=dataclasses.replace(
        bridged("vllm", toward="candle").trailers, id=ident))
    there = dataclasses.replace(via("vllm", "candle"), trailers=dataclasses.replace(via("vllm", "candle").trailers,
                                                                                   id=ident))
    path = [observed(VLLM, VLLM), observed(VLLM, CODER, on_bridge), observed(CODER, CODER, on_bridge),
            observed(CODER, CODER, on_bridge, workloads=handed(("candle",))),
            observed(CODER, CODER, on_bridge, workloads=handed(("vllm",))),
            observed(CANDLE, CANDLE, there, workloads=handed(("vllm",)))]
    taken = [decide.next_step(seen, BRIDGE) for seen in path]
    assert {decide.thread(seen, BRIDGE, each) for seen, each in zip(path, taken, strict=True)} == {ident}
    assert [decide.hop(each) for each in taken] == ["coder", "coder", "free vllm", "restore candle", "candle",
                                                    "candle"]
    assert decide.thread(observed(VLLM, VLLM, cutover("candle", "vllm", hold="vllm")), PLAN,
                         steps.Hold("vllm", "c0ffee", "cutover")) is None  # no cutover at work


def test_a_rollback_stopped_on_the_bridge_is_finished_and_audit_leaves_a_bridged_path_alone() -> None:
    assert decide.rollback_to(observed(CODER, CODER, bridged("candle", toward="vllm", hold="vllm")), BRIDGE) == "vllm"
    assert decide.rollback_to(observed(CODER, CODER, bridged("vllm", toward="candle")), BRIDGE) == "vllm"
    assert decide.rollback_to(observed(CANDLE, CANDLE, via("vllm", "candle")), BRIDGE) == "vllm"
    assert isinstance(audit_rules.audit_step(observed(CODER, CODER, bridged("vllm", toward="candle")), BRIDGE,
                                        verified=None, now=NOW), steps.Nothing)
    # no gap under bridge: the bridge serves while the source is freed
    free = step("vllm", "free", to="candle")
    # ... and a free whose sync failed is no hop under way: the bridge is checked, then the stall said
    hop, freed = (dataclasses.replace(commit, date=NOW - timedelta(minutes=n))
                  for commit, n in ((bridged("vllm", toward="candle"), 9), (free, 2)))
    stuck = observed(CODER, CODER, hop, workloads=handed(("vllm",), vllm=freed), application=failed_sync(free.sha))
    # (the Lease holds no bridge hop as verified: its PostSync checked it on the bridged names, which the audit's
    # verification on every served name would fail, rolling back a bridge that carries what it should)
    for verified in (hop.sha, None):
        assert audit_rules.audit_step(stuck, BRIDGE, verified=verified, now=NOW) == steps.Check("coder", steps.Stalled(
            f"ArgoCD's sync of {free.sha[:12]} ended Error: ComparisonError: context deadline exceeded; ArgoCD does "
            f"not sync a revision it failed again by itself", free.sha, "free vllm"))
    # ... and one whose operation runs on (the tier's: a policy refused the free, the target waits for the card)
    running = dataclasses.replace(stuck, application=runs_on(free.sha))
    assert audit_rules.audit_step(running, BRIDGE, verified=None, now=NOW) == \
        steps.Check("coder", ran_on(freed, step="free vllm"))
    assert hops.gap_opened(observed(CODER, CODER, workloads=handed(("vllm",), vllm=free)), BRIDGE,
                             source="vllm", to="candle") is None


def test_a_rollback_that_restored_its_backend_switches_back_next() -> None:
    """rollback.auto on one GPU: the failed target's PostSync restored vLLM (freeing candle); the next PostSync
    switches back with the hold instead of verifying candle again."""
    restored = step("vllm", "restore", to="vllm", hold="vllm", at=NOW + timedelta(minutes=1))
    seen = observed(CANDLE, CANDLE, cutover("vllm", "candle"), workloads=handed(("candle",), vllm=restored))
    assert decide.next_step(seen, RECREATE) == steps.Advance("candle", "vllm", "vllm")
    older = step("vllm", "restore", to="vllm", hold="vllm", at=NOW - timedelta(minutes=1))
    assert decide.next_step(observed(CANDLE, CANDLE, cutover("vllm", "candle"), workloads=handed(vllm=older)),
                            RECREATE) == steps.Verify("candle")  # a switch made since: over


# handoff.retire: the backend a verified switch left, freed `after` later
(RETIRE,) = plan.parse(_world.plan_text(workloads=_WORKLOADS, handoff="{retire: {after: 1h}}"))
SWITCH = cutover("vllm", "candle")


@pytest.mark.parametrize(("seen", "verified", "now", "expected"), [
    (observed(CANDLE, CANDLE, SWITCH), SWITCH.sha, NOW + timedelta(hours=1), steps.Free("vllm", "candle")),
    (observed(CANDLE, CANDLE, SWITCH), SWITCH.sha, NOW + timedelta(minutes=59), None),  # not yet
    (observed(CANDLE, CANDLE, SWITCH), None, NOW + timedelta(hours=2), None),  # never verified
    (observed(VLLM, CANDLE, SWITCH), SWITCH.sha, NOW + timedelta(hours=2), None),  # not applied (any more)
    (observed(CANDLE, CANDLE, SWITCH, workloads=handed(("vllm",))), SWITCH.sha, NOW + timedelta(hours=2), None),
    # a person restored it after the switch: not undone
    (observed(CANDLE, CANDLE, SWITCH, workloads=handed(vllm=step("vllm", "restore", to="vllm",
                                                               at=NOW + timedelta(minutes=70)))),
     SWITCH.sha, NOW + timedelta(hours=2), None),
    # a rollback's hold: the target it left is not retired
    (observed(VLLM, VLLM, cutover("candle", "vllm", hold="vllm")), "c0ffee" + "0" * 34, NOW + timedelta(hours=2),
     None),
])
def test_retire_step(seen: steps.Observed, verified: str | None, now: datetime,
                     expected: steps.Free | None) -> None:
    assert hops.retire_step(seen, RETIRE, verified=verified, now=now) == expected
    assert hops.retire_step(seen, RECREATE, verified=verified, now=now) is None  # retire is off by default

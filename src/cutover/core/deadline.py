"""How long one hook Job of a plan may need, against the Job's `activeDeadlineSeconds` (docs/capacity.md): a Job the
Job controller kills at its deadline in the middle of a wait says nothing of why, so cutover says it first. Pure.

The shipped Jobs (hooks/, jobs/) set `activeDeadlineSeconds: 2400` and mirror it in `CUTOVER_DEADLINE_SECONDS`
(tests/install/test_manifests.py keeps the two equal); `cutover plan`, run outside a Job, compares with the shipped
value. Called by the CLI (each phase in a Job) and `cutover plan`.
"""

from __future__ import annotations

from cutover.plan import Plan

SHIPPED = 2400.0  # seconds: the shipped hook Jobs' and CronJobs' activeDeadlineSeconds
MARGIN = 300.0  # seconds one Job needs beyond its waits: proofs, fitness rounds, the commit, the refresh, Events
MERGE_WAIT = 3600.0  # seconds a pull-request-mode commit waits for someone to merge it, in the Job that opened it


def longest_job(plan: Plan, *, whole_path: bool = False, sync_wait: float = 0.0) -> float:
    """The longest one Job of this plan may run: the startup wait (verify.maxWait), or the longer of it and the
    drain (handoff.drainTimeout) where a handoff or a retirement drains (within a gap, recreate's or a bridge's
    that leaves names unanswered, the wait is bounded by handoff.maxGap, when shorter), each hop being a hook Job
    of its own; `whole_path` (`cutover run`, `cutover rollback`: every hop in one Job) adds them up with
    `sync_wait`, how long ArgoCD's apply is waited for (twice through a bridge); the wait for a pull request's
    merge (git.mode pull-request: the Job that opens it waits for it); plus MARGIN."""
    wait, drain, applies = plan.verify.max_wait, 0.0, 1
    if plan.handoff.strategy == "recreate" and plan.handoff.max_gap is not None:
        wait, drain = min(wait, plan.handoff.max_gap), plan.handoff.drain_timeout
    elif plan.handoff.strategy == "bridge":  # the bridge serves already: its hop is a proof, not a startup
        drain, applies = plan.handoff.drain_timeout, 2  # ArgoCD applies the bridge, then the target
        if plan.handoff.max_gap is not None:  # names the bridge does not answer: the wait is within the gap
            wait = min(wait, plan.handoff.max_gap)
    if plan.handoff.retire_after is not None:  # a PostSync or an audit may drain the backend it retires
        drain = plan.handoff.drain_timeout
    merge = MERGE_WAIT if plan.git.mode == "pull-request" else 0.0  # after the proof, before the apply
    if whole_path:
        return drain + wait + merge + applies * sync_wait + MARGIN
    return max(drain, wait) + merge + MARGIN


def warning(plan: Plan, deadline: float, *, whose: str, whole_path: bool = False,
            sync_wait: float = 0.0) -> str | None:
    """What to say when `deadline` (seconds) is too short for `longest_job`; None when it is not."""
    need = longest_job(plan, whole_path=whole_path, sync_wait=sync_wait)
    if need <= deadline:
        return None
    merged = ", then up to 3600s for the pull request's merge" if plan.git.mode == "pull-request" else ""
    what = ("the drain or the wait within handoff.maxGap" if plan.handoff.max_gap is not None else
            "the drain or verify.maxWait" if plan.handoff.strategy == "bridge" or plan.handoff.retire_after is not None
            else "verify.maxWait")
    return (f"{whose} activeDeadlineSeconds ({deadline:g}s) is shorter than one hook Job of this plan may take "
            f"({need:g}s: {what}{merged} and {MARGIN:g}s to prove and commit): the Job controller would kill it "
            "mid-wait")


def sync_timeout(plan: Plan) -> float:
    """The least ArgoCD sync timeout (application-controller `--sync-timeout`, `controller.sync.timeout.seconds` in
    argocd-cmd-params-cm; 0, none, by default) a sync of this plan needs: its PreSync gate (a proof) and its PostSync
    hop (`longest_job`). From ArgoCD 3.4 on, ending a sync deletes its running hook Jobs: a wait cut short."""
    return longest_job(plan) + MARGIN


def sync_timeout_note(plan: Plan) -> str:
    """What `cutover plan` says of ArgoCD's sync timeout, which cutover cannot read (it lives in ArgoCD's own
    configuration)."""
    return (f"a sync of this plan may run its hooks for {sync_timeout(plan):g}s: keep ArgoCD's sync timeout "
            "(controller.sync.timeout.seconds in argocd-cmd-params-cm, --sync-timeout) at 0, its default, or above "
            "that; ending a sync deletes its running hook Jobs (ArgoCD 3.4 and later)")

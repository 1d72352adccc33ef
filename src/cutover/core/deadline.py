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


def longest_job(plan: Plan, *, whole_path: bool = False, sync_wait: float = 0.0) -> float:
    """The longest one Job of this plan may run: the startup wait (verify.maxWait), or under recreate the longer
    of the drain (handoff.drainTimeout) and the wait within the gap (handoff.maxGap, when shorter), each hop being a
    hook Job of its own; `whole_path` (`cutover run`, `cutover rollback`: every hop in one Job) adds them up with
    `sync_wait`, how long ArgoCD's apply is waited for; plus MARGIN."""
    wait, drain = plan.verify.max_wait, 0.0
    if plan.handoff.strategy == "recreate" and plan.handoff.max_gap is not None:
        wait, drain = min(wait, plan.handoff.max_gap), plan.handoff.drain_timeout
    if whole_path:
        return drain + wait + sync_wait + MARGIN
    return max(drain, wait) + MARGIN


def warning(plan: Plan, deadline: float, *, whose: str, whole_path: bool = False,
            sync_wait: float = 0.0) -> str | None:
    """What to say when `deadline` (seconds) is too short for `longest_job`; None when it is not."""
    need = longest_job(plan, whole_path=whole_path, sync_wait=sync_wait)
    if need <= deadline:
        return None
    what = ("the drain or the wait within handoff.maxGap" if plan.handoff.strategy == "recreate"
            and plan.handoff.max_gap is not None else "verify.maxWait")
    return (f"{whose} activeDeadlineSeconds ({deadline:g}s) is shorter than one hook Job of this plan may take "
            f"({need:g}s: {what} and {MARGIN:g}s to prove and commit): the Job controller would kill it mid-wait")

"""Whether ArgoCD has taken cutover's newest commit, for the nudge that follows a hook's commit (docs/sources.md,
"After the hook"). Pure.

A hook pushes its commit while the hook's own operation runs, and a refresh then would have ArgoCD compare the
commit during the operation and sync it afterwards as a selective self-heal, without hooks (argo-cd#27875). When
an automated operation ends, ArgoCD compares once more, but through the repo-server's cached branch resolution
(argo-cd `controller/appcontroller.go`: "Do not force revision resolution on automated operations"; the cache
lives 3 minutes by default), so under ArgoCD's defaults the commit waits for the cache to expire and the next
periodic look: minutes per hop. The nudge, a Job the hook creates, waits for the operation to end and then asks
for a refresh, which resolves the branch anew: ArgoCD sees the commit and syncs it in full, hooks and all, within
seconds. These rules say where that stands. Called by `flows.nudge`.
"""

from __future__ import annotations

import enum

from cutover.core import commits, steps
from cutover.core.views import ApplicationView, Commit


class Pickup(enum.Enum):
    NOTHING = "nothing"  # no commit of ours to wait for, or ArgoCD compared it and has nothing to sync
    RUNNING = "running"  # an operation from before the commit still runs (the hook's own): wait for its end
    BEHIND = "behind"  # no operation since the commit: ask ArgoCD to look at Git now
    TAKEN = "taken"  # an operation of the commit (or of a later one) started: a full sync, hooks and all
    HOOKLESS = "hookless"  # it started as a selective sync, which runs no hook: the audit's rules take the hop


def pickup(observed: steps.Observed) -> Pickup:
    """Where ArgoCD stands with this plan's newest cutover commit (`commits.newest_commit`)."""
    app, newest = observed.application, commits.newest_commit(observed)
    if app is None or newest is None or newest.date is None:
        return Pickup.NOTHING
    if _of(app, newest, observed):
        return Pickup.HOOKLESS if app.operation_selective else Pickup.TAKEN
    if app.operation_phase in ("Running", "Terminating"):
        return Pickup.RUNNING
    compared = app.hydrator.dry_sha if app.hydrator is not None else app.sync_revision
    if compared == newest.sha and app.sync_status == "Synced":
        return Pickup.NOTHING  # compared, and nothing it renders changed (a workload in another Application)
    return Pickup.BEHIND


def _of(app: ApplicationView, newest: Commit, observed: steps.Observed) -> bool:
    """The Application's last operation is of `newest`: it synced that very revision, or began after it on a
    revision that is none of ours (a person's later commit, which holds ours)."""
    revision = app.operation_revision
    if revision is None:
        return False
    applied = revision if app.hydrator is None else app.hydrator.dry_of(revision)
    if applied == newest.sha:
        return True
    ours = {commit.sha for commit in commits.ours(observed)}
    started = app.operation_started
    return applied not in ours and started is not None and newest.date is not None and started > newest.date


SELF_HEAL_HINT = ("with a Git webhook on the repository, set selfHeal: false on this Application (every hop's sync "
                  "then runs its hooks; drift is corrected at its next sync, not at once), or ArgoCD's fixed "
                  "self-heal delay controller-wide (docs/install.md, step 7)")


def self_heal_race(app: ApplicationView | None, *, always: bool, nudge: bool) -> str | None:
    """What a person should know before a hop's sync (said by `cutover plan` and the gate): with `selfHeal: true`, a
    comparison while the hook's sync runs (a Git webhook at cutover's push; `argocd.refresh: always`, certainly) may
    make the next sync a selective self-heal that runs no hook under ArgoCD's default self-heal backoff (argo-cd
    `controller/appcontroller.go`, autoSync; the tier measured 18 of 20 with both hooks with a webhook at every
    push). `selfHeal: false` takes that path away for this Application alone. None when the path is not there.
    `always`: argocd.refresh always; `nudge`: a refresh after the hook's sync (argocd.refresh true or always)."""
    if app is None or not app.self_heal:
        return None
    how = "cutover's own refresh at its push (argocd.refresh: always)" if always else \
        "a Git webhook at cutover's push, or anyone's refresh while the sync runs"
    return (f"Application {app.name} syncs with selfHeal: true: {how} may make a hop's sync a selective self-heal "
            "that runs no hook under ArgoCD's default self-heal backoff (argo-cd#27875); "
            + ("the nudge takes such a sync over at once (verified, the next hop taken)" if nudge else
               "the audit CronJob takes such a sync over at its schedule")
            + ", but none of your own hooks runs in it")

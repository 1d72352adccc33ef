"""Kills and re-runs: a Job stopped (SIGTERM) or killed (SIGKILL) right after a step; the run after it
finishes the job without a second commit (docs/guarantees.md #5)."""

from __future__ import annotations

from harness import BACK, RUN, SWITCH, Case, failed_pod, hung_pod, kill, switched_by_hand

CASES = [
    # kills and re-runs
    *[Case("kill", f"run killed at {event}", steps=kill(("run",), event), saw=(event,))
      for event in ("lock.acquired", "target.watching", "target.ready", "names.proven", "git.committed",
                    "argocd.refresh_requested", "argocd.waiting", "argocd.synced", "service.verified")],
    Case("kill", "run hard-killed at names.proven: its pod is gone", steps=kill(("run",), "names.proven", hard=True),
         saw=("names.proven", "lock.taken_over"), unseen=("lock.waiting",)),
    Case("kill", "run hard-killed at names.proven: its pod still Running", hung_pod("cutover-job-0"),
         steps=kill(("run",), "names.proven", hard=True), saw=("names.proven", "lock.waiting"),
         unseen=("lock.taken_over",)),
    Case("kill", "run hard-killed at names.proven: a person's run", steps=kill(("run",), "names.proven", hard=True,
                                                                            pod=False),
         saw=("names.proven", "lock.waiting"), unseen=("lock.taken_over",)),
    Case("kill", "postsync hard-killed at target.ready: its pod failed", failed_pod("cutover-job-0"),
         steps=kill(("postsync",), "target.ready", hard=True), saw=("target.ready", "lock.taken_over")),
    Case("kill", "run hard-killed at git.committed", steps=kill(("run",), "git.committed", hard=True),
         saw=("git.committed",)),  # the commit is in Git: the next Job has nothing left to lock for
    *[Case("kill", f"postsync killed at {event}", steps=kill(("postsync",), event), saw=(event,))
      for event in ("lock.acquired", "target.ready", "names.proven", "git.committed", "argocd.refresh_requested")],
    *[Case("kill", f"rollback killed at {event}", steps=kill(("rollback",), event, before=RUN),
           commits=(SWITCH, BACK), saw=(event,))
      for event in ("lock.acquired", "names.proven", "git.committed", "argocd.synced")],
    Case("kill", "presync killed at presync.gating", switched_by_hand, commits=("ops: switch to candle",),
         steps=kill(("presync",), "presync.gating"), saw=("presync.gating",)),
    Case("kill", "syncfail killed at cutover.failed", commits=(),
         steps=kill(("syncfail",), "cutover.failed"), saw=("cutover.failed",)),
]

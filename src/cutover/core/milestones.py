"""The milestone events of a cutover (docs/reporting.md): one name each, shared by the code that logs them and the
Slack sink that announces them. Pure data.

Each constant is an event name as logs carry it; `STAGES` says what Slack shows for it. A failure of any
kind (the cutover's, the wait's, the proof's) is the stage "failed".
"""

from __future__ import annotations

from collections.abc import Mapping

STARTED = "cutover.started"
WAITING = "target.waiting"  # progress, coalesced by the Slack sink
READY = "target.ready"
WARMING = "target.warming"  # Ready, but answering slower than verify.fitness.maxLatency (docs/fitness.md)
PROVEN = "names.proven"
COMMITTED = "git.committed"
CHANGE_OPENED = "git.change_opened"
SYNCED = "argocd.synced"
VERIFIED = "service.verified"
COMPLETED = "cutover.completed"
FAILED = "cutover.failed"
FAILED_FAST = "target.failed_fast"
BUDGET_EXHAUSTED = "target.budget_exhausted"
NAMES_FAILED = "names.failed"
ROLLED_BACK = "rollback.committed"
HELD = "cutover.held"
# docs/capacity.md: the hops of a handoff
DRAINING = "handoff.draining"
FREED = "handoff.freed"
RESTORED = "handoff.restored"
GAP_CLOSED = "handoff.gap_closed"
BRIDGING = "handoff.bridging"  # strategy bridge: the hop to the bridge begins
BRIDGED = "handoff.bridged"  # ... the bridge's selector committed
BRIDGE_VERIFIED = "handoff.bridge_verified"  # ... and checked through the Service, before the source is freed
RETIRED = "handoff.retired"  # handoff.retire: the backend a verified switch left, drained and freed after `after`

STAGES: Mapping[str, str] = {
    STARTED: "started", WAITING: "waiting for the target", READY: "target ready",
    WARMING: "warming up", PROVEN: "names proven",
    COMMITTED: "committed", CHANGE_OPENED: "pull request opened", SYNCED: "synced by ArgoCD",
    VERIFIED: "verified", COMPLETED: "completed", FAILED: "failed", FAILED_FAST: "failed",
    BUDGET_EXHAUSTED: "failed", NAMES_FAILED: "failed", ROLLED_BACK: "rolled back", HELD: "held",
    DRAINING: "draining the source", FREED: "source freed", RESTORED: "workload restored",
    GAP_CLOSED: "gap closed", BRIDGING: "switching to the bridge", BRIDGED: "bridge committed",
    BRIDGE_VERIFIED: "bridge serves", RETIRED: "source retired",
}

"""A fleet's step order, as a later step's gate keeps it (docs/fleet.md, "The order of the steps"). Pure.

RollingSync starts a step once every Application of the steps before it is Healthy in the ApplicationSet's status,
and an entry leaves Healthy only once its Application's own status names the new revision (argo-cd v3.5
`applicationset/progressivesync/progressive_sync.go`): a later step's Application refreshed before an earlier
step's is started beside it (argo-cd#29410). So the gate of a later step looks at the earlier steps' Applications
itself: each must have synced the revision this gate's sync applies, and proven it, before this cluster switches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from cutover.core.views import ApplicationView

FAILED = ("Failed", "Error")


@dataclasses.dataclass(frozen=True)
class Standing:
    """Where the steps before this cluster's stand with a revision: each Application's name, said."""

    done: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()  # not synced with that revision yet, or its sync still runs
    failed: tuple[str, ...] = ()  # its sync of that revision failed (a gate or a verifier refused it)

    @property
    def ready(self) -> bool:
        return not self.waiting and not self.failed


def standing(earlier: Sequence[ApplicationView], revision: str) -> Standing:
    """`revision` may be a hook Job name's first 7 characters. Done: the Application synced it whole and
    succeeded (its history, which records nothing else), or it is Synced and Healthy at it (a commit that
    changes nothing there: no sync to wait for). Failed: its last operation, on that revision, failed."""
    done, waiting, failed = [], [], []
    for app in earlier:
        if any(deployed.startswith(revision) for deployed in app.deployed) or (
                app.sync_status == "Synced" and app.health == "Healthy"
                and (app.sync_revision or "").startswith(revision)):
            done.append(app.name)
        elif app.operation_phase in FAILED and (app.operation_revision or "").startswith(revision):
            failed.append(f"{app.name}: {app.failure()}")
        else:
            at = f" at {app.sync_revision[:7]}" if app.sync_revision else ""
            running = f"; its sync of {(app.operation_revision or '?')[:7]} runs" \
                if app.operation_phase == "Running" else ""
            waiting.append(f"{app.name} ({app.sync_status or 'unknown'}{at}, {app.health or 'no health'}{running})")
    return Standing(tuple(done), tuple(waiting), tuple(failed))

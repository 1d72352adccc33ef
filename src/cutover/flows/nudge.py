"""`cutover nudge`: what the Job a hook makes after its commit runs (docs/sources.md, "After the hook").

It waits for the operation the hook ran in to end, asks ArgoCD to look at Git (a refresh resolves the branch
anew, so the sync that follows is a full one, hooks and all), and watches the sync of the commit start: seconds
after the hook, where ArgoCD's own look comes minutes later under its defaults. A sync that starts without hooks
(a refresh during the operation: a Git webhook, a person) is followed at once by what the audit does for one, the
next hop included, instead of at the audit's schedule. Git is read once: the commit the hook pushed is there
before the Job that nudges it. Called by the CLI.
"""

from __future__ import annotations

import asyncio
import dataclasses

import structlog

from cutover.core import commits, pickup, steps
from cutover.core.results import Audited, Nudged
from cutover.flows import phases, sync
from cutover.flows.context import Run

ENDED_WAIT = 600.0  # seconds for the hook's operation to end: it has, once the hook exits, but for SyncFail's waits
PICKUP_WAIT = 60.0  # seconds for the sync of the commit to start after a refresh, before asking once more
REFRESHES = 3  # refreshes asked in all: one is enough unless ArgoCD was busy elsewhere
POLL = 1.0  # seconds between looks at the Application

log = structlog.get_logger("cutover")
# `--dry-run`: what one look says, in the words of a nudge's end
DRY = {pickup.Pickup.TAKEN: "taken", pickup.Pickup.HOOKLESS: "taken", pickup.Pickup.NOTHING: "nothing",
       pickup.Pickup.RUNNING: "running", pickup.Pickup.BEHIND: "not_taken"}


async def nudge(run: Run) -> Nudged | Audited:
    run.bind("nudge")
    observed, _ = await phases.observe(run)
    loop = asyncio.get_running_loop()
    started, refreshed, asked = loop.time(), None, 0
    while True:
        observed = dataclasses.replace(observed, application=await sync.application(run))
        found = pickup.pickup(observed)
        waited = round(loop.time() - started, 1)
        if run.dry_run:  # one look, no refresh: where ArgoCD stands with the newest commit
            return Nudged(DRY[found], _newest(observed), waited, 0)
        if found is pickup.Pickup.TAKEN:
            app = observed.application
            log.info("argocd.taken", revision=((app.operation_revision if app else None) or "")[:12], waited=waited,
                     refreshes=asked)
            return Nudged("taken", _newest(observed), waited, asked)
        if found is pickup.Pickup.HOOKLESS:
            return await _hookless(run, waited)
        if found is pickup.Pickup.NOTHING:
            return Nudged("nothing", _newest(observed), waited, asked)
        if found is pickup.Pickup.RUNNING and loop.time() - started > ENDED_WAIT:
            log.warning("argocd.still_running", waited=waited, hint="the operation the hook ran in has not ended: "
                        "ArgoCD syncs the commit when it does, at its next look at Git")
            return Nudged("running", _newest(observed), waited, asked)
        if found is pickup.Pickup.BEHIND and (refreshed is None or loop.time() - refreshed > PICKUP_WAIT):
            if asked == REFRESHES:
                log.warning("argocd.not_taken", waited=waited, refreshes=asked, hint="ArgoCD did not start a "
                            "sync of the commit after as many refreshes: read the Application's conditions")
                return Nudged("not_taken", _newest(observed), waited, asked)
            await sync.refresh(run)
            refreshed, asked = loop.time(), asked + 1
        await asyncio.sleep(POLL)


async def _hookless(run: Run, waited: float) -> Audited | Nudged:
    """A selective sync of the commit: no PostSync will take the next hop or verify it. The audit's rules do, once
    that sync has ended, now rather than at the audit CronJob's schedule."""
    log.warning("argocd.synced_without_hooks", waited=waited, hint="a refresh during the hook's operation (a Git "
                "webhook, a person, refresh: always) made ArgoCD sync the commit as a selective self-heal, without "
                "hooks; the audit's rules take it from here (docs/install.md, \"Git webhooks\")")
    loop = asyncio.get_running_loop()
    until = loop.time() + max(PICKUP_WAIT, ENDED_WAIT - waited)  # within the Job's 900 s, the audit's check after
    while True:
        app = await sync.application(run)
        if app is None or app.operation_phase not in ("Running", "Terminating"):
            return await phases.audit(run)
        if loop.time() > until:  # said before the Job's deadline kills it mid-wait: the audit takes it later
            log.warning("argocd.still_running", hint="the sync without hooks has not ended: the audit CronJob takes "
                        "the switch or the next hop once it has")
            return Nudged("running", app.operation_revision, waited, 0)
        await asyncio.sleep(POLL)


def _newest(observed: steps.Observed) -> str | None:
    newest = commits.newest_commit(observed)
    return newest.sha if newest else None

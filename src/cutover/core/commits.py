"""What cutover's own commits say, read back (docs/guarantees.md #5): which backend a selector is, the last switch
and the last step of each workload, a rollback's hold and where a rollback goes, the newest commit of a plan and
the order of two, the hop to a bridge, and the id of one cutover. Pure; called by the rules and the phases."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime

from cutover.core import steps
from cutover.core.views import Commit
from cutover.errors import InvalidInput
from cutover.plan import Plan


def bridge_hop(last: Commit | None, plan: Plan) -> Commit | None:
    """The newest switch, when it was the hop to the plan's bridge on a path elsewhere."""
    bridge = plan.handoff.bridge
    if last is None or bridge is None or last.trailers.to != bridge or last.trailers.bridge != bridge:
        return None
    return last if last.trailers.toward else None


def ours(observed: steps.Observed) -> list[Commit]:
    """This plan's newest cutover commits: the last switch, and each backend's last free or restore."""
    return [commit for commit in (observed.last, *observed.workloads.steps.values()) if commit is not None]


def newest_commit(observed: steps.Observed) -> Commit | None:
    """The newest cutover commit of this plan: a switch, a free or a restore (by its date in Git; within one second,
    a step's restore, which is pushed after its free)."""
    dated = [commit for commit in ours(observed) if commit.date is not None]
    return max(dated, key=lambda commit: (commit.date or datetime.min, commit.trailers.step == "restore")) \
        if dated else None


def pushed_before(commit: Commit, other: Commit) -> bool:
    """By date; within one second (a date's precision) a hop's free is pushed before its restore."""
    if commit.date is None or other.date is None or commit.sha == other.sha:
        return False
    return commit.date < other.date or (commit.date == other.date and commit.trailers.step == "free"
                                          and other.trailers.step == "restore")


def after(commit: Commit, other: Commit) -> bool:
    return commit.date is not None and other.date is not None and commit.date > other.date


def backend_of(plan: Plan, selector: Mapping[str, str]) -> str | None:
    """The backend of the plan whose selector this is, exactly; None for any other selector."""
    return next((name for name, backend in plan.backends.items() if dict(backend.selector) == dict(selector)),
                None)


def held_by(last: Commit | None, plan: Plan, *, lifted: str | None = None) -> str | None:
    """The backend a rollback holds the Service on, while the plan still names the target rolled back from (on a
    path through a bridge, the switch that left it may be the bridge's: any other target than the hold's then). A
    rollback's hop to its bridge holds nothing yet: it says where the path ends. The hold lasts until the plan's
    target changes: once a run saw it changed (`lifted`, that rollback commit), a target set back is no hold."""
    if last is None or not _holding(last) or last.sha == lifted:
        return None
    trailers = last.trailers
    if trailers.source == plan.target or (trailers.bridge and trailers.hold != plan.target):
        return trailers.hold
    return None


def hold_lifted(last: Commit | None, plan: Plan, *, lifted: str | None = None) -> str | None:
    """The rollback commit whose hold the plan's target has just ended (its target no longer the one rolled back
    from), for the runs that come after to remember: None when there is none, or it is remembered already."""
    if last is None or not _holding(last) or last.sha == lifted:
        return None
    return last.sha if held_by(last, plan) is None else None


def _holding(last: Commit) -> bool:
    """A rollback's switch, holding on where it went (its hop to a bridge says where the path ends, holding
    nothing yet)."""
    return bool(last.trailers.hold) and last.trailers.to == last.trailers.hold


def previous_backend(plan: Plan, now: str | None, last: Commit | None) -> str:
    """Where a rollback goes: the last cutover's source, else the plan's only other backend."""
    came_from = last.trailers.source if last is not None else None
    if last is not None and last.trailers.to == now and came_from in plan.backends and came_from != now:
        assert came_from is not None
        return came_from
    others = [name for name in plan.backends if name != now]
    if len(others) == 1:
        return others[0]
    raise InvalidInput(f"cannot tell which backend to roll back to (Git selects {now}; no cutover commit says "
                       f"where it came from)", cause="rollback_unknown",
                       hint="run `cutover run --to BACKEND` with the backend to go back to")


def last_cutover(history: Sequence[Commit], plan: Plan) -> Commit | None:
    """The newest cutover commit of this plan that switched the selector: the state the phases read back (a commit
    that freed or restored a workload is not one: its trailers speak of a backend, not of the Service)."""
    return next((commit for commit in history if commit.trailers.plan == plan.name and not commit.trailers.step),
                None)


def commit_to(history: Sequence[Commit], plan: Plan, to: str) -> Commit | None:
    """The newest cutover commit of this plan that switched to `to`: what made Git hold it."""
    return next((commit for commit in history if commit.trailers.plan == plan.name and commit.trailers.to == to
                 and not commit.trailers.step), None)


def last_step(history: Sequence[Commit], plan: Plan, backend: str) -> Commit | None:
    """The newest commit of this plan that freed or restored `backend`'s workload."""
    return next((commit for commit in history if commit.trailers.plan == plan.name and commit.trailers.step
                 and commit.trailers.backend == backend), None)


def fleet_change(plan: Plan, revision: str) -> str:
    """A fleet change (docs/fleet.md): the same in every cluster that syncs the fleet's commit (one plan, one
    revision), so that every cluster's line goes into one Slack thread."""
    return hashlib.sha256(f"fleet:{plan.service.namespace}/{plan.service.name}:{revision}".encode()).hexdigest()[:12]


def cutover_id(plan: Plan, *, from_backend: str | None, to_backend: str, service_uid: str) -> str:
    """Stable for one intent (this Service, from, to), so that re-runs speak of the same cutover."""
    seed = f"{plan.service.namespace}/{plan.service.name}:{service_uid}:{from_backend}->{to_backend}"
    return hashlib.sha256(seed.encode()).hexdigest()[:12]

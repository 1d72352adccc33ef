"""The hops of a handoff that are not a selector switch (docs/capacity.md): reading what Git says of the backends'
workloads, freeing the source (drained first) and restoring a backend, each a guarded compare-and-swap commit like the
switch, with `Cutover-Step` trailers; and what happens when the target is not proven while the gap is open (the card
given back: the target freed, the source restored with a hold; exit 6 `gap_exceeded`). The decisions are `decide`'s
(`on_capacity_held`, `gap_opened`, `Restore`); the edits are `sources.freeing`'s. A workload file's history is read
`WORKLOAD_HISTORY` commits back: a free older than that is not seen (its gap then goes unmeasured, and a restore
starts the backend at verify.minReadyPods). Called by `advance` and the phases, under the Service's Lease.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable

import structlog

from cutover.core import commits, hops, milestones, ownership, steps
from cutover.core.repository import FileVersion, GitHost
from cutover.core.results import Freed, Restored
from cutover.core.trailers import Trailers
from cutover.core.views import Commit
from cutover.engines import api
from cutover.errors import CutoverError, GapExceeded, InvalidInput
from cutover.flows import drain, sync, writeback
from cutover.flows.context import Run
from cutover.plan import Backend, Plan
from cutover.sources import field_edit, freeing
from cutover.sources.field_edit import FieldEdit
from cutover.sources.kustomize import KustomizeSource

log = structlog.get_logger("cutover")

WORKLOAD_HISTORY = 20  # commits of a workload's file read back for its newest free or restore


async def workloads(run: Run, seen: writeback.Seen) -> steps.Workloads:
    """Which backends Git holds freed, and the newest free or restore commit of each: one read of each workload
    file (the Service's file as the phase read it) and of its recent history. Nothing when no backend names a
    workload."""
    return await read_workloads(run.host, run.plan, {run.plan.git.path: seen.version.content})


async def read_workloads(host: GitHost, plan: Plan, texts: dict[str, str]) -> steps.Workloads:
    """`workloads`, on a Git host; `texts` are files read already, by path."""
    texts, histories = dict(texts), {}
    freed, newest = set(), {}
    for name, backend in plan.backends.items():
        if backend.workload is None:
            continue
        where = _where(plan, backend)
        if where.path not in texts:
            texts[where.path] = (await host.read(where.path)).content
        if field_edit.read_field(texts[where.path], where.field, source=where.path) == str(where.freed):
            freed.add(name)
        if where.path not in histories:
            histories[where.path] = await host.history(where.path, limit=WORKLOAD_HISTORY)
        step = commits.last_step(histories[where.path], plan, name)
        if step is not None:
            newest[name] = step
    return steps.Workloads(frozenset(freed), newest)


async def free(run: Run, observed: steps.Observed, step: steps.Free, *,
               before_write: Callable[[], Awaitable[None]], serving: bool = True) -> Freed:
    """Drain `step.backend` (its in-flight requests to 0, bounded by handoff.drainTimeout), then free its workload
    by a commit (`Cutover-Step: free`, the value it held in `Cutover-Previous`). A backend that never served
    (`serving` False: a target given up on) is not drained."""
    plan = run.plan
    backend = plan.backends[step.backend]
    await _own_engine(run, step.backend)
    drained = await _drain(run, step) if serving else None
    where = _where(plan, backend)
    trailers = _trailers(run, observed, step.backend, to=step.to, step="free")

    def message(edit: FieldEdit) -> str:
        how = f"Drained: {_drained(drained.as_data())}." if drained else "Not drained: it never served."
        return _message(plan.service.name, f"free {step.backend} for {step.to}",
                        f"{how}\nFreed: {where.field} = {where.freed} "
                        f"(was {edit.old if edit.old is not None else 'absent'}) in {where.path}.",
                        dataclasses.replace(trailers, previous=freeing.previous_of(edit),
                                            added=str(edit.created) if edit.created else None))

    change = writeback.FieldChange(where.path, lambda text: freeing.free(text, where, source=where.path), message,
                                   branch=plan.branch(f"{plan.name}-free-{step.backend}"),
                                   check=_render_check(run, step.backend, where, wanted=str(where.freed)))
    result = await writeback.commit_field(run.host, plan, change, author=run.author, before_write=before_write)
    measured = drained.as_data() if drained else {}
    log.info(milestones.FREED, backend=step.backend, to=step.to, commit=result.sha or None,
             committed=result.committed, drain=measured, max_gap=plan.handoff.max_gap)
    await run.event(observed.live, "CutoverFreed", f"{step.backend} {'drained and ' if drained else ''}freed for "
                    f"{step.to}" + (f" in {result.sha[:12]}" if result.sha else " (already in Git)"))
    return Freed(step.backend, step.to, result.committed, result.sha, result.url, measured)


async def _own_engine(run: Run, name: str) -> None:
    """The workload a free would stop is the backend's own (its pods carry its selector, and no other runs it):
    checked on the live pods before anything is drained or written, so a plan cannot have another team's
    Deployment of its choosing set to zero (docs/security.md)."""
    plan = run.plan
    backend = plan.backends[name]
    workload = backend.workload
    assert workload is not None  # the plan reader requires one where a handoff frees
    pods, _ = await run.cluster.pods(plan.service.namespace, {})
    why = ownership.stranger(pods, kind=workload.kind, name=workload.name, namespace=plan.service.namespace,
                             selector=backend.selector)
    if why is not None:
        raise InvalidInput(f"backends.{name}.workload: {why}; nothing drained or written",
                           cause="workload_not_backend",
                           hint=f"name the {workload.kind} whose pods {name}'s selector selects (kubectl -n "
                                f"{plan.service.namespace} get pods --show-labels)")


async def _drain(run: Run, step: steps.Free) -> drain.Drained:
    plan = run.plan
    backend = plan.backends[step.backend]
    pods, _ = await run.cluster.pods(plan.service.namespace, backend.selector)
    log.info(milestones.DRAINING, backend=step.backend, to=step.to, pods=len(pods),
             timeout=plan.handoff.drain_timeout)
    async with api.new_client(timeout=plan.verify.request_timeout) as client:
        return await drain.drain_backend(client, backend, pods, within=plan.handoff.drain_timeout)


async def restore(run: Run, observed: steps.Observed, step: steps.Restore, *,
                  before_write: Callable[[], Awaitable[None]] | None = None) -> Restored:
    """Write back exactly what `step.backend`'s workload held before its free (from that commit's trailers)."""
    plan = run.plan
    where = _where(plan, plan.backends[step.backend])
    freed_by = observed.workloads.steps.get(step.backend)
    back = freeing.put_back(where, freed_by.trailers if freed_by else None, replicas=plan.verify.min_ready_pods)
    previous, added = back.value, back.added
    how = f"freed in {freed_by.sha[:12]}" if back.recorded and freed_by else \
        "no cutover commit freed it: started at verify.minReadyPods"
    trailers = _trailers(run, observed, step.backend, to=step.to, step="restore", hold=step.hold)

    def message(edit: FieldEdit) -> str:
        return _message(plan.service.name, f"restore {step.backend}", f"Restored: {where.field} = {previous} in "
                        f"{where.path} ({how}).", trailers)

    change = writeback.FieldChange(where.path, lambda text: freeing.restore(text, where, previous=previous,
                                                                            added=added, source=where.path),
                                   message, branch=plan.branch(f"{plan.name}-restore-{step.backend}"),
                                   check=_render_check(run, step.backend, where, wanted=None))
    result = await writeback.commit_field(run.host, plan, change, author=run.author, before_write=before_write)
    log.info(milestones.RESTORED, backend=step.backend, to=step.to, commit=result.sha or None,
             committed=result.committed, value=previous, hold=step.hold)
    await run.event(observed.live, "CutoverRestored", f"{step.backend} restored"
                    + (f" in {result.sha[:12]}" if result.sha else " (already in Git)"), warning=bool(step.hold))
    return Restored(step.backend, step.to, result.committed, result.sha, result.url,
                    None if previous == freeing.ABSENT else previous)


async def gap_failed(run: Run, observed: steps.Observed, opened: Commit, failure: CutoverError, *, source: str,
                     to: str, deadline: float, before_write: Callable[[], Awaitable[None]]) -> CutoverError:
    """The target failed while the gap was open: free the target (its pods hold the card the source needs back),
    restore the source, hold the Service on it, ask ArgoCD to refresh. maxGap spent is `gap_exceeded` (exit 6); any
    other failure keeps its own cause, saying the source was restored."""
    loop = asyncio.get_running_loop()
    log.warning("handoff.target_failed", cause=failure.cause, message=failure.message, to=to,
                then=f"free {to}, restore {source}")
    try:
        back = await give_back(run, observed, source=source, to=to, before_write=before_write)
    except CutoverError as exc:
        return type(failure)(f"{failure.message}; giving the card back to {source} failed: {exc.message}",
                             cause="restore_failed", hint=exc.hint)
    restored = f"{to} freed and {source} restored in {back.sha[:12]}" if back.sha else f"{source} restored"
    plan = run.plan
    bridge = plan.handoff.bridge if plan.handoff.strategy == "bridge" else None
    stays = f"the Service goes back to {source} through {bridge} once {source} is proven" if bridge else \
        "the Service stays on it"
    if loop.time() >= deadline:
        since = f"the switch to the bridge {bridge} in {opened.sha[:12]} left {', '.join(plan.dark_names)} " \
                "unanswered" if bridge else f"{source} was freed in {opened.sha[:12]}"
        return GapExceeded(f"{to} was not proven within handoff.maxGap ({plan.handoff.max_gap or 0.0:g}s since "
                           f"{since}): {failure.message}; {restored}, {stays}",
                           hint=f"read why {to} did not come up in time (its pods' events and logs); then change the "
                                "plan's target again (the restore holds the Service until then), or raise "
                                "handoff.maxGap")
    return type(failure)(f"{failure.message}; {restored}, {stays}", cause=failure.cause,
                         hint=f"{failure.hint}; the restore holds the Service on {source} until the plan's target "
                              "changes")


async def give_back(run: Run, observed: steps.Observed, *, source: str, to: str,
                    before_write: Callable[[], Awaitable[None]]) -> Restored:
    """The card back to the source: the target freed (it never served: not drained), the source restored with a
    hold on it, ArgoCD asked to refresh. Under bridge the restore is a rollback's (`hops.rolling_back`): the next
    hop switches from the bridge back to the source."""
    await free(run, observed, steps.Free(to, source), before_write=before_write, serving=False)
    back = await restore(run, observed, hops.given_back(run.plan, source=source, to=to), before_write=before_write)
    await sync.refresh(run)
    return back


def _where(plan: Plan, backend: Backend) -> freeing.Freeing:
    """Where `backend`'s workload is freed: its file (the plan's Service file by default), the one field, and the
    Service's namespace, the only one its document may name."""
    return freeing.freeing(backend, default_path=plan.git.path, namespace=plan.service.namespace)


def _render_check(run: Run, backend: str, where: freeing.Freeing, *,
                  wanted: str | None) -> Callable[[FileVersion, FieldEdit], Awaitable[None]] | None:
    """With `git.source: kustomize`, a free or a restore is render-checked like the switch (docs/capacity.md): the
    build of the Application's directory with the edit holds the workload's field at `wanted` (None: a restore, not
    checked) and nothing else changed. Workloads the build does not render (another Application's) are not."""
    source, workload = run.source, run.plan.backends[backend].workload
    if not isinstance(source, KustomizeSource) or workload is None or workload.values_key is not None:
        return None
    rendered = freeing.rendered_field(workload)

    async def check(version: FileVersion, edit: FieldEdit) -> None:
        await source.check_workload(version, edit.after, path=where.path, kind=workload.kind, name=workload.name,
                                    field=rendered, wanted=wanted)

    return check


def _trailers(run: Run, observed: steps.Observed, backend: str, *, to: str, step: str,
              hold: str | None = None) -> Trailers:
    plan, live = run.plan, observed.live
    source = hops.path_source(observed, plan)
    ident = commits.cutover_id(plan, from_backend=source, to_backend=to, service_uid=live.uid)
    if "cutover_id" not in structlog.contextvars.get_contextvars():  # a hop of its own: its cutover's Slack thread
        structlog.contextvars.bind_contextvars(cutover_id=ident)
    return Trailers(id=ident, source=source, to=to, plan=plan.name, step=step, backend=backend, hold=hold)


def _message(service: str, title: str, body: str, trailers: Trailers) -> str:
    return f"cutover({service}): {title}\n\n{body}\n\n{trailers.render()}\n"


def _drained(data: dict[str, object]) -> str:
    if data.get("complete"):
        return f"no request in flight after {data.get('seconds')}s (by {data.get('by')})"
    return f"timed out after {data.get('seconds')}s with {data.get('running')} still running"

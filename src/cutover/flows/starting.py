"""What a sync is about to start, judged before ArgoCD applies it (docs/capacity.md, "Before ArgoCD starts the
target").

With the engines in the Service's Application, a commit that starts the plan's target (its Deployment or
StatefulSet asks for more pods than are bound now) is waited for inside ArgoCD's Sync phase, where no hook runs:
on a cluster whose cards the source holds, the target stays Pending and the sync sits Running until the target's
progress deadline, saying nothing. So the PreSync gate renders the revision being synced and judges where the new
pods fit (`capacity.judge`, as the PostSync judges a Pending pod): not beside the source is
`capacity_held_by_source`, nowhere is `unschedulable`, each with the nodes' figures, and the sync fails before
ArgoCD applies anything. A revision that frees the source in the same sync (a recreate's swap, or a person's
commit that does it) is judged with the source gone. The gate says the revision's sync order too
(`sync_order.findings`, docs/install.md "Sync waves and deadlines"). Called by the PreSync gate.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from cutover.core import commits, decide
from cutover.core.repository import FileVersion, GitHost
from cutover.errors import CutoverError, TargetNotReady
from cutover.flows.context import Run
from cutover.kube import capacity, payloads
from cutover.plan import Plan
from cutover.sources import sync_order, yaml_edit
from cutover.sources.base import Source

log = structlog.get_logger("cutover")


async def ahead(run: Run, *, ref: str | None, gating: bool) -> list[dict[str, Any]] | None:
    """The PreSync's look at what the revision `ref` is about to do, before ArgoCD applies it: its sync order said
    (on a switch, or every hop of a handoff), and where a target it starts would fit judged (`judge`). The render
    it judged; None when there is none (a chart without argocd.server, or unreadable: said)."""
    plan = run.plan
    try:
        docs = await judged(run.host, run.source, plan, await run.host.read(plan.git.path, ref=ref), ref=ref)
    except CutoverError as exc:
        log.warning("sync_order.unread", error=exc.message, cause=exc.cause, hint=exc.hint)
        return None
    if docs is None:
        return None  # a chart without argocd.server: cutover cannot render it
    if gating or plan.handoff.strategy != "parallel":
        for found in sync_order.findings(docs, plan):  # said, never refused here: `cutover plan` refuses
            log.warning("presync.sync_order", cause=found.cause, message=found.message, hint=found.hint,
                        refused_by_plan=found.refuse)
    await judge(run, docs)
    return docs


def swap(docs: Sequence[Mapping[str, Any]] | None, plan: Plan) -> tuple[frozenset[str], frozenset[str]]:
    """What the render does to the engines: the backends whose workload it stops (replicas 0) and those it runs
    (asking for pods); nothing of either without a render."""
    counts = {name: sync_order.replicas(doc) for name, backend in plan.backends.items()
              if docs is not None and (doc := sync_order.engine(docs, backend)) is not None}
    return (frozenset(name for name, count in counts.items() if count == 0),
            frozenset(name for name, count in counts.items() if count))


async def fleet_swap(run: Run, docs: Sequence[Mapping[str, Any]] | None, *, live: str | None) -> str | None:
    """A fleet's revision that leaves the selector as it is: every other backend it runs judged where it fits
    (beside the engine serving, or with it gone when the revision stops it; TargetNotReady with the nodes' figures
    otherwise, before ArgoCD applies anything). A recreate's first commit (`decide.fleet_swap`: the engine the
    Service selects stopped, another started): the backend it starts; None for any other revision."""
    if not run.plan.fleet or docs is None:
        return None
    freed, started = swap(docs, run.plan)
    for other in sorted(started - {live}):
        await judge(dataclasses.replace(run, plan=run.plan.aimed(other)), docs)
    to = decide.fleet_swap(run.plan, live=live, freed=freed, started=started)
    if to is None:
        return None
    log.info("presync.swap", stops=live, starts=to, max_gap=run.plan.handoff.max_gap,
             hint=f"the Service keeps selecting {live}, unanswered until the fleet's next commit switches it to {to}, "
                  f"which that commit's gate proves first (docs/fleet.md)")
    return to


async def no_switch_before_start(run: Run, docs: Sequence[Mapping[str, Any]] | None, *, leaving: str | None) -> None:
    """Refuse at once a fleet's commit that switches to a target with no pod yet, which the same sync starts while
    it stops the engine serving (`decide.switch_before_start`): the gate would wait for pods ArgoCD starts only
    after it, and no cluster switches before its own target is proven."""
    plan = run.plan
    if not plan.fleet:
        return
    freed, started = swap(docs, plan)
    if plan.target not in started:
        return
    pods, _ = await run.cluster.pods(plan.service.namespace, plan.backends[plan.target].selector)
    if decide.switch_before_start(plan, leaving=leaving, freed=freed, started=started, target_pods=len(pods)):
        raise TargetNotReady(
            f"the revision switches the Service to {plan.target}, which it starts in the same sync while it stops "
            f"{leaving}: {plan.target} cannot be proven before the switch applies", cause="switch_before_start",
            hint=f"commit the swap first ({leaving} stopped, {plan.target} started, the selector as it is; "
                 f"handoff.strategy recreate), the switch next, once {plan.target} runs: its gate proves it "
                 "(docs/fleet.md)")


async def judged(host: GitHost, source: Source, plan: Plan, version: FileVersion, *,
                 ref: str | None) -> list[dict[str, Any]] | None:
    """What the sync order and the fit are judged on: the plan's render of the revision `ref`; with a plain file
    (`git.source: manifest`), which renders `git.path` alone, the files the backends' workloads name beside it too,
    where the engines' waves, progress deadlines and replicas are written (the Application applies them all)."""
    docs = await source.render(version, ref=ref)
    if docs is None or plan.git.source != "manifest":
        return docs
    paths = sorted({backend.workload.path for backend in plan.backends.values() if backend.workload is not None
                    and backend.workload.path and backend.workload.path != plan.git.path})
    for path in paths:
        found = await host.read(path, ref=ref)
        docs = [*docs, *(doc for doc in yaml_edit.documents(found.content, source=path) if doc.get("apiVersion")
                         and doc.get("kind") and not str(doc["apiVersion"]).startswith("kustomize.config.k8s.io/"))]
    return docs


async def judge(run: Run, docs: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a revision that starts the plan's target where it cannot fit (TargetNotReady, exit 3); say a fit that
    could not be judged. Nothing when the revision starts no pod of the target."""
    plan = run.plan
    target = plan.backends[plan.target]
    doc = sync_order.engine(docs, target)
    wanted = sync_order.replicas(doc) if doc is not None else None
    if doc is None or not wanted:
        return
    namespace = plan.service.namespace
    (pods, _), live = await asyncio.gather(run.cluster.pods(namespace, target.selector),
                                           run.cluster.service(namespace, plan.service.name))
    placed = sum(1 for pod in pods if pod.node_name and not pod.deleting)
    serving = commits.backend_of(plan, live.selector)
    if placed >= wanted or serving == plan.target:
        return  # nothing new to place, or the live backend's own scaling: not a cutover's
    source = plan.backends[serving] if serving is not None else None
    nodes, (bound, seen_all) = await asyncio.gather(run.cluster.nodes(), run.cluster.bound_pods(namespace))
    # the pods of every backend this revision frees go in the same sync (a recreate's swap, a bridge's hop): not
    # counted as holding what the target needs
    going = sync_order.freed(docs, plan)
    bound = [pod for pod in bound if not any(pod.namespace == namespace and pod.matches(backend.selector)
                                              for backend in going)]
    pending = _pending(doc, namespace)
    verdict = capacity.judge(target=plan.target, pending=pending, needed=wanted - placed, nodes=nodes, bound=bound,
                             source=serving if source else None, seen_all=seen_all,
                             source_pods=[pod for pod in bound if source is not None and pod.namespace == namespace
                                          and pod.matches(source.selector)])
    log.info("capacity.judged", backend=plan.target, pod=pending.name, message=verdict.summary(),
             **verdict.as_data())
    if verdict.fit is capacity.Fit.NOW:
        return
    if verdict.fit not in (capacity.Fit.ONCE_SOURCE_GONE, capacity.Fit.NOWHERE):
        log.warning("presync.fit_unknown", backend=plan.target, message=verdict.summary(),
                    hint="grant the optional ClusterRole cutover-capacity so that the gate can judge where the "
                         "target's pods fit before ArgoCD starts them (docs/capacity.md)")
        return
    held = verdict.fit is capacity.Fit.ONCE_SOURCE_GONE
    raise TargetNotReady(
        f"the revision being synced starts {plan.target} ({_kind(doc)}, {wanted} pod{'s' * (wanted != 1)}), and "
        f"{verdict.summary()}: ArgoCD would apply it and wait in its Sync phase, no hook running, until the "
        "progress deadline", cause="capacity_held_by_source" if held else "unschedulable",
        hint=(f"in a fleet, stop {serving} in the commit that starts {plan.target}, the selector as it is "
              "(handoff.strategy recreate), and switch in the next (docs/fleet.md)" if plan.fleet else
              f"commit the target stopped and let a handoff make room: handoff.strategy recreate (with maxGap) or "
              f"bridge frees {serving} by its own commits (docs/capacity.md)") if held else
             f"add capacity for {plan.target}, or lower what its pods request (docs/capacity.md)")


def _pending(doc: Mapping[str, Any], namespace: str) -> Any:
    """One of the pods the rendered workload would make, as the scheduler would judge it (its requests, its
    placement)."""
    template = (doc.get("spec") or {}).get("template") or {}
    meta = template.get("metadata") or {}
    return payloads.pod_view({"metadata": {"name": f"{_kind(doc)} (not yet applied)", "namespace": namespace,
                                           "labels": meta.get("labels") or {}},
                              "spec": template.get("spec") or {}, "status": {"phase": "Pending"}})


def _kind(doc: Mapping[str, Any]) -> str:
    return f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name', '')}"

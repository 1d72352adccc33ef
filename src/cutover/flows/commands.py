"""The commands that only read and prove: verify, status, plan, diff. Each returns a typed result (`results`)
for the CLI to render; none writes anything anywhere. The phases that write live in `phases`. Called by `cli`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from cutover import sources
from cutover.core import commits, deadline, decide, hops, pickup, steps
from cutover.core.clock import Clock
from cutover.core.repository import FileVersion, GitHost
from cutover.core.results import Diffed, Proven, Shown, Status
from cutover.core.views import Commit, ServiceView
from cutover.engines import kinds
from cutover.errors import CutoverError, InvalidInput
from cutover.flows import drain, handoff, starting, writeback
from cutover.flows.wait import judge_capacity, prove_backend
from cutover.kube import lease, lease_rules, readiness
from cutover.kube.cluster import Cluster
from cutover.plan import Backend, GitDocument, Plan, label_problem
from cutover.sources import sync_order, yaml_edit
from cutover.sources.base import Source
from cutover.sources.checkout import LocalCheckout
from cutover.sources.manifest import ManifestSource

log = structlog.get_logger("cutover")


async def verify(cluster: Cluster, plan: Plan, *, backend: str, wait: bool) -> Proven:
    chosen = plan.backend(backend)
    structlog.contextvars.bind_contextvars(service=f"{plan.service.namespace}/{plan.service.name}",
                                           cutover=plan.name)
    return await prove_backend(cluster, plan, chosen, wait=wait)


async def status(cluster: Cluster, plan: Plan, *, host: GitHost | None = None) -> Status:
    """The live Service and each backend's pods, where the target fits, who holds the Lease, and with a Git host
    (best effort) where a handoff stands in Git (`_handoff`)."""
    service = await cluster.service(plan.service.namespace, plan.service.name)
    live = commits.backend_of(plan, service.selector)
    if plan.fleet:  # docs/fleet.md: the fleet's commits choose the backend; the Service's own is the target here
        plan = plan.aimed(live) if live else plan
    pods = await asyncio.gather(*(cluster.pods(plan.service.namespace, backend.selector)
                                  for backend in plan.backends.values()))
    backends: dict[str, Any] = {}
    for (name, backend), (views, _) in zip(plan.backends.items(), pods, strict=True):
        backends[name] = {
            "engine": backend.engine, "engineProof": kinds.method_for(backend.engine, plan.verify.proof),
            "model": backend.model, "pods": len(views), "ready": sum(1 for pod in views if pod.ready),
            "states": [f"{pod.name}={readiness.pod_state(pod)}" for pod in sorted(views, key=lambda p: p.name)],
            **_by_name(name, backend),
        }
    target_pods = pods[list(plan.backends).index(plan.target)][0] if plan.target else []
    pending = next((pod for pod in sorted(target_pods, key=lambda p: p.name)
                    if pod.unschedulable_message is not None and not pod.deleting), None)
    if pending is not None:  # docs/capacity.md: where the target fits, before anyone waits on it
        verdict = await judge_capacity(cluster, plan, plan.backends[plan.target], pending, targets=target_pods,
                                       service=service)
        backends[plan.target]["capacity"] = {**verdict.as_data(), "summary": verdict.summary()}
    state = {"service": {"uid": service.uid, "clusterIP": service.cluster_ip,
                         "ports": [port.port for port in service.ports]},
             "selector": selector_text(service.selector), "liveBackend": live, "target": plan.target or None,
             "strategy": plan.handoff.strategy, "backends": backends, "lease": await _lease(cluster, plan),
             "mode": "fleet" if plan.fleet else "single"}
    if host is not None and not plan.fleet:  # a fleet's handoffs are not cutover's to take (yet)
        state["handoff"] = await _handoff(cluster, plan, host, live=service)
    return Status(state)


def _by_name(name: str, backend: Backend) -> dict[str, str]:
    """What a proof of this backend's names cannot say: an engine that answers any model name is proven by
    generating, which a misspelt name passes too, unless `model` names the weights /v1/models must report."""
    if not kinds.ENGINES[backend.engine].any_name or backend.model is not None:
        return {}
    return {"proofNote": f"{backend.engine} answers any model name, so a misspelt served name is answered too: the "
                         f"names prove generation, not the weights; set backends.{name}.model to the id or root its "
                         f"/v1/models reports (docs/engines.md)"}


async def _lease(cluster: Cluster, plan: Plan) -> dict[str, Any] | None:
    """Who works on this Service now (docs/guarantees.md #4): the Lease's holder while it is held, else None."""
    try:
        held = await cluster.lease(plan.service.namespace, lease_rules.lease_name(plan.service.name))
    except CutoverError:
        return None  # unreadable: the rest of the status still stands
    if held is None or not held.holder:
        return None
    expires = held.expires()
    return {"holder": held.holder, "renewed": held.renewed.isoformat() if held.renewed else None,
            "expires": expires.isoformat() if expires else None}


async def show_plan(cluster: Cluster, plan: Plan, *, host: GitHost | None) -> Shown:
    """State, whether the target is provable right now, and the exact diff that would be committed."""
    state = await status(cluster, plan, host=host)
    proven, unprovable = None, None
    try:
        proven = await prove_backend(cluster, plan, plan.backend(plan.target), wait=False)
    except CutoverError as exc:
        unprovable = {"error": exc.message, "cause": exc.cause, "hint": exc.hint, "exitCode": int(exc.exit_code)}
    short = deadline.warning(plan, deadline.SHIPPED, whose="the shipped hook Jobs'")
    read: FileVersion | CutoverError | None = None
    if host is not None:
        try:
            read = await host.read(plan.git.path)
        except CutoverError as exc:
            read = exc
    source = sources.for_plan(plan, host=host) if host is not None else None
    return Shown(state, proven, unprovable, await _planned_diff(plan, source, read), plan.git.path,
                 await drain.safety(cluster, plan, leaving=state.state["liveBackend"], to=plan.target),
                 (*([short] if short else []), deadline.sync_timeout_note(plan)), deadline.sync_timeout(plan),
                 (*await _sync_order(plan, source, read, host), *await _self_heal(cluster, plan)))


async def _self_heal(cluster: Cluster, plan: Plan) -> tuple[dict[str, Any], ...]:
    """The Application's selfHeal against a webhook's refresh during a hop's sync (`pickup.self_heal_race`), said as
    a finding of the sync order; nothing when the Application cannot be read (the status says why)."""
    if plan.argocd is None:
        return ()
    try:
        app = await cluster.application(plan.argocd.namespace, plan.argocd.application)
    except CutoverError:
        return ()
    said = pickup.self_heal_race(app, always=plan.argocd.refresh_always, nudge=plan.argocd.refresh)
    return ({"cause": "self_heal_race", "message": said, "hint": pickup.SELF_HEAL_HINT, "refuse": False},) \
        if said else ()


async def _sync_order(plan: Plan, source: Source | None, read: FileVersion | CutoverError | None,
                      host: GitHost | None) -> tuple[dict[str, Any], ...]:
    """docs/install.md, "Sync waves and deadlines": what the Application's render at the branch head holds that
    would delay or break a hop (`sync_order.findings`); nothing when no Git host or the source cannot render."""
    if source is None or host is None or not isinstance(read, FileVersion):
        return ()
    try:
        docs = await starting.judged(host, source, plan, read, ref=None)
    except CutoverError as exc:
        log.warning("sync_order.unread", error=exc.message, cause=exc.cause, hint=exc.hint)
        return ()
    return tuple(dataclasses.asdict(found) for found in sync_order.findings(docs or (), plan))


async def _handoff(cluster: Cluster, plan: Plan, host: GitHost, *, live: ServiceView) -> dict[str, Any] | None:
    """docs/capacity.md: where a handoff stands in Git: the backends freed there, the newest free or restore commit
    of each, an open gap with the time left of handoff.maxGap, a path through a bridge, and the hop the next
    PostSync would take."""
    if not any(backend.workload for backend in plan.backends.values()):
        return None  # no handoff without workloads to free: `cutover plan`'s diff says what Git holds
    try:
        workloads = await handoff.read_workloads(host, plan, {})
    except CutoverError as exc:
        return {"error": exc.message, "cause": exc.cause, "hint": exc.hint}
    state: dict[str, Any] = {"strategy": plan.handoff.strategy, "freed": sorted(workloads.freed), "steps": {
        name: {"step": commit.trailers.step, "commit": commit.sha, "to": commit.trailers.to,
               "hold": commit.trailers.hold, "at": commit.date.isoformat() if commit.date else None}
        for name, commit in workloads.steps.items()}}
    serving = commits.backend_of(plan, live.selector)
    opened = hops.gap_commit(workloads, source=serving, to=plan.target)
    if opened is not None and plan.handoff.strategy != "bridge":
        state.update(_open_gap(plan, opened, source=serving))
    try:
        observed = await _observed(plan, host, live, workloads)
    except CutoverError as exc:
        state["next"] = f"not known: {exc.message}"
        return state
    state["git"] = commits.backend_of(plan, observed.in_git) or selector_text(observed.in_git)
    hop = commits.bridge_hop(observed.last, plan)
    if hop is not None and commits.backend_of(plan, observed.in_git) == plan.handoff.bridge:
        state["bridge"] = {"backend": plan.handoff.bridge, "toward": hop.trailers.toward, "commit": hop.sha,
                           "hold": hop.trailers.hold}
        dark = hops.dark_since(observed, plan, source=hop.trailers.source, to=hop.trailers.toward or "")
        if dark is not None:
            state.update(_open_gap(plan, dark, source=hop.trailers.source, names=plan.dark_names))
    state["next"] = next_hop(decide.next_step(observed, plan), plan)
    retire = await _retiring(cluster, plan, observed)
    if retire is not None:
        state["retire"] = retire
    return state


def _open_gap(plan: Plan, opened: Commit, *, source: str | None, names: tuple[str, ...] = ()) -> dict[str, Any]:
    """`gap`: the commit that opened a gap in service (recreate's free; the switch to a bridge leaving `names`
    unanswered), how long ago, and what is left of handoff.maxGap; nothing when Git gives the commit no date."""
    if opened.date is None:
        return {}
    spent = (Clock().now() - opened.date).total_seconds()
    return {"gap": {"source": source, **({"names": list(names)} if names else {}), "openedBy": opened.sha,
                    "seconds": round(spent), "left": round((plan.handoff.max_gap or 0.0) - spent)}}


async def _retiring(cluster: Cluster, plan: Plan, observed: steps.Observed) -> dict[str, Any] | None:
    """handoff.retire: the backend the verified switch left, and when the next run after that retires it."""
    if plan.handoff.retire_after is None or observed.last is None:
        return None
    notes = await lease.notes(cluster, namespace=plan.service.namespace, service=plan.service.name)
    step = hops.retiring(observed, plan, verified=notes.get(lease.VERIFIED))
    if step is None:
        return None
    return {"backend": step.backend, "at": hops.retire_at(observed.last, plan).isoformat()}


async def _observed(plan: Plan, host: GitHost, live: ServiceView, workloads: steps.Workloads) -> steps.Observed:
    """What a PostSync would read (`phases.observe`), for the hop it would take next."""
    version = await host.read(plan.git.path)
    in_git = await sources.for_plan(plan, host=host).selector(version, ref=None, where=plan.git.path)
    last = commits.last_cutover(await writeback.history(host, plan), plan)
    return steps.Observed(live, in_git, last, workloads=workloads)


def next_hop(step: steps.Step, plan: Plan) -> str:
    """What the next PostSync would do, in words (docs/capacity.md)."""
    said = type(step).__name__
    match step:
        case steps.Advance(to=to, toward=toward) if toward is not None:
            said = f"switch to the bridge {to} (proven on {', '.join(plan.handoff.bridge_names)}), toward {toward}"
        case steps.Advance(to=to, bridge=bridge) if bridge is not None:
            said = f"wait for {to}, prove it and switch from the bridge {bridge} to it"
        case steps.Advance(to=to):
            said = f"wait for {to}, prove it and switch to it"
        case steps.Restore(backend=backend, free=free):
            said = f"restore {backend}" + (f", draining and freeing {free} in the same sync" if free else "")
        case steps.Free(backend=backend, to=to):
            said = f"drain and free {backend} for {to}" + (
                f", once {plan.handoff.bridge} answers through the Service" if plan.handoff.strategy == "bridge"
                else "")
        case steps.AwaitApply(to=to, restore=str() as restore):
            said = f"ArgoCD syncs {restore[:12]}, which restores {to}"
        case steps.AwaitApply(to=to):
            said = f"ArgoCD applies {to}'s selector"
        case steps.Verify(backend=backend):
            said = f"verify {backend} through the Service"
        case steps.Hold(on=on, commit=commit):
            said = f"none: held on {on} by {commit[:12]}"
        case steps.Nothing(reason=reason):
            said = f"none: {reason}"
    return said


async def _planned_diff(plan: Plan, source: Source | None,
                        current: FileVersion | CutoverError | None) -> dict[str, Any] | None:
    if source is None or current is None:
        return None
    if isinstance(current, CutoverError):  # the file could not be read
        return {"error": current.message, "cause": current.cause, "hint": current.hint}
    try:
        edit = await source.edit(current, plan.backend(plan.target).selector, where=plan.git.path)
    except CutoverError as exc:
        return {"error": exc.message, "cause": exc.cause, "hint": exc.hint}
    return {"changed": edit.changed, "patch": edit.diff(plan.git.path), "version": current.version}


def selector_text(selector: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in selector.items()) or "(empty)"


async def diff(plan: Plan | None, *, file: str, to: str | None, selector: str | None, document: str | None = None,
               selector_path: str | None = None) -> Diffed:
    """Offline: the unified diff of what would be committed, made on a local copy of the file. With a plan, its
    source makes the edit as before a commit (for `kustomize`, the target less what the build adds, render-checked
    on the local checkout; for `helm-values`, the mapping or the backend's `gitValue`) and the patch names
    `git.path`. Without one (`--selector`), the file's only Service and spec.selector, unless `document`
    (KIND/NAME) and `selector_path` say otherwise; a values file (no `kind`) by `selector_path` alone."""
    wanted = _wanted_selector(plan, to=to, selector=selector)
    text = _read_local(file)
    if plan is not None and document is None and selector_path is None:
        source = sources.offline(plan, checkout=LocalCheckout(Path(file), plan.git.path))
        edit = await source.edit(FileVersion(text, "local"), wanted, where=file)
        if plan.git.source == "manifest" and commits.backend_of(plan, dict(edit.old)) is None:
            # a patch from what no backend names: the wrong file, or a plan whose selectors are not the file's
            log.warning("diff.selector_unknown", file=file, selector=selector_text(edit.old),
                        hint=f"the file's selector is no backend's of the plan: check that --file is the Service the "
                             f"plan names ({plan.git.path}) and that backends.*.selector match it")
        return Diffed(plan.git.path, edit.diff(plan.git.path) if edit.changed else "", selector_text(edit.new),
                      plan.git.selector_path)
    where = _document(plan, text, file=file, document=document, selector_path=selector_path)
    dotted = selector_path or (plan.git.selector_path if plan else "spec.selector")
    try:
        edit = ManifestSource(where, dotted).rewrite(text, wanted, where=file)
    except InvalidInput as exc:
        if plan is not None:
            raise
        raise _without_plan(exc) from None
    path = plan.git.path if plan else _patch_path(file)
    return Diffed(path, edit.diff(path) if edit.changed else "", selector_text(wanted), dotted)


# Without a plan the file's hints speak of the options that stand in for the plan's keys.
_PLANLESS = (("git.selectorPath", "--selector-path"), ("git.document", "--document"), ("git.path", "--file"),
             (" in the plan", ""), (" in Git", ""))


def _without_plan(exc: InvalidInput) -> InvalidInput:
    hint = exc.hint
    for key, option in _PLANLESS:
        hint = hint.replace(key, option)
    return InvalidInput(exc.message, cause=exc.cause, hint=hint)


def _read_local(file: str) -> str:
    try:
        return Path(file).read_bytes().decode("utf-8")  # bytes, so CRLF line ends survive
    except OSError as exc:
        raise InvalidInput(f"--file {file}: cannot read: {exc.strerror}", hint="pass a local copy of the file") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"--file {file}: not UTF-8 text", hint="pass the YAML file itself") from exc


def _patch_path(file: str) -> str:
    """The file as a patch names it: relative to where the command runs (where `git apply` will run)."""
    relative = os.path.relpath(file)
    return Path(file).name if relative.startswith("..") else Path(relative).as_posix()


def _document(plan: Plan | None, text: str, *, file: str, document: str | None,
              selector_path: str | None) -> GitDocument:
    if document is not None:
        kind, slash, name = document.partition("/")
        if not slash or not kind or not name:
            raise InvalidInput(f"--document: expected KIND/NAME, found {document!r}", hint="e.g. Service/my-service")
        return GitDocument(kind, name)
    if plan is not None:
        return plan.git.document
    if selector_path is not None and yaml_edit.holds_values(text, source=file):
        return GitDocument("", "")  # a values file: its only document, addressed by the path alone
    found = yaml_edit.services(text, source=file)
    if len(found) != 1:
        raise InvalidInput(f"--file {file}: expected exactly one Service, found {len(found)}"
                           + (f" ({', '.join(found)})" if found else ""),
                           hint="name the document with --document KIND/NAME")
    return GitDocument("Service", found[0])


def _wanted_selector(plan: Plan | None, *, to: str | None, selector: str | None) -> dict[str, str]:
    """The selector to write: `--to`'s backend's, the plan's target's when neither is given (docs/commands.md), or
    the one `--selector` spells out."""
    if to is not None and selector is not None:
        raise InvalidInput("diff: expected exactly one of --to BACKEND or --selector K=V,K=V, found both",
                           hint="name a backend of the plan, or spell the selector out")
    if selector is not None:
        return parse_selector(selector)
    if plan is None:
        raise InvalidInput("diff: expected --selector K=V,K=V (no plan was read, so there is no target to default to)",
                           hint="spell the selector out, or give the plan with --plan and name --to BACKEND")
    if to is None and plan.fleet:
        raise InvalidInput("diff: expected --to BACKEND or --selector K=V,K=V (a fleet's plan names no target: the "
                           "fleet's commit chooses the backend)",
                           hint="cutover diff --file PATH --to BACKEND shows what the fleet's commit changes")
    return dict(plan.backend(to or plan.target, field="--to").selector)


SELECTOR_HINT = "e.g. --selector app.kubernetes.io/name=llm-reasoning-candle,component=predictor"


def parse_selector(text: str) -> dict[str, str]:
    """`K=V,K=V` as a selector, each pair checked and named when wrong: an empty pair, a pair without '=' or
    without a value, a key given twice (one of them would be dropped), a key or value Kubernetes refuses."""
    found: dict[str, str] = {}
    for index, part in enumerate(text.split(","), start=1):
        key, sep, value = (piece.strip() for piece in part.partition("="))
        where = f"--selector: pair {index} of {text!r}"
        if not part.strip():
            raise InvalidInput(f"{where}: expected K=V, found an empty pair", hint=SELECTOR_HINT)
        if sep != "=" or not key:
            raise InvalidInput(f"{where}: expected K=V pairs separated by commas, found {part.strip()!r}",
                               hint=SELECTOR_HINT)
        if not value:
            raise InvalidInput(f"{where}: expected a value after '=', found none in {part.strip()!r}",
                               hint="a selector with an empty value selects only pods whose label is empty")
        if key in found:
            raise InvalidInput(f"{where}: {key!r} is given twice ({key}={found[key]}, {key}={value})",
                               hint="a selector holds each key once: keep the one you mean")
        if problem := label_problem(key, value):
            raise InvalidInput(f"{where}: {problem}", hint=SELECTOR_HINT)
        found[key] = value
    return found

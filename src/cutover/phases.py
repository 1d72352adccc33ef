"""The phases users run as ArgoCD hooks and Jobs, told with the pieces below them.

`postsync` advances a cutover (hold the Lease, wait and prove, commit with compare-and-swap, ask ArgoCD
to refresh) or, once ArgoCD has applied the commit, checks the switch; a rollback's hold stops it.
`presync` is the gate. It finds the revision being synced, reads the Service's selector
there, and compares it with the live Service. No change pending: done at once (no waiting, no
engine request). A change to a backend of the plan: prove that backend's pods now (on their startup
timeline if they are still starting) and check that the new selector picks none of another backend's
pods; any failure exits non-zero, so ArgoCD aborts the sync and the Service keeps its selector
(reference/argocd-hooks.md §1.4). The gate writes nothing. Called by the CLI.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
from collections.abc import Mapping
from datetime import datetime

import structlog

from cutover import argocd, engines, gate, lease, manifest, writeback
from cutover.cluster import Cluster
from cutover.commands import Report
from cutover.errors import (
    ClusterError,
    CutoverError,
    InvalidInput,
    LockHeld,
    NamesNotProven,
    SyncTimeout,
    TargetNotReady,
    VerificationFailed,
)
from cutover.githost.base import Author, Commit, GitHost
from cutover.plan import Plan
from cutover.views import ServiceView
from cutover.wait import Clock, Proven, prove_backend

# --dry-run: prove, decide and show the diff, but no commit, no Lease, no refresh, no Event (SPEC §5).
DRY_RUN: contextvars.ContextVar[bool] = contextvars.ContextVar("cutover_dry_run", default=False)
SYNC_WAIT = 600.0  # seconds `run` and `rollback` give ArgoCD to apply their commit
SYNC_POLL = 10.0  # seconds between looks at the Service and the Application while waiting for that
DNS_TIMEOUT = 2.0  # seconds to resolve the Service's name before using its ClusterIP
SERVICE_TRIES, SERVICE_RETRY = 3, 2.0  # proofs through the Service, and seconds between them
ENDPOINTS_SETTLE, ENDPOINTS_POLL = 60.0, 2.0  # seconds EndpointSlices may trail a selector change, and between looks
SIDE_EFFECT_BUDGET = 5.0  # seconds an Event may take; it never changes the outcome (SPEC §6.7)

log = structlog.get_logger("cutover")


def backend_of(plan: Plan, selector: Mapping[str, str]) -> str | None:
    return next((name for name, backend in plan.backends.items() if dict(backend.selector) == dict(selector)),
                None)


async def presync(cluster: Cluster, plan: Plan, host: GitHost, *, job_name: str | None) -> Report:
    structlog.contextvars.bind_contextvars(service=f"{plan.service.namespace}/{plan.service.name}",
                                           cutover=plan.name, phase="presync")
    revision = await _syncing_revision(cluster, plan, job_name)
    ref = revision.sha if revision else None
    version = await host.read(plan.git.path, ref=ref)
    wanted = manifest.read_selector(version.content, document=plan.git.document,
                                    selector_path=plan.git.selector_path, source=f"{plan.git.path}@{ref or 'head'}")
    live = await cluster.service(plan.service.namespace, plan.service.name)
    shown = ref[:12] if ref else plan.git.branch
    if dict(wanted) == dict(live.selector):
        log.info("presync.no_change", revision=shown)
        return Report(summary=f"no selector change in {shown}: nothing to gate", data={"changed": False})
    target = backend_of(plan, wanted)
    if target is None:
        log.warning("presync.unknown_selector", revision=shown, selector=dict(wanted),
                    hint="the selector in Git is no backend of the plan: not ours to gate")
        return Report(summary=f"the selector in {shown} is no backend of the plan: not gated",
                      data={"changed": True, "backend": None})
    log.info("presync.gating", revision=shown, to=target, live=backend_of(plan, live.selector))
    proven = await prove_backend(cluster, plan, plan.backend(target), wait=True)
    await _no_foreign_pods(cluster, plan, target)
    return Report(summary=f"{shown} switches the Service to {target}: proven on {len(proven.pods)} pod(s)",
                  data={"changed": True, "backend": target, "proof": proven.as_data()})


async def _syncing_revision(cluster: Cluster, plan: Plan, job_name: str | None) -> argocd.Revision | None:
    app = None
    if plan.argocd is not None:
        try:
            app = await cluster.application(plan.argocd.namespace, plan.argocd.application)
        except ClusterError as exc:
            log.warning("argocd.unreadable", error=exc.message, cause=exc.cause, hint=exc.hint)
    revision = argocd.syncing_revision(job_name, app)
    if revision is None:
        log.warning("presync.revision_unknown", hint="no hook Job name and no ArgoCD operation: reading the "
                                                     "branch head, which may be newer than the revision synced")
    return revision


async def _no_foreign_pods(cluster: Cluster, plan: Plan, target: str) -> None:
    """Guarantee 1, early: the new selector must pick none of another backend's pods."""
    selected, _ = await cluster.pods(plan.service.namespace, plan.backend(target).selector)
    _refuse_foreign(gate.foreign(selected, target=target, backends=_selectors(plan)), target)


def _selectors(plan: Plan) -> dict[str, Mapping[str, str]]:
    return {name: backend.selector for name, backend in plan.backends.items()}


def _refuse_foreign(found: tuple[tuple[str, str], ...], target: str) -> None:
    if found:
        backend = found[0][1]
        raise NamesNotProven(
            f"the {target} selector also picks pods of backend {backend}: {', '.join(pod for pod, _ in found)}",
            cause="selector_overlap",
            hint=f"make the {target} selector pick only its own pods (add a distinguishing label)")


async def _gate(cluster: Cluster, plan: Plan, to: str, proofs: list[Proven], clock: Clock) -> None:
    """SPEC §6.1 right before the write, on the pods the selector picks now: prove again once if the proof went
    stale or pods left Ready since; a pod of another backend, or still too few, stops the commit."""
    for attempt in range(2):
        selected, _ = await cluster.pods(plan.service.namespace, plan.backend(to).selector)
        proven = {proof.pod: proofs[-1].proven_at for proof in proofs[-1].proofs}
        verdict = gate.judge(selected, target=to, backends=_selectors(plan), proven=proven, now=clock.now(),
                             min_ready=plan.verify.min_ready_pods)
        _refuse_foreign(verdict.foreign, to)
        if verdict.open:
            return
        if attempt:
            raise TargetNotReady(f"backend {to} changed after its proof: {verdict.short}", cause="target_changed",
                                 hint="the target's pods are not steady; look at their restarts and probes")
        proofs.append(await prove_backend(cluster, plan, plan.backend(to), wait=False))


# --- postsync --------------------------------------------------------------------------------------------


def cutover_id(plan: Plan, *, from_backend: str | None, to_backend: str, service_uid: str) -> str:
    """Stable for one intent (this Service, from, to), so that re-runs speak of the same cutover."""
    seed = f"{plan.service.namespace}/{plan.service.name}:{service_uid}:{from_backend}->{to_backend}"
    return hashlib.sha256(seed.encode()).hexdigest()[:12]


def held_by(last: Commit | None, plan: Plan) -> str | None:
    """The backend a rollback holds the Service on, while the plan still names the target rolled back from."""
    if last is None or not last.trailers.get("Cutover-Hold"):
        return None
    return last.trailers["Cutover-Hold"] if last.trailers.get("Cutover-From") == plan.target else None


async def postsync(cluster: Cluster, plan: Plan, host: GitHost, *, identity: str, author: Author) -> Report:
    structlog.contextvars.bind_contextvars(service=f"{plan.service.namespace}/{plan.service.name}",
                                           cutover=plan.name, phase="postsync")
    live = await cluster.service(plan.service.namespace, plan.service.name)
    current = await host.read(plan.git.path)
    in_git = manifest.read_selector(current.content, document=plan.git.document,
                                    selector_path=plan.git.selector_path, source=plan.git.path)
    target = plan.backend(plan.target).selector
    last = await writeback.last_cutover(host, plan)
    hold = held_by(last, plan)
    if hold is not None and last is not None:
        log.info("cutover.held", on=hold, commit=last.sha[:12], target=plan.target)
        return Report(summary=f"held on {hold} by rollback {last.sha[:12]}: change the plan's target to resume",
                      data={"held": hold})
    if dict(in_git) != dict(target):
        return await _advance(cluster, plan, host, live=live, in_git=in_git, identity=identity, author=author)
    if last is not None and last.trailers.get("Cutover-Id"):  # the same cutover, seen by a later Job
        structlog.contextvars.bind_contextvars(cutover_id=last.trailers["Cutover-Id"])
    if dict(live.selector) != dict(target):
        await _refresh(cluster, plan)
        return Report(summary=f"Git selects {plan.target}; waiting for ArgoCD to apply it", data={"applied": False})
    try:
        verified = await _verify(cluster, plan, live, last)
        log.info("cutover.completed", to=plan.target, commit=last.sha[:12] if last else None)
        return verified
    except VerificationFailed as failure:
        if not plan.rollback_auto:
            raise
        raise await _roll_back_after(failure, cluster, plan, host, live=live, in_git=in_git, last=last,
                                     identity=identity, author=author) from failure


async def _roll_back_after(failure: VerificationFailed, cluster: Cluster, plan: Plan, host: GitHost, *,
                           live: ServiceView, in_git: Mapping[str, str], last: Commit | None, identity: str,
                           author: Author) -> VerificationFailed:
    """rollback.auto: commit the previous selector by the same guarded path; the outcome stays exit 6."""
    previous = previous_backend(plan, backend_of(plan, in_git), last)
    log.error("cutover.failed", cause="verification_failed", message=failure.message, then=f"roll back to {previous}")
    if DRY_RUN.get():
        return VerificationFailed(f"{failure.message}; dry run: would roll back to {previous}", hint=failure.hint)
    try:
        back = await _advance(cluster, plan, host, live=live, in_git=in_git, identity=identity, author=author,
                              to=previous, hold=previous)
    except CutoverError as exc:
        return VerificationFailed(f"{failure.message}; the rollback to {previous} failed too: {exc.message}",
                                  cause="rollback_failed", hint=exc.hint)
    return VerificationFailed(f"{failure.message}; rolled back to {previous} in {str(back.data['commit'])[:12]}",
                              cause="verification_failed_rolled_back",
                              hint="the Service goes back once ArgoCD syncs the rollback; fix the target, then "
                                   "change the plan's target to try again")


async def _advance(cluster: Cluster, plan: Plan, host: GitHost, *, live: ServiceView, in_git: Mapping[str, str],
                   identity: str, author: Author, to: str | None = None, hold: str | None = None) -> Report:
    """Hold the Lease, wait and prove `to` (default: the plan's target), commit its selector, ask for a refresh."""
    clock = Clock()
    to = to or plan.target
    source = backend_of(plan, in_git)
    target = plan.backend(to)
    log.info("cutover.started", source=source, to=to, dry_run=DRY_RUN.get())
    if DRY_RUN.get():
        return await _would_advance(cluster, plan, host, source=source, to=to)
    async with lease.hold(cluster, namespace=plan.service.namespace, service=plan.service.name, me=identity,
                          now=clock.now) as held:
        proofs: list[Proven] = [await prove_backend(cluster, plan, target, wait=True)]
        await _no_foreign_pods(cluster, plan, to)

        async def before_write() -> None:
            if held.lost.is_set():
                raise LockHeld("the Service's Lease was taken over during the cutover", cause="lock_lost",
                               hint="another cutover runs now; this one committed nothing")
            await _gate(cluster, plan, to, proofs, clock)

        ident = cutover_id(plan, from_backend=source, to_backend=to, service_uid=live.uid)
        structlog.contextvars.bind_contextvars(cutover_id=ident)  # one Slack thread per cutover
        text = writeback.message(plan, from_backend=source, to_backend=to, cutover_id=ident,
                                 proof=_proof(proofs[-1], plan), service_uid=live.uid,
                                 cluster_ip=live.cluster_ip or "", hold=hold)
        result = await writeback.commit_selector(host, plan, to_backend=to, text=text, author=author,
                                                 before_write=before_write)
    await _refresh(cluster, plan)
    reason = "CutoverRolledBack" if hold else "CutoverCommitted"
    await _event(cluster, live, reason, f"{source} -> {to} in {result.sha[:12]}")
    if hold:
        log.info("rollback.committed", source=source, to=to, commit=result.sha, hold=hold)
    verb = "committed" if result.committed else "already in Git at"
    return Report(summary=f"{source} -> {to}: {verb} {result.sha[:12]}",
                  data={"committed": result.committed, "commit": result.sha, "url": result.url, "id": ident,
                        "to": to})


async def _would_advance(cluster: Cluster, plan: Plan, host: GitHost, *, source: str | None, to: str) -> Report:
    """--dry-run: the proof (not waiting) and the exact diff; nothing written anywhere."""
    proven = await prove_backend(cluster, plan, plan.backend(to), wait=False)
    await _no_foreign_pods(cluster, plan, to)
    current = await host.read(plan.git.path)
    edit = manifest.edit_selector(current.content, document=plan.git.document, selector_path=plan.git.selector_path,
                                  selector=plan.backend(to).selector, source=plan.git.path)
    log.info("cutover.dry_run", source=source, to=to, would_commit=edit.changed)
    return Report(summary=f"dry run: {source} -> {to} would be committed (proven on {len(proven.pods)} pod(s)); "
                          "nothing was written", lines=edit.diff(plan.git.path).splitlines(),
                  data={"dryRun": True, "to": to, "diff": edit.diff(plan.git.path), "proof": proven.as_data()})


def _proof(proven: Proven, plan: Plan) -> writeback.Proof:
    return writeback.Proof(pods=tuple(f"{proof.pod} ({proof.address})" for proof in proven.proofs),
                           names=plan.verify.served_names, method=proven.proofs[0].method if proven.proofs else "",
                           waited=proven.waited, proven_at=proven.proven_at.strftime("%Y-%m-%dT%H:%M:%SZ"))


def switch_problems(trailers: Mapping[str, str], live: ServiceView, *, ready: set[str],
                    serving: set[str]) -> list[str]:
    """What is wrong with an applied switch (pure): a re-created Service, a new ClusterIP, endpoints that are not
    exactly the target's Ready pods. `trailers` are those of the cutover commit, recorded before the switch."""
    problems = []
    if trailers.get("Cutover-Service-Uid") and trailers["Cutover-Service-Uid"] != live.uid:
        problems.append(f"the Service was re-created (uid {live.uid}, was {trailers['Cutover-Service-Uid']})")
    if trailers.get("Cutover-Cluster-Ip") and trailers["Cutover-Cluster-Ip"] != live.cluster_ip:
        problems.append(f"the ClusterIP changed to {live.cluster_ip} (was {trailers['Cutover-Cluster-Ip']})")
    if serving != ready or not ready:
        problems.append(f"EndpointSlices serve {sorted(serving)}, the target's Ready pods are {sorted(ready)}")
    return problems


async def _verify(cluster: Cluster, plan: Plan, live: ServiceView, last: Commit | None,
                  backend: str | None = None) -> Report:
    """The switch as ArgoCD applied it: the same Service object, and endpoints that are the target's Ready pods."""
    backend = backend or plan.target
    problems, serving = await _settled_endpoints(cluster, plan, live, last, backend)
    if not problems:
        problems = await _through_the_service(plan, live, backend)
    if problems:
        await _event(cluster, live, "CutoverVerificationFailed", "; ".join(problems), warning=True)
        raise VerificationFailed("; ".join(problems), hint="the switch did not land as committed; roll back with "
                                                           "the cutover-rollback Job if clients fail")
    log.info("service.verified", backend=backend, endpoints=sorted(serving),
             names=list(plan.verify.served_names), ports=list(_ports(plan, live)))
    await _event(cluster, live, "CutoverVerified", f"the Service selects {backend}; every name answered on ports "
                                                   f"{', '.join(map(str, _ports(plan, live)))}")
    return Report(summary=f"verified: the Service selects {backend}, same object, {len(serving)} endpoint(s)",
                  data={"verified": True, "endpoints": sorted(serving)})


async def _settled_endpoints(cluster: Cluster, plan: Plan, live: ServiceView, last: Commit | None,
                             backend: str) -> tuple[list[str], set[str]]:
    """`switch_problems`, looked at again while only the endpoints differ: the EndpointSlice controller rewrites
    the slices after it sees the selector change, seconds later on a busy cluster. A re-created Service or a new
    ClusterIP is final at once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ENDPOINTS_SETTLE
    while True:
        pods, _ = await cluster.pods(plan.service.namespace, plan.backend(backend).selector)
        ready = {pod.ip for pod in pods if pod.ready and pod.ip}
        serving = {endpoint.ip for endpoint in await cluster.endpoints(plan.service.namespace, plan.service.name)
                   if endpoint.ready}
        problems = switch_problems(last.trailers if last else {}, live, ready=ready, serving=serving)
        only_endpoints = problems == switch_problems({}, live, ready=ready, serving=serving)
        if not problems or not only_endpoints or loop.time() + ENDPOINTS_POLL > deadline:
            return problems, serving
        log.info("service.endpoints_waiting", serving=sorted(serving), ready=sorted(ready),
                 hint="the EndpointSlice controller has not caught up with the selector yet")
        await asyncio.sleep(ENDPOINTS_POLL)


def _ports(plan: Plan, live: ServiceView) -> tuple[int, ...]:
    return plan.service.ports or tuple(port.port for port in live.ports)


async def _service_address(live: ServiceView) -> str:
    """The Service's DNS name when it resolves from here; else its ClusterIP (a selector edit never changes
    what the name resolves to, so the ClusterIP proves the same path)."""
    name = f"{live.name}.{live.namespace}.svc"
    try:
        async with asyncio.timeout(DNS_TIMEOUT):
            await asyncio.get_running_loop().getaddrinfo(name, None)
        return name
    except (OSError, TimeoutError):
        log.warning("service.dns_unavailable", name=name, using=live.cluster_ip,
                    hint="no cluster DNS from here; checking through the ClusterIP read from the API")
        return live.cluster_ip or name


async def _through_the_service(plan: Plan, live: ServiceView, backend: str) -> list[str]:
    """Every served name, through every Service port, as clients reach it."""
    profile = plan.backend(backend)
    method = engines.method_for(profile.engine, plan.verify.proof)
    address = await _service_address(live)
    problems: list[str] = []
    async with engines.new_client(timeout=plan.verify.request_timeout) as client:
        for port in _ports(plan, live):
            for attempt in range(SERVICE_TRIES):  # kube-proxy may trail the EndpointSlice by a moment
                proof = await engines.prove(client, pod=f"Service port {port}", ip=address, port=port,
                                            engine=profile.engine, names=plan.verify.served_names, method=method)
                if proof.ok or not all(problem.retryable for problem in proof.problems) or \
                        attempt == SERVICE_TRIES - 1:
                    break
                await asyncio.sleep(SERVICE_RETRY)
            problems += [f"through {address}:{port}: {problem.message}" for problem in proof.problems]
    return problems


async def _refresh(cluster: Cluster, plan: Plan) -> None:
    if plan.argocd is None or not plan.argocd.refresh or DRY_RUN.get():
        return
    try:
        await cluster.request_refresh(plan.argocd.namespace, plan.argocd.application)
        log.info("argocd.refresh_requested", application=plan.argocd.application)
    except ClusterError as exc:  # ArgoCD polls Git every few minutes anyway
        log.warning("argocd.refresh_failed", error=exc.message, cause=exc.cause, hint=exc.hint)


async def _event(cluster: Cluster, service: ServiceView, reason: str, message: str, *, warning: bool = False) -> None:
    if DRY_RUN.get():
        return
    try:
        async with asyncio.timeout(SIDE_EFFECT_BUDGET):
            await cluster.record_event(service, reason=reason, message=message, warning=warning, at=Clock().now())
    except (ClusterError, TimeoutError) as exc:
        log.warning("event.failed", reason=reason, error=str(exc))


# --- run and rollback --------------------------------------------------------------------------------------


async def run(cluster: Cluster, plan: Plan, host: GitHost, *, identity: str, author: Author,
              to: str | None = None, hold: str | None = None) -> Report:
    """A whole cutover outside a sync: wait, prove, commit, wait for ArgoCD to apply it, verify.
    An explicit run ignores a rollback's hold: it is how a person lifts it."""
    to = to or plan.target
    structlog.contextvars.bind_contextvars(service=f"{plan.service.namespace}/{plan.service.name}",
                                           cutover=plan.name, phase="rollback" if hold else "run")
    live = await cluster.service(plan.service.namespace, plan.service.name)
    current = await host.read(plan.git.path)
    in_git = manifest.read_selector(current.content, document=plan.git.document,
                                    selector_path=plan.git.selector_path, source=plan.git.path)
    loop = asyncio.get_running_loop()
    if dict(in_git) != dict(plan.backend(to).selector) or hold:
        advanced = await _advance(cluster, plan, host, live=live, in_git=in_git, identity=identity, author=author,
                                  to=to, hold=hold)
        if DRY_RUN.get():
            return advanced
        commit = str(advanced.data["commit"])
        # When the commit landed, not when the run began: the wait before it may have taken 30 minutes, and an
        # operation that began during that wait is one that can end without our commit (argo-cd#21902).
        committed_at = Clock().now()
    else:
        last = await writeback.last_cutover(host, plan)
        commit = last.sha if last else ""
        committed_at = last.date if last and last.date else Clock().now()
    started = loop.time()
    await _await_applied(cluster, plan, to=to, commit=commit, committed_at=committed_at)
    log.info("argocd.synced", commit=commit[:12], waited=round(loop.time() - started))
    live = await cluster.service(plan.service.namespace, plan.service.name)
    last = await writeback.last_cutover(host, plan)
    try:
        report = await _verify(cluster, plan, live, last, backend=to)
    except VerificationFailed as failure:
        if hold or not plan.rollback_auto:  # a rollback that fails to verify is not rolled back again
            raise
        raise await _roll_back_after(failure, cluster, plan, host, live=live, in_git=plan.backend(to).selector,
                                     last=last, identity=identity, author=author) from failure
    report.data.update(commit=commit, to=to)
    if hold:
        log.info("cutover.held", on=hold, commit=commit[:12], hint="change the plan's target to resume cutovers")
    log.info("cutover.completed", to=to, commit=commit[:12])
    return report


async def rollback(cluster: Cluster, plan: Plan, host: GitHost, *, identity: str, author: Author) -> Report:
    """Back to the backend the last cutover left, by the same guarded path, then hold there."""
    current = await host.read(plan.git.path)
    in_git = manifest.read_selector(current.content, document=plan.git.document,
                                    selector_path=plan.git.selector_path, source=plan.git.path)
    now, last = backend_of(plan, in_git), await writeback.last_cutover(host, plan)
    if last is not None and last.trailers.get("Cutover-Hold") and last.trailers["Cutover-Hold"] == now:
        previous = now  # a rollback is in Git already (its Job was killed, or it ran twice): finish that one
    else:
        previous = previous_backend(plan, now, last)
    return await run(cluster, plan, host, identity=identity, author=author, to=previous, hold=previous)


def previous_backend(plan: Plan, now: str | None, last: Commit | None) -> str:
    """Where a rollback goes: the last cutover's source, else the plan's only other backend."""
    if last is not None and last.trailers.get("Cutover-To") == now and last.trailers.get("Cutover-From") in \
            plan.backends and last.trailers.get("Cutover-From") != now:
        return last.trailers["Cutover-From"]
    others = [name for name in plan.backends if name != now]
    if len(others) == 1:
        return others[0]
    raise InvalidInput(f"cannot tell which backend to roll back to (Git selects {now}; no cutover commit says "
                       f"where it came from)", cause="rollback_unknown",
                       hint="run `cutover run --to BACKEND` with the backend to go back to")


async def _await_applied(cluster: Cluster, plan: Plan, *, to: str, commit: str, committed_at: datetime) -> None:
    """Until the live Service selects `to` (ArgoCD applied our commit) and the Application is healthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SYNC_WAIT
    target = dict(plan.backend(to).selector)
    while True:
        live = await cluster.service(plan.service.namespace, plan.service.name)
        app = await cluster.application(plan.argocd.namespace, plan.argocd.application) if plan.argocd else None
        if dict(live.selector) == target and (app is None or (app.health == "Healthy" and
                                                              app.operation_phase != "Running")):
            return
        if app is not None:
            state = argocd.judge_sync(app, revision=commit, committed_at=committed_at)
            if state is argocd.SyncState.FAILED:
                raise SyncTimeout(f"ArgoCD's sync of {commit[:12]} failed", cause="argocd_sync_failed",
                                  hint=f"read the operation's message: argocd app get {app.name}")
            if state is argocd.SyncState.REFRESH_AGAIN:
                log.info("argocd.refresh_again", commit=commit[:12], hint="an older operation ended without it")
                await _refresh(cluster, plan)
        if loop.time() + SYNC_POLL > deadline:
            raise SyncTimeout(f"ArgoCD did not apply {commit[:12]} within {SYNC_WAIT:.0f}s",
                              hint="check the Application in ArgoCD; re-run to continue from where this stopped")
        log.info("argocd.waiting", commit=commit[:12], live=backend_of(plan, live.selector))
        await asyncio.sleep(SYNC_POLL)


# --- syncfail ----------------------------------------------------------------------------------------------


async def syncfail(cluster: Cluster, plan: Plan, host: GitHost, *, identity: str, author: Author) -> Report:
    """Say what failed, with its cause; change nothing, unless rollback.auto and Git already holds a selector the
    failed sync could not apply: then Git goes back to what the Service still selects (and holds there), so that
    ArgoCD is not left retrying a revision that fails."""
    structlog.contextvars.bind_contextvars(service=f"{plan.service.namespace}/{plan.service.name}",
                                           cutover=plan.name, phase="syncfail")
    message = "the sync failed"
    if plan.argocd is not None:
        try:
            app = await cluster.application(plan.argocd.namespace, plan.argocd.application)
            message = f"ArgoCD's sync of {(app.operation_revision or '?')[:12]} ended {app.operation_phase}"
        except ClusterError as exc:
            log.warning("argocd.unreadable", error=exc.message, cause=exc.cause, hint=exc.hint)
    live = await cluster.service(plan.service.namespace, plan.service.name)
    current = await host.read(plan.git.path)
    in_git = manifest.read_selector(current.content, document=plan.git.document,
                                    selector_path=plan.git.selector_path, source=plan.git.path)
    serving, wanted = backend_of(plan, live.selector), backend_of(plan, in_git)
    log.error("cutover.failed", cause="argocd_sync_failed", message=message, serving=serving, git=wanted,
              hint="read the hook Jobs' logs (kubectl -n cutover logs job/...) and the Application's message")
    await _event(cluster, live, "CutoverSyncFailed", f"{message}; the Service still selects {serving}", warning=True)
    if not plan.rollback_auto or serving is None or wanted == serving or DRY_RUN.get():
        return Report(summary=f"{message}; the Service still selects {serving}; nothing changed",
                      data={"rolledBack": False})
    back = await _advance(cluster, plan, host, live=live, in_git=in_git, identity=identity, author=author,
                          to=serving, hold=serving)
    return Report(summary=f"{message}; Git goes back to {serving} (held) in {str(back.data['commit'])[:12]}",
                  data={"rolledBack": True, "commit": back.data["commit"]})

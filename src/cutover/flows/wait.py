"""Wait for a backend's pods on their startup timeline, then prove the served names on each of them.

The wait is driven by watch events, not by polling: it wakes when a pod changes, when a progress
event is due (every 30 s), and when the budget ends. A decision that cannot be taken back (fail)
is made on a fresh list, never on a possibly lagging watch. The rules live in `readiness` (when to fail,
when to try a proof again) and `netpolicy`; this module only tells the story with them. Called by the
commands and the phases.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Sequence

import structlog

from cutover import patience
from cutover.core import commits, milestones, proofs
from cutover.core.clock import Clock
from cutover.core.proofs import PodProof, Problem
from cutover.core.results import Proven
from cutover.core.views import PodView, ServiceView
from cutover.engines import api, fitness, kinds, trials
from cutover.errors import ClusterUnavailable, CutoverError, NamesNotProven, TargetNotReady
from cutover.kube import capacity, image_pulls, netpolicy, readiness
from cutover.kube.cluster import READ_TIMEOUT, Cluster, PodWatch, selector_text
from cutover.plan import Backend, Plan

log = structlog.get_logger("cutover")

def final_grace(plan: Plan) -> float:
    """Seconds past verify.maxWait for the last answer: one request, an engine's (verify.requestTimeout) or the
    API's (its read timeout), then the wait gives up, whatever the Kubernetes API does."""
    return max(plan.verify.request_timeout, READ_TIMEOUT)


PROOF_RETRY = 5.0  # seconds between proofs that failed for a reason that may pass (refused, 503)
# Seconds a passing problem of a Ready pod (refused, 503, reset) is tried again once its startup budget is spent,
# as it is for a pod that has long been Ready: a listener restarting inside the container passes in that time, a
# wrong port does not and fails then, not after the whole maxWait.
PROOF_GRACE = 30.0
# Seconds between judgments of a target pod the freed source's pods still keep off its node (they terminate, with
# their grace period): each judgment reads the nodes and the bound pods, so not on every event.
FREED_LOOK = 5.0
# asyncio fires a timer up to its clock resolution early; comparing instants without this slack made the
# loop wake "just before" a progress tick, find nothing due and spin without time passing.
SLACK = 0.001


async def prove_backend(cluster: Cluster, plan: Plan, backend: Backend, *, wait: bool, budget: float | None = None,
                        source_freed: bool = False, budget_of: str = "handoff.maxGap") -> Proven:
    """Ready and proven, or TargetNotReady / NamesNotProven with a cause and a hint; never longer than
    verify.maxWait (or `budget`, when shorter: what is left of a handoff's maxGap, or what `budget_of` names) and
    one request more (`final_grace`), even when the Kubernetes API stops answering (the watch retries for as long
    as it is needed, so the deadline is kept here). `source_freed`: the backend the Service selects is freed in
    Git, so a target pod its pods still keep off a node is waited on, not failed (docs/capacity.md)."""
    clock = Clock()
    max_wait = plan.verify.max_wait if budget is None else max(0.0, min(plan.verify.max_wait, budget))
    bound = "verify.maxWait" if budget is None or budget >= plan.verify.max_wait else budget_of
    settings = readiness.Settings(max_wait=max_wait, min_ready=plan.verify.min_ready_pods, bound=bound)
    try:
        grace = final_grace(plan)
        async with asyncio.timeout(settings.max_wait + grace) as deadline, \
                cluster.watch_pods(plan.service.namespace, backend.selector) as watch, \
                api.new_client(timeout=plan.verify.request_timeout) as client:
            await _synced(watch, backend)
            watch.raise_if_failed()
            return await _Wait(cluster, plan, backend, watch=watch, client=client, clock=clock, settings=settings,
                               wait=wait, source_freed=source_freed).run()
    except TimeoutError as exc:
        if not deadline.expired():
            raise
        raise ClusterUnavailable(
            f"backend {backend.name}: no verdict within {settings.bound} ({settings.max_wait:g}s) and "
            f"{grace:g}s more: the Kubernetes API stopped answering the pod watch and lists",
            hint="check the API server (kubectl get --raw /readyz); nothing was committed") from exc


async def _synced(watch: PodWatch, backend: Backend) -> None:
    """The watch's first list: it retries through an outage for as long as the wait lasts, but a person waiting
    (`verify` without --wait) is told within cutover.patience's limit that the API does not answer."""
    within = patience.limit.get()
    try:
        async with asyncio.timeout(within):
            await watch.synced.wait()
    except TimeoutError:
        raise ClusterUnavailable(f"backend {backend.name}: the Kubernetes API did not answer the pod list within "
                                 f"{within:g}s", hint="check the API server and the way to it (kubectl get --raw "
                                                      "/readyz, the kubeconfig's server, a VPN); --wait keeps "
                                                      "trying for verify.maxWait") from None


async def judge_capacity(cluster: Cluster, plan: Plan, backend: Backend, pending: PodView, *,
                         targets: Iterable[PodView], service: ServiceView) -> capacity.Verdict:
    """Where the backend's pods fit (docs/capacity.md), from the nodes, the pods bound to them and the source (the
    backend `service` selects now, if another); `targets` are the backend's pods the caller holds already. Logged as
    `capacity.judged` with its figures."""
    namespace = plan.service.namespace
    live = commits.backend_of(plan, service.selector)
    source = plan.backends[live] if live is not None and live != backend.name else None
    nodes, (bound, seen_all) = await asyncio.gather(cluster.nodes(), cluster.bound_pods(namespace))
    source_pods = [pod for pod in bound if source is not None and pod.namespace == namespace
                   and pod.matches(source.selector)]
    placed = sum(1 for pod in targets if pod.node_name and not pod.deleting)
    verdict = capacity.judge(target=backend.name, pending=pending, needed=plan.verify.min_ready_pods - placed,
                             nodes=nodes, bound=bound, source=source.name if source else None,
                             source_pods=source_pods, seen_all=seen_all,
                             short=capacity.lacking(pending.unschedulable_message))
    log.info("capacity.judged", backend=backend.name, pod=pending.name, message=verdict.summary(),
             **verdict.as_data())
    return verdict


class _Wait:
    def __init__(self, cluster: Cluster, plan: Plan, backend: Backend, *, watch: PodWatch, client: api.Client,
                 clock: Clock, settings: readiness.Settings, wait: bool, source_freed: bool = False) -> None:
        self.cluster, self.plan, self.backend, self.watch = cluster, plan, backend, watch
        self.source_freed = source_freed
        self.client, self.clock, self.settings, self.keep_waiting = client, clock, settings, wait
        self.started = clock.now()
        self.baseline = {pod.name: pod.restarts for pod in watch.pods.values()}
        self.next_progress = clock.monotonic() + readiness.PROGRESS_EVERY
        self.next_proof = clock.monotonic()
        self.announced_ready = False
        self.pulled = image_pulls.PullLog()  # why pulls failed, remembered across the kubelet's back-offs
        self.first_trial: float | None = None  # when fitness was first tried, for the warm-up time
        self.round_started = self.next_proof  # when the latest round of proofs began
        self.live: proofs.Side | None = None  # the live backend's column, measured once
        self.live_measured = False
        self.last_slow: str | None = None  # what the latest round that was too slow said, for a round cut short
        self.failing_since: float | None = None  # when the proofs began to fail, for PROOF_GRACE
        self.capacity_since: float | None = None  # when an unschedulable pod was first found to fit by the figures
        self.freed_look: float | None = None  # when to judge again a pod held off by a freed source's going pods

    def assess(self) -> readiness.Assessment:
        now = self.clock.now()
        self.pulled.see(self.watch.pods.values(), now=now)
        return readiness.assess(self.watch.pods.values(), now=now, started=self.started,
                                settings=self.settings, baseline_restarts=self.baseline,
                                seen_any=self.watch.ever_seen, pulled=self.pulled)

    async def run(self) -> Proven:
        log.info("target.watching", backend=self.backend.name, pods=len(self.watch.pods),
                 budget=self.settings.max_wait)
        while True:
            found = self.assess()
            if found.failure is None:
                self.capacity_since = self.freed_look = None  # a pod unschedulable later gets a grace of its own
            else:
                failure = await self._final(found.failure)
                if failure is not None:
                    raise await self._failed(failure)
            if found.satisfied and self._due(self.next_proof):
                proven = await self._prove(found)
                if proven is not None:
                    return proven
            elif not found.satisfied and not self.keep_waiting:
                raise await self._not_ready_now(found)
            await self.watch.changed(self._sleep(found))
            self._maybe_progress()

    async def _final(self, failure: readiness.Failure) -> readiness.Failure | None:
        """The failure to fail on, or None to wait on: never decided on a view that might lag behind the API (a
        fresh list first), and for an unschedulable pod only once capacity is judged; within the grace for room the
        scheduler has yet to see, nothing is listed again (a fresh list is a change, and would wake the wait at
        once)."""
        grace_end = self._grace_end()
        if failure.cause == "unschedulable" and grace_end is not None and not self._due(grace_end):
            return None
        await self.watch.relist()
        found = self.assess()
        return found.failure and await self._placed(found.failure)

    async def _placed(self, failure: readiness.Failure) -> readiness.Failure | None:
        """An unschedulable target pod, judged by capacity (docs/capacity.md): fits nowhere is `unschedulable`
        with the figures; fits once the source is gone is `capacity_held_by_source` under strategy parallel (a gap
        nobody consented to is never opened); fits now by the figures means the scheduler has yet to see the room,
        so the wait goes on for readiness.CAPACITY_GRACE (None) before the scheduler's word is taken; the rule is
        `readiness.after_capacity`."""
        pod = self.watch.pods.get(failure.pod or "")
        if failure.cause != "unschedulable" or pod is None:
            return failure
        service = await self.cluster.service(self.plan.service.namespace, self.plan.service.name)
        verdict = await judge_capacity(self.cluster, self.plan, self.backend, pod, targets=self.watch.pods.values(),
                                       service=service)
        now = self.clock.monotonic()
        if verdict.fit is capacity.Fit.NOW and self.capacity_since is None:
            self.capacity_since = now
        waited = now - (self.capacity_since if self.capacity_since is not None else now)
        meant = readiness.after_capacity(failure, verdict, strategy=self.plan.handoff.strategy, waited=waited,
                                         source_freed=self.source_freed)
        # the freed source's pods are going: judge again in a while
        self.freed_look = now + FREED_LOOK if meant is None and verdict.held_by_source else None
        return meant

    def _sleep(self, found: readiness.Assessment) -> float:
        now = self.clock.monotonic()
        wakes = [self.next_progress, now + found.budget_left]
        grace_end = self._grace_end()
        if grace_end is not None and grace_end > now:
            wakes.append(grace_end)
        if found.satisfied:
            wakes.append(self.next_proof)
        return max(SLACK, min(wakes) - now)

    def _grace_end(self) -> float | None:
        """When an unschedulable pod is judged again, if it waits on something: the grace for room the scheduler
        has yet to see (readiness.CAPACITY_GRACE), or the next look while a freed source's pods go (FREED_LOOK).
        Before then nothing is listed again: a fresh list is a change, and would wake the wait at once."""
        ends = [end for end in (None if self.capacity_since is None else
                                self.capacity_since + readiness.CAPACITY_GRACE, self.freed_look) if end is not None]
        return min(ends) if ends else None

    def _due(self, instant: float) -> bool:
        return self.clock.monotonic() >= instant - SLACK

    def _maybe_progress(self) -> None:
        if not self._due(self.next_progress):
            return
        self.next_progress = self.clock.monotonic() + readiness.PROGRESS_EVERY
        found = self.assess()
        log.info(milestones.WAITING, backend=self.backend.name, elapsed=round(found.elapsed),
                 budget_left=round(found.budget_left), ready=len(found.ready),
                 pods=[_pod_line(pod) for pod in found.pods])

    async def _not_ready_now(self, found: readiness.Assessment) -> TargetNotReady:
        if not found.pods:  # none at all: say where we looked, and what nearly matched
            failure = readiness.Failure("no_target_pods", f"no pod in {self.plan.service.namespace} matches "
                                                          f"{selector_text(self.backend.selector)}",
                                        "check that the target workload is synced and that its pod labels match "
                                        f"backends.{self.backend.name}.selector")
            return await self._failed(failure)
        return TargetNotReady(f"backend {self.backend.name}: {len(found.ready)} of {self.settings.min_ready} pods "
                              "Ready now", cause="target_not_ready_now",
                              hint="run with --wait to wait on the startup timeline")

    async def _failed(self, failure: readiness.Failure) -> TargetNotReady:
        if failure.cause == "no_target_pods":
            failure = dataclasses.replace(failure, message=failure.message + await self._near_misses())
        return self._not_ready(failure)

    async def _near_misses(self) -> str:
        """Pods that carry some of the selector's labels, and which they lack: the usual typo, found for the user."""
        near: dict[str, list[str]] = {}
        for key, value in self.backend.selector.items():
            pods, _ = await self.cluster.pods(self.plan.service.namespace, {key: value})
            for pod in pods:
                near.setdefault(pod.name, [f"{k}={v}" for k, v in self.backend.selector.items()
                                           if pod.labels.get(k) != v])
        shown = [f"{name} (lacks {', '.join(lacks)})" for name, lacks in sorted(near.items())[:5]]
        return f"; pods matching part of it: {'; '.join(shown)}" if shown else "; no pod matches any of its labels"

    def _not_ready(self, failure: readiness.Failure) -> TargetNotReady:
        event = milestones.BUDGET_EXHAUSTED if failure.cause in ("startup_budget_exhausted", "no_target_pods") \
            else milestones.FAILED_FAST
        log.error(event, backend=self.backend.name, cause=failure.cause, pod=failure.pod,
                  message=failure.message, hint=failure.hint)
        return TargetNotReady(failure.message, cause=failure.cause, hint=failure.hint)

    async def _prove(self, found: readiness.Assessment) -> Proven | None:
        if not self.announced_ready:
            self.announced_ready = True
            log.info(milestones.READY, backend=self.backend.name, pods=[pod.name for pod in found.ready],
                     elapsed=round(found.elapsed, 1))
        method = kinds.method_for(self.backend.engine, self.plan.verify.proof)
        self.round_started = self.clock.monotonic()
        proofs = await asyncio.gather(*(
            api.prove(self.client, pod=pod.name, ip=pod.ip or "", port=self.backend.port,
                          engine=self.backend.engine, names=self.plan.verify.served_names, method=method,
                          clock=self.clock.monotonic, model=self.backend.model)
            for pod in found.ready))
        problems = [(proof, problem) for proof in proofs for problem in proof.problems]
        if not problems:
            self.failing_since = None  # a later failure gets a grace of its own
            if self.plan.verify.fitness is None:
                return self._proven(found, method, proofs, None)
            fitted = await self._fit(found)
            if fitted is not None:
                return self._proven(found, method, proofs, fitted)
        else:
            await self._judge(found, problems)
        self.next_proof = self.clock.monotonic() + PROOF_RETRY
        return None

    def _proven(self, found: readiness.Assessment, method: str, proofs: Sequence[PodProof],
                fitted: proofs.Fitted | None) -> Proven:
        # the table once, at the top (Slack's code block reads it there), not again inside the figures
        extra = {"fitness": {key: value for key, value in fitted.as_data().items() if key != "table"},
                 "table": list(fitted.table())} if fitted else {}
        log.info(milestones.PROVEN, backend=self.backend.name, method=method,
                 names=list(self.plan.verify.served_names), pods=[proof.pod for proof in proofs],
                 seconds=round(max(proof.seconds for proof in proofs), 3), **extra)
        return Proven(self.backend.name, found.ready, tuple(proofs), found.elapsed, self.clock.now(), fitted)

    async def _fit(self, found: readiness.Assessment) -> proofs.Fitted | None:
        """docs/fitness.md on every Ready pod: the Fitted table, None to try again (still warming, or fewer Ready pods
        than live while more are starting), or NamesNotProven (exit 4) when waiting cannot help."""
        settings = self.plan.verify.fitness
        assert settings is not None
        started = self.clock.monotonic()
        self.first_trial = started if self.first_trial is None else self.first_trial
        # the live side is measured once, beside the target's first round: its time is not added to the wait;
        # with --wait, a round (each request in it) is bounded by what is left of the budget
        left = max(self._left(found), 0.0) if self.keep_waiting else None
        seen: list[fitness.Sample] = []
        try:
            async with asyncio.timeout(left) as scope, asyncio.TaskGroup() as group:
                live = group.create_task(self._live_side(measure=settings.compare))
                rounds = [group.create_task(trials.trial(
                    self.client, pod=pod.name, ip=pod.ip or "", port=self.backend.port, engine=self.backend.engine,
                    names=self.plan.verify.served_names, fitness=settings, stream=settings.stream,
                    context=settings.compare, seen=seen)) for pod in found.ready]
        except TimeoutError:
            if not scope.expired():
                raise
            asked = settings.requests * len(self.plan.verify.served_names) * len(found.ready)
            cut = (f"a round of fitness trials did not end within the {left:.0f}s left of {self.settings.bound}: "
                   f"{fitness.seen(seen, asked=asked, max_latency=settings.max_latency)}")
            raise self._unfit("too_slow", f"{self.last_slow}; then {cut}" if self.last_slow else cut,
                              fitness.HINTS["too_slow"]) from None
        old, tried = live.result(), [task.result() for task in rounds]
        judged = fitness.judge(tried, max_latency=settings.max_latency)
        if judged.state is not fitness.State.WARM:
            self._not_warm(found, judged, tried)
            return None
        new = fitness.side(self.backend.name, tried, ready=len(found.ready), warmup=started - self.first_trial)
        short = fitness.compare(new, old)
        step = fitness.after_compare(short, to_target=self.backend.name == self.plan.target,
                                     more_coming=self._may_wait(found) and len(found.pods) > len(found.ready))
        if step is fitness.Next.ACCEPT:
            return proofs.Fitted(new, old, short)
        assert short is not None
        if step is fitness.Next.WAIT:
            log.info(milestones.WARMING, backend=self.backend.name, cause=short.cause, message=short.message)
            return None
        raise self._unfit(short.cause, short.message, short.hint, new=new, old=old)

    def _may_wait(self, found: readiness.Assessment) -> bool:
        """Budget is left for another round after the pause (docs/fitness.md: keep proving while it lasts; the round
        itself is bounded by what is left, `_left`): not whether its worst case fits, which refused a target
        warm by its second round with two thirds of the budget left."""
        return self.keep_waiting and self._left(found) > PROOF_RETRY

    def _left(self, found: readiness.Assessment) -> float:
        """Seconds of verify.maxWait left now, for Ready pods warming up: the assessment's elapsed time plus this
        round so far. Not `budget_left`, which follows the pods' startup budgets: for pods that have long been
        Ready it is 0, and a first round bounded by it was cut before it began (found on the real tier)."""
        return self.settings.max_wait - found.elapsed - (self.clock.monotonic() - self.round_started)

    def _not_warm(self, found: readiness.Assessment, judged: fitness.Judged,
                 tried: Sequence[fitness.PodTrial]) -> None:
        """Broken: fail now. Warming: log it and let the caller try again, while another round fits the budget."""
        latencies = {trial.pod: [round(seconds, 3) for seconds in trial.latencies()] for trial in tried}
        if judged.state is fitness.State.BROKEN:
            raise self._unfit(judged.cause or "unfit", judged.message,
                              fitness.HINTS.get(judged.cause or "", kinds.HINTS.get(judged.cause or "", "")))
        if not self._may_wait(found):
            raise self._unfit("too_slow", judged.message, fitness.HINTS["too_slow"], latencies=latencies)
        self.last_slow = judged.message
        log.info(milestones.WARMING, backend=self.backend.name, elapsed=round(found.elapsed),
                 budget_left=round(found.budget_left), latencies=latencies, message=judged.message)

    async def _live_side(self, *, measure: bool) -> proofs.Side | None:
        """The live backend's column, measured once per wait; never a reason to fail (docs/fitness.md). Without
        `measure` (compare: false) it is not contacted at all."""
        if not measure:
            return None
        if not self.live_measured:
            self.live = await self._measure_live()
            self.live_measured = True
        return self.live

    async def _measure_live(self) -> proofs.Side | None:
        """None when the Service selects the target or no backend of the plan; a Side with a note when the live
        backend cannot be read."""
        plan = self.plan
        try:
            service = await self.cluster.service(plan.service.namespace, plan.service.name)
            selected = commits.backend_of(plan, service.selector)
            if selected is None or selected == self.backend.name:
                return None
            live = plan.backend(selected)
            pods, _ = await self.cluster.pods(plan.service.namespace, live.selector)
        except CutoverError as exc:
            return proofs.Side("?", note=f"not measured: {exc.message}")
        return await trials.live_side(live, pods, plan, self.client)

    def _unfit(self, cause: str, message: str, hint: str, **fields: object) -> NamesNotProven:
        message = f"backend {self.backend.name}: {message}"
        log.error(milestones.NAMES_FAILED, backend=self.backend.name, cause=cause, message=message, hint=hint,
                  **{key: value.as_data() if isinstance(value, proofs.Side) else value
                     for key, value in fields.items()})
        return NamesNotProven(message, cause=cause, hint=hint)

    async def _judge(self, found: readiness.Assessment, problems: Sequence[tuple[PodProof, Problem]]) -> None:
        """Raise when waiting cannot help (`readiness.after_failed_proof` says); otherwise log and let the caller
        try again."""
        proof, problem = readiness.worst(problems)
        left = self._retry_window(found)
        step = readiness.after_failed_proof(problem, budget_left=left, retry_in=PROOF_RETRY)
        if step is readiness.ProofStep.DIAGNOSE:
            verdict = await self._diagnose(found)
            if verdict.admitted is False:
                raise self._names_failed(proof, problem, cause="network_policy_blocks",
                                         hint=f"{verdict.explanation}; add an ingress rule for namespace "
                                              f"{self.cluster.own_namespace} on TCP {self.backend.port}")
            step = readiness.after_failed_proof(problem, budget_left=left, retry_in=PROOF_RETRY, diagnosed=True)
        if step is readiness.ProofStep.FAIL:
            raise self._names_failed(proof, problem, cause=problem.kind, hint=kinds.HINTS.get(problem.kind, ""))
        log.info("names.retry", backend=self.backend.name, pod=proof.pod, problem=problem.kind,
                 message=problem.message, next_in=PROOF_RETRY)

    def _retry_window(self, found: readiness.Assessment) -> float:
        """`readiness.retry_window` for this wait, counting how long the proofs have failed (with --wait)."""
        now = self.clock.monotonic()
        self.failing_since = now if self.failing_since is None else self.failing_since
        return readiness.retry_window(budget_left=found.budget_left, grace=PROOF_GRACE,
                                      failing_for=now - self.failing_since if self.keep_waiting else None,
                                      wait_left=self.settings.max_wait - found.elapsed)

    async def _diagnose(self, found: readiness.Assessment) -> netpolicy.Verdict:
        policies = await self.cluster.network_policies(self.plan.service.namespace)
        verdict = netpolicy.diagnose(policies, pod_labels=found.ready[0].labels,
                                     source_namespace=self.cluster.own_namespace, port=self.backend.port)
        log.warning("network.diagnosis", backend=self.backend.name, admitted=verdict.admitted,
                    policies=list(verdict.selecting), explanation=verdict.explanation)
        return verdict

    def _names_failed(self, proof: PodProof, problem: Problem, *, cause: str,
                      hint: str) -> NamesNotProven:
        message = f"pod {proof.pod} ({proof.address}): {problem.message}"
        log.error(milestones.NAMES_FAILED, backend=self.backend.name, pod=proof.pod, cause=cause, message=message,
                  hint=hint, proven=list(proof.proven))
        return NamesNotProven(message, cause=cause, hint=hint)


def _pod_line(pod: readiness.PodProgress) -> str:
    parts = [f"{pod.name} {pod.state}"]
    if pod.budget_left is not None:
        parts.append(f"probe budget {pod.budget_left:.0f}s ({pod.probe_failures_allowed} failures allowed)")
    if pod.restarts:
        parts.append(f"{pod.restarts} restarts")
    if pod.pull_error:
        parts.append(f"image pull failing, waited through: {pod.pull_error}")
    return ", ".join(parts)

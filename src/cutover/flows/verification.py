"""The switch as ArgoCD applied it (docs/guarantees.md, the flow's step 4): the same Service object, EndpointSlices
that are exactly the target's Ready pods, and every served name answered through every Service port as clients reach it,
by the target's engine (both engines serve the same names), each request on a connection of its own.

EndpointSlices may trail a selector change by seconds; `switch.look_again` says when to look again and
when a problem is final. Proofs through the Service are tried again while `switch.retry_through_service`
allows (kube-proxy may trail the slices). Called by the phases after ArgoCD applied a switch.
"""

from __future__ import annotations

import asyncio
import dataclasses

import structlog

from cutover.core import milestones, switch
from cutover.core.proofs import PodProof
from cutover.core.results import Verified
from cutover.core.trailers import Trailers
from cutover.core.views import Commit, ServiceView
from cutover.engines import api, fitness, kinds, trials
from cutover.errors import CutoverError, VerificationFailed
from cutover.flows.context import Run
from cutover.flows.wait import prove_backend
from cutover.plan import Backend, Plan, secrets

DNS_TIMEOUT = 2.0  # seconds to resolve the Service's name before using its ClusterIP
# How long the proofs through the Service are tried again while every problem may pass (a connection refused or
# reset while kube-proxy programs the switch), and the seconds between tries. Kubernetes' own SLO for network
# programming latency is 30 s at the 99th percentile (kubernetes/community, sig-scalability/slos/
# network_programming_latency.md); a loaded node of the real tier once took longer than the 6 s this was.
SERVICE_WINDOW, SERVICE_RETRY = 30.0, 2.0
ENDPOINTS_SETTLE, ENDPOINTS_POLL = 60.0, 2.0  # seconds EndpointSlices may trail a selector change, and between looks

log = structlog.get_logger("cutover")


async def verify(run: Run, live: ServiceView, trailers: Trailers, backend: str) -> Verified:
    """VerificationFailed (exit 6) with every problem found, or the verified switch."""
    problems, serving = await _settled_endpoints(run, live, trailers, backend)
    messages = problems.messages() or await _through_the_service(run, live, backend)
    if messages:
        await run.event(live, "CutoverVerificationFailed", "; ".join(messages), warning=True)
        raise VerificationFailed("; ".join(messages), hint=_after_failure(run.plan))
    ports = ports_of(run, live)
    log.info(milestones.VERIFIED, backend=backend, endpoints=sorted(serving),
             names=list(run.plan.verify.served_names), ports=list(ports))
    await run.event(live, "CutoverVerified", f"the Service selects {backend}; every name answered on ports "
                                             f"{', '.join(map(str, ports))}")
    return Verified(backend, tuple(sorted(serving)))


def _after_failure(plan: Plan) -> str:
    if plan.fleet:  # docs/fleet.md: this cluster's sync fails, and the fleet's step with it
        return ("the switch did not land as the revision has it: this cluster's sync fails here and the fleet's "
                "step stalls on it; revert the fleet's commit to go back (its syncs are gated on the way)")
    return f"the switch did not land as committed; roll back with {plan.job('rollback')} if clients fail"


async def _settled_endpoints(run: Run, live: ServiceView, trailers: Trailers,
                             backend: str) -> tuple[switch.SwitchProblems, set[str]]:
    plan, loop = run.plan, asyncio.get_running_loop()
    deadline = loop.time() + ENDPOINTS_SETTLE
    while True:
        pods, _ = await run.cluster.pods(plan.service.namespace, plan.backend(backend).selector)
        ready = {pod.ip for pod in pods if pod.ready and pod.ip}
        serving = {endpoint.ip for endpoint in await run.cluster.endpoints(plan.service.namespace, plan.service.name)
                   if endpoint.ready}
        problems = switch.switch_problems(trailers, live, ready=ready, serving=serving)
        if not switch.look_again(problems, now=loop.time(), deadline=deadline, poll=ENDPOINTS_POLL):
            return problems, serving
        log.info("service.endpoints_waiting", serving=sorted(serving), ready=sorted(ready),
                 hint="the EndpointSlice controller has not caught up with the selector yet")
        await asyncio.sleep(ENDPOINTS_POLL)


def ports_of(run: Run, live: ServiceView) -> tuple[int, ...]:
    return run.plan.service.ports or tuple(port.port for port in live.ports)


async def _service_address(live: ServiceView) -> str:
    """The Service's DNS name when it resolves from here; else its ClusterIP (a selector edit never changes
    what the name resolves to, so the ClusterIP proves the same path)."""
    name = f"{live.name}.{live.namespace}.svc"
    try:
        async with asyncio.timeout(DNS_TIMEOUT):
            await asyncio.get_running_loop().getaddrinfo(name, None)
        return name
    except (OSError, TimeoutError):
        # worth a warning in a pod, whose clients resolve that name; off-cluster (a laptop, the demo) it is expected
        say = log.warning if secrets.in_cluster() else log.info
        say("service.dns_unavailable", name=name, using=live.cluster_ip,
            hint="no cluster DNS from here; checking through the ClusterIP read from the API")
        return live.cluster_ip or name


async def _through_the_service(run: Run, live: ServiceView, backend: str) -> list[str]:
    """Every served name, through every Service port, as clients reach it."""
    plan, profile = run.plan, run.plan.backend(backend)
    method = kinds.method_for(profile.engine, plan.verify.proof)
    address = await _service_address(live)
    problems: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SERVICE_WINDOW  # one window for every port: they are programmed together
    async with api.new_client(timeout=plan.verify.request_timeout, fresh=True) as client:
        for port in ports_of(run, live):
            while True:
                proof = await _prove_through(client, run.plan, profile, address, port, method=method)
                if not switch.retry_through_service(proof, now=loop.time(), deadline=deadline,
                                                    retry_in=SERVICE_RETRY):
                    break
                log.info("service.proof_retry", port=port, problems=[p.message for p in proof.problems],
                         next_in=SERVICE_RETRY)
                await asyncio.sleep(SERVICE_RETRY)
            problems += [f"through {address}:{port}: {problem.message}" for problem in proof.problems]
            if not proof.problems and plan.verify.fitness is not None:
                problems += await _latency(client, plan, profile.engine, address, port)
    return problems


async def _prove_through(client: api.Client, plan: Plan, profile: Backend, address: str, port: int, *,
                         method: str) -> PodProof:
    """Who answers first, then every name. Both engines serve the same names, so an answer proves nothing of which
    pods gave it; and while kube-proxy still leads to the old engine, its answers (a name it does not list) are not
    the target's to judge: the old engine named, retried within the window, says what is wrong."""
    pod = f"Service port {port}"
    problem = await api.identify(client, ip=address, port=port, engine=profile.engine)
    if problem is not None and problem.kind == "wrong_engine":
        return PodProof(pod=pod, address=f"{address}:{port}", method=method, proven=(), problems=(problem,),
                        seconds=0.0)
    proof = await api.prove(client, pod=pod, ip=address, port=port, engine=profile.engine,
                            names=plan.verify.served_names, method=method, model=profile.model)
    return dataclasses.replace(proof, problems=(problem,)) if problem is not None and proof.ok else proof


async def _latency(client: api.Client, plan: Plan, engine: str, address: str, port: int) -> list[str]:
    """docs/fitness.md: through the Service, as clients reach it, a p50 over maxLatency fails like a missing name."""
    settings = plan.verify.fitness
    assert settings is not None
    tried = await trials.trial(client, pod=f"Service port {port}", ip=address, port=port, engine=engine,
                               names=plan.verify.served_names, fitness=settings, stream=False, context=False)
    measured = fitness.side("service", [tried], ready=0)
    log.info("service.latency", port=port, p50=measured.as_data()["latencyP50"],
             max=measured.as_data()["latencyMax"], bound=settings.max_latency)
    if measured.p50 is None:
        failed = next(sample.problem for sample in tried.samples if sample.problem is not None)
        return [f"through {address}:{port}: no fitness generation answered: {failed.message}"]
    if measured.p50 > settings.max_latency:
        return [f"through {address}:{port}: latency p50 {measured.p50:.2f}s is over verify.fitness.maxLatency "
                f"{settings.max_latency:g}s (max {measured.max:.2f}s)"]
    return []


async def still_serving(run: Run, live: ServiceView, backend: str, *, gap: Commit | None = None) -> None:
    """The live backend's pods prove every name now (`cutover audit`); an alert otherwise: an Event, Slack (an
    error event), exit 6. `gap`: the free that left `backend` without pods, while no sync finishes the hop (a
    Terminate ends a sync and runs no SyncFail): the hint says how to go on."""
    try:
        await prove_backend(run.cluster, run.plan, run.plan.backend(backend), wait=False)
    except CutoverError as exc:
        message = f"the live backend {backend} no longer proves its names: {exc.message}"
        hint = f"clients of the Service are failing: look at the {backend} pods, or roll back with " \
               f"{run.plan.job('rollback')}"
        if gap is not None:
            hint = f"a handoff's gap is open: {backend} was freed by {gap.sha[:12]} for {gap.trailers.to} and no " \
                   f"sync is finishing the hop (a Terminate, a sync that ended): sync the Application again, or " \
                   f"run {run.plan.job('run')}"
        # the log keeps the proof's own hint (what to fix in the engine) unless the gap explains it all
        log.error(milestones.FAILED, cause="live_backend_unproven", message=message,
                  hint=hint if gap is not None else exc.hint)
        await run.event(live, "CutoverLiveBackendUnproven", message, warning=True)
        raise VerificationFailed(message, cause="live_backend_unproven", hint=hint) from exc

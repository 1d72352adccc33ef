"""Draining a backend the Service no longer selects (docs/capacity.md): read its pods' in-flight gauge every second
until each reads 0 twice in a row, or wait `handoff.drainTimeout` for an engine without one; bounded by the timeout
either way, then the caller frees it with a warning naming what still ran. Measured and reported (`drain.*`
events). The rule is `engines.drain`; this module only reads and waits. Called before any free. Beside it, `safety`:
what deleting the backend a switch leaves would cut (`engines.shutdown`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import structlog

from cutover.core.clock import Clock
from cutover.core.views import PodView
from cutover.engines import api, drain, kinds, shutdown
from cutover.kube import dataplane
from cutover.kube.cluster import Cluster
from cutover.plan import Backend, Plan

log = structlog.get_logger("cutover")


@dataclasses.dataclass(frozen=True)
class Drained:
    backend: str
    seconds: float  # from the first read to the verdict
    complete: bool  # every pod idle (False: the timeout ran out first)
    by: str  # metrics | timeout: how the end was told (an engine without the gauge is waited on)
    running: dict[str, float] = dataclasses.field(default_factory=dict)  # pods still busy when it ended

    def as_data(self) -> dict[str, object]:
        return {"backend": self.backend, "seconds": round(self.seconds, 1), "complete": self.complete, "by": self.by,
                "running": self.running}


async def drain_backend(client: api.Client, backend: Backend, pods: Sequence[PodView], *,
                        within: float) -> Drained:
    """Until `backend`'s pods have nothing in flight, or `within` seconds; never raises for an engine's answer."""
    clock = Clock()
    started = clock.monotonic()
    gauge = kinds.ENGINES[backend.engine].in_flight
    serving = [pod for pod in pods if pod.ip and not pod.deleting]
    log.info("drain.started", backend=backend.name, pods=[pod.name for pod in serving], timeout=within,
             by="metrics" if gauge else "timeout")
    reads, by = drain.Reads(), "metrics" if gauge else "timeout"
    try:
        async with asyncio.timeout(within):
            while gauge is not None:
                try:
                    values = await asyncio.gather(*(_read(client, backend, pod, gauge) for pod in serving))
                except _NoGauge as exc:
                    log.warning("drain.no_metrics", backend=backend.name, message=str(exc), then="wait the timeout")
                    gauge, by = None, "timeout"
                    break
                for pod, value in zip(serving, values, strict=True):
                    reads = reads.after(pod.name, value)
                if reads.idle(pod.name for pod in serving):
                    return _done(backend, clock.monotonic() - started, complete=True, by=by, reads=reads)
                await asyncio.sleep(drain.POLL)
            await asyncio.sleep(within)  # no gauge: the timeout is the drain (docs/capacity.md)
    except TimeoutError:
        pass
    return _done(backend, clock.monotonic() - started, complete=by == "timeout", by=by, reads=reads)


class _NoGauge(Exception):
    """The engine answers, but without the gauge: nothing tells when it is idle."""


async def _read(client: api.Client, backend: Backend, pod: PodView, gauge: str) -> float | None:
    """The pod's in-flight count; None when it does not answer (nothing runs on a pod that is gone)."""
    try:
        text = await api.metrics(client, api.base_url(pod.ip or "", backend.port))
    except api.Refusal:
        return None
    value = drain.gauge(text, gauge) if text is not None else None
    if value is None:
        raise _NoGauge(f"{pod.name} serves no {gauge} on /metrics")
    return value


def _done(backend: Backend, seconds: float, *, complete: bool, by: str, reads: drain.Reads) -> Drained:
    drained = Drained(backend.name, seconds, complete, by, {} if complete else reads.running())
    if complete:
        log.info("drain.done", **drained.as_data())
    else:
        log.warning("drain.timed_out", **drained.as_data(),
                    message=f"{backend.name}: requests still running after the drain timeout: "
                            + ", ".join(f"{pod} {value:g}" for pod, value in drained.running.items()),
                    hint="raise handoff.drainTimeout, or accept that these requests are cut when it is freed")
    return drained


async def safety(cluster: Cluster, plan: Plan, *, leaving: str | None, to: str) -> tuple[str, ...]:
    """What deleting the pods of the backend a switch to `to` leaves would cut (docs/capacity.md): warnings, never a
    refusal; `cutover plan` shows them and the PreSync gate logs them."""
    if leaving is None or leaving == to:
        return ()
    backend = plan.backends[leaving]
    pods, _ = await cluster.pods(plan.service.namespace, backend.selector)
    cut = await _dataplane(cluster)
    return (*shutdown.warnings(leaving, backend.engine, pods), *([cut] if cut else []))


async def _dataplane(cluster: Cluster) -> str | None:
    """Whether the switch itself cuts streams (Cilium's kube-proxy replacement), where cutover may list nodes and
    pods (the optional cutover-capacity ClusterRole); nothing is said where it may not."""
    nodes = await cluster.nodes()
    runs = await cluster.kube_proxy_runs() if nodes else None
    return None if nodes is None or runs is None else dataplane.warning(nodes, kube_proxy_runs=runs)

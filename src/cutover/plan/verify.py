"""The plan's `verify:` section: which names are proven, how, and the fitness check's bounds."""

from __future__ import annotations

from cutover.plan.field import Field
from cutover.plan.model import PROOFS, Fitness, Verify


def read_verify(node: Field) -> Verify:
    node.mapping(("servedNames", "proof", "minReadyPods", "maxWait", "requestTimeout", "fitness"),
                 required=("servedNames",))
    names = node.child("servedNames")
    if not isinstance(names.value, list) or not names.value:
        raise names.fail("a non-empty list of the model names clients send")
    served = tuple(names.child(i).string() for i in range(len(names.value)))
    if len(set(served)) != len(served):
        raise names.fail("each name once")
    return Verify(
        served_names=served,
        proof=node.child("proof").string(default="auto", choices=PROOFS),
        min_ready_pods=node.child("minReadyPods").integer(default=1, low=1, high=10_000),
        max_wait=node.child("maxWait").duration(default=1800.0),
        request_timeout=node.child("requestTimeout").duration(default=10.0),
        fitness=_read_fitness(node.child("fitness")) if "fitness" in node.value else None,
    )


def _read_fitness(node: Field) -> Fitness:
    if node.value is None:
        return Fitness()  # `fitness:` with nothing under it: every default
    node.mapping(("requests", "maxLatency", "stream", "compare"))
    return Fitness(requests=node.child("requests").integer(default=3, low=1, high=20),
                   max_latency=node.child("maxLatency").duration(default=5.0),
                   stream=node.child("stream").boolean(default=True),
                   compare=node.child("compare").boolean(default=True))

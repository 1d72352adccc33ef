"""The plan's `handoff:` section (docs/capacity.md): how the target gets room when the cluster cannot hold both
engines, and what happens to the source after the switch (retire). Every key is read and checked against the rest of
the plan."""

from __future__ import annotations

from collections.abc import Mapping

from cutover.plan.field import Field
from cutover.plan.model import DRAIN_TIMEOUT, STRATEGIES, Backend, Handoff, unanswered

_KEYS = ("strategy", "bridge", "bridgeNames", "maxGap", "drainTimeout", "retire")


def read_handoff(node: Field, *, backends: Mapping[str, Backend], target: str,
                 served: tuple[str, ...]) -> Handoff:
    if node.value is None:
        return Handoff()
    node.mapping(_KEYS)
    strategy = node.child("strategy").string(default="parallel", choices=STRATEGIES)
    bridge_names = _bridge_names(node, strategy, served)
    dark = unanswered(served, bridge_names) if strategy == "bridge" else ()
    handoff = Handoff(strategy=strategy, bridge=_bridge(node, strategy, backends=backends, target=target),
                      bridge_names=bridge_names, max_gap=_max_gap(node, strategy, dark),
                      drain_timeout=node.child("drainTimeout").duration(default=DRAIN_TIMEOUT),
                      retire_after=_retire_after(node.child("retire")))
    if strategy != "parallel" or handoff.retire_after is not None:
        _workloads_named(node, backends, why=f"handoff.strategy {strategy}" if strategy != "parallel" else
                         "handoff.retire", bridge=handoff.bridge)
    return handoff


def _workloads_named(node: Field, backends: Mapping[str, Backend], *, why: str, bridge: str | None) -> None:
    """recreate, bridge and retire free the source and restore it (a rollback goes the other way): every backend
    names its workload, but the bridge, which is never freed."""
    for name, backend in backends.items():
        if backend.workload is None and name != bridge:
            raise Field(node.source, f"backends.{name}.workload", None).fail(
                f"the workload that holds the backend's resources, {{kind, name}} ({why} frees and restores it)")


def _bridge(node: Field, strategy: str, *, backends: Mapping[str, Backend], target: str) -> str | None:
    field = node.child("bridge")
    if strategy != "bridge":
        if field.value is not None:
            raise field.fail("no bridge (it is for handoff.strategy: bridge only)")
        return None
    if field.value is None:
        raise field.fail("the backend that serves the names while the source is freed (bridge needs one)")
    name = field.string()
    if name not in backends or name == target:
        others = ", ".join(other for other in backends if other != target) or "none"
        raise field.fail(f"a backend of the plan other than the target ({others})")
    if len(backends) < 3:  # the bridge carries the names between two others: with two, it would be the source
        raise field.fail(f"a third backend besides the target and the one it replaces (the plan has "
                         f"{', '.join(backends)})")
    return name


def _bridge_names(node: Field, strategy: str, served: tuple[str, ...]) -> tuple[str, ...]:
    field = node.child("bridgeNames")
    if field.value is None:
        return served if strategy == "bridge" else ()
    if strategy != "bridge":
        raise field.fail("no bridgeNames (they are for handoff.strategy: bridge only)")
    if not isinstance(field.value, list) or not field.value:
        raise field.fail("a non-empty list of served names")
    names = tuple(field.child(index).string() for index in range(len(field.value)))
    for index, name in enumerate(names):
        if name not in served:
            raise field.child(index).fail(f"one of verify.servedNames ({', '.join(served)})")
    return names


def _max_gap(node: Field, strategy: str, dark: tuple[str, ...]) -> float | None:
    """The consent to a gap in service: recreate's (every name, from the free to the switch), and a bridge's that
    leaves `dark` names unanswered (they have no backend from the switch to the bridge until the switch off it)."""
    field = node.child("maxGap")
    if strategy == "bridge" and not dark:
        if field.value is not None:
            raise field.fail("no maxGap (under bridge it bounds the names the bridge does not answer, and "
                             "handoff.bridgeNames holds every served name: no name goes unanswered)")
        return None
    if strategy not in ("recreate", "bridge"):
        if field.value is not None:
            raise field.fail("no maxGap (it is for handoff.strategy: recreate, and bridge with names the bridge "
                             "does not answer)")
        return None
    if field.value is None:
        why = "recreate opens a gap in service" if strategy == "recreate" else \
            f"handoff.bridgeNames leaves {', '.join(dark)} unanswered while the bridge serves"
        raise field.fail(f"a duration such as '45m': {why}, and maxGap is the consent to it")
    return field.duration(default=0.0)


def _retire_after(node: Field) -> float | None:
    if node.value is None:
        return None
    node.mapping(("after",), required=("after",))
    return node.child("after").duration(default=0.0)

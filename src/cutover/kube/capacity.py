"""Capacity, read rather than guessed (docs/capacity.md): does the target fit now, only once the source's pods are
gone, or nowhere? Pure: no I/O, no clock.

The scheduler says that a pod does not fit ("0/4 nodes are available: 4 Insufficient nvidia.com/gpu"); it does not
say whether freeing the backend being replaced would make room, which is what decides between waiting, stopping
with `capacity_held_by_source` and `unschedulable`. `judge` answers that from the nodes' allocatable, the requests of
the pods bound to them and the target pod's requests and placement (nodeSelector, required node affinity and
tolerations, as far as they are plain label matches), the way the scheduler's NodeResourcesFit, NodeAffinity and
TaintToleration filters count (kubernetes/pkg/scheduler/framework/plugins). Quantities are integers of milli-units,
so "500m" CPU and "1" GPU add up exactly. Called by `flows.wait` (a Pending target pod) and `flows.commands`
(`cutover status` and `cutover plan`, before any wait).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction

from cutover.core.views import NodeView, Placement, PodView, Requirement, Taint, Toleration

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_SUFFIXES: Mapping[str, int | Fraction] = {
    "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60,
    "n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000), "k": 10 ** 3,
    "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18}
_INSUFFICIENT = re.compile(r"Insufficient ([A-Za-z0-9./_-]+)")
_HARD_EFFECTS = ("NoSchedule", "NoExecute")  # PreferNoSchedule only steers; it never keeps a pod off a node
# The scheduler's own taint on a cordoned node (kubernetes/pkg/apis/core: TaintNodeUnschedulable).
_CORDONED = "node.kubernetes.io/unschedulable"


def milli(text: object) -> int:
    """A Kubernetes quantity ("500m", "16Gi", "1", "1e3") in milli-units, rounded up as the scheduler rounds a
    request up; ValueError for anything else."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise ValueError(text)
    number, exponent, suffix = match.groups()
    value = Fraction(number) * _SUFFIXES.get(suffix or "", 1) * Fraction(10) ** int(exponent or 0)
    return math.ceil(value * 1000)


def shown(resource: str, amount: int) -> str:
    """Milli-units as a person reads them: whole CPUs and GPUs, memory in Gi or Mi."""
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        units = amount / 1000
        for suffix, size in (("Gi", 2 ** 30), ("Mi", 2 ** 20), ("Ki", 2 ** 10)):
            if units >= size:
                return f"{units / size:g}{suffix}"
        return f"{units:g}"
    return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"


class Fit(enum.Enum):
    NOW = "fits_now"
    ONCE_SOURCE_GONE = "fits_once_source_gone"
    MAYBE_ONCE_SOURCE_GONE = "may_fit_once_source_gone"  # some pods could not be seen: stated as a possibility
    NOWHERE = "fits_nowhere"
    UNKNOWN = "unknown"  # the nodes could not be read


@dataclasses.dataclass(frozen=True)
class Verdict:
    fit: Fit
    target: str
    source: str | None
    needed: int  # target pods that must still be scheduled
    fits_now: int  # how many of them fit on what is free now
    fits_freed: int  # ... once the source's pods are gone
    figures: tuple[str, ...] = ()  # one line per eligible node: allocatable, held by the source, by others, free
    unseen: str | None = None  # what could not be read, and so is not in the figures
    demand: str = ""  # what one target pod requests

    @property
    def held_by_source(self) -> bool:
        return self.fit in (Fit.ONCE_SOURCE_GONE, Fit.MAYBE_ONCE_SOURCE_GONE)

    def summary(self) -> str:
        """One line: the verdict with its figures, as the log, Slack and `cutover status` say it."""
        head = {
            Fit.NOW: f"{self.target} fits now",
            Fit.ONCE_SOURCE_GONE: f"{self.target} fits only once {self.source}'s pods are gone",
            Fit.MAYBE_ONCE_SOURCE_GONE: f"{self.target} may fit once {self.source}'s pods are gone",
            Fit.NOWHERE: f"{self.target} fits nowhere" + (f", even with {self.source}'s pods gone"
                                                          if self.source else ""),
            Fit.UNKNOWN: f"{self.target}'s fit is unknown",
        }[self.fit]
        parts = [head]
        if self.demand:
            parts.append(f"{self.target} needs {self.demand} per pod for {self.needed} pod"
                         f"{'s' if self.needed != 1 else ''}")
        parts.extend(self.figures)
        if self.unseen:
            parts.append(self.unseen)
        return "; ".join(parts)

    def as_data(self) -> dict[str, object]:
        return {"fit": self.fit.value, "target": self.target, "source": self.source, "needed": self.needed,
                "fitsNow": self.fits_now, "fitsOnceSourceGone": self.fits_freed, "demand": self.demand,
                "figures": list(self.figures), **({"unseen": self.unseen} if self.unseen else {})}


def lacking(message: str | None) -> tuple[str, ...]:
    """The resources the scheduler's message names as insufficient ("4 Insufficient nvidia.com/gpu")."""
    return tuple(dict.fromkeys(name.rstrip(".") for name in _INSUFFICIENT.findall(message or "")))


def judge(*, target: str, pending: PodView, needed: int, nodes: Sequence[NodeView] | None,
          bound: Iterable[PodView], source: str | None, source_pods: Iterable[PodView],
          seen_all: bool = True, short: Sequence[str] = ()) -> Verdict:
    """Where `needed` more pods like `pending` fit. `bound`: every non-terminal pod bound to a node that could be
    read (the cluster's, or only the plan namespace's when `seen_all` is false); `source_pods`: the live backend's,
    among them; `short`: what the scheduler said was insufficient (`lacking`)."""
    demand = dict(pending.requests)
    demand_text = ", ".join(f"{shown(name, amount)} {name}" for name, amount in sorted(demand.items())
                            if name != "pods")
    if nodes is None:
        # Nothing of the nodes is known: the source holding what the scheduler found short is the one fact left,
        # said as a possibility (docs/capacity.md), never as a verdict on figures that were not read.
        held = _held(source_pods)
        maybe = any(amount > 0 for on in held.values() for name, amount in on.items() if name in (short or demand))
        return Verdict(Fit.MAYBE_ONCE_SOURCE_GONE if maybe and needed > 0 else Fit.UNKNOWN, target, source, needed,
                       0, 0, demand=demand_text,
                       unseen="the nodes and the pods bound to them could not be read (grant the optional "
                              "ClusterRole cutover-capacity)")
    placement = pending.placement or Placement()
    eligible = [node for node in nodes if admits(node, placement)]
    source_pods = list(source_pods)
    ours = {(pod.namespace, pod.name) for pod in source_pods}
    held, by_source = _held(bound), _held(source_pods)
    holders = _holders(pod for pod in bound if (pod.namespace, pod.name) not in ours)
    lines, now_count, freed_count = [], 0, 0
    for node in eligible:
        free = {name: node.allocatable.get(name, 0) - held.get(node.name, {}).get(name, 0) for name in demand}
        mine = by_source.get(node.name, {})
        freed = {name: free[name] + mine.get(name, 0) for name in demand}
        now_count += _how_many(free, demand)
        freed_count += _how_many(freed, demand)
        lines.append(_figure(node, demand, free=free, mine=mine, source=source, short=short,
                             others=holders.get(node.name, {})))
    fit = _fit(needed, now_count, freed_count, seen_all=seen_all, source_holds=_holds_short(
        by_source, eligible, short or tuple(demand)))
    skipped = len(nodes) - len(eligible)
    if skipped:
        lines.append(f"{skipped} node{'s' if skipped != 1 else ''} excluded (the target's placement, or taints)")
    unseen = None if seen_all else ("pods of other namespaces could not be read (grant the optional ClusterRole "
                                    "cutover-capacity): what they hold is not counted")
    return Verdict(fit, target, source, needed, min(now_count, needed), min(freed_count, needed), tuple(lines),
                   unseen, demand_text)


def _fit(needed: int, now: int, freed: int, *, seen_all: bool, source_holds: bool) -> Fit:
    if needed <= 0 or (seen_all and now >= needed):
        return Fit.NOW
    if freed < needed or not source_holds:
        # what is free is at most what was counted; freeing the source adds only what the source holds
        return Fit.NOWHERE
    return Fit.ONCE_SOURCE_GONE if seen_all else Fit.MAYBE_ONCE_SOURCE_GONE


def _held(pods: Iterable[PodView]) -> dict[str, dict[str, int]]:
    """Requests per node of the pods bound there (a terminating pod still holds what it requests)."""
    held: dict[str, dict[str, int]] = {}
    for pod in pods:
        if pod.node_name and pod.phase not in ("Succeeded", "Failed"):
            on = held.setdefault(pod.node_name, {})
            for name, amount in pod.requests.items():
                on[name] = on.get(name, 0) + amount
    return held


def _holders(pods: Iterable[PodView]) -> dict[str, dict[str, dict[str, int]]]:
    """Per node and resource, what each workload other than the source holds there (`PodView.workload`): who a person
    would ask for a card, or which engine could bridge."""
    found: dict[str, dict[str, dict[str, int]]] = {}
    for pod in pods:
        if pod.node_name and pod.phase not in ("Succeeded", "Failed"):
            for name, amount in pod.requests.items():
                if amount > 0:
                    by = found.setdefault(pod.node_name, {}).setdefault(name, {})
                    by[pod.workload] = by.get(pod.workload, 0) + amount
    return found


def _holds_short(by_source: Mapping[str, Mapping[str, int]], eligible: Sequence[NodeView],
                 short: Sequence[str]) -> bool:
    """Whether the source holds any of the short resources on a node the target may use."""
    return any(by_source.get(node.name, {}).get(name, 0) > 0 for node in eligible for name in short)


def _how_many(free: Mapping[str, int], demand: Mapping[str, int]) -> int:
    counts = [free[name] // amount for name, amount in demand.items() if amount > 0]
    return max(0, min(counts)) if counts else 1 << 20


def _figure(node: NodeView, demand: Mapping[str, int], *, free: Mapping[str, int], mine: Mapping[str, int],
            source: str | None, short: Sequence[str], others: Mapping[str, Mapping[str, int]]) -> str:
    """"worker-1: nvidia.com/gpu 2 allocatable, vllm holds 1, others 1 (coder/coder 1), 0 free" for the resources
    that matter: those the scheduler named, else those the target requests but this node lacks."""
    names = [name for name in demand if name in short] or [name for name in demand if free[name] < demand[name]]
    parts = []
    for name in names or [name for name in demand if name != "pods"][:1]:
        allocatable, theirs = node.allocatable.get(name, 0), mine.get(name, 0)
        held_by = allocatable - free[name] - theirs
        holder = f", {source} holds {shown(name, theirs)}" if source else ""
        named = ", ".join(f"{workload} {shown(name, amount)}" for workload, amount in
                          sorted((others.get(name) or {}).items(), key=lambda item: (-item[1], item[0])))
        parts.append(f"{name} {shown(name, allocatable)} allocatable{holder}, others {shown(name, held_by)}"
                     f"{f' ({named})' if named else ''}, {shown(name, max(free[name], 0))} free")
    return f"{node.name}: {'; '.join(parts)}" if parts else f"{node.name}: requests nothing"


# --- placement: NodeAffinity and TaintToleration, as plain label matches --------------------------------------


def admits(node: NodeView, placement: Placement) -> bool:
    """Whether the scheduler's placement filters let a pod with `placement` onto `node`."""
    if node.unschedulable and not _tolerated(Taint(_CORDONED), placement.tolerations):
        return False
    if any(node.labels.get(key) != value for key, value in placement.node_selector.items()):
        return False
    if placement.terms and not any(all(_meets(node, need) for need in term) for term in placement.terms):
        return False
    return all(_tolerated(taint, placement.tolerations) for taint in node.taints if taint.effect in _HARD_EFFECTS)


def _meets(node: NodeView, need: Requirement) -> bool:
    """One NodeSelectorRequirement (apimachinery's nodeaffinity semantics; matchFields: metadata.name only); an
    operator it does not know matches no node, as the API server would have refused it."""
    value = node.name if need.field else node.labels.get(need.key)
    rule = _OPERATORS.get(need.operator)
    return rule is not None and rule(value, need.values)


def _compare(value: str | None, values: tuple[str, ...], sign: int) -> bool:
    try:
        return value is not None and len(values) == 1 and (int(value) - int(values[0])) * sign > 0
    except ValueError:
        return False


_OPERATORS: Mapping[str, Callable[[str | None, tuple[str, ...]], bool]] = {
    "In": lambda value, values: value is not None and value in values,
    "NotIn": lambda value, values: value is None or value not in values,
    "Exists": lambda value, values: value is not None,
    "DoesNotExist": lambda value, values: value is None,
    "Gt": lambda value, values: _compare(value, values, 1),
    "Lt": lambda value, values: _compare(value, values, -1),
}


def _tolerated(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    """core/v1 Toleration.ToleratesTaint: the effect (empty: any), then the key (empty with Exists: any) and
    the value (Exists: any)."""
    for toleration in tolerations:
        if toleration.effect and toleration.effect != taint.effect:
            continue
        if toleration.key is None or toleration.key == "":
            if toleration.operator == "Exists":
                return True
            continue
        if toleration.key != taint.key:
            continue
        if toleration.operator == "Exists" or toleration.value == taint.value:
            return True
    return False

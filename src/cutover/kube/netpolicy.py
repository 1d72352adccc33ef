"""Does any NetworkPolicy let this Job reach the target pods? Pure evaluation, no I/O.

When a direct pod check times out on connect, the usual cause is not a hung engine but an ingress
policy that admits the clients' namespace and not the cutover Jobs' (manifests/examples/llm-serving/). `diagnose()`
applies the NetworkPolicy semantics (a pod selected by any Ingress policy accepts only what one of their
rules admits) and names the policies that lack a rule. Called by `wait` after a connect timeout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from cutover.core.views import PolicyView

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set on every namespace since Kubernetes 1.21


@dataclasses.dataclass(frozen=True)
class Verdict:
    admitted: bool | None  # None: a rule we cannot evaluate from here (ipBlock, named port) might admit us
    selecting: tuple[str, ...]  # policies that select the target pod for ingress
    explanation: str


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against labels; an empty selector matches everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_expression_holds(expr, labels) for expr in selector.get("matchExpressions") or ())


def _expression_holds(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or ()
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False


def diagnose(
    policies: Iterable[PolicyView], *, pod_labels: Mapping[str, str], source_namespace: str, port: int,
) -> Verdict:
    """Whether traffic from `source_namespace` to a pod with `pod_labels` on TCP `port` is admitted."""
    selecting = [
        policy for policy in policies
        if "Ingress" in (policy.policy_types or ("Ingress",)) and selector_matches(policy.pod_selector, pod_labels)
    ]
    names = tuple(policy.name for policy in selecting)
    if not selecting:
        return Verdict(True, names, "no NetworkPolicy selects the target pods for ingress")
    maybe = False
    for policy in selecting:
        for rule in policy.ingress:
            outcome = _rule_admits(rule, policy_namespace=policy.namespace, source_namespace=source_namespace,
                                   port=port)
            if outcome is True:
                return Verdict(True, names, f"NetworkPolicy {policy.name} admits namespace "
                                            f"{source_namespace} on TCP {port}")
            maybe = maybe or outcome is None
    listing = ", ".join(names)
    if maybe:
        return Verdict(None, names, f"NetworkPolicies {listing} apply to the target pods; only rules that cannot "
                                    f"be evaluated from here (ipBlock, named ports) might admit namespace "
                                    f"{source_namespace} on TCP {port}")
    blocked = f"NetworkPolicy {listing} selects the target pods and no ingress rule admits"
    return Verdict(False, names, f"{blocked} namespace {source_namespace} on TCP {port}")


def _rule_admits(rule: Mapping[str, Any], *, policy_namespace: str, source_namespace: str, port: int) -> bool | None:
    port_ok = _port_admitted(rule.get("ports"), port)
    peers = rule.get("from")
    if port_ok is False:
        return False
    if not peers:
        return port_ok  # no `from`: every source
    peer_ok: bool | None = False
    for peer in peers:
        verdict = _peer_admits(peer, policy_namespace=policy_namespace, source_namespace=source_namespace)
        if verdict is True:
            peer_ok = True
            break
        if verdict is None:
            peer_ok = None
    if peer_ok is True:
        return port_ok
    return peer_ok if port_ok else None if peer_ok is None else False


def _port_admitted(ports: Iterable[Mapping[str, Any]] | None, port: int) -> bool | None:
    if not ports:
        return True
    unknown = False
    for entry in ports:
        if entry.get("protocol", "TCP") != "TCP":
            continue
        value = entry.get("port")
        if value is None:
            return True
        if isinstance(value, str):
            unknown = True  # a named port: resolving it needs the pod's container ports
            continue
        if value == port or value <= port <= (entry.get("endPort") or value):
            return True
    return None if unknown else False


def _peer_admits(peer: Mapping[str, Any], *, policy_namespace: str, source_namespace: str) -> bool | None:
    if "ipBlock" in peer:
        return None
    ns_labels = {NAMESPACE_NAME_LABEL: source_namespace}
    if "namespaceSelector" in peer:
        if not selector_matches(peer["namespaceSelector"], ns_labels):
            # We know only the name label of our namespace; a selector on other labels may still match.
            return False if _keys(peer["namespaceSelector"]) <= {NAMESPACE_NAME_LABEL} else None
        # A podSelector beside it narrows to some pods of that namespace; ours may or may not match.
        return True if not peer.get("podSelector") else None
    if "podSelector" in peer:
        if source_namespace != policy_namespace:
            return False
        return True if not peer["podSelector"] else None
    return False


def _keys(selector: Mapping[str, Any]) -> set[str]:
    expressions = selector.get("matchExpressions") or ()
    return set(selector.get("matchLabels") or {}) | {expr.get("key", "") for expr in expressions}

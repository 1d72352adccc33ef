"""NetworkPolicy semantics for the connect-timeout diagnosis (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from cutover.core.views import PolicyView
from cutover.kube import netpolicy

PREDICTOR = {"app.kubernetes.io/name": "llm-reasoning-candle", "component": "predictor"}


def policy(name: str, *rules: dict[str, Any], selector: dict[str, Any] | None = None,
           types: tuple[str, ...] = ("Ingress",)) -> PolicyView:
    chosen = selector if selector is not None else {"matchLabels": {"component": "predictor"}}
    return PolicyView("llm-serving", name, chosen, types, tuple(rules))


def from_namespace(name: str, port: int | str | None = 8080) -> dict[str, Any]:
    rule: dict[str, Any] = {"from": [{"namespaceSelector": {"matchLabels": {netpolicy.NAMESPACE_NAME_LABEL: name}}}]}
    if port is not None:
        rule["ports"] = [{"protocol": "TCP", "port": port}]
    return rule


def diagnose(*policies: PolicyView, source: str = "cutover", port: int = 8080) -> netpolicy.Verdict:
    return netpolicy.diagnose(policies, pod_labels=PREDICTOR, source_namespace=source, port=port)


def test_the_reference_scenario_policy_blocks_the_jobs_and_is_named() -> None:
    verdict = diagnose(policy("llm-serving-ingress", from_namespace("poimen")))
    assert verdict.admitted is False
    assert verdict.selecting == ("llm-serving-ingress",)
    assert verdict.explanation == ("NetworkPolicy llm-serving-ingress selects the target pods and no ingress rule "
                                   "admits namespace cutover on TCP 8080")


def test_a_second_policy_with_the_jobs_rule_admits() -> None:
    verdict = diagnose(policy("llm-serving-ingress", from_namespace("poimen")),
                       policy("llm-serving-ingress-cutover", from_namespace("cutover")))
    assert verdict.admitted is True and "llm-serving-ingress-cutover admits" in verdict.explanation


@pytest.mark.parametrize(("policies", "admitted"), [
    ((), True),  # nothing selects the pods: all traffic admitted
    ((policy("other", from_namespace("poimen"), selector={"matchLabels": {"component": "router"}}),), True),
    ((policy("egress-only", types=("Egress",)),), True),
    ((policy("deny-all"),), False),  # selects, no rules
    ((policy("open", {}),), True),  # an empty rule admits everything
    ((policy("wrong-port", from_namespace("cutover", port=9000)),), False),
    ((policy("port-range", {"ports": [{"port": 8000, "endPort": 8100}]}),), True),
    ((policy("udp-only", {"ports": [{"protocol": "UDP", "port": 8080}]}),), False),
    ((policy("named-port", from_namespace("cutover", port="http")),), None),  # needs the pod's port names
    ((policy("ip-block", {"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}),), None),
    ((policy("same-namespace-pods", {"from": [{"podSelector": {}}]}),), False),  # we are in another namespace
    ((policy("by-team-label", {"from": [{"namespaceSelector": {"matchLabels": {"team": "ml"}}}]}),), None),
    ((policy("expr", {"from": [{"namespaceSelector": {"matchExpressions": [
        {"key": netpolicy.NAMESPACE_NAME_LABEL, "operator": "In", "values": ["cutover", "poimen"]}]}}]}),), True),
])
def test_policy_semantics(policies: tuple[PolicyView, ...], admitted: bool | None) -> None:
    assert diagnose(*policies).admitted is admitted


@pytest.mark.parametrize(("selector", "labels", "matches"), [
    ({}, {"a": "b"}, True),
    ({"matchLabels": {"a": "b"}}, {"a": "b", "c": "d"}, True),
    ({"matchLabels": {"a": "b"}}, {"a": "c"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}, {}, True),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
])
def test_label_selectors(selector: dict[str, Any], labels: dict[str, str], matches: bool) -> None:
    assert netpolicy.selector_matches(selector, labels) is matches

"""The tier comes up: nodes Ready, the example installed, both engines' pods Ready on the scaled timeline."""

import pytest

from tier.cluster import Tier


def ready(tier: Tier, app: str) -> list[str]:
    pods = tier.core.list_namespaced_pod("llm-serving", label_selector=f"app.kubernetes.io/name={app}").items
    return [p.metadata.name for p in pods
            if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]


def test_both_engines_pods_become_ready_on_their_startup_timeline(tier: Tier) -> None:
    for app in ("llm-reasoning", "llm-reasoning-candle"):
        tier.wait(f"a Ready {app} pod", lambda app=app: ready(tier, app), 60)



@pytest.mark.after_all
def test_the_nodes_and_the_live_engine_stayed_ready(tier: Tier) -> None:
    """After every scenario (minutes, past the node lifecycle controller's 40 s grace): kwok kept the nodes'
    heartbeat, so no pod was marked unready behind the scenarios' backs."""
    for node in tier.core.list_node().items:
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or []), node.metadata.name
    assert ready(tier, "llm-reasoning")

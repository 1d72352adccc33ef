"""The tier comes up: nodes Ready, the example installed, the engine pods Ready on the scaled timeline."""

from tier.cluster import Tier


def test_the_engine_pods_become_ready_on_their_startup_timeline(tier: Tier) -> None:
    pods = tier.wait("both engine pods Ready", lambda: [
        p for p in tier.core.list_namespaced_pod("llm-serving").items
        if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])] or None, 60)
    assert pods

"""The steps before an Application's, as an ApplicationSet's RollingSync status orders them (`rollout.earlier_steps`):
what a later step's gate waits for (docs/fleet.md)."""

from __future__ import annotations

from typing import Any

from cutover.argocd import rollout


def appset(*entries: tuple[str, str], strategy: str | None = "RollingSync") -> dict[str, Any]:
    return {"spec": {"strategy": {"type": strategy}} if strategy else {},
            "status": {"applicationStatus": [{"application": name, "step": step, "status": "Healthy"}
                                             for name, step in entries]}}


def test_the_applications_of_every_earlier_step_in_name_order() -> None:
    found = appset(("west", "3"), ("canary", "1"), ("east", "2"), ("south", "2"))
    assert rollout.earlier_steps(found, "west") == ("canary", "east", "south")
    assert rollout.earlier_steps(found, "east") == ("canary",)  # not its own step's others
    assert rollout.earlier_steps(found, "canary") == ()
    assert rollout.earlier_steps(appset(("a", "10"), ("b", "9")), "a") == ("b",)  # by number, not text


def test_nothing_to_keep_where_rolling_sync_does_not_step_the_application() -> None:
    assert rollout.earlier_steps(appset(("canary", "1"), ("east", "2")), "nobody") is None  # not generated yet
    assert rollout.earlier_steps(appset(("canary", "1"), ("east", "2"), strategy=None), "east") is None
    assert rollout.earlier_steps(appset(("canary", "1"), ("east", "2"), strategy="AllAtOnce"), "east") is None
    assert rollout.earlier_steps({}, "east") is None
    assert rollout.earlier_steps(appset(("canary", "1"), ("stray", "-1")), "stray") is None  # in no step
    assert rollout.earlier_steps(appset(("canary", "1"), ("stray", "-1"), ("east", "2")), "east") == ("canary",)

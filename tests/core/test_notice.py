"""What ArgoCD's Application page says of a cutover (core/notice.py, pure)."""

from __future__ import annotations

from cutover.core import milestones, notice


def test_a_wait_says_how_long_is_spent_and_left() -> None:
    said = notice.of({"event": milestones.WAITING, "cutover": "reasoning-long", "backend": "candle", "ready": 0,
                      "elapsed": 240, "budget_left": 1560})
    assert said == ("cutover reasoning-long: waiting for the target; candle: 0 pod(s) Ready, 240s spent, 1560s left",
                    "info")


def test_held_and_rolled_back_warn_a_failure_is_critical_other_events_say_nothing() -> None:
    assert notice.of({"event": milestones.HELD, "cutover": "p", "on": "vllm", "commit": "0a1b2c3d4e5f6a7b"}) == (
        "cutover p: held; on vllm; commit 0a1b2c3d4e5f", "warning")
    assert notice.of({"event": milestones.ROLLED_BACK, "cutover": "p", "to": "vllm"})[1] == "warning"  # type: ignore[index]
    failed = notice.of({"event": milestones.FAILED, "cutover": "p", "cause": "git_auth", "message": "401"})
    assert failed == ("cutover p: failed; git_auth: 401", "critical")
    assert notice.of({"event": "lock.acquired", "cutover": "p"}) is None


def test_the_outcome_is_within_what_argocd_shows() -> None:
    content, severity = notice.ended("p", "postsync", ok=False, said="x" * 1000)
    assert len(content) == notice.LIMIT and content.endswith("…") and severity == "critical"
    assert notice.ended("p", "syncfail", ok=True, said="ArgoCD's sync of 0a1b failed: …")[1] == "warning"
    assert notice.as_annotations(("c", "info")) == {notice.CONTENT: "c", notice.SEVERITY: "info"}

"""Where ArgoCD stands with cutover's newest commit, as the nudge reads it (pure): a row per state."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from test_decide import CANDLE, NOW, VLLM, cutover, observed

from cutover.core import pickup, steps
from cutover.core.views import ApplicationView

OURS = cutover("vllm", "candle")  # pushed at NOW
BEFORE = "b" * 40  # the revision the hook's own operation synced
LATER = "d" * 40  # a person's commit after ours


def app(phase: str | None, revision: str, *, started: timedelta, compared: str = BEFORE, status: str = "OutOfSync",
        selective: bool = False) -> ApplicationView:
    return ApplicationView("argocd", "llm-serving", status, compared, "Healthy", phase, revision, NOW + started,
                           None if phase == "Running" else NOW + started + timedelta(seconds=9), False,
                           operation_selective=selective)


@pytest.mark.parametrize(("application", "expected"), [
    (app("Running", BEFORE, started=timedelta(seconds=-30)), pickup.Pickup.RUNNING),  # the hook's own operation
    (app("Succeeded", BEFORE, started=timedelta(seconds=-30)), pickup.Pickup.BEHIND),  # ended: ask now
    (app("Running", OURS.sha, started=timedelta(seconds=6)), pickup.Pickup.TAKEN),
    (app("Succeeded", OURS.sha, started=timedelta(seconds=6)), pickup.Pickup.TAKEN),
    (app("Running", LATER, started=timedelta(seconds=6)), pickup.Pickup.TAKEN),  # a later commit holds ours
    # begun in the second of the push on a revision of before it: ArgoCD resolved the branch without our commit
    (app("Running", BEFORE, started=timedelta(0)), pickup.Pickup.RUNNING),
    (app("Succeeded", OURS.sha, started=timedelta(seconds=6), selective=True), pickup.Pickup.HOOKLESS),
    # compared, and nothing ArgoCD renders changed (a workload in another Application): nothing to sync
    (app("Succeeded", BEFORE, started=timedelta(seconds=-30), compared=OURS.sha, status="Synced"),
     pickup.Pickup.NOTHING),
    (None, pickup.Pickup.NOTHING),
], ids=["running", "behind", "taken-running", "taken-ended", "taken-by-a-later-commit", "same-second-older",
        "hookless", "compared-nothing-to-sync", "no-application"])
def test_where_argocd_stands(application: ApplicationView | None, expected: pickup.Pickup) -> None:
    assert pickup.pickup(observed(VLLM, CANDLE, OURS, application=application)) is expected


def test_no_commit_of_ours_is_nothing_to_nudge() -> None:
    seen = observed(VLLM, VLLM, None, application=app("Succeeded", BEFORE, started=timedelta(seconds=-30)))
    assert pickup.pickup(seen) is pickup.Pickup.NOTHING
    undated = dataclasses.replace(OURS, date=None)
    assert pickup.pickup(dataclasses.replace(seen, last=undated)) is pickup.Pickup.NOTHING
    assert isinstance(seen, steps.Observed)


def test_self_heal_is_said_as_the_path_a_webhook_takes_the_hooks_away_by() -> None:
    """argo-cd#27875 (docs/install.md, step 7): with selfHeal a comparison during a hop's sync may make the next one
    a hook-less self-heal; said for the Application, naming what takes such a sync over; nothing without selfHeal."""
    healing = dataclasses.replace(app("Succeeded", BEFORE, started=timedelta(0)), self_heal=True)
    said = pickup.self_heal_race(healing, always=False, nudge=True)
    assert said is not None and said.startswith("Application llm-serving syncs with selfHeal: true: a Git webhook")
    assert "the nudge takes such a sync over at once" in said
    assert "cutover's own refresh at its push" in str(pickup.self_heal_race(healing, always=True, nudge=True))
    assert "the audit CronJob takes such a sync over" in str(pickup.self_heal_race(healing, always=False,
                                                                                   nudge=False))
    assert "selfHeal: false on this Application" in pickup.SELF_HEAL_HINT
    for quiet in (dataclasses.replace(healing, self_heal=False), dataclasses.replace(healing, self_heal=None), None):
        assert pickup.self_heal_race(quiet, always=True, nudge=True) is None

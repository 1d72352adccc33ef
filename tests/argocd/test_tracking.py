"""The Application a hook belongs to, from the tracking ArgoCD writes on it (src/cutover/argocd/tracking.py)."""

from __future__ import annotations

from typing import Any

import pytest

from cutover.argocd import tracking


@pytest.mark.parametrize(("metadata", "found"), [
    ({"annotations": {tracking.TRACKING_ID: "reasoning-long-east:batch/Job:cutover/cutover-verify-fleet"}},
     ("argocd", "reasoning-long-east")),
    # an Application outside the controller's namespace (apps in any namespace): <namespace>_<name>
    ({"annotations": {tracking.TRACKING_ID: "team-a_reasoning-long:batch/Job:cutover/cutover-presync-fleet"}},
     ("team-a", "reasoning-long")),
    ({"labels": {tracking.INSTANCE: "reasoning-long-west"}}, ("argocd", "reasoning-long-west")),  # label tracking
    # the annotation wins over a label another tool wrote
    ({"annotations": {tracking.TRACKING_ID: "a:batch/Job:cutover/x"}, "labels": {tracking.INSTANCE: "b"}},
     ("argocd", "a")),
    ({}, None),  # not applied by ArgoCD (a person's kubectl)
    ({"annotations": {tracking.TRACKING_ID: "garbage"}}, None),
    ({"annotations": {tracking.TRACKING_ID: ":batch/Job:cutover/x"}}, None),
])
def test_the_application_a_hook_belongs_to(metadata: dict[str, Any], found: tuple[str, str] | None) -> None:
    assert tracking.application_of(metadata, controller_namespace="argocd") == found

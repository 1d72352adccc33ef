"""What a phase returns, where it decides something (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from cutover.core.results import Shown, Status

UNPROVABLE = {"error": "no Ready pod", "cause": "no_target_pods", "hint": "h", "exitCode": 3}


@pytest.mark.parametrize(("live", "unprovable", "blocked"), [
    ("vllm", UNPROVABLE, True),  # a switch pending, the target not provable now: `cutover plan` says NOT READY
    ("candle", UNPROVABLE, False),  # the Service is on the target already: nothing to go ahead with
    ("vllm", None, False),  # provable now
])
def test_the_plan_is_blocked_only_while_a_switch_is_pending_and_cannot_be_made(
        live: str, unprovable: dict[str, Any] | None, blocked: bool) -> None:
    shown = Shown(Status({"liveBackend": live, "target": "candle"}), proven=None, unprovable=unprovable, diff=None,
                  path="svc.yaml")
    assert (shown.blocked is not None) is blocked

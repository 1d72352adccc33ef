"""What a test can observe of an Application after a sync, the same way for the real ArgoCD (e2e/gitops) and the
stand-in (src/cutover/demo/argocd.py): the operation's phase, message and shape, the hooks' and the Service's
lines in its result (in the order recorded), the history entry's shape, and which revision each place names.
`STORY` holds the real ArgoCD's observations after the reference story's last sync (e2e/gitops, scenario a):
the e2e checks the real one still gives them, the fast suite that the stand-in does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STORY = Path(__file__).parent / "fixtures" / "argocd-story.json"
LINE_KEYS = ("kind", "name", "namespace", "status", "message", "syncPhase", "hookType", "hookPhase")


def observations(app: dict[str, Any]) -> dict[str, Any]:
    status = app["status"]
    state = status["operationState"]
    sync, result = state["operation"]["sync"], state["syncResult"]
    lines = [{key: line[key] for key in LINE_KEYS if key in line} for line in result.get("resources", [])
             if line.get("hookType") or line["kind"] == "Service"]
    return {
        "phase": state["phase"],
        "message": state.get("message"),
        "operation": sorted(state["operation"]),
        "operation.sync": sorted(sync),
        "syncResult": sorted(result),
        "lines": lines,
        "history entry": sorted(status["history"][-1]),
        "one revision everywhere": len({sync.get("revision"), result.get("revision"), status["sync"]["revision"],
                                        status["history"][-1]["revision"]}) == 1,
    }


def story() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(STORY.read_text())
    return found

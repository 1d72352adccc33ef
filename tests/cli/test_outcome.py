"""Every typed result as the CLI renders it: the summary that ends the outcome line and the data `--output json`
prints. These strings are what people and machines read: pinned here, one row each."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from cutover import plan
from cutover.cli import outcome
from cutover.core.proofs import PodProof
from cutover.core.results import (
    Advanced,
    Audited,
    Awaiting,
    Completed,
    Diffed,
    Gated,
    Held,
    Proven,
    Result,
    Shown,
    Status,
    SyncFailed,
    Verified,
    WouldAdvance,
)
from cutover.core.views import PodView
from cutover.demo.world import World

_world = World.__new__(World)
_world.port = 8080
(PLAN,) = plan.parse(_world.plan_text())
AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
POD = PodView(namespace="llm-serving", name="candle-0", uid="u", labels={}, ready=True, ip="10.0.0.5")
PROVEN = Proven("candle", (POD,), (PodProof("candle-0", "10.0.0.5:8080", "generate", ("reasoning-long", "reasoning"),
                                              (), 0.01),), 712.4, AT)
STATE = {"service": {"uid": "u1", "clusterIP": "10.96.0.1", "ports": [80, 8080]}, "selector": "a=b",
         "liveBackend": "vllm", "target": "candle", "backends": {
             "vllm": {"engine": "vllm", "engineProof": "listed", "pods": 1, "ready": 1, "states": ["v-0=ready"]},
             "candle": {"engine": "candle-vllm", "engineProof": "generate", "pods": 0, "ready": 0, "states": []}}}
SHA = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"


@pytest.mark.parametrize(("result", "summary", "data"), [
    (PROVEN, "backend candle proven: 1 pod(s) serve reasoning-long, reasoning (waited 712s)",
     {"backend": "candle", "waitedSeconds": 712.4}),
    (Gated("0a1b2c3d4e5f", False), "no selector change in 0a1b2c3d4e5f: nothing to gate", {"changed": False}),
    (Gated("0a1b2c3d4e5f", True), "the selector in 0a1b2c3d4e5f is no backend of the plan: not gated",
     {"changed": True, "backend": None}),
    (Gated("0a1b2c3d4e5f", True, "candle", PROVEN), "0a1b2c3d4e5f switches the Service to candle: proven on 1 "
                                                    "pod(s)", {"changed": True, "backend": "candle"}),
    (Held("vllm", SHA, "Mallory <m@example.invalid>"), "held on vllm by rollback 0a1b2c3d4e5f (Mallory "
     "<m@example.invalid>): to go to candle again once it is fixed, run the cutover-run-llm-serving Job (kubectl -n "
     "cutover create job --from=cronjob/cutover-run-llm-serving cutover-run-$(date +%s)); to stay on vllm, set the "
     "plan's target to vllm (and back to candle later: the hold ends once the target changed), or revert that "
     "commit if nobody here made it", {"held": "vllm"}),
    (Advanced("vllm", "candle", True, SHA, "https://github.com/x", "c0ffee"), "vllm -> candle: committed "
                                                                            "0a1b2c3d4e5f",
     {"committed": True, "commit": SHA, "id": "c0ffee", "to": "candle"}),
    (Advanced("vllm", "candle", False, SHA, None, "c0ffee"), "vllm -> candle: already in Git at 0a1b2c3d4e5f",
     {"committed": False}),
    (WouldAdvance("vllm", "candle", PROVEN, "--- a/x\n+++ b/x\n", True),
     "dry run: vllm -> candle would be committed (proven on 1 pod(s)); nothing was written",
     {"dryRun": True, "to": "candle"}),
    (Awaiting("candle"), "Git selects candle; waiting for ArgoCD to apply it", {"applied": False}),
    (Verified("candle", ("10.0.0.5",)), "verified: the Service selects candle, same object, 1 endpoint(s)",
     {"verified": True, "endpoints": ["10.0.0.5"]}),
    (Completed(Verified("vllm", ("10.0.0.4",)), SHA, "vllm"), "verified: the Service selects vllm, same object, "
                                                              "1 endpoint(s)", {"commit": SHA, "to": "vllm"}),
    (SyncFailed("ArgoCD's sync of 0a1b2c3d4e5f ended Failed", "vllm"),
     "ArgoCD's sync of 0a1b2c3d4e5f ended Failed; the Service still selects vllm; nothing changed",
     {"rolledBack": False}),
    (SyncFailed("the sync failed", "vllm", SHA), "the sync failed; Git goes back to vllm (held) in 0a1b2c3d4e5f",
     {"rolledBack": True, "commit": SHA}),
    (Audited("verified", "candle", "applied without a PostSync hook", SHA),
     "verified the switch to candle that no hook verified (0a1b2c3d4e5f)", {"audit": "verified"}),
    (Audited("checked", "candle", "ok"), "the live backend candle still serves every name", {"audit": "checked"}),
    (Audited("skipped", None, "not ours"), "nothing to audit: not ours", {"audit": "skipped"}),
    (Status(STATE), "the Service selects vllm; the plan's target is candle", {"liveBackend": "vllm"}),
    (Shown(Status(STATE), None, {"error": "0 of 1 pods Ready now", "cause": "target_not_ready_now", "hint": "h"},
           None, "k8s/svc.yaml"), "the Service selects vllm; the plan's target is candle",
     {"targetProof": {"error": "0 of 1 pods Ready now", "cause": "target_not_ready_now", "hint": "h"}}),
], ids=lambda value: type(value).__name__ if not isinstance(value, str | dict) else None)
def test_each_result_reads_as_pinned(result: Result, summary: str, data: dict[str, Any]) -> None:
    report = outcome.render(result, PLAN)
    assert report.summary == summary
    assert {key: report.data[key] for key in data} == data


def test_status_and_plan_lines() -> None:
    lines = outcome.render(Status(STATE), PLAN).lines
    assert lines == ["Service llm-serving/reasoning-long-predictor: selector a=b → backend vllm; target candle",
                     "  backend vllm: 1/1 Ready (v-0=ready)", "  backend candle: 0/0 Ready (no pods)"]
    shown = outcome.render(Shown(Status(STATE), PROVEN, None, {"changed": True, "patch": "-a\n+b\n",
                                                               "version": SHA}, "k8s/svc.yaml"), PLAN)
    assert shown.lines[-4:] == ["  target candle: proven now on 1 pod(s)", "  diff against k8s/svc.yaml at "
                                "0a1b2c3d4e5f:", "    -a", "    +b"]
    assert outcome.render(Shown(Status(STATE), PROVEN, None, None, "x"), PLAN).lines[-1] == \
        "  diff: no Git host configured"


def test_a_diff_prints_raw_without_a_plan() -> None:
    patch = "--- a/x\r\n+++ b/x\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n"
    report = outcome.render(Diffed("x", patch, "a=b", "spec.selector"), None)
    assert (report.raw, report.headline, report.lines) == (patch, False, [])
    assert report.summary == "2 line(s) change in x, all inside spec.selector"
    assert outcome.render(Diffed("x", "", "a=b", "spec.selector"), None).summary == \
        "nothing to change: x already selects a=b"

"""How long a switch takes through the real ArgoCD, from cutover's commit (the target proven Ready) to the live
Service selecting the target: with `argocd.refresh: true` and with ArgoCD's own polling (`argocd.refresh: false`;
`timeout.reconciliation` is 15 s in the tier, 120 s by default). A PostSync commits while its own sync runs, and from
ArgoCD 3.4 a refresh then turns the next sync into a hook-less self-heal (argo-cd#27875): cutover defers it, so
both take ArgoCD's next look, and every switch is gated and verified by the hooks. The target toggles between the two
engines, both running; p50 of the runs goes under the table (docs/testing.md, "Timing through the real ArgoCD")."""

from __future__ import annotations

import statistics
import time

from conftest import MEASURED
from tier import gitops

CANDLE, VLLM = gitops.CANDLE, gitops.VLLM
RUNS = {True: 5, False: 3}  # with the refresh: the goal's p50; with polling, for comparison


def switch_once(argo: gitops.GitOpsTier, target: str, *, refresh: bool) -> float:
    # compare: false, since vLLM's context is the shorter one: the way back is refused otherwise (context_shorter)
    plan = gitops.with_target((gitops.cluster.ROOT / gitops.PLAN).read_text(), target).replace(
        "        compare: true\n", "        compare: false\n")
    assert "compare: false" in plan
    if not refresh:
        plan = plan.replace("      refresh: true\n", "      refresh: false\n")
        assert "refresh: false" in plan
    before = argo.git.cutover_commits()[:1]
    argo.commit({gitops.PLAN: plan}, f"Hand reasoning-long to {target}\n")
    argo.wait("cutover's commit", lambda: argo.git.cutover_commits()[:1] != before, timeout=120, every=0.1)
    committed = time.monotonic()
    wanted = CANDLE if target == "candle" else VLLM
    argo.wait(f"the Service to select {target}", lambda: argo.service().spec.selector == wanted, timeout=120,
              every=0.1)
    took = time.monotonic() - committed
    argo.wait_app("llm-serving", synced=True, healthy=True, timeout=120)  # PostSync verified, nothing running
    return took


def test_commit_to_live_switch_with_the_refresh_and_with_polling(argo: gitops.GitOpsTier) -> None:
    measured: dict[bool, list[float]] = {}
    for refresh, runs in RUNS.items():
        serving = "candle" if argo.service().spec.selector == CANDLE else "vllm"
        other = {"candle": "vllm", "vllm": "candle"}
        targets = [other[serving], serving] * runs
        measured[refresh] = [switch_once(argo, target, refresh=refresh) for target in targets[:runs]]
    for refresh, seconds in measured.items():
        mode = "cutover's refresh" if refresh else "ArgoCD's polling (15 s)"
        MEASURED.append(f"commit → live selector switched, {mode}: p50 {statistics.median(seconds):.1f} s, "
                        f"max {max(seconds):.1f} s over {len(seconds)} runs")
    # a ratio inside one run, not a bound on the clock (docs/testing.md): a hook's refresh is deferred, so the two
    # take alike (ArgoCD's next look after its operation); neither waits for more than that look
    assert 0.5 < statistics.median(measured[True]) / statistics.median(measured[False]) < 2, measured

"""How long one Job of a plan may need against its activeDeadlineSeconds (docs/capacity.md), as a table."""

from __future__ import annotations

import pytest

from cutover import plan
from cutover.core import deadline
from cutover.demo.world import World

_world = World.__new__(World)
_world.port = 8080
_WORKLOADS = {"vllm": "{kind: Deployment, name: llm-reasoning}", "candle": "{kind: Deployment, name: candle}"}


def planned(max_wait: str = "30m", handoff: str | None = None) -> plan.Plan:
    (one,) = plan.parse(_world.plan_text(max_wait=max_wait, workloads=_WORKLOADS if handoff else None,
                                         handoff=handoff, coder=bool(handoff and "bridge" in handoff)))
    return one


@pytest.mark.parametrize(("the_plan", "whole", "need"), [
    (planned(), False, 1800 + 300),  # the shipped 30-minute budget fits the shipped 2400 s
    (planned("40m"), False, 2400 + 300),  # the newcomer's trap: a maxWait over 35 minutes
    (planned(handoff="{strategy: recreate, maxGap: 20m, drainTimeout: 5m}"), False, 1200 + 300),  # hop by hop
    (planned(handoff="{strategy: recreate, maxGap: 1h, drainTimeout: 5m}"), False, 1800 + 300),  # maxWait bounds
    (planned(handoff="{strategy: recreate, maxGap: 20m, drainTimeout: 5m}"), True, 300 + 1200 + 600 + 300),
    (planned(handoff="{strategy: bridge, bridge: coder, drainTimeout: 5m}"), False, 1800 + 300),
    # a whole run through a bridge waits for ArgoCD twice: the shipped run Jobs' 3000 s is short of a 30m budget
    (planned("20m", handoff="{strategy: bridge, bridge: coder, drainTimeout: 5m}"), True,
     300 + 1200 + 2 * 600 + 300),
    (planned(handoff="{retire: {after: 1h}, drainTimeout: 45m}"), False, 2700 + 300),  # the audit drains
], ids=["parallel", "parallel-40m", "recreate-hop", "recreate-maxwait", "recreate-run", "bridge-hop", "bridge-run",
        "retire-drain"])
def test_the_longest_job(the_plan: plan.Plan, whole: bool, need: float) -> None:
    assert deadline.longest_job(the_plan, whole_path=whole, sync_wait=600 if whole else 0) == need
    said = deadline.warning(the_plan, deadline.SHIPPED, whose="the shipped hook Jobs'", whole_path=whole,
                            sync_wait=600 if whole else 0)
    assert (said is not None) == (need > deadline.SHIPPED)
    if said:
        assert said.startswith("the shipped hook Jobs' activeDeadlineSeconds (2400s) is shorter") and f"({need:g}s" \
            in said


def test_a_pull_request_s_merge_wait_is_counted_and_said() -> None:
    """Issue 54's C9: pull-request mode waits up to an hour for a merge inside the PostSync Job that opened it, which
    the shipped deadline (40 minutes) kills first: `cutover plan` says so."""
    (one,) = plan.parse(_world.plan_text(git_more="mode: pull-request"))
    assert deadline.longest_job(one) == 1800 + deadline.MERGE_WAIT + 300
    said = deadline.warning(one, deadline.SHIPPED, whose="the shipped hook Jobs'")
    assert said is not None and "then up to 3600s for the pull request's merge" in said


def test_the_sync_timeout_a_plan_needs() -> None:
    """ArgoCD's sync timeout cannot be read from the cluster by cutover: `cutover plan` says the least it needs."""
    assert deadline.sync_timeout(planned()) == 1800 + 300 + 300
    note = deadline.sync_timeout_note(planned())
    assert note.startswith("a sync of this plan may run its hooks for 2400s") and "controller.sync.timeout" in note

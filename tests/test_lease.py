"""One cutover per Service: the Lease decisions (pure) and the Lease held over the emulated API server,
in fake time."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cutover import cluster, lease, lock
from cutover.clock import Clock
from cutover.demo.world import NAMESPACE, SERVICE, World
from cutover.errors import LockHeld
from helpers import named

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASES = "coordination.k8s.io/v1/leases"


def view(holder: str | None, renewed_ago: float | None) -> lock.LeaseView:
    renewed = T0 - timedelta(seconds=renewed_ago) if renewed_ago is not None else None
    return lock.LeaseView("cutover-x", holder, renewed, 60.0, 1, "1")


@pytest.mark.parametrize(("lease_view", "verdict"), [
    (None, lock.Verdict.TAKE),
    (view(None, 5), lock.Verdict.TAKE),  # released
    (view("me", 5), lock.Verdict.TAKE),  # ours already: a re-run of the same pod
    (view("other", 60), lock.Verdict.TAKE),  # expired
    (view("other", 5), lock.Verdict.HELD),  # renewed lately: alive
    (view("other", 45), lock.Verdict.WAIT),  # quiet for two renewals: probably gone, expires in 15 s
])
def test_judge(lease_view: lock.LeaseView | None, verdict: lock.Verdict) -> None:
    assert lock.judge(lease_view, me="me", now=T0) is verdict




@pytest.mark.looptime
async def test_held_renewed_and_released(world: World, kube: cluster.Cluster, events: list[dict[str, Any]]) -> None:
    clock = Clock()
    async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="job-a", now=clock.now) as held:
        stored = world.kube.stored(LEASES, NAMESPACE, f"cutover-{SERVICE}")
        assert stored is not None and stored["spec"]["holderIdentity"] == "job-a"
        await asyncio.sleep(65)  # longer than the duration: renewals keep it ours
        assert not held.lost.is_set()
    writes = [r for r in world.kube if r.url.path.endswith("/leases") or f"/leases/cutover-{SERVICE}" in r.url.path]
    assert [r.method for r in writes if r.method != "GET"] == ["POST", "PUT", "PUT", "PUT", "PUT"]  # 20, 40, 60 s
    released = world.kube.stored(LEASES, NAMESPACE, f"cutover-{SERVICE}")
    assert released is not None and released["spec"].get("holderIdentity") is None
    assert [e["event"] for e in events if e["event"].startswith("lock.")] == ["lock.acquired", "lock.released"]


@pytest.mark.looptime
async def test_a_live_holder_means_exit_8(world: World, kube: cluster.Cluster) -> None:
    clock = Clock()
    async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="job-a", now=clock.now):
        await asyncio.sleep(30)
        with pytest.raises(LockHeld) as caught:
            async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="job-b", now=clock.now):
                pytest.fail("two holders")
    assert caught.value.exit_code == 8 and caught.value.cause == "lock_held"
    assert "job-a, renewed 10s ago" in caught.value.message and "kubectl -n cutover get jobs" in caught.value.hint


@pytest.mark.looptime
async def test_a_killed_holder_is_waited_out_then_replaced(world: World, kube: cluster.Cluster,
                                                          events: list[dict[str, Any]]) -> None:
    clock = Clock()
    renewed = clock.now() - timedelta(seconds=45)  # its Job was deleted 45 s ago, mid-run
    world.kube.apply(LEASES, {"metadata": {"name": f"cutover-{SERVICE}", "namespace": NAMESPACE},
                              "spec": {"holderIdentity": "job-killed", "leaseDurationSeconds": 60,
                                       "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                                       "leaseTransitions": 3}})
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="job-rerun", now=clock.now) as held:
        assert held.lease.holder == "job-rerun" and held.lease.transitions == 4
    assert 15 <= loop.time() - start <= 16.5
    assert named(events, "lock.waiting")[0]["holder"] == "job-killed"


@pytest.mark.looptime
async def test_two_racing_for_a_free_lease_one_wins(world: World, kube: cluster.Cluster) -> None:
    clock = Clock()
    results: list[str] = []

    async def contender(name: str) -> None:
        try:
            async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me=name, now=clock.now):
                results.append(f"{name} held")
                await asyncio.sleep(5)
        except LockHeld:
            results.append(f"{name} refused")

    await asyncio.gather(contender("job-a"), contender("job-b"))
    assert sorted(r.split()[1] for r in results) == ["held", "refused"]


@pytest.mark.looptime
async def test_a_lease_taken_from_us_is_noticed(world: World, kube: cluster.Cluster,
                                                events: list[dict[str, Any]]) -> None:
    clock = Clock()
    async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="job-a", now=clock.now) as held:
        world.kube.merge(LEASES, NAMESPACE, f"cutover-{SERVICE}", {"spec": {"holderIdentity": "job-b"}})
        await asyncio.sleep(25)
        assert held.lost.is_set()
    (lost,) = named(events, "lock.lost")
    assert lost["holder"] == "job-b" and lost["cause"] == "lock_lost"
    stored = world.kube.stored(LEASES, NAMESPACE, f"cutover-{SERVICE}")
    assert stored is not None and stored["spec"]["holderIdentity"] == "job-b"  # not released: it is not ours


async def test_notes_on_the_lease_keep_its_holder_and_each_other(world: World, kube: cluster.Cluster) -> None:
    from cutover import lease as lease_notes

    clock = Clock()
    async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="job-1", now=clock.now):
        await lease_notes.annotate(kube, namespace=NAMESPACE, service=SERVICE, notes={lease_notes.VERIFIED: "abc"})
        await lease_notes.annotate(kube, namespace=NAMESPACE, service=SERVICE, notes={"cutover.dev/other": "x"})
        held = await kube.lease(NAMESPACE, "cutover-" + SERVICE)
        assert held is not None and held.holder == "job-1"  # a note never takes the Lease from its holder
    notes = await lease_notes.notes(kube, namespace=NAMESPACE, service=SERVICE)
    assert notes[lease_notes.VERIFIED] == "abc" and notes["cutover.dev/other"] == "x"
    assert await lease_notes.notes(kube, namespace=NAMESPACE, service="no-such-service") == {}

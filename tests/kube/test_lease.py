"""One cutover per Service: the Lease decisions (pure) and the Lease held over the emulated API server,
in fake time: renewed, given back, refused to a second live holder, taken over from a killed one."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cutover.cli.main import _identity
from cutover.core.clock import Clock
from cutover.demo.world import NAMESPACE, PODS, SERVICE, World
from cutover.errors import LockHeld
from cutover.kube import cluster, lease, lease_rules
from helpers import named

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASES = "coordination.k8s.io/v1/leases"


def view(holder: str | None, renewed_ago: float | None, version: str = "1") -> lease_rules.LeaseView:
    renewed = T0 - timedelta(seconds=renewed_ago) if renewed_ago is not None else None
    return lease_rules.LeaseView("cutover-x", holder, renewed, 60.0, 1, version)


def watched(*reads: tuple[float, lease_rules.LeaseView | None]) -> lease_rules.Watch:
    """The watch after reading the Lease at each (monotonic time, view)."""
    watch = None
    for at, lease_view in reads:
        watch = lease_rules.observe(watch, lease_view, now=at)
    assert watch is not None
    return watch


QUIET = view("other", 45)  # its renewTime says 45 s ago, by another machine's clock
RENEWED = view("other", 0, version="2")
CASES = [
    ("none yet", None, watched((0, None)), 0, False, lease_rules.Verdict.TAKE),
    ("released", view(None, 5), watched((0, view(None, 5))), 0, False, lease_rules.Verdict.TAKE),
    ("ours already: the same process again", view("me", 5), watched((0, view("me", 5))), 0, False,
     lease_rules.Verdict.TAKE),
    ("first seen: its renewTime proves neither life nor death", QUIET, watched((0, QUIET)), 0, False,
     lease_rules.Verdict.WAIT),
    ("an hour-old renewTime still expires on our clock", view("other", 3600), watched((0, view("other", 3600))), 10,
     False, lease_rules.Verdict.WAIT),
    ("unchanged for a whole duration on our clock: expired", QUIET, watched((0, QUIET), (60, QUIET)), 60, False,
     lease_rules.Verdict.TAKE),
    ("renewed while we watched: alive", RENEWED, watched((0, QUIET), (20, RENEWED)), 20, False,
     lease_rules.Verdict.HELD),
    ("its pod has ended: taken over at once", QUIET, watched((0, QUIET)), 0, True, lease_rules.Verdict.TAKE_OVER),
    ("another holder took it meanwhile: watched anew", view("third", 0), watched((0, QUIET), (20, view("third", 0))),
     20, False, lease_rules.Verdict.WAIT),
]


@pytest.mark.parametrize(("why", "lease_view", "watch", "now", "gone", "verdict"), CASES,
                         ids=[case[0] for case in CASES])
def test_judge(why: str, lease_view: lease_rules.LeaseView | None, watch: lease_rules.Watch, now: float, gone: bool,
               verdict: lease_rules.Verdict) -> None:
    assert lease_rules.judge(lease_view, me="me", watch=watch, now=now, holder_gone=gone) is verdict


@pytest.mark.parametrize(("identity", "pod"), [
    ("cutover/cutover-postsync-x7k2p", ("cutover", "cutover-postsync-x7k2p")),
    ("cutover/cutover-postsync-x7k2p#3f9a0c1b2d4e", ("cutover", "cutover-postsync-x7k2p")),  # one process's
    ("laptop-4242#3f9a0c1b2d4e", None),
    ("laptop-4242", None),
    ("cutover/", None),
    ("/pod", None),
    ("a/b/c", None),
    (None, None),
])
def test_holder_pod(identity: str | None, pod: tuple[str, str] | None) -> None:
    assert lease_rules.holder_pod(identity) == pod


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
    loop = asyncio.get_running_loop()
    async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="job-a", now=clock.now):
        # 32 s, not 30: job-b's reads (every 5 s) never fall on the instant of job-a's renewals (every 20 s), whose
        # order at one fake instant is the loop's to choose
        await asyncio.sleep(32)
        started = loop.time()
        with pytest.raises(LockHeld) as caught:
            async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="job-b", now=clock.now):
                pytest.fail("two holders")
    assert caught.value.exit_code == 8 and caught.value.cause == "lock_held"
    assert "job-a, renewed 2s ago while we watched" in caught.value.message
    assert "kubectl get jobs in cutover's namespace" in caught.value.hint  # job-a is no pod: no namespace to name
    assert 10 <= loop.time() - started <= 11  # its renewal at 40 s, seen at the read at 42 s


@pytest.mark.looptime
async def test_two_runs_on_one_host_are_two_holders(world: World, kube: cluster.Cluster,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """One $HOSTNAME (two runs on a laptop, or a re-run in the same pod): each process is a holder of its own,
    so the second sees the first's renewals as someone else's and stops with exit 8, instead of taking the
    Lease over as its own (issue: two runs on one host share a Lease identity)."""
    monkeypatch.setenv("HOSTNAME", "laptop")
    monkeypatch.delenv("POD_NAME", raising=False)
    first, second = _identity("cutover"), _identity("cutover")
    assert first != second and first.startswith("laptop-") and lease_rules.holder_pod(first) is None
    clock = Clock()
    async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me=first, now=clock.now):
        await asyncio.sleep(32)
        with pytest.raises(LockHeld) as caught:
            async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me=second, now=clock.now):
                pytest.fail("two holders")
    assert first in caught.value.message
    monkeypatch.setenv("POD_NAME", "cutover-postsync-x7k2p")
    monkeypatch.setenv("POD_NAMESPACE", "cutover")
    assert lease_rules.holder_pod(_identity("cutover")) == ("cutover", "cutover-postsync-x7k2p")


def left_behind(world: World, holder: str, *, renewed_ago: float, clock: Clock) -> None:
    """The Lease as a SIGKILL leaves it: held, renewed `renewed_ago` seconds ago, never given back."""
    renewed = clock.now() - timedelta(seconds=renewed_ago)
    world.kube.apply(LEASES, {"metadata": {"name": f"cutover-{SERVICE}", "namespace": NAMESPACE},
                              "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60,
                                       "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                                       "leaseTransitions": 3}})


def job_pod(world: World, name: str, phase: str) -> None:
    world.kube.apply(PODS, {"metadata": {"name": name, "namespace": "cutover", "uid": f"uid-{name}"},
                                 "spec": {"containers": [{"name": "cutover", "image": "cutover"}]},
                                 "status": {"phase": phase}})


@pytest.mark.looptime
@pytest.mark.parametrize(("why", "phase", "waited"), [
    ("its pod is gone", None, (0, 0.5)),
    ("its pod failed (OOMKilled, SIGKILL)", "Failed", (0, 0.5)),
    ("its pod is still Running (a hung process): a whole duration on our clock", "Running", (60, 61)),
])
async def test_a_killed_pod_holder(world: World, kube: cluster.Cluster, events: list[dict[str, Any]], why: str,
                                   phase: str | None, waited: tuple[float, float]) -> None:
    clock = Clock()
    left_behind(world, "cutover/cutover-postsync-a1", renewed_ago=5, clock=clock)  # 5 s ago: "alive" by its clock
    if phase is not None:
        job_pod(world, "cutover-postsync-a1", phase)
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="cutover/cutover-postsync-b2",
                          now=clock.now) as held:
        assert held.lease.holder == "cutover/cutover-postsync-b2" and held.lease.transitions == 4
    assert waited[0] <= loop.time() - start <= waited[1]
    assert bool(named(events, "lock.taken_over")) is (phase != "Running")


@pytest.mark.looptime
async def test_a_killed_holder_that_is_no_pod_is_waited_out_on_our_clock(world: World, kube: cluster.Cluster,
                                                                       events: list[dict[str, Any]]) -> None:
    """Its renewTime is an hour old by its clock, which may be wrong: expiry counts from when we first saw it."""
    clock = Clock()
    left_behind(world, "laptop-4242", renewed_ago=3600, clock=clock)
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="job-rerun", now=clock.now) as held:
        assert held.lease.holder == "job-rerun"
    assert 60 <= loop.time() - start <= 61
    (waiting,) = named(events, "lock.waiting")
    assert waiting["holder"] == "laptop-4242" and waiting["expires_in"] == 60


@pytest.mark.looptime
async def test_two_racing_for_a_free_lease_never_hold_it_together(world: World, kube: cluster.Cluster) -> None:
    clock = Clock()
    loop = asyncio.get_running_loop()
    spans: list[tuple[str, float, float]] = []

    async def contender(name: str) -> None:
        async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me=name, now=clock.now):
            began = loop.time()
            await asyncio.sleep(5)
            spans.append((name, began, loop.time()))

    await asyncio.gather(contender("job-a"), contender("job-b"))
    (first, _, one_ended), (second, two_began, _) = sorted(spans, key=lambda span: span[1])
    assert first != second and two_began >= one_ended  # the loser waited for the release, then took it


@pytest.mark.looptime
async def test_the_lease_is_read_again_right_before_a_write(world: World, kube: cluster.Cluster) -> None:
    clock = Clock()
    async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="job-a", now=clock.now) as held:
        await lease.confirm(kube, held)  # still ours
        world.kube.merge(LEASES, NAMESPACE, f"cutover-{SERVICE}", {"spec": {"holderIdentity": "job-b"}})
        with pytest.raises(LockHeld) as caught:
            await lease.confirm(kube, held)  # no renewal has run yet: only the read sees it
    assert caught.value.cause == "lock_lost" and "job-b" in caught.value.message and held.lost.is_set()


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
    from cutover.kube import lease as lease_notes

    clock = Clock()
    async with lease.hold(kube, namespace=NAMESPACE, service=SERVICE, me="job-1", now=clock.now):
        await lease_notes.annotate(kube, namespace=NAMESPACE, service=SERVICE, notes={lease_notes.VERIFIED: "abc"})
        await lease_notes.annotate(kube, namespace=NAMESPACE, service=SERVICE, notes={"cutover.dev/other": "x"})
        held = await kube.lease(NAMESPACE, "cutover-" + SERVICE)
        assert held is not None and held.holder == "job-1"  # a note never takes the Lease from its holder
    notes = await lease_notes.notes(kube, namespace=NAMESPACE, service=SERVICE)
    assert notes[lease_notes.VERIFIED] == "abc" and notes["cutover.dev/other"] == "x"
    assert await lease_notes.notes(kube, namespace=NAMESPACE, service="no-such-service") == {}

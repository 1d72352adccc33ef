"""One Slack thread per fleet change, a line per cluster (docs/fleet.md): each cluster's hook Jobs are processes of
their own, in clusters of their own (a Lease each), that find the thread by its message metadata in the channel's
history; against the Slack double, which keeps the channel as Slack does."""

from __future__ import annotations

import io
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import structlog

from cutover import logs
from cutover.slack import sink, threads, transports
from doubles.slack import FakeSlack

pytestmark = pytest.mark.looptime

SERVICE = "llm-serving/reasoning-long-predictor"
CHANGE, REVISION = "f1eet0c4a9e1", "4f2c9d1e7a3b"
CLUSTERS = ("reasoning-long-gpu-canary", "reasoning-long-gpu-east", "reasoning-long-gpu-west")


class Lease:
    """A cluster's Lease annotations (`kube.lease.Notes` keeps them on the real one): each cluster its own."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def read(self) -> Mapping[str, str]:
        return dict(self.values)

    async def add(self, values: Mapping[str, str]) -> None:
        self.values.update(values)


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(epoch=int(time.time())) as double:  # ts of today: the history is read back one day
        yield double


async def hook_job(slack: FakeSlack, output: io.StringIO, lease: Lease, cluster: str, *said: tuple[str, dict[str, Any]],
                   opened: bool = False) -> transports.Bot:
    """One hook Job of one cluster: a new process, its sender, what it logs, its exit. `opened`: as if the channel
    had been read before the other cluster's head was there (two clusters of one step at the same moment)."""
    bot = transports.Bot(slack.token, "C0FLEET", api=slack.url + "/api")
    if opened:
        bot.looked.add(CHANGE)
    outbox = sink.Outbox()
    logs.configure(fmt="json", stream=output, sinks=[sink.SlackSink(outbox)])
    sender = sink.Sender(bot, outbox, store=threads.LeaseThreads(lease))
    sender.start()
    log = structlog.get_logger("cutover").bind(service=SERVICE, cutover="reasoning-long", cutover_id=CHANGE,
                                               fleet=REVISION, cluster=cluster)
    for event, fields in said:
        log.info(event, **fields)
    await sender.flush(budget=60)
    return bot


GATE = (("target.ready", {"pods": ["candle-0"]}), ("names.proven", {"names": ["reasoning-long"], "to": "candle"}))
VERIFIER = (("service.verified", {"backend": "candle"}),)


async def test_every_cluster_of_a_fleet_change_writes_its_line_in_one_thread(slack: FakeSlack,
                                                                           output: io.StringIO) -> None:
    """The first cluster opens the thread (its head carries the change in its metadata), the others find it; each
    cluster's gate posts its line and its verifier, a later process, updates that line in place."""
    leases = {cluster: Lease() for cluster in CLUSTERS}
    for cluster in CLUSTERS:  # the rollout's steps, in order
        await hook_job(slack, output, leases[cluster], cluster, *GATE)
        await hook_job(slack, output, leases[cluster], cluster, *VERIFIER)
    (head, lines), = slack.threads().items()
    assert slack.messages[head]["metadata"] == {"event_type": "cutover_fleet_change",
                                                "event_payload": {"change": CHANGE}}
    assert f"cutover fleet {SERVICE} at {REVISION}" in slack.messages[head]["text"]
    assert [line["text"] for line in lines] == [f"{cluster}: verified (candle)" for cluster in CLUSTERS]
    for cluster in CLUSTERS:  # kept on each cluster's own Lease, for its next Job
        assert leases[cluster].values[threads.TS] == head
    reads = [post for post in slack.posted if post.path.endswith("conversations.history")]
    assert len(reads) == 2 * len(CLUSTERS)  # one read of the channel per process, at its first message
    assert {post.body["include_all_metadata"] for post in reads} == {"true"}


async def test_two_clusters_that_opened_a_thread_at_once_end_in_the_older(slack: FakeSlack,
                                                                        output: io.StringIO) -> None:
    """Two clusters of one step gate at the same moment, each finding no head: two threads for a while. The
    younger's next process finds the older head, moves its line there and deletes its own head and line."""
    east, west = Lease(), Lease()
    await hook_job(slack, output, east, CLUSTERS[1], *GATE, opened=True)
    await hook_job(slack, output, west, CLUSTERS[2], *GATE, opened=True)
    assert len(slack.threads()) == 2
    await hook_job(slack, output, west, CLUSTERS[2], *VERIFIER)
    await hook_job(slack, output, east, CLUSTERS[1], *VERIFIER)
    (head, lines), = slack.threads().items()
    assert head == east.values[threads.TS] == west.values[threads.TS]
    assert sorted(line["text"] for line in lines) == [f"{cluster}: verified (candle)" for cluster in CLUSTERS[1:]]
    assert west.values[threads.LINE] == next(line["ts"] for line in lines if line["text"].startswith(CLUSTERS[2]))


async def test_a_bot_that_cannot_read_the_channel_opens_a_thread_of_its_own_and_says_why(
        slack: FakeSlack, output: io.StringIO) -> None:
    """Without `channels:history` the head cannot be found: the cluster's line goes under a head of its own (a
    thread per cluster, as a single cluster's), said once with the scope to add."""
    slack.history = "missing_scope"
    for cluster in CLUSTERS[:2]:
        await hook_job(slack, output, Lease(), cluster, *GATE)
    assert len(slack.threads()) == 2
    said = [line for line in output.getvalue().splitlines() if "slack.fleet_thread_unread" in line]
    assert len(said) == 2 and "missing_scope" in said[0] and "channels:history" in said[0]


async def test_a_failure_is_a_reply_of_its_own_beside_the_line(slack: FakeSlack, output: io.StringIO) -> None:
    """A cluster's line says where it stands; a failure also posts a reply (an updated line notifies nobody), with
    the cause and the hint."""
    lease = Lease()
    await hook_job(slack, output, lease, CLUSTERS[1], *GATE)
    await hook_job(slack, output, lease, CLUSTERS[1], ("cutover.failed", {
        "cause": "switch_not_applied", "message": "the Service selects vllm", "hint": "give the Service a wave"}))
    (_, lines), = slack.threads().items()
    assert [line["text"] for line in lines] == [f"{CLUSTERS[1]}: failed"] * 2
    failure = next(post for post in reversed(slack.posted) if post.path.endswith("chat.postMessage"))
    assert "switch_not_applied" in failure.body["blocks"][-1]["text"]["text"]

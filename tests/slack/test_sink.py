"""Slack from structlog: message shapes, webhook and bot-token modes, coalesced progress, rate limits,
failures that never block or change an outcome, and no secret anywhere; against a Slack double."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import structlog

from cutover import logs
from cutover.slack import blocks, breaker, sink, transports
from doubles.slack import FakeSlack

pytestmark = pytest.mark.looptime

SERVICE = "llm-serving/reasoning-long-predictor"


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as double:
        yield double


def wire(transport: transports.Webhook | transports.Bot, output: io.StringIO, secrets: list[str],
         size: int = sink.QUEUE_SIZE) -> sink.Sender:
    outbox = sink.Outbox(size)
    logs.configure(fmt="json", stream=output, secrets=secrets, sinks=[sink.SlackSink(outbox)])
    sender = sink.Sender(transport, outbox)
    sender.start()
    return sender


def story(log: Any) -> None:
    log.info("cutover.started", source="vllm", to="candle")
    log.info("lock.acquired", lease="x")  # not a milestone, not a warning: not for Slack
    for elapsed in range(30, 300, 30):
        log.info("target.waiting", elapsed=elapsed, budget_left=1800 - elapsed)
    log.info("target.ready", pods=["candle-0"])
    log.info("names.proven", names=["reasoning-long", "reasoning"], pods=["candle-0"])
    log.info("git.committed", commit="2fd4d74dc3c6", url="https://github.com/acme/gitops/commit/2fd4d74")


async def test_webhook_mode_posts_one_message_per_milestone(slack: FakeSlack, output: io.StringIO) -> None:
    sender = wire(transports.Webhook(slack.webhook), output, [slack.webhook])
    log = structlog.get_logger("cutover").bind(service=SERVICE, cutover="reasoning-long")
    story(log)
    await sender.flush(budget=60)
    stages = [post.body["blocks"][1]["fields"][0]["text"] for post in slack.posted]
    assert stages == ["*Stage*\nstarted", "*Stage*\nwaiting for the target", "*Stage*\ntarget ready",
                      "*Stage*\nnames proven", "*Stage*\ncommitted"]  # progress coalesced to one in 60 s
    header = slack.posted[0].body["blocks"][0]["text"]["text"]
    assert header == "cutover llm-serving/reasoning-long-predictor vllm → candle"
    assert "secretpath" not in output.getvalue()


async def test_bot_mode_one_thread_with_its_head_updated_in_place(slack: FakeSlack, output: io.StringIO) -> None:
    bot = transports.Bot(slack.token, "C0123", api=slack.url + "/api")
    sender = wire(bot, output, [slack.token])
    log = structlog.get_logger("cutover").bind(service=SERVICE, cutover="reasoning-long")
    story(log)
    await sender.flush(budget=60)
    calls = [(post.path.rsplit("/", 1)[-1], "thread_ts" in post.body, "ts" in post.body) for post in slack.posted]
    assert calls[0] == ("chat.postMessage", False, False)  # the head message opens the thread
    head_updates = [call for call in calls if call[0] == "chat.update"]
    replies = [call for call in calls if call[1]]
    assert len(head_updates) == 4 and len(replies) == 3  # progress updates the head only; milestones reply
    assert len(slack.posted) <= 10
    assert all(post.authorization == f"Bearer {slack.token}" for post in slack.posted)
    assert slack.token not in output.getvalue()


async def test_429_waits_as_asked_and_500_is_retried(slack: FakeSlack, output: io.StringIO) -> None:
    slack.faults = [(429, {"Retry-After": "7"}), (500, {})]
    sender = wire(transports.Webhook(slack.webhook), output, [slack.webhook])
    loop = asyncio.get_running_loop()
    start = loop.time()
    structlog.get_logger("cutover").info("cutover.started", service=SERVICE, to="candle")
    await sender.flush(budget=60)
    assert len(slack.posted) == 1
    assert loop.time() - start >= 7 + 2  # waited as asked, then backed off once


async def test_a_hanging_slack_never_holds_the_exit_longer_than_5s(slack: FakeSlack, output: io.StringIO) -> None:
    slack.hang = True
    sender = wire(transports.Webhook(slack.webhook), output, [slack.webhook])
    structlog.get_logger("cutover").info("cutover.completed", service=SERVICE, to="candle")
    loop = asyncio.get_running_loop()
    start = loop.time()
    await sender.flush()
    assert loop.time() - start == pytest.approx(5, abs=0.1)
    unsent = [json.loads(line) for line in output.getvalue().splitlines() if '"slack.unsent"' in line]
    assert unsent and unsent[0]["left"] == 1 and unsent[0]["host"] == "127.0.0.1"


async def test_a_hanging_slack_holds_even_a_long_flush_5s_at_most(slack: FakeSlack, output: io.StringIO) -> None:
    """The demo gives its story 30 s to post (one message a second); a Slack that accepts and never answers
    once made it take 22 s (three hung requests before the breaker opened, then the rest of the budget)."""
    slack.hang = True
    sender = wire(transports.Webhook(slack.webhook), output, [slack.webhook])
    log = structlog.get_logger("cutover").bind(service=SERVICE, cutover="reasoning-long")
    story(log)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await sender.flush(budget=30)
    assert loop.time() - start == pytest.approx(5, abs=0.1)
    assert sender.breaker.open  # said once, then left alone


async def test_a_slack_that_answers_gets_the_whole_long_budget(slack: FakeSlack, output: io.StringIO) -> None:
    sender = wire(transports.Webhook(slack.webhook), output, [slack.webhook])
    log = structlog.get_logger("cutover").bind(service=SERVICE, cutover="reasoning-long")
    for n in range(8):
        log.warning(f"engine.slow_{n}")  # eight messages, one a second: more than 5 s in all
    loop = asyncio.get_running_loop()
    start = loop.time()
    await sender.flush(budget=30)
    assert len(slack.posted) == 8 and 7 <= loop.time() - start < 9


async def test_an_unreachable_slack_is_dropped_quietly(output: io.StringIO) -> None:
    sender = wire(transports.Webhook("http://127.0.0.1:9/services/T/B/hidden-token-path"), output,
                  ["http://127.0.0.1:9/services/T/B/hidden-token-path"])
    structlog.get_logger("cutover").info("cutover.started", service=SERVICE)
    await sender.flush(budget=60)
    dropped = [json.loads(line) for line in output.getvalue().splitlines() if '"slack.dropped"' in line]
    assert len(dropped) == 1 and "hidden-token-path" not in output.getvalue()


def test_a_full_queue_drops_the_oldest_progress_and_counts() -> None:
    outbox = sink.Outbox(size=3)
    for index, name in enumerate(("target.waiting", "cutover.started", "names.proven", "git.committed")):
        outbox.put(blocks.Message(f"k{index}", name, {"event": name}), now=index * 100.0)
    assert [m.event["event"] for m in outbox.items] == ["cutover.started", "names.proven", "git.committed"]
    assert outbox.dropped == 1


def test_a_newer_progress_replaces_one_still_unsent_in_its_place() -> None:
    outbox = sink.Outbox()
    for at, name in ((0, "cutover.started"), (10, "target.waiting"), (20, "target.ready"), (100, "target.warming"),
                     (130, "target.waiting"), (200, "target.waiting")):
        outbox.put(blocks.Message("k", name, {"event": name, "at": at}), now=float(at))
    assert [(m.event["event"], m.event["at"]) for m in outbox.items] == [
        ("cutover.started", 0), ("target.waiting", 200), ("target.ready", 20)]
    assert outbox.dropped == 0


def test_blocks_stay_within_slacks_limits_and_carry_cause_and_hint() -> None:
    event = {"event": "cutover.failed", "service": "s" * 500, "to": "candle", "cause": "crash_loop",
             "message": "m" * 5000, "hint": "read the logs", **{f"k{i}": i for i in range(30)}}
    rendered = blocks.blocks(blocks.Message("k", "failed", event))
    assert len(rendered[0]["text"]["text"]) <= 150
    assert all(len(field["text"]) <= 2000 for field in rendered[1]["fields"]) and len(rendered[1]["fields"]) <= 10
    assert len(rendered[2]["text"]["text"]) <= 3000 and "`crash_loop`" in rendered[2]["text"]["text"]
    assert len(rendered) <= 50
    # the review's N7: Slack links bare URLs and channel names in mrkdwn unless it is verbatim
    texts = [*rendered[1]["fields"], *(block["text"] for block in rendered[2:])]
    assert all(text["type"] == "mrkdwn" and text["verbatim"] is True for text in texts)


def test_the_fitness_table_is_a_code_block_of_escaped_lines() -> None:
    table = ["             old (vllm)  new (candle)", "context      32768       40960", "note         <!channel>"]
    rendered = blocks.blocks(blocks.Message("k", "names proven", {"event": "names.proven", "table": table}))
    block = next(b["text"]["text"] for b in rendered if b.get("text", {}).get("text", "").startswith("```"))
    assert block.splitlines()[1:3] == table[:2]  # columns kept: a code block, lines as they were
    assert "&lt;!channel&gt;" in block and "<!channel>" not in block


async def test_a_later_job_finds_the_thread_and_announces_nothing_twice(slack: FakeSlack, output: io.StringIO,
                                                                      world: Any, kube: Any) -> None:
    from cutover.demo.world import NAMESPACE
    from cutover.demo.world import SERVICE as NAME
    from cutover.kube import lease
    from cutover.slack import threads

    def process() -> sink.Sender:  # each hook Job is a new process with a new sender
        bot = transports.Bot(slack.token, "C0123", api=slack.url + "/api")
        outbox = sink.Outbox()
        logs.configure(fmt="json", stream=output, sinks=[sink.SlackSink(outbox)])
        sender = sink.Sender(bot, outbox, store=threads.LeaseThreads(lease.Notes(kube, NAMESPACE, NAME)))
        sender.start()
        return sender

    def logger() -> Any:  # bound after configuring: a bound logger keeps the processors it was bound with
        return structlog.get_logger("cutover").bind(service=SERVICE, cutover="reasoning-long", cutover_id="c0ffee")

    first = process()
    log = logger()
    log.info("cutover.started", source="vllm", to="candle")
    log.info("git.committed", commit="2fd4d74")
    await first.flush(budget=60)
    second = process()  # the next sync's PostSync, or a re-run of the same Job
    log = logger()
    log.info("cutover.started", source="vllm", to="candle")  # said again by a re-run: not posted again
    log.info("service.verified", backend="candle")
    await second.flush(budget=60)
    heads = [post.body["ts"] for post in slack.posted if "ts" in post.body]
    replies = [post.body["thread_ts"] for post in slack.posted if "thread_ts" in post.body]
    opened = [post for post in slack.posted if post.path.endswith("chat.postMessage") and "thread_ts" not in post.body]
    assert len(opened) == 1  # one thread for the cutover, across both processes
    assert set(heads) == set(replies) == {"1700000000.000001"}
    stages = [post.body["blocks"][1]["fields"][0]["text"].split("\n")[1] for post in slack.posted]
    assert stages.count("started") == 1 and "verified" in stages
    stored = world.kube.stored("coordination.k8s.io/v1/leases", NAMESPACE, f"cutover-{NAME}")
    assert stored["metadata"]["annotations"]["cutover.dev/slack-thread-ts"] == "1700000000.000001"


def test_what_came_from_outside_cannot_mention_or_link() -> None:
    """An engine's answer, a pod's message or a commit author may hold `<!channel>` or a link: shown literally."""
    event = {"event": "names.failed", "service": "llm-serving/svc", "cause": "http_status",
             "message": "pod x: <!channel> please <https://evil.example|click> & see", "hint": "a > b",
             "commit": "by Eve <eve@example.invalid>"}
    message = blocks.Message("k", "failed", event)
    rendered = json.dumps(blocks.blocks(message)) + blocks.text(message)
    assert "<!channel>" not in rendered and "<https://" not in rendered and "<eve@" not in rendered
    assert "&lt;!channel&gt; please &lt;https://evil.example|click&gt; &amp; see" in rendered
    assert "*Cause* `http_status`" in rendered  # our own formatting stays formatting


async def test_a_failing_slack_is_left_alone_after_three_tries(slack: FakeSlack, output: io.StringIO) -> None:
    """Slack answering 500 to everything: three requests, then no more for the rest of the process; the work
    waits for none of it (the flush returns as soon as the breaker opens, not at its budget)."""
    slack.always = 500
    sender = wire(transports.Webhook(slack.webhook), output, [slack.webhook])
    log = structlog.get_logger("cutover").bind(service=SERVICE, cutover="reasoning-long")
    story(log)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await sender.flush(budget=60)
    assert slack.failed == breaker.BREAK_AFTER and slack.posted == []
    assert loop.time() - start <= 1 + 2 + 0.1  # the backoff between the three tries, nothing more
    lines = [json.loads(line) for line in output.getvalue().splitlines()]
    (opened,) = [line for line in lines if line["event"] == "slack.circuit_open"]
    assert "3 failures in a row" in opened["why"] and slack.webhook not in output.getvalue()
    (unsent,) = [line for line in lines if line["event"] == "slack.unsent"]
    assert unsent["dropped"] >= 4  # the story's other milestones, never tried


def test_a_rate_limit_or_a_refusal_does_not_open_the_breaker() -> None:
    circuit = breaker.Breaker(after=2)
    for _ in range(5):
        circuit.record(transports.SlackFailed("429", retry_after=3.0))
        circuit.record(transports.SlackFailed("400", retryable=False))
    assert not circuit.open
    circuit.record(transports.SlackFailed("500"))
    circuit.record(None)  # a success in between: the count starts again
    circuit.record(TimeoutError())
    assert not circuit.open
    circuit.record(transports.SlackFailed("503"))
    assert circuit.open

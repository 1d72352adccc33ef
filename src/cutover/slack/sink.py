"""Slack as a structlog sink: milestones (and events at or above `minLevel`) become Slack messages.

Processor order: the Redactor runs before this sink, so only redacted events reach it. The sink only
enqueues and returns (a log call never waits on Slack); a named background task sends, at most one
request per second, honouring 429 Retry-After and retrying 5xx and network errors (tenacity); progress
is coalesced to at most one post per 60 s (a newer one replaces one still unsent); when the queue is full
the oldest progress message goes and the drop is counted. At exit, `flush()` waits at most 5 s. A Slack
failure never changes an outcome.

How a message reads is `blocks`, how it travels `transports` (a webhook, or a bot thread per cutover), when
Slack is left alone `breaker`, where a thread outlives the process `threads`. Called by the CLI, which builds
the sink from the plan's `notify.slack`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import MutableMapping
from typing import Any, Protocol

import httpx
import structlog
import tenacity

from cutover.core import milestones
from cutover.slack import QUIET
from cutover.slack.blocks import Message
from cutover.slack.breaker import Breaker
from cutover.slack.threads import Kept
from cutover.slack.transports import SEND_EVERY, Bot, SlackFailed, Webhook

log = structlog.get_logger("cutover.notify")

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
QUEUE_SIZE = 50
PROGRESS_EVERY = 60.0  # seconds between progress posts of one cutover
FLUSH_BUDGET = 5.0  # seconds the process waits for Slack at exit (docs/guarantees.md #7)
FLUSH_LOOK = 0.25  # seconds between looks at a flush waiting out a rate limit: is a request in flight again?


class ThreadStore(Protocol):
    """Where a cutover's Slack thread and announced milestones outlive the process (the next hook Job reads
    them): `cutover.slack.threads.LeaseThreads` keeps them in annotations on the Service's Lease."""

    async def load(self, key: str) -> Kept: ...

    async def save(self, key: str, kept: Kept) -> None: ...


class Outbox:
    """What waits to be sent, bounded: when full, the oldest progress message gives way."""

    def __init__(self, size: int = QUEUE_SIZE) -> None:
        self.items: collections.deque[Message] = collections.deque()
        self.size, self.dropped = size, 0
        self.ready = asyncio.Event()
        self.drained = asyncio.Event()  # set whenever nothing waits any more
        self.drained.set()
        self._last_progress: dict[str, float] = {}

    def put(self, message: Message, *, now: float) -> None:
        if message.progress:
            last = self._last_progress.get(message.key)
            if last is not None and now - last < PROGRESS_EVERY:
                return  # coalesced: progress is one updated message, not a stream
            self._last_progress[message.key] = now
            stale = next((i for i, item in enumerate(self.items) if item.progress and item.key == message.key), None)
            if stale is not None:  # still unsent: the newer progress says more, in the older one's place
                self.items[stale] = message
                return
        if len(self.items) >= self.size:
            oldest = next((item for item in self.items if item.progress), self.items[0])
            self.items.remove(oldest)
            self.dropped += 1
        self.items.append(message)
        self.drained.clear()
        self.ready.set()


class Sender:
    def __init__(self, transport: Webhook | Bot, outbox: Outbox, *, store: ThreadStore | None = None,
                 breaker: Breaker | None = None) -> None:
        self.transport, self.outbox, self.store = transport, outbox, store
        self.breaker = breaker or Breaker()
        self._asking_since: float | None = None  # loop time the request in flight was sent
        self._silent_since: float | None = None  # since when requests went out and Slack answered none
        self.sent = 0
        self.task: asyncio.Task[None] | None = None
        self._announced: dict[str, set[str]] = {}

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name="slack sender")

    async def _run(self) -> None:
        while True:
            if not self.outbox.items:
                self.outbox.ready.clear()
                await self.outbox.ready.wait()
                continue
            if self.breaker.open:  # what waits is dropped and counted: flush reports it once
                self.outbox.dropped += len(self.outbox.items)
                self.outbox.items.clear()
                self.outbox.drained.set()
                continue
            message = self.outbox.items[0]
            posted = False
            try:
                if await self._fresh(message):
                    await self._deliver(message)
                    posted = True
                    self.sent += 1
                    await self._remember(message)
            except Exception as exc:
                log.warning("slack.dropped", error=str(exc), stage=message.stage, host=self.transport.host,
                            **{QUIET: True})
            if self.outbox.items and self.outbox.items[0] is message:
                self.outbox.items.popleft()
            if not self.outbox.items:
                self.outbox.drained.set()
            if posted:
                await asyncio.sleep(SEND_EVERY)  # one request a second, per channel

    async def _fresh(self, message: Message) -> bool:
        """False for a milestone this cutover already announced (a re-run of the same Job says it again)."""
        if message.key not in self._announced:
            kept = await self.store.load(message.key) if self.store else Kept(None, None, set())
            self._announced[message.key] = kept.announced
            if kept.ts and isinstance(self.transport, Bot):
                self.transport.threads.setdefault(message.key, kept.ts)
                if kept.line:
                    self.transport.lines.setdefault(message.key, kept.line)
        return message.progress or message.said not in self._announced[message.key]

    async def _remember(self, message: Message) -> None:
        bot = self.transport if isinstance(self.transport, Bot) else None
        if bot is not None and bot.unread is not None:  # a fleet's thread not found: this cluster's own, said once
            log.warning("slack.fleet_thread_unread", error=bot.unread, host=bot.host, **{QUIET: True},
                        hint="the bot reads the channel's history to find the fleet change's thread: give it "
                             "channels:history (groups:history for a private channel) (docs/fleet.md)")
            bot.unread = None
        if message.progress and message.cluster is None:
            return  # a fleet's line is kept from its first post, progress or not: the next Job updates it
        if not message.progress:
            self._announced[message.key].add(message.said)
        if self.store is not None:
            await self.store.save(message.key, Kept(bot.threads.get(message.key) if bot else None,
                                                    bot.lines.get(message.key) if bot else None,
                                                    self._announced[message.key]))

    async def _deliver(self, message: Message) -> None:
        async for attempt in tenacity.AsyncRetrying(
                retry=tenacity.retry_if_exception(lambda exc: not self.breaker.open and (
                    isinstance(exc, httpx.TransportError) or (isinstance(exc, SlackFailed) and exc.retryable))),
                wait=_wait, stop=tenacity.stop_after_attempt(4), reraise=True):
            with attempt:
                now = asyncio.get_running_loop().time()
                self._asking_since = now
                self._silent_since = now if self._silent_since is None else self._silent_since
                try:
                    await self.transport.send(message)
                except Exception as exc:
                    if isinstance(exc, SlackFailed):  # an answer, if not the one hoped for
                        self._silent_since = None
                    self.breaker.record(exc)
                    raise
                finally:
                    self._asking_since = None
                self._silent_since = None
                self.breaker.record(None)

    async def flush(self, budget: float = FLUSH_BUDGET, *, idle: float = FLUSH_BUDGET) -> None:
        """Give queued messages up to `budget` seconds while Slack keeps taking them, and at most `idle` seconds
        without one taken: a Slack that accepts and never answers holds the exit `idle` seconds whatever the
        budget (the demo's is 60 s, to post its story one message a second), never longer (docs/guarantees.md #7)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + budget
        while not self.outbox.drained.is_set():
            now, silent = loop.time(), self._silent_since
            until = end if silent is None else min(end, silent + idle)  # no answer for `idle` s: done
            if now >= until:
                break
            with contextlib.suppress(TimeoutError):  # between requests (a Retry-After), look again shortly
                async with asyncio.timeout(min(until - now, FLUSH_LOOK)):
                    await self.outbox.drained.wait()
        if not self.outbox.drained.is_set():  # what is left is counted below, then dropped
            stuck = self._asking_since is not None and loop.time() - self._asking_since > 1
            if stuck or self.breaker.failures:  # Slack not answering, or failing: not merely a long queue
                self.breaker.trip(f"messages still unsent after {min(budget, idle):g}s without an answer"
                                  if stuck else f"messages still unsent after {budget:g}s")
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self.outbox.items or self.outbox.dropped:
            log.warning("slack.unsent", left=len(self.outbox.items), dropped=self.outbox.dropped,
                        host=self.transport.host, **{QUIET: True})
        await self.transport.aclose()


def _wait(state: tenacity.RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    asked = getattr(exc, "retry_after", None)
    return float(asked) if asked is not None else min(8.0, 2.0 ** (state.attempt_number - 1))


class SlackSink:
    """The structlog processor: decides what is worth a message, enqueues it, returns at once."""

    def __init__(self, outbox: Outbox, *, min_level: str = "info") -> None:
        self.outbox, self.min_level = outbox, LEVELS.get(min_level, 20)

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        if event.pop(QUIET, False):
            return event
        name = str(event.get("event", ""))
        stage = milestones.STAGES.get(name)
        # Outside the milestones only warnings and errors, however low minLevel is: every info line in
        # Slack is the spam ArgoCD users complain about most (argo-cd#14316).
        if stage is None and LEVELS.get(method, 20) >= max(self.min_level, LEVELS["warning"]):
            stage = name
        if stage is None:
            return event
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:  # no loop: nothing can send it anyway
            return event
        key = str(event.get("cutover_id") or f"{event.get('service', '')}:{event.get('cutover', '')}")
        self.outbox.put(Message(key, stage, dict(event)), now=now)
        return event

"""The two ways into Slack, each one protocol: an incoming webhook, or a bot token with `chat.postMessage` and
`chat.update` (one thread per cutover, its head message updated with the current stage). A fleet's cluster
(docs/fleet.md) writes one line in its fleet change's thread: the head is found in the channel by its message
metadata (`conversations.history`), opened by the first cluster that finds none.

A transport sends one message and raises `SlackFailed` saying whether trying again can help; the sender
(`cutover.slack.sink`) paces, retries and gives up. Only the host is ever logged, never the URL or the token.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from cutover import trust
from cutover.core import bounded
from cutover.slack.blocks import Message, blocks, fleet_head, line, line_blocks, text

SEND_EVERY = 1.0  # seconds between requests (Slack allows about one message per second per channel)
FLEET_EVENT = "cutover_fleet_change"  # the metadata event_type of a fleet change's head message
HISTORY_LIMIT = 100  # messages read back for a fleet's head (Slack answers 15 at most to apps under its 2025 limits)
HISTORY_SPAN = 24 * 3600.0  # seconds back a fleet change's head is looked for: a rollout's steps, not last week's


class SlackFailed(Exception):
    def __init__(self, message: str, *, retry_after: float | None = None, retryable: bool = True) -> None:
        super().__init__(message)
        self.retry_after, self.retryable = retry_after, retryable


ANSWER_CAP = 64 << 10  # bytes a Slack answer may decode to: `ok`, or a few hundred bytes of JSON
_IDENTITY = {"Accept-Encoding": "identity"}  # what comes compressed anyway is inflated under the cap (`_post`)


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, Any], *,
                verb: str = "POST") -> tuple[httpx.Response, bytes]:
    """The answer and its body, decoded under ANSWER_CAP (core.bounded): never a body the Job cannot hold. A GET
    (Slack's read methods) sends the body as its query."""
    request: dict[str, Any] = {"params": body} if verb == "GET" else {"json": body}
    async with client.stream(verb, url, **request) as response:
        try:
            data = await bounded.collect(response.aiter_raw(), cap=ANSWER_CAP,
                                         content_encoding=response.headers.get("content-encoding", ""))
        except (bounded.TooLarge, bounded.BadEncoding) as exc:
            raise SlackFailed(f"Slack's answer: {exc}", retryable=False) from None
        return response, data


class Webhook:
    """An incoming webhook: one message per milestone. Only the host is ever logged."""

    def __init__(self, url: str, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url, self.host = url, urlsplit(url).hostname or "?"
        self.client = httpx.AsyncClient(timeout=5.0, transport=transport, trust_env=False, verify=trust.context(),
                                        headers=_IDENTITY)

    async def send(self, message: Message) -> None:
        response, _ = await _post(self.client, self.url, {"text": text(message), "blocks": blocks(message)})
        _check(response)

    async def aclose(self) -> None:
        await self.client.aclose()


class Bot:
    """A bot token and a channel: one thread per cutover, its head message updated in place."""

    def __init__(self, token: str, channel: str, *, api: str = "https://slack.com/api",
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.channel, self.host = channel, urlsplit(api).hostname or "?"
        self.client = httpx.AsyncClient(base_url=api, timeout=5.0, transport=transport, trust_env=False,
                                        headers={"Authorization": f"Bearer {token}", **_IDENTITY},
                                        verify=trust.context())
        self.threads: dict[str, str] = {}  # cutover key -> ts of the head message
        self.lines: dict[str, str] = {}  # a fleet change's key -> ts of this cluster's line in its thread
        self.looked: set[str] = set()  # fleet changes this process looked for in the channel
        self.unread: str | None = None  # why the channel's history could not be read (said once, by the sink)

    async def _call(self, method: str, body: dict[str, Any], *, read: bool = False) -> dict[str, Any]:
        # Slack's read methods take a query, not a JSON body
        response, data = await _post(self.client, f"/{method}", body, verb="GET" if read else "POST")
        _check(response)
        try:
            answer = json.loads(data)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise SlackFailed(f"Slack {method}: the answer is not a JSON object ({data[:40]!r})", retryable=False)
        if not answer.get("ok"):
            error = str(answer.get("error", "unknown"))
            raise SlackFailed(f"Slack {method}: {error}", retryable=error in ("ratelimited", "internal_error",
                                                                               "service_unavailable"))
        return answer

    async def send(self, message: Message) -> None:
        if message.cluster is not None:
            await self._send_line(message)
            return
        head = self.threads.get(message.key)
        payload = {"channel": self.channel, "text": text(message), "blocks": blocks(message)}
        if head is None:
            answer = await self._call("chat.postMessage", payload)
            self.threads[message.key] = str(answer["ts"])
            return
        await self._call("chat.update", {**payload, "ts": head})
        if not message.progress:  # progress lives in the head message only: no stream of replies
            await self._call("chat.postMessage", {**payload, "thread_ts": head})

    async def _send_line(self, message: Message) -> None:
        """A fleet's cluster: its line in the fleet change's thread, posted once and updated in place; a failure is
        also a reply of its own (an update notifies nobody)."""
        head = await self._fleet_head(message)
        payload = {"channel": self.channel, "text": line(message), "blocks": line_blocks(message)}
        mine = self.lines.get(message.key)
        if mine is None:
            answer = await self._call("chat.postMessage", {**payload, "thread_ts": head})
            self.lines[message.key] = str(answer["ts"])
            return
        await self._call("chat.update", {**payload, "ts": mine})
        if message.event.get("cause"):
            await self._call("chat.postMessage", {**payload, "thread_ts": head})

    async def _fleet_head(self, message: Message) -> str:
        """The fleet change's thread: the oldest head in the channel carrying its key (once per process), else the
        one this cluster opened before (its Lease), else a new one. Two clusters of one step open theirs at the same
        moment: the next process of the younger finds the older, moves its line there and deletes its own."""
        key = message.key
        if key not in self.looked:
            self.looked.add(key)
            found = await self._find_head(key)
            mine = self.threads.get(key)
            if found is not None and found != mine:
                if mine is not None:  # opened beside the older head: one thread per fleet change
                    await self._delete(self.lines.pop(key, None))
                    await self._delete(mine)
                self.threads[key] = found
        head = self.threads.get(key)
        if head is None:
            text, shown = fleet_head(message)
            answer = await self._call("chat.postMessage", {
                "channel": self.channel, "text": text, "blocks": shown,
                "metadata": {"event_type": FLEET_EVENT, "event_payload": {"change": key}}})
            head = self.threads[key] = str(answer["ts"])
        return head

    async def _find_head(self, key: str) -> str | None:
        """The oldest message of the channel's recent history whose metadata names this fleet change; None when
        there is none or the history cannot be read (the bot lacks `channels:history`, or Slack's rate limit):
        said once, and this cluster opens a thread of its own."""
        query = {"channel": self.channel, "limit": HISTORY_LIMIT, "include_all_metadata": "true",
                 "oldest": f"{time.time() - HISTORY_SPAN:.6f}"}
        try:
            answer = await self._call("conversations.history", query, read=True)
        except (SlackFailed, httpx.HTTPError) as exc:
            self.unread = str(exc) or type(exc).__name__
            return None
        heads = [str(found["ts"]) for found in answer.get("messages") or () if isinstance(found, dict)
                 and found.get("ts") and _names(found.get("metadata"), key)]
        return min(heads, key=float) if heads else None

    async def _delete(self, ts: str | None) -> None:
        if ts is not None:
            with contextlib.suppress(SlackFailed):  # already gone, or not the bot's: the thread goes on without it
                await self._call("chat.delete", {"channel": self.channel, "ts": ts})

    async def aclose(self) -> None:
        await self.client.aclose()


def _names(metadata: object, key: str) -> bool:
    if not isinstance(metadata, dict) or metadata.get("event_type") != FLEET_EVENT:
        return False
    payload = metadata.get("event_payload")
    return isinstance(payload, dict) and payload.get("change") == key


def _check(response: httpx.Response) -> None:
    if response.status_code == 429:
        after = response.headers.get("retry-after", "")
        raise SlackFailed("Slack rate limit (429)", retry_after=float(after) if after.isdigit() else SEND_EVERY)
    if response.status_code >= 500:
        raise SlackFailed(f"Slack answered {response.status_code}")
    if response.status_code >= 400:
        raise SlackFailed(f"Slack refused the message ({response.status_code})", retryable=False)

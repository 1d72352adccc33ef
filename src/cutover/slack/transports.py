"""The two ways into Slack, each one protocol: an incoming webhook, or a bot token with `chat.postMessage` and
`chat.update` (one thread per cutover, its head message updated with the current stage).

A transport sends one message and raises `SlackFailed` saying whether trying again can help; the sender
(`cutover.slack.sink`) paces, retries and gives up. Only the host is ever logged, never the URL or the token.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import httpx

from cutover import trust
from cutover.core import bounded
from cutover.slack.blocks import Message, blocks, text

SEND_EVERY = 1.0  # seconds between requests (Slack allows about one message per second per channel)


class SlackFailed(Exception):
    def __init__(self, message: str, *, retry_after: float | None = None, retryable: bool = True) -> None:
        super().__init__(message)
        self.retry_after, self.retryable = retry_after, retryable


ANSWER_CAP = 64 << 10  # bytes a Slack answer may decode to: `ok`, or a few hundred bytes of JSON
_IDENTITY = {"Accept-Encoding": "identity"}  # what comes compressed anyway is inflated under the cap (`_post`)


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> tuple[httpx.Response, bytes]:
    """The answer and its body, decoded under ANSWER_CAP (core.bounded): never a body the Job cannot hold."""
    async with client.stream("POST", url, json=body) as response:
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

    async def _call(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        response, data = await _post(self.client, f"/{method}", body)
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
        head = self.threads.get(message.key)
        payload = {"channel": self.channel, "text": text(message), "blocks": blocks(message)}
        if head is None:
            answer = await self._call("chat.postMessage", payload)
            self.threads[message.key] = str(answer["ts"])
            return
        await self._call("chat.update", {**payload, "ts": head})
        if not message.progress:  # progress lives in the head message only: no stream of replies
            await self._call("chat.postMessage", {**payload, "thread_ts": head})

    async def aclose(self) -> None:
        await self.client.aclose()


def _check(response: httpx.Response) -> None:
    if response.status_code == 429:
        after = response.headers.get("retry-after", "")
        raise SlackFailed("Slack rate limit (429)", retry_after=float(after) if after.isdigit() else SEND_EVERY)
    if response.status_code >= 500:
        raise SlackFailed(f"Slack answered {response.status_code}")
    if response.status_code >= 400:
        raise SlackFailed(f"Slack refused the message ({response.status_code})", retryable=False)

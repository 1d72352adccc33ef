"""Slack's answers read under a cap on what they decode to (docs/security.md): a bomb or a page that is no JSON is a
failed message that is not retried, never an internal error or a Job out of memory."""

from __future__ import annotations

import gzip

import httpx
import pytest

from cutover.slack.blocks import Message
from cutover.slack.transports import Bot, SlackFailed, Webhook
from helpers import streamed


def answering(body: bytes, headers: dict[str, str] | None = None) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return streamed(200, body, headers)

    return httpx.MockTransport(answer), seen


MESSAGE = Message(key="c1", stage="committed", event={"event": "git.committed", "service": "llm-serving/x"})


@pytest.mark.parametrize(("why", "body", "headers", "words"), [
    ("a compression bomb", gzip.compress(b" " * (8 << 20)), {"Content-Encoding": "gzip"}, "more than 65536 bytes"),
    ("a proxy's page", b"<html>sign in</html>", {}, "not a JSON object"),
])
async def test_a_bot_answer_that_is_not_slacks_fails_the_message_for_good(why: str, body: bytes,
                                                                          headers: dict[str, str], words: str) -> None:
    transport, seen = answering(body, headers)
    bot = Bot("xoxb-" + "1" * 20, "C0123", transport=transport)
    with pytest.raises(SlackFailed) as caught:
        await bot.send(MESSAGE)
    await bot.aclose()
    assert words in str(caught.value) and caught.value.retryable is False
    assert seen[0].headers["Accept-Encoding"] == "identity"


async def test_a_webhook_answer_is_read_under_the_cap_too() -> None:
    transport, _ = answering(gzip.compress(b"o" * (1 << 20)), {"Content-Encoding": "gzip"})
    hook = Webhook("https://hooks.slack.example.invalid/services/T0/B0/x", transport=transport)
    with pytest.raises(SlackFailed, match="more than 65536 bytes"):
        await hook.send(MESSAGE)
    await hook.aclose()

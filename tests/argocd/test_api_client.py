"""The ArgoCD API client on its own (httpx.MockTransport, fake time): what it asks, how it retries, what each
refusal becomes; never the token in an error."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from cutover.argocd.api import ArgoCDApi, token
from cutover.errors import ClusterError, ClusterUnavailable, InvalidInput
from cutover.plan import ArgoCD
from helpers import streamed

pytestmark = pytest.mark.looptime

SETTINGS = ArgoCD(application="llm-serving", namespace="argocd", server="https://argocd.example.invalid")
TOKEN = "argocd-token-" + "Z" * 20


class _Streaming(httpx.AsyncBaseTransport):
    """The mock's answers with their bodies streamed: the client reads raw bytes under its cap."""

    def __init__(self, mock: httpx.MockTransport) -> None:
        self.mock = mock

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = await self.mock.handle_async_request(request)
        if answer.is_stream_consumed or hasattr(answer, "_content"):
            return streamed(answer.status_code, answer.content, dict(answer.headers))
        return answer


def client(handler: httpx.MockTransport) -> ArgoCDApi:
    return ArgoCDApi(SETTINGS, token=TOKEN, transport=_Streaming(handler))


async def test_manifests_of_one_source_and_of_a_position() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"manifests": [json.dumps({"kind": "Service", "metadata": {"name": "s"}})]})

    api = client(httpx.MockTransport(answer))
    assert await api.manifests("abc") == [{"kind": "Service", "metadata": {"name": "s"}}]
    await api.manifests("def", position=1)
    await api.aclose()
    assert [str(r.url) for r in seen] == [
        "https://argocd.example.invalid/api/v1/applications/llm-serving/manifests?appNamespace=argocd&revision=abc",
        "https://argocd.example.invalid/api/v1/applications/llm-serving/manifests?appNamespace=argocd&revisions=def"
        "&sourcePositions=2"]
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in seen)


async def test_5xx_and_429_are_retried_then_answered() -> None:
    answers = iter([httpx.Response(503), httpx.Response(429), httpx.Response(200, json={})])
    api = client(httpx.MockTransport(lambda request: next(answers)))
    await api.refresh()
    await api.aclose()


async def test_an_outage_ends_after_six_attempts() -> None:
    calls = []

    def down(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise httpx.ConnectError("refused", request=request)

    api = client(httpx.MockTransport(down))
    with pytest.raises(ClusterUnavailable) as caught:
        await api.refresh()
    await api.aclose()
    assert len(calls) == 6 and caught.value.cause == "argocd_api_unavailable"  # named for ArgoCD, not the API server


@pytest.mark.parametrize(("status", "cause"), [(401, "argocd_api_forbidden"), (403, "argocd_api_forbidden"),
                                               (404, "argocd_api_error")])
async def test_a_refusal_is_named_without_the_token(status: int, cause: str) -> None:
    api = client(httpx.MockTransport(lambda request: httpx.Response(status, json={"message": "no"})))
    with pytest.raises(ClusterError) as caught:
        await api.manifests("abc")
    await api.aclose()
    assert caught.value.cause == cause and TOKEN not in str(caught.value) + caught.value.hint


def test_the_token_from_a_file_is_stripped_and_a_missing_file_is_named(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    assert token(ArgoCD(application="a", token_file=str(tmp_path / "token"))) == TOKEN
    monkeypatch.setenv("CUTOVER_ARGOCD_TOKEN", TOKEN)
    assert token(ArgoCD(application="a")) == TOKEN
    with pytest.raises(InvalidInput) as caught:
        token(ArgoCD(application="a", token_file=str(tmp_path / "absent")))
    assert caught.value.cause == "argocd_token_missing"
    assert ArgoCDApi.connect(None) is None and ArgoCDApi.connect(ArgoCD(application="a")) is None


async def test_a_body_dripped_slowly_meets_the_whole_answer_deadline() -> None:
    """httpx bounds each read (30 s), not the whole answer: a body sent a byte every 20 s is cut at 60 s, an
    outage, retried, then given up on within a bounded time."""
    async def drip() -> Any:
        for _ in range(100):
            await asyncio.sleep(20)
            yield b" "

    api = client(httpx.MockTransport(lambda request: httpx.Response(200, content=drip())))
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(ClusterUnavailable) as caught:
        await api.refresh()
    await api.aclose()
    assert "no whole answer within 60s" in caught.value.message
    assert loop.time() - began <= 6 * 60 + 60  # six attempts of 60 s and their backoff, not 100 × 20 s each


BOMB = gzip.compress(b" " * (64 << 20), compresslevel=9)  # 64 MiB decoded from ~64 KiB


@pytest.mark.parametrize(("why", "body", "headers", "words"), [
    ("a proxy's HTML page", b"<html>login</html>", {}, "not a JSON object"),
    ("a JSON list", b"[1, 2]", {}, "not a JSON object"),
    ("manifests that are no strings", b'{"manifests": [{"kind": "Service"}]}', {},
     "`manifests` is not a list of strings"),
    ("a manifest that is no JSON", b'{"manifests": ["kind: Service"]}', {}, "a manifest"),
    ("a compression bomb", BOMB, {"Content-Encoding": "gzip"}, "decodes to more than 33554432 bytes"),
    ("an encoding nobody asked for", b"x", {"Content-Encoding": "zstd"},
     "Content-Encoding zstd is not one cutover decodes"),
])
async def test_a_malformed_answer_is_a_named_cause_not_an_internal_error(why: str, body: bytes,
                                                                       headers: dict[str, str], words: str) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return streamed(200, body, headers)

    api = client(httpx.MockTransport(answer))
    with pytest.raises(ClusterError) as caught:
        await api.manifests("abc")
    await api.aclose()
    assert caught.value.cause == "argocd_api_malformed" and words in caught.value.message and caught.value.hint
    assert TOKEN not in caught.value.message
    assert seen[0].headers["Accept-Encoding"] == "identity"

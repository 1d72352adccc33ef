"""Engine answers read under a cap on what they decode to (docs/security.md): the reader itself, and the proofs
and streams over the wire against a double that sends a compression bomb or a line that never ends."""

from __future__ import annotations

import gzip
import zlib

import pytest

from cutover.core import bounded
from cutover.demo.engines import bomb
from cutover.demo.world import World
from cutover.engines import api, trials
from cutover.engines.kinds import ENGINES


def test_layers_are_undone_in_reverse_under_the_cap() -> None:
    body = b'{"data": []}'
    twice = gzip.compress(zlib.compress(body))  # deflate applied first, then gzip: listed "deflate, gzip"
    decoder = bounded.Decoder("deflate, gzip", cap=100)
    assert b"".join(decoder.feed(twice[i:i + 3]) for i in range(0, len(twice), 3)) == body
    assert bounded.Decoder("", cap=5).feed(b"12345") == b"12345"
    assert bounded.Decoder("identity", cap=5).feed(b"12345") == b"12345"


def test_a_bomb_stops_at_the_cap_without_inflating_it_whole() -> None:
    decoder = bounded.Decoder("gzip, gzip", cap=1 << 20)

    def feed_all() -> None:
        for start in range(0, len(bomb()), 1024):
            decoder.feed(bomb()[start:start + 1024])

    with pytest.raises(bounded.TooLarge, match="more than 1048576 bytes"):
        feed_all()
    assert decoder.total <= 1 << 20


@pytest.mark.parametrize(("encoding", "body", "words"), [
    ("br", b"x", "Content-Encoding br is not one cutover decodes"),
    ("gzip", b"\x1f\x8b\x08\x00not gzip at all", "does not inflate"),
])
def test_what_cannot_be_decoded_is_named(encoding: str, body: bytes, words: str) -> None:
    with pytest.raises(bounded.BadEncoding, match=words):
        bounded.Decoder(encoding, cap=100).feed(body)


def test_lines_split_across_chunks_and_line_ends() -> None:
    lines = bounded.Lines(cap=10)
    assert lines.feed(b"data: a\r") == []  # a CR that may begin a CRLF waits for the next chunk
    assert lines.feed(b"\n\r\ndata: b\nda") == ["data: a", "", "data: b"]
    assert lines.feed(b"ta: c") == [] and lines.end() == ["data: c"]
    with pytest.raises(bounded.TooLarge, match="a line longer than 10 bytes"):
        bounded.Lines(cap=10).feed(b"data: " + b"x" * 20)


@pytest.mark.looptime
async def test_an_answer_that_is_a_bomb_is_too_large_and_never_inflated_whole(world: World) -> None:
    vllm = world.add_pod("vllm", ready=True)
    await world.settled()
    vllm.engine.fault = "bomb"
    async with api.new_client(timeout=10) as client:
        assert client.headers["Accept-Encoding"] == "identity"  # asked; the double compresses all the same
        with pytest.raises(api.Refusal) as caught:
            await api.call(client, "GET", f"http://{vllm.ip}:{world.port}/v1/models")
    assert caught.value.problem.kind == "too_large" and "above 1048576 bytes" in caught.value.problem.message


@pytest.mark.looptime
async def test_a_stream_line_that_never_ends_breaks_the_stream(world: World) -> None:
    candle = world.add_pod("candle", ready=True)
    await world.settled()
    candle.engine.fault = "stream-endless-line"
    async with api.new_client(timeout=10) as client:
        _, check = await trials._streamed(client, f"http://{candle.ip}:{world.port}", ENGINES["candle-vllm"],
                                          "reasoning")
    assert check.broken is not None and "a line longer than 65536 bytes" in check.broken

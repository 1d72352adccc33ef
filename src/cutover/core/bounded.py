"""Answers read under a cap on what they decode to (docs/security.md), for every wing that reads one: pure, no I/O.

cutover asks every engine for `Accept-Encoding: identity`, but a proxy in front of one may compress all the same, and
httpx inflates a compressed chunk whole before anyone can count it: a few KiB of `Content-Encoding: gzip, gzip` became
hundreds of MiB in a 192 Mi Job. So the raw bytes are inflated here, layer by layer, never past the cap; and a
stream's lines are split here, so a line that never ends is refused at the cap instead of buffered whole.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterable, AsyncIterator

LINE_CAP = 64 << 10  # bytes in one line of a stream: an engine's chunk is a few hundred
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class TooLarge(Exception):
    """The answer decodes to more than the cap."""


class BadEncoding(Exception):
    """An encoding this reader does not speak, or a body that does not inflate."""


class Decoder:
    """Raw body chunks in, decoded bytes out, never more than `cap` in all (`Content-Encoding` layers undone in
    reverse order, as RFC 9110 (Content-Encoding) lists them in the order they were applied)."""

    def __init__(self, content_encoding: str, *, cap: int) -> None:
        names = [name.strip().lower() for name in content_encoding.split(",") if name.strip()]
        unknown = [name for name in names if name not in _WBITS and name != "identity"]
        if unknown:
            raise BadEncoding(f"Content-Encoding {', '.join(unknown)} is not one cutover decodes")
        self.layers = [zlib.decompressobj(_WBITS[name]) for name in reversed(names) if name != "identity"]
        self.cap, self.total = cap, 0

    def feed(self, raw: bytes) -> bytes:
        data = raw
        for layer in self.layers:
            data = _inflate(layer, data, room=self.cap - self.total)
        self.total += len(data)
        if self.total > self.cap:
            raise TooLarge(f"the answer decodes to more than {self.cap} bytes")
        return data


async def decoded(raw: AsyncIterable[bytes], *, content_encoding: str, cap: int) -> AsyncIterator[bytes]:
    """A body's raw chunks (an HTTP client's undecoded stream) inflated under `cap`, chunk by chunk."""
    decoder = Decoder(content_encoding, cap=cap)
    async for chunk in raw:
        yield decoder.feed(chunk)


async def collect(raw: AsyncIterable[bytes], *, content_encoding: str, cap: int) -> bytes:
    """A whole body, decoded under `cap` (TooLarge or BadEncoding otherwise)."""
    body = bytearray()
    async for chunk in decoded(raw, content_encoding=content_encoding, cap=cap):
        body += chunk
    return bytes(body)


def _inflate(layer: zlib._Decompress, data: bytes, *, room: int) -> bytes:
    """`data` inflated, stopping as soon as it passes `room` bytes (max_length 0 would mean no limit: never asked)."""
    out = bytearray()
    pending = data
    try:
        while True:
            out += layer.decompress(pending, room - len(out) + 1)
            if len(out) > room:
                raise TooLarge(f"the answer decodes to more than {room} bytes")
            pending = layer.unconsumed_tail
            if not pending:
                return bytes(out)
    except zlib.error as exc:
        raise BadEncoding(f"the body does not inflate: {exc}") from exc


class Lines:
    """Decoded bytes in, whole lines out (without their line ends, `\\r\\n`, `\\n` or `\\r`); a line longer than
    `cap` bytes is refused before it is held whole."""

    def __init__(self, *, cap: int) -> None:
        self.cap = cap
        self.pending = bytearray()

    def feed(self, data: bytes) -> list[str]:
        buffered = bytes(self.pending + data)
        held = buffered.endswith(b"\r")  # perhaps the first half of a CRLF the next chunk completes
        body = buffered[:-1] if held else buffered
        *lines, rest = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        if len(rest) > self.cap:
            raise TooLarge(f"a line longer than {self.cap} bytes")
        self.pending = bytearray(rest + (b"\r" if held else b""))
        return [line.decode("utf-8", errors="replace") for line in lines]

    def end(self) -> list[str]:
        rest, self.pending = bytes(self.pending).rstrip(b"\r"), bytearray()
        return [rest.decode("utf-8", errors="replace")] if rest else []

"""Server-sent events as the engines stream them, read line by line. Pure: no I/O.

vLLM writes each chunk as `data: {json}\\n\\n` and ends every stream, an error included, with
`data: [DONE]\\n\\n` (vllm/entrypoints/openai/completion/serving.py, completion_stream_generator); candle-vllm
streams through axum's Sse with a keep-alive comment `: keep-alive-text` every 100 ms, sends errors as plain
`data: <text>` and ends with `data: [DONE]` (src/openai/streaming.rs, src/openai/openai_server.rs). The
rules are the WHATWG event-stream format's: a line starting with `:` is a comment, `data:` may be followed
by one space, an empty line ends an event, several data lines of one event join with a newline.
"""

from __future__ import annotations

import dataclasses

DONE = "[DONE]"


@dataclasses.dataclass(frozen=True)
class Event:
    data: str
    name: str = "message"


class Reader:
    """Feed it lines (without their line ends); it hands back each event as its blank line arrives."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._name = "message"
        self.comments = 0  # keep-alives and other comments seen; they are no chunk and no first token

    def feed(self, line: str) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            self.comments += 1
            return None
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._name = value or "message"
        return None  # `id` and `retry` mean nothing to a one-shot reader

    def _dispatch(self) -> Event | None:
        data, name = self._data, self._name
        self._data, self._name = [], "message"
        return Event("\n".join(data), name) if data else None

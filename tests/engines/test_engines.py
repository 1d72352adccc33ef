"""The served-name proof over real HTTP against engine doubles with the exact payloads of
docs/engines.md, and the classification of every way a check can fail."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from cutover.core import proofs
from cutover.demo.engines import CANDLE_ARCHITECTURE, CANDLE_LATEST, Blackhole, EngineDouble
from cutover.demo.world import _free_port
from cutover.engines import api, kinds

NAMES = ("reasoning-long", "reasoning")
_ips = itertools.count(1)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with api.new_client(timeout=2.0) as http:
        yield http


@pytest.fixture
async def make_engine() -> AsyncIterator[Callable[..., EngineDouble]]:
    made: list[EngineDouble] = []

    def make(engine: str, served: tuple[str, ...] = NAMES, model_id: str | None = None,
             version: tuple[int, int, int] = CANDLE_LATEST) -> EngineDouble:
        double = EngineDouble(engine, ip=f"127.77.200.{next(_ips)}", port=_free_port(), served_names=served,
                              model_id=model_id, version=version)
        made.append(double)
        return double

    yield make
    for double in made:
        await double.unbind()


async def prove(client: httpx.AsyncClient, double: EngineDouble, method: str,
                names: tuple[str, ...] = NAMES) -> proofs.PodProof:
    return await api.prove(client, pod="pod-0", ip=double.ip, port=double.port, engine=double.engine,
                               names=names, method=method)


def test_auto_lists_where_the_engine_lists_every_name() -> None:
    assert kinds.method_for("vllm", "auto") == "listed"
    assert {kinds.method_for(e, "auto") for e in ("candle-vllm", "sglang", "llama.cpp", "tgi", "openai")} == {
        "generate"}
    assert kinds.method_for("candle-vllm", "listed") == "listed"


async def test_vllm_lists_both_names(client: httpx.AsyncClient, make_engine: Callable[..., EngineDouble]) -> None:
    double = make_engine("vllm")
    await double.bind()
    proof = await prove(client, double, "listed")
    assert proof.ok and proof.proven == NAMES
    assert [(m, p) for m, p, _ in double.requests] == [("GET", "/health"), ("GET", "/v1/models")]


async def test_vllm_missing_a_name_is_final(client: httpx.AsyncClient,
                                            make_engine: Callable[..., EngineDouble]) -> None:
    double = make_engine("vllm", served=("reasoning",))
    await double.bind()
    proof = await prove(client, double, "listed")
    assert proof.proven == ("reasoning",)
    (problem,) = proof.problems
    assert problem.kind == "name_not_listed" and not problem.retryable and problem.name == "reasoning-long"
    assert "lists: reasoning" in problem.message


async def test_vllm_generate_rejects_an_unknown_name_with_404(
        client: httpx.AsyncClient, make_engine: Callable[..., EngineDouble]) -> None:
    double = make_engine("vllm", served=("reasoning",))
    await double.bind()
    proof = await prove(client, double, "generate")
    (problem,) = proof.problems
    assert (problem.kind, problem.status, problem.retryable) == ("name_rejected", 404, False)
    assert double.requests[1][2] == {"model": "reasoning-long", "max_tokens": 1, "temperature": 0, "stream": False,
                                     "prompt": "ping"}


async def test_candle_lists_one_id_so_listing_cannot_prove_the_alias(
        client: httpx.AsyncClient, make_engine: Callable[..., EngineDouble]) -> None:
    double = make_engine("candle-vllm", model_id="reasoning-long")
    await double.bind()
    proof = await prove(client, double, "listed")
    assert proof.proven == ("reasoning-long",)
    assert [p.kind for p in proof.problems] == ["name_not_listed"]


async def test_candle_generate_proves_the_alias_without_health(
        client: httpx.AsyncClient, make_engine: Callable[..., EngineDouble]) -> None:
    double = make_engine("candle-vllm", model_id="reasoning-long")
    await double.bind()
    proof = await prove(client, double, kinds.method_for("candle-vllm", "auto"))
    assert proof.ok and proof.proven == NAMES
    # No /health on candle-vllm: the profile does not ask, and a chat completion carries each name.
    assert [(m, p, (b or {}).get("model")) for m, p, b in double.requests] == [
        ("POST", "/v1/chat/completions", "reasoning-long"), ("POST", "/v1/chat/completions", "reasoning")]


@pytest.mark.parametrize(("asked", "answering", "problem"), [
    ("candle-vllm", "candle-vllm", None),
    ("vllm", "vllm", None),
    ("candle-vllm", "vllm", "answered by vllm (owned_by in /v1/models), not candle-vllm"),
    ("vllm", "candle-vllm", "answered by candle-vllm (owned_by in /v1/models), not vllm"),
])
async def test_who_answers_is_told_by_owned_by(client: httpx.AsyncClient, make_engine: Callable[..., EngineDouble],
                                               asked: str, answering: str, problem: str | None) -> None:
    double = make_engine(answering, model_id="reasoning-long")
    await double.bind()
    found = await api.identify(client, ip=double.ip, port=double.port, engine=asked)
    assert (found.message if found else None) == problem
    assert found is None or (found.kind == "wrong_engine" and found.retryable)  # kube-proxy may still catch up


@pytest.mark.parametrize(("version", "listed", "model_proof"), [
    ((0, 3, 9), None, "http_status"),  # no /v1/models before PR #312: who answers cannot be told, nor the weights
    ((0, 4, 0), "default", "model_not_loaded"),  # PR #312
    ((0, 4, 10), CANDLE_ARCHITECTURE, "model_not_loaded"),  # PR #355: the architecture's name
    ((0, 5, 3), "qwen3-8b", None),  # PR #377: --m, else the weights' basename
    (CANDLE_LATEST, "qwen3-8b", None),
])
async def test_candle_releases_each_report_their_own_id(
        client: httpx.AsyncClient, make_engine: Callable[..., EngineDouble], version: tuple[int, int, int],
        listed: str | None, model_proof: str | None) -> None:
    """docs/engines.md's table of candle-vllm releases: generation proves the names on every one; `model` proves
    the weights from 0.5.3 on; who answers is told wherever /v1/models exists."""
    double = make_engine("candle-vllm", model_id="qwen3-8b", version=version)
    await double.bind()
    names = await prove(client, double, kinds.method_for("candle-vllm", "auto"))
    assert names.ok and names.proven == NAMES
    cards = [] if listed is None else await api.models(client, api.base_url(double.ip, double.port))
    assert [card["id"] for card in cards] == ([listed] if listed else [])
    assert all(card["created"] > 10**12 for card in cards)  # milliseconds
    assert await api.identify(client, ip=double.ip, port=double.port, engine="candle-vllm") is None
    weights = await api.prove(client, pod="pod-0", ip=double.ip, port=double.port, engine="candle-vllm",
                              names=NAMES, method="generate", model="qwen3-8b")
    assert [p.kind for p in weights.problems] == ([model_proof] if model_proof else [])


def test_kinds_that_name_no_owner_of_their_own_are_not_told_apart() -> None:
    assert kinds.answered_by("openai", {"vllm"}) is None and kinds.answered_by("tgi", {"Qwen/Qwen3-8B"}) is None
    assert kinds.answered_by("llama.cpp", set()) is not None  # it says llamacpp; silence is someone else


@pytest.mark.parametrize(("engine", "model", "problem"), [
    ("vllm", "/models/weights", None),  # vLLM's `root`, the --model path
    ("vllm", "reasoning-long", None),  # a served name is an id too
    ("vllm", "/models/other", "/v1/models reports /models/weights, reasoning, reasoning-long, not the model "
                              "'/models/other'"),
    ("candle-vllm", "qwen3-8b", None),  # candle-vllm's one id
    ("candle-vllm", "qwen3-8B", "/v1/models reports qwen3-8b, not the model 'qwen3-8B'"),  # a misspelt name
])
async def test_the_model_a_backend_names_must_be_the_one_its_pods_loaded(
        client: httpx.AsyncClient, make_engine: Callable[..., EngineDouble], engine: str, model: str,
        problem: str | None) -> None:
    double = make_engine(engine, model_id="qwen3-8b")
    await double.bind()
    proof = await api.prove(client, pod="pod-0", ip=double.ip, port=double.port, engine=engine, names=NAMES,
                            method=kinds.method_for(engine, "auto"), model=model)
    if problem is None:
        assert proof.ok and proof.proven == NAMES
    else:  # final: an engine that answers has loaded what it will serve, and the names are not asked
        assert [(p.kind, p.message, p.retryable) for p in proof.problems] == [("model_not_loaded", problem, False)]
        assert proof.proven == ()


async def test_a_404_health_means_no_endpoint_not_unhealthy(
        client: httpx.AsyncClient, make_engine: Callable[..., EngineDouble]) -> None:
    double = make_engine("candle-vllm", model_id="reasoning-long")
    await double.bind()
    proof = await api.prove(client, pod="p", ip=double.ip, port=double.port, engine="tgi", names=("x",),
                                method="generate")  # the tgi profile asks /health; this server has none
    assert proof.ok
    assert double.requests[0][:2] == ("GET", "/health")


async def test_nothing_listening_is_refused_and_retryable(
        client: httpx.AsyncClient, make_engine: Callable[..., EngineDouble]) -> None:
    double = make_engine("vllm")  # never bound: the engine is still loading
    proof = await prove(client, double, "listed")
    (problem,) = proof.problems
    assert (problem.kind, problem.retryable) == ("refused", True)


@pytest.mark.parametrize(("fault", "kind", "retryable"), [
    ("503", "unhealthy", True),
    ("garbage", "bad_json", True),
    ("huge", "too_large", False),
    ("reset", "reset", True),
])
async def test_faults_of_a_bound_vllm(client: httpx.AsyncClient, make_engine: Callable[..., EngineDouble],
                                      fault: str, kind: str, retryable: bool) -> None:
    double = make_engine("vllm")
    await double.bind()
    double.fault = fault
    proof = await prove(client, double, "listed")
    (problem,) = proof.problems
    assert (problem.kind, problem.retryable) == (kind, retryable)


async def test_a_generation_without_a_token_does_not_prove(
        client: httpx.AsyncClient, make_engine: Callable[..., EngineDouble]) -> None:
    double = make_engine("candle-vllm", model_id="reasoning-long")
    await double.bind()
    double.fault = "no-token"
    proof = await prove(client, double, "generate")
    assert [p.kind for p in proof.problems] == ["no_token", "no_token"]


@pytest.mark.looptime
async def test_a_slow_engine_times_out_on_read(make_engine: Callable[..., EngineDouble]) -> None:
    double = make_engine("vllm")
    await double.bind()
    double.fault = "slow"
    async with api.new_client(timeout=10.0) as slow_client:
        proof = await prove(slow_client, double, "listed")
    assert [(p.kind, p.retryable) for p in proof.problems] == [("read_timeout", True)]


@pytest.mark.looptime
async def test_dropped_packets_are_a_connect_timeout(client: httpx.AsyncClient) -> None:
    port = _free_port()
    with Blackhole("127.77.201.1", port):
        proof = await api.prove(client, pod="p", ip="127.77.201.1", port=port, engine="vllm", names=NAMES,
                                    method="listed")
    assert [(p.kind, p.retryable) for p in proof.problems] == [("connect_timeout", True)]

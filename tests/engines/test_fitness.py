"""Fitness (docs/fitness.md): warm, fast enough, streaming, no smaller than the live backend. The rules on plain data,
the SSE reader on the engines' own byte shapes, then the whole wait over the emulated cluster and the engine
doubles in fake time, table-driven: each row sets up the target (and the live backend) and states the outcome."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pytest

from cutover.core import proofs
from cutover.core.proofs import Problem
from cutover.demo.world import Script, SimPod, World
from cutover.engines import fitness, sse
from cutover.errors import NamesNotProven
from cutover.flows import wait
from cutover.kube import cluster
from cutover.plan import Plan
from helpers import named

NAMES = ("reasoning-long", "reasoning")
TIMEOUT = Problem("read_timeout", "POST /v1/completions: no whole answer within 10s", retryable=True)
REJECTED = Problem("name_rejected", "'x' rejected with 400", retryable=False)


# --- the rules -----------------------------------------------------------------------------------------------


def trial(*seconds: float, problem: Problem | None = None, stream: fitness.StreamCheck | None = None,
          context: int | None = None, pod: str = "p") -> fitness.PodTrial:
    samples = tuple(fitness.Sample("n", value) for value in seconds)
    if problem is not None:
        samples += (fitness.Sample("n", 10.0, problem=problem),)
    return fitness.PodTrial(pod, samples, stream, context)


@pytest.mark.parametrize(("trials", "state", "cause"), [
    ([trial(0.1, 0.2)], fitness.State.WARM, None),
    ([trial(0.1, 5.0)], fitness.State.WARM, None),  # within the bound, at it
    ([trial(0.1, 5.01)], fitness.State.WARMING, "too_slow"),
    ([trial(0.1), trial(0.1, problem=TIMEOUT, pod="q")], fitness.State.WARMING, "too_slow"),  # no answer yet
    ([trial(0.1, problem=REJECTED)], fitness.State.BROKEN, "name_rejected"),
    ([trial(0.1, stream=fitness.StreamCheck(1, False, "the stream ended after 1 chunk without data: [DONE]"))],
     fitness.State.BROKEN, "stream_broken"),
    ([trial(9.0, stream=fitness.StreamCheck(1, False, "stalled"))], fitness.State.BROKEN, "stream_broken"),
], ids=["fast", "at the bound", "just over", "a timeout is slowness", "refused for good", "no DONE",
        "broken beats slow"])
def test_judge(trials: list[fitness.PodTrial], state: fitness.State, cause: str | None) -> None:
    judged = fitness.judge(trials, max_latency=5.0)
    assert (judged.state, judged.cause) == (state, cause)
    if state is fitness.State.WARMING:
        assert "maxLatency 5s" in judged.message and "pod" in judged.message


NEW = proofs.Side("candle", ready=2, context=40960, p50=0.1, max=0.2)


@pytest.mark.parametrize(("old", "cause"), [
    (None, None),
    (proofs.Side("vllm", ready=2, context=32768), None),
    (proofs.Side("vllm", ready=2, context=81920), "context_shorter"),
    (proofs.Side("vllm", ready=3, context=32768), "fewer_replicas"),
    (proofs.Side("vllm", ready=2, context=None), None),  # not reported by the live engine: not compared
    (proofs.Side("vllm", ready=9, context=81920, note="not measured: the live backend does not answer"), None),
], ids=["no live", "no smaller", "shorter context", "fewer replicas", "live reports no context", "live broken"])
def test_compare(old: proofs.Side | None, cause: str | None) -> None:
    found = fitness.compare(NEW, old)
    assert (found.cause if found else None) == cause
    if found:
        assert "candle" in found.message and "vllm" in found.message and found.hint


def test_compare_with_an_unreported_target_context_passes() -> None:
    assert fitness.compare(dataclasses.replace(NEW, context=None), proofs.Side("vllm", ready=1, context=8)) is None


SHORT = proofs.Shortfall("context_shorter", "shorter", "hint")
FEWER = proofs.Shortfall("fewer_replicas", "fewer", "hint")


@pytest.mark.parametrize(("short", "to_target", "more_coming", "step"), [
    (None, True, False, fitness.Next.ACCEPT),
    (SHORT, True, False, fitness.Next.REFUSE),
    (SHORT, True, True, fitness.Next.REFUSE),  # more pods do not lengthen the context
    (SHORT, False, False, fitness.Next.ACCEPT),  # a switch back: reported, not refused
    (FEWER, True, True, fitness.Next.WAIT),
    (FEWER, True, False, fitness.Next.REFUSE),
    (FEWER, False, True, fitness.Next.ACCEPT),
], ids=["nothing short", "shorter context", "shorter, more coming", "switch back", "fewer, more coming",
        "fewer, none coming", "fewer, switch back"])
def test_after_compare(short: proofs.Shortfall | None, to_target: bool, more_coming: bool,
                       step: fitness.Next) -> None:
    assert fitness.after_compare(short, to_target=to_target, more_coming=more_coming) is step


@pytest.mark.parametrize(("trials", "ready", "note"), [
    ([trial(0.1, context=4096)], 1, None),
    ([], 0, "not measured: no Ready pod"),
    ([trial(0.1), trial(0.1, problem=TIMEOUT, pod="q")], 2, "not measured: the live backend does not answer"),
], ids=["measured", "no Ready pod", "one answer failed"])
def test_the_live_column(trials: list[fitness.PodTrial], ready: int, note: str | None) -> None:
    column = fitness.live("vllm", trials, ready=ready)
    assert (column.backend, column.ready, column.note) == ("vllm", ready, note)
    assert (column.context == 4096) is (note is None)


@pytest.mark.parametrize(("cards", "context"), [
    ([{"id": "reasoning", "max_model_len": 32768}], 32768),
    ([{"id": "base", "max_model_len": 8192}, {"id": "reasoning-long", "max_model_len": 4096}], 4096),  # ours
    ([{"id": "qwen3", "max_model_len": 40960}], 40960),  # candle-vllm: one id, not our name
    ([{"id": "sql-lora", "max_model_len": None}], None),  # a vLLM LoRA card
    ([{"id": "reasoning", "max_model_len": True}], None),
    ([], None),
], ids=["ours", "ours among others", "one foreign id", "null", "a boolean", "no card"])
def test_context_of(cards: list[dict[str, Any]], context: int | None) -> None:
    assert fitness.context_of(cards, NAMES) == context


def test_the_table_puts_old_beside_new() -> None:
    old = proofs.Side("vllm", ready=2, context=32768, p50=0.25, max=0.5)
    new = dataclasses.replace(NEW, warmup=240.0)
    lines = proofs.table(new, old)
    assert lines[0].split() == ["old", "(vllm)", "new", "(candle)"]
    assert lines[1].split() == ["context", "32768", "40960"]
    assert lines[2].split() == ["Ready", "pods", "2", "2"]
    assert lines[3].split() == ["latency", "p50", "0.250s", "0.100s"]
    assert lines[5].split() == ["warm-up", "-", "240s"]
    assert (lines[1].index("32768"), lines[1].index("40960")) == (lines[0].index("old"), lines[0].index("new"))
    unmeasured = proofs.table(NEW, proofs.Side("vllm", ready=0, note="not measured: no Ready pod"))
    assert unmeasured[-1].split()[:3] == ["note", "not", "measured:"] and "?" in unmeasured[1]


def test_side_takes_the_median_and_the_worst() -> None:
    measured = fitness.side("candle", [trial(0.1, 0.3), trial(0.2, context=4096, pod="q")], ready=2)
    assert (measured.p50, measured.max, measured.context, measured.ready) == (0.2, 0.3, 4096, 2)


# --- server-sent events as the engines write them -----------------------------------------------------------


def events(text: str) -> tuple[list[sse.Event], int]:
    reader = sse.Reader()
    found = [event for line in text.split("\n") if (event := reader.feed(line)) is not None]
    return found, reader.comments


def test_sse_reads_vllm_and_candle_shapes() -> None:
    vllm = 'data: {"choices":[{"text":" po"}]}\n\ndata: {"choices":[{"text":"ng"}]}\n\ndata: [DONE]\n\n'
    found, comments = events(vllm)
    assert [event.data for event in found] == ['{"choices":[{"text":" po"}]}', '{"choices":[{"text":"ng"}]}',
                                              "[DONE]"] and comments == 0
    candle = ': keep-alive-text\n\n: keep-alive-text\n\ndata:{"choices":[]}\n\ndata: [DONE]\n\n'
    found, comments = events(candle)
    assert [event.data for event in found] == ['{"choices":[]}', "[DONE]"] and comments == 2


def test_sse_joins_data_lines_and_keeps_event_names() -> None:
    found, _ = events("event: error\ndata: first\ndata:  second\nid: 7\n\n")
    assert found == [sse.Event("first\n second", "error")]


# --- the whole wait, in fake time ----------------------------------------------------------------------------

FIT = "{requests: 3, maxLatency: 5s}"


@dataclasses.dataclass(frozen=True)
class Row:
    why: str
    arrange: Callable[[World, SimPod, SimPod], None]
    cause: str | None = None  # None: proven
    fitness: str = FIT
    min_ready: int = 1
    warming: bool = False  # target.warming was logged


def cold_for(seconds: float) -> Callable[[World, SimPod, SimPod], None]:
    """Ready after 270 s, then every generation takes 8 s (over maxLatency) for `seconds` more."""
    def arrange(world: World, live: SimPod, target: SimPod) -> None:
        target.engine.cold_until = asyncio.get_running_loop().time() + 270 + seconds
    return arrange


def set_engine(**values: Any) -> Callable[[World, SimPod, SimPod], None]:
    def arrange(world: World, live: SimPod, target: SimPod) -> None:
        for key, value in values.items():
            setattr(target.engine, key, value)
    return arrange


def live_engine(**values: Any) -> Callable[[World, SimPod, SimPod], None]:
    def arrange(world: World, live: SimPod, target: SimPod) -> None:
        for key, value in values.items():
            setattr(live.engine, key, value)
    return arrange


def second_live_pod(world: World, live: SimPod, target: SimPod) -> None:
    world.add_pod("vllm", ready=True)


def nothing(world: World, live: SimPod, target: SimPod) -> None:
    pass


ROWS = [
    Row("warm from the start", nothing),
    Row("Ready but cold for 4 minutes: waits, then proven", cold_for(240), warming=True),
    Row("cold for its first 10 answers", set_engine(cold_answers=10), warming=True),
    Row("always slower than maxLatency", set_engine(latency=6.0), cause="too_slow", warming=True),
    Row("a stream without [DONE]", set_engine(fault="stream-no-done"), cause="stream_broken"),
    Row("a stream that stalls mid-way (keep-alives go on)", set_engine(fault="stream-stall"), cause="stream_broken"),
    Row("half the live context", set_engine(max_model_len=16384), cause="context_shorter"),
    Row("half the live context, compare off", set_engine(max_model_len=16384),
        fitness="{maxLatency: 5s, compare: false}"),
    Row("fewer Ready pods than live", second_live_pod, cause="fewer_replicas"),
    Row("the live backend is down: not a reason to refuse", live_engine(fault="503")),
    Row("the live backend reports no context", live_engine(max_model_len=None)),
    Row("no stream asked for: a stream fault is not met", set_engine(fault="stream-no-done"),
        fitness="{maxLatency: 5s, stream: false}"),
]


@pytest.mark.looptime
@pytest.mark.parametrize("row", ROWS, ids=[row.why for row in ROWS])
async def test_fitness_in_the_wait(row: Row, world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan],
                                   events: list[dict[str, Any]]) -> None:
    live = world.add_pod("vllm", ready=True)
    target = world.add_pod("candle", Script(pull=30, load=240))
    row.arrange(world, live, target)
    await world.settled()
    plan = make_plan(fitness=row.fitness, min_ready=row.min_ready)
    if row.cause is None:
        proven = await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
        assert proven.fitness is not None
        assert named(events, "names.proven")[0]["table"] == list(proven.fitness.table())
        assert "table" not in named(events, "names.proven")[0]["fitness"]  # once per line, not twice
    else:
        with pytest.raises(NamesNotProven) as caught:
            await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
        assert caught.value.cause == row.cause and caught.value.hint
        assert named(events, "names.failed")[-1]["cause"] == row.cause
    assert bool(named(events, "target.warming")) == row.warming
    assert target.ready_at is not None
    early = [when for when in target.engine.request_times if when < target.ready_at]
    assert early == []  # never a request to a pod that is not Ready


@pytest.mark.looptime
async def test_a_cold_target_reports_its_warm_up_and_latencies_so_far(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    target = world.add_pod("candle", Script(pull=30, load=240))
    cold_for(240)(world, target, target)
    await world.settled()
    plan = make_plan(fitness=FIT)
    proven = await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert proven.fitness is not None
    new, old = proven.fitness.new, proven.fitness.old
    assert new.warmup is not None and 240 - 70 <= new.warmup <= 240 + 70  # a trial round of cold answers is ~64 s
    assert new.p50 is not None and new.p50 < 5 and (new.context, new.ready) == (40960, 1)
    assert old is not None and (old.backend, old.context, old.ready, old.note) == ("vllm", 32768, 1, None)
    warming = named(events, "target.warming")
    assert warming and all(latency >= 8 for latency in next(iter(warming[0]["latencies"].values())))
    assert "budget_left" in warming[0] and "elapsed" in warming[0]
    proven_event = named(events, "names.proven")[0]
    assert proven_event["fitness"]["new"]["context"] == 40960 and proven_event["fitness"]["old"]["context"] == 32768
    assert proven_event["fitness"]["new"]["latencyP50"] is not None


@pytest.mark.looptime
async def test_too_slow_names_the_numbers_and_takes_the_budget(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    world.add_pod("vllm", ready=True)
    target = world.add_pod("candle", Script(pull=30, load=240))
    target.engine.latency = 6.0
    await world.settled()
    plan = make_plan(fitness=FIT, max_wait="20m")
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(NamesNotProven) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert "6.0" in caught.value.message and "maxLatency 5s" in caught.value.message
    assert 1200 - 90 <= loop.time() - began <= 1200  # waited for warm-up until the budget ended, not past it


@pytest.mark.looptime
async def test_a_target_warm_by_its_second_round_is_proven_while_budget_is_left(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    """maxWait 60s, the first three answers 6 s each, then 0.1 s: the first round (about 20 s) is too slow, and
    the next one, with 40 s left, proves it. Refused once as too_slow there: the next round's worst case might
    not have fitted."""
    world.add_pod("vllm", ready=True)
    target = world.add_pod("candle", ready=True)
    target.engine.cold_answers, target.engine.cold_latency, target.engine.latency = 3, 6.0, 0.1
    await world.settled()
    plan = make_plan(fitness=FIT, max_wait="60s")
    proven = await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert proven.fitness is not None and proven.fitness.new.p50 is not None and proven.fitness.new.p50 < 1
    assert named(events, "target.warming")


@pytest.mark.looptime
async def test_a_round_is_bounded_by_what_is_left_of_the_budget(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    world.add_pod("vllm", ready=True)
    target = world.add_pod("candle", ready=True)
    target.engine.cold_answers, target.engine.cold_latency = 100, 9.0  # each answer 9 s: a round takes 54 s
    await world.settled()
    plan = make_plan(fitness=FIT, max_wait="60s")
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(NamesNotProven) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert caught.value.cause == "too_slow"
    assert loop.time() - began <= 60 + 1  # the second round cut at the budget's end, not run to its own
    # what the round cut short saw, not only that time ran out (the newcomer's f3)
    assert re.search(r"did not end within the \d+s left of .*: \d+ of 6 trial\(s\) answered, in 9\.00s",
                     caught.value.message), caught.value.message
    assert "(maxLatency 5s); the rest did not answer in time" in caught.value.message


def test_a_round_that_saw_no_answer_says_so() -> None:
    assert fitness.seen([], asked=6, max_latency=2.0) == "no answer came from any of the 6 trial(s) asked " \
                                                         "(maxLatency 2s)"


@pytest.mark.looptime
async def test_without_wait_a_cold_target_is_judged_now(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    world.add_pod("vllm", ready=True)
    target = world.add_pod("candle", ready=True)
    target.engine.cold_answers = 100
    await world.settled()
    plan = make_plan(fitness=FIT)
    with pytest.raises(NamesNotProven) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=False)
    assert caught.value.cause == "too_slow"


@pytest.mark.looptime
@pytest.mark.parametrize("stream", [True, False])
async def test_requests_per_pod_per_proof_stay_within_requests_times_names_plus_one(
        stream: bool, world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    live = world.add_pod("vllm", ready=True)
    targets = [world.add_pod("candle", ready=True) for _ in range(2)]
    await world.settled()
    plan = make_plan(fitness=f"{{requests: 4, maxLatency: 5s, stream: {str(stream).lower()}}}")
    await wait.prove_backend(kube, plan, plan.backends["candle"], wait=False)
    for target in targets:
        names_proof = len(NAMES)  # candle-vllm: one generation per name proves the names
        sent = [(method, path, (body or {}).get("stream")) for method, path, body in target.engine.requests]
        assert len(sent) - names_proof == 4 * len(NAMES) + 1  # every generation, and /v1/models once: the bound
        assert sum(1 for _, _, streamed in sent if streamed) == int(stream)
    assert len(live.engine.requests) <= 4 * len(NAMES) + 1  # the live side: no stream, /v1/models once


@pytest.mark.looptime
async def test_compare_off_never_contacts_the_live_backend(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    live = world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    plan = make_plan(fitness="{compare: false}")
    proven = await wait.prove_backend(kube, plan, plan.backends["candle"], wait=False)
    assert live.engine.requests == [] and proven.fitness is not None and proven.fitness.old is None


@pytest.mark.looptime
async def test_a_switch_back_reports_a_shorter_context_without_refusing(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    """The plan's target is candle; proving vllm (a rollback's target) while candle serves a longer context is
    reported, not refused: going back to what ran before must stay possible."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    world.kube.merge("/v1/services", "llm-serving", "reasoning-long-predictor", {"spec": {"selector": None}})
    world.kube.merge("/v1/services", "llm-serving", "reasoning-long-predictor", {"spec": {"selector": {
        "app.kubernetes.io/name": "llm-reasoning-candle", "component": "predictor"}}})
    plan = make_plan(fitness=FIT)
    proven = await wait.prove_backend(kube, plan, plan.backends["vllm"], wait=False)
    assert proven.fitness is not None and proven.fitness.shortfall is not None
    assert proven.fitness.shortfall.cause == "context_shorter"
    assert proven.fitness.old is not None and proven.fitness.old.backend == "candle"


@pytest.mark.looptime
async def test_verify_and_plan_output_show_the_table(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    from cutover.cli import outcome
    from cutover.flows import commands

    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    plan = make_plan(fitness=FIT)
    proven = await commands.verify(kube, plan, backend="candle", wait=False)
    assert proven.fitness is not None
    shown = outcome.render(proven, plan)
    table = [f"    {line}" for line in proven.fitness.table()]
    assert shown.lines[-len(table):] == table and "  fitness:" in shown.lines
    assert shown.data["fitness"]["old"]["backend"] == "vllm"  # --output json carries both columns
    planned = outcome.render(await commands.show_plan(kube, plan, host=None), plan)
    assert any(line.split() == ["context", "32768", "40960"] for line in planned.lines)


@pytest.mark.looptime
@pytest.mark.parametrize(("backend", "fault", "words"), [
    ("vllm", "stream-error", "an error event after 1 chunk"),  # vLLM still ends it with data: [DONE]
    ("candle", "stream-error", "a data event that is not JSON after 1 chunk: 'ModelError: CUDA out of memory'"),
    ("vllm", "stream-no-done", "ended after 2 chunks without data: [DONE]"),
    ("vllm", "stream-stall", "stalled after 1 chunk and 0 comments"),
    ("candle", "stream-stall", "stalled after 1 chunk and"),  # its keep-alive comments count for nothing
])
async def test_a_broken_stream_names_what_arrived(backend: str, fault: str, words: str, world: World,
                                                  kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    pod = world.add_pod(backend, ready=True)
    await world.settled()
    pod.engine.fault = fault
    plan = make_plan(fitness="{requests: 1, maxLatency: 5s, compare: false}")
    with pytest.raises(NamesNotProven) as caught:
        await wait.prove_backend(kube, plan, plan.backends[backend], wait=True)
    assert caught.value.cause == "stream_broken" and words in caught.value.message, caught.value.message


@pytest.mark.looptime
async def test_a_stream_answered_503_is_a_slow_answer_not_a_broken_stream(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    """An error status comes before any stream begins (both engines): the engine is not ready for it yet."""
    from cutover.engines import api, trials
    from cutover.plan import Fitness

    pod = world.add_pod("vllm", ready=True)
    await world.settled()
    pod.engine.fault = "503"
    async with api.new_client(timeout=2) as client:
        tried = await trials.trial(client, pod=pod.name, ip=pod.ip, port=world.port, engine="vllm", names=NAMES,
                                   fitness=Fitness(requests=1), stream=True, context=True)
    assert tried.stream == fitness.StreamCheck(0, False) and tried.context is None and tried.sent == 3
    assert [s.problem.kind if s.problem else None for s in tried.samples] == ["http_status", "http_status"]
    assert fitness.judge([tried], max_latency=5).state is fitness.State.WARMING

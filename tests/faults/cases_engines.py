"""Faults of the engines: refused, silent, slow or wrong answers to the name proof, and the fitness check
(docs/fitness.md): warm, fast enough, streaming, no smaller than the live backend."""

from __future__ import annotations

import asyncio

from harness import (
    BACK,
    SWITCH,
    Case,
    Step,
    at,
    both,
    cold,
    engine_set,
    fit,
    live_set,
    ready_but_silent,
    switched_by_hand,
)

from cutover.demo.world import NAMESPACE, Script

CASES = [
    # engines
    Case("engine", "target answers 503 for a while", both(
        at("target.ready", lambda stage: stage.engine("503")()),
        at("names.retry", lambda stage: asyncio.get_running_loop().call_later(60, stage.engine(None)))),
        saw=("names.retry",)),
    Case("engine", "target drips its answers a byte a second", both(
        at("target.ready", lambda stage: stage.engine("drip")()),
        at("names.retry", lambda stage: asyncio.get_running_loop().call_later(60, stage.engine(None)))),
        saw=("names.retry",)),  # each read is quick; the whole answer is cut at requestTimeout and tried again
    Case("engine", "target refuses connections", ready_but_silent(), script=Script(pull=30, fault="never_binds"),
         commits=(), steps=(Step(("run",), 4),), cause="refused", saw=("names.retry",)),
    Case("engine", "target drops SYNs (connect timeout)", ready_but_silent(hole=True),
         script=Script(pull=30, fault="never_binds"), commits=(), steps=(Step(("run",), 4),),
         cause="connect_timeout", saw=("names.retry",)),
    Case("engine", "target resets connections", at("target.ready", lambda stage: stage.engine("reset")()),
         commits=(), steps=(Step(("run",), 4),), cause="reset"),
    Case("engine", "target answers 503 forever", at("target.ready", lambda stage: stage.engine("503")()),
         commits=(), steps=(Step(("run",), 4),), cause="http_status"),
    Case("engine", "target answers garbage JSON", at("target.ready", lambda stage: stage.engine("garbage")()),
         commits=(), steps=(Step(("run",), 4),), cause="bad_json"),
    Case("engine", "target answers a broken gzip body", at("target.ready", lambda stage: stage.engine("gzip")()),
         commits=(), steps=(Step(("run",), 4),), cause="bad_encoding"),
    Case("engine", "target answers a 2 MB body", at("target.ready", lambda stage: stage.engine("huge")()),
         commits=(), steps=(Step(("run",), 4),), cause="too_large"),
    Case("engine", "target never answers (read timeout)", at("target.ready", lambda stage: stage.engine("slow")()),
         commits=(), steps=(Step(("run",), 4),), cause="read_timeout"),
    Case("engine", "target generates no token", at("target.ready", lambda stage: stage.engine("no-token")()),
         commits=(), steps=(Step(("run",), 4),), cause="no_token"),
    Case("engine", "target stops answering after the proof",
         at("git.committed", lambda stage: stage.engine("503")()), commits=(SWITCH, BACK),
         steps=(Step(("run",), 6),), cause="verification_failed_rolled_back"),
    Case("engine", "vLLM target: a served name disappears after the proof", at("git.committed", lambda stage: setattr(
        stage.target.engine, "served_names", ("reasoning-long",))), back=True, commits=(BACK, SWITCH),
        steps=(Step(("run",), 6),), cause="verification_failed_rolled_back"),
    Case("engine", "a NetworkPolicy drops the Job's packets", both(lambda stage: stage.world.kube.remove(
        "networking.k8s.io/v1/networkpolicies", NAMESPACE, "llm-serving-ingress-cutover"),
        ready_but_silent(hole=True)), script=Script(pull=30, fault="never_binds"), commits=(),
        steps=(Step(("run",), 4),), cause="network_policy_blocks", saw=("network.diagnosis",)),
    Case("engine", "target crash-loops", commits=(), script=Script(pull=30, fault="crash_loop"),
         steps=(Step(("run",), 3),), cause="crash_loop"),
    Case("engine", "target image cannot be pulled", commits=(), script=Script(pull=30, fault="image_pull"),
         steps=(Step(("run",), 3),), cause="image_pull", within=60),  # not found: at once
    Case("engine", "target image rate-limited (429) for a while", script=Script(pull=30, fault="image_rate_limited"),
         saw=("target.waiting",)),  # waited through, the reason in target.waiting
    Case("engine", "target image only ever backs off, no reason", commits=(),
         script=Script(pull=30, fault="image_backoff_only"), steps=(Step(("run",), 3),), cause="image_pull",
         within=30 + 330 + 31),
    Case("engine", "target cannot be scheduled", commits=(), script=Script(fault="unschedulable"),
         steps=(Step(("run",), 3),), cause="unschedulable"),
    Case("engine", "target slower than maxWait", commits=(), script=Script(pull=30, load=3000),
         steps=(Step(("run",), 3),), cause="startup_budget_exhausted"),
    # fitness (docs/fitness.md): warm, fast enough, streaming, no smaller than the live backend
    Case("fitness", "target Ready but cold for 4 minutes", at("target.ready", cold(240)), plan=fit(),
         saw=("target.warming",)),
    Case("fitness", "target always slower than maxLatency", at("target.ready", engine_set(latency=6.0)), plan=fit(),
         commits=(), steps=(Step(("run",), 4),), cause="too_slow", saw=("target.warming",)),
    Case("fitness", "target's stream ends without [DONE]", at("target.ready", engine_set(fault="stream-no-done")),
         plan=fit(), commits=(), steps=(Step(("run",), 4),), cause="stream_broken"),
    Case("fitness", "target's stream stalls mid-way", at("target.ready", engine_set(fault="stream-stall")),
         plan=fit(), commits=(), steps=(Step(("run",), 4),), cause="stream_broken"),
    Case("fitness", "target serves half the live context", engine_set(max_model_len=16384), plan=fit(),
         commits=(), steps=(Step(("run",), 4),), cause="context_shorter"),
    Case("fitness", "target has fewer Ready pods than live", lambda stage: stage.world.add_pod("vllm", ready=True),
         plan=fit(), commits=(), steps=(Step(("run",), 4),), cause="fewer_replicas"),
    Case("fitness", "the live backend (2 pods) is down: the switch to 1 healthy pod is not blocked",
         both(lambda stage: stage.world.add_pod("vllm", ready=True), live_set(fault="503")), plan=fit()),
    Case("fitness", "rollback to a healthy old backend, the new one broken",
         at("cutover.completed", engine_set(fault="503")), plan=fit(), commits=(SWITCH, BACK),
         steps=(Step(("run",), 0), Step(("rollback",), 0))),
    Case("fitness", "target slow through the Service after the switch",
         at("git.committed", engine_set(latency=6.0)), plan=fit(), commits=(SWITCH, BACK),
         steps=(Step(("run",), 6),), cause="verification_failed_rolled_back", saw=("service.latency",)),
    Case("fitness", "PreSync gate: a hand-made switch to a cold target waits for its warm-up",
         both(switched_by_hand, at("target.ready", cold(240))), plan=fit(), commits=("ops: switch to candle",),
         steps=(Step(("presync",), 0),), saw=("target.warming",)),
    Case("fitness", "PreSync gate: a hand-made switch to half the live context is refused",
         both(switched_by_hand, engine_set(max_model_len=16384)), plan=fit(), commits=("ops: switch to candle",),
         steps=(Step(("presync",), 4),), cause="context_shorter"),
]

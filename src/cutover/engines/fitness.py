"""Is the target fit to take the live backend's traffic (docs/fitness.md)? The rules, on measurements. Pure: no I/O.

A name that answers one token proves the name, not the engine: vLLM's /health is liveness only and engines
answer their first requests slowly while they compile and warm up (docs/engines.md), and a
replacement can serve a shorter context or run fewer replicas. `trials` measures; this module says what the
measurements mean: warm, still warming (wait within the budget), or broken (fail now); whether the target is
smaller than the live backend; and the side-by-side table people read in the commit, Slack and the CLI.
"""

from __future__ import annotations

import dataclasses
import enum
import statistics
from collections.abc import Iterable, Mapping, Sequence

from cutover.core.proofs import Problem, Shortfall, Side

__all__ = ["HINTS", "Judged", "Next", "PodTrial", "Sample", "State", "StreamCheck", "after_compare", "compare",
           "context_of", "judge", "live", "side"]


@dataclasses.dataclass(frozen=True)
class Sample:
    """One short generation: seconds to the whole answer, or to the first data event when streamed."""

    name: str
    seconds: float
    streamed: bool = False
    problem: Problem | None = None  # no answer (the seconds are how long it was waited for)


@dataclasses.dataclass(frozen=True)
class StreamCheck:
    chunks: int  # data events that carried choices
    done: bool  # ended with `data: [DONE]`
    broken: str | None = None  # what went wrong, naming what arrived; None: a proper stream


@dataclasses.dataclass(frozen=True)
class PodTrial:
    pod: str
    samples: tuple[Sample, ...]
    stream: StreamCheck | None = None
    context: int | None = None  # max_model_len from /v1/models, where the engine reports it
    sent: int = 0  # requests this trial sent to the pod

    def latencies(self) -> list[float]:
        return [sample.seconds for sample in self.samples if sample.problem is None]


class State(enum.Enum):
    WARM = "warm"
    WARMING = "warming"  # slow or not answering yet: may pass by waiting
    BROKEN = "broken"  # waiting cannot help


@dataclasses.dataclass(frozen=True)
class Judged:
    state: State
    cause: str | None = None  # too_slow | stream_broken | the problem's own kind
    message: str = ""


def judge(trials: Sequence[PodTrial], *, max_latency: float) -> Judged:
    """Broken where a stream misbehaved or an answer was refused for good; warming where any answer was slower
    than `max_latency` or did not come (a cold engine may simply need more time); else warm."""
    for trial in trials:
        if trial.stream is not None and trial.stream.broken:
            return Judged(State.BROKEN, "stream_broken", f"pod {trial.pod}: {trial.stream.broken}")
        final = next((s.problem for s in trial.samples if s.problem is not None and not s.problem.retryable), None)
        if final is not None:
            return Judged(State.BROKEN, final.kind, f"pod {trial.pod}: {final.message}")
    slow = [f"pod {trial.pod}: {_seconds_list(trial.samples)}" for trial in trials
            if any(s.problem is not None or s.seconds > max_latency for s in trial.samples)]
    if slow:
        return Judged(State.WARMING, "too_slow", f"answers slower than maxLatency {max_latency:g}s: "
                                                 + "; ".join(slow))
    return Judged(State.WARM)


def seen(samples: Sequence[Sample], *, asked: int, max_latency: float) -> str:
    """What a round cut short by the budget saw, for `too_slow`: the answers that came, against maxLatency, or
    that none did (an operator wants the engine's latencies, not only that time ran out)."""
    if not samples:
        return f"no answer came from any of the {asked} trial(s) asked (maxLatency {max_latency:g}s)"
    return (f"{len(samples)} of {asked} trial(s) answered, in {_seconds_list(samples)} (maxLatency "
            f"{max_latency:g}s); the rest did not answer in time")


def _seconds_list(samples: Iterable[Sample]) -> str:
    return ", ".join(f"{s.seconds:.2f}s" + ("" if s.problem is None else f" ({s.problem.kind})") for s in samples)


def context_of(cards: Sequence[Mapping[str, object]], names: Sequence[str]) -> int | None:
    """max_model_len of the /v1/models card that names one of ours (vLLM lists each served name; candle-vllm one
    id), else of the first card; None where the engine does not report it (a vLLM LoRA card says null)."""
    chosen = next((card for card in cards if card.get("id") in names), cards[0] if cards else {})
    value = chosen.get("max_model_len")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def side(backend: str, trials: Sequence[PodTrial], *, ready: int, warmup: float | None = None) -> Side:
    latencies = [seconds for trial in trials for seconds in trial.latencies()]
    contexts = [trial.context for trial in trials if trial.context is not None]
    return Side(backend, ready=ready, context=min(contexts) if contexts else None,
                p50=statistics.median(latencies) if latencies else None, max=max(latencies, default=None),
                warmup=warmup)


def compare(new: Side, old: Side | None) -> Shortfall | None:
    """Where both report it: a shorter context, or fewer Ready pods, than the live backend. A live side that
    could not be measured is no reason to refuse (docs/fitness.md)."""
    if old is None or old.note:
        return None
    if new.context is not None and old.context is not None and new.context < old.context:
        return Shortfall("context_shorter", f"backend {new.backend} serves a context of {new.context} tokens, "
                                            f"the live {old.backend} {old.context}",
                         f"start {new.backend} with --max-model-len {old.context} (or more KV cache), or set "
                         "verify.fitness.compare: false to accept the shorter context")
    if old.ready is not None and new.ready is not None and new.ready < old.ready:
        return Shortfall("fewer_replicas", f"backend {new.backend} has {new.ready} Ready pods, the live "
                                           f"{old.backend} {old.ready}",
                         f"scale {new.backend} to {old.ready} replicas first, or set verify.fitness.compare: false")
    return None


def live(backend: str, trials: Sequence[PodTrial], *, ready: int) -> Side:
    """The live backend's column, or a note saying why it is not measured (no Ready pod, an answer that failed):
    then it is never a reason to refuse (docs/fitness.md)."""
    if not ready:
        return Side(backend, ready=0, note="not measured: no Ready pod")
    if any(sample.problem is not None for trial in trials for sample in trial.samples):
        return Side(backend, ready=ready, note="not measured: the live backend does not answer")
    return side(backend, trials, ready=ready)


class Next(enum.Enum):
    ACCEPT = "accept"
    WAIT = "wait"  # fewer Ready pods than live, while more target pods are on their way to Ready
    REFUSE = "refuse"


def after_compare(short: Shortfall | None, *, to_target: bool, more_coming: bool) -> Next:
    """A shortfall refuses only a switch to the plan's target: a switch back (a rollback) is never refused for
    it, so going back to what ran before stays possible. Fewer Ready pods are waited on while more are coming."""
    if short is None or not to_target:
        return Next.ACCEPT
    if short.cause == "fewer_replicas" and more_coming:
        return Next.WAIT
    return Next.REFUSE


HINTS = {  # what to do about each cause of a target found unfit
    "too_slow": "the engine answers slower than verify.fitness.maxLatency: give it more warm-up (a longer "
                "startupProbe budget or verify.maxWait), more GPUs, or raise maxLatency",
    "stream_broken": "streamed answers do not end properly: read the engine's logs, and check any proxy in "
                     "between for buffering or idle timeouts",
}
